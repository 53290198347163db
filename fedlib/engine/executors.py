"""Executors: run the selected clients' local training for one round.

`train_sequential` trains clients one after another on the model's own parameters, updated in place
with `torch._foreach_*` (the fastest path for small models on a CPU: no functional_call overhead).
`train_vmap` trains all clients at once with `torch.func.vmap` over stacked parameters; clients with
fewer steps or a short last batch are padded and masked, so each client follows exactly the same
batches and arithmetic as in the sequential executor (equal up to float reassociation). `train_graph` is the
batched executor with its step captured: on a GPU a batched step is a few hundred small kernel launches whose
Python dispatch costs far more than their arithmetic, so once per round it runs `WARMUP_STEPS` steps, captures
the next in a CUDA graph (static input buffers: the step's sample indices, weights, active clients and learning
rate) and replays it for the round's other steps. The graph is the same kernels on the same buffers, so it
computes what the uncaptured batched step computes (the `gpu`-marked conformance battery compares them). A
round of fewer than `MIN_CAPTURED_STEPS` steps runs the same static step uncaptured (a capture would not pay),
as does every step on a CPU, where there is no graph to capture.

All three (sequential, vmap, graph) apply the same update per step, `sgd_step`:
d = algorithm.local_direction(p, grad, ...); d += weight_decay * p; buf = momentum * buf + d; p -= lr * buf (only
for clients still active).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn
from torch.func import functional_call, grad, grad_and_value, vmap

from fedlib.algorithms.base import Algorithm
from fedlib.core.augment import AUGMENTATIONS
from fedlib.core.contracts import ClientJob, ClientOutcome, LocalTraining
from fedlib.core.params import Params

LossFn = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]  # (output, target) -> per-sample losses


def cross_entropy(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample cross-entropy, the default loss."""
    return F.cross_entropy(output, target, reduction="none")


def batch_mean(loss_fn: LossFn) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The mini-batch mean of `loss_fn`; for the default cross-entropy, torch's fused mean reduction (two
    fewer kernels per step forward and backward, which a small model on a CPU notices)."""
    if loss_fn is cross_entropy:
        return F.cross_entropy
    return lambda output, target: loss_fn(output, target).mean()


def half_squared_error(output: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """Per-sample 0.5 * (output - target)^2 for scalar regression (least-squares clients)."""
    return 0.5 * (output.reshape(target.shape) - target) ** 2


def sgd_step(p: list[torch.Tensor], d: list[torch.Tensor], momentum_buf: list[torch.Tensor] | None,
             lr: float | torch.Tensor,
             local: LocalTraining, active: torch.Tensor | None = None) -> None:
    """The local step, in place: d += weight_decay * p; buf = momentum * buf + d; p -= lr * buf.

    With stacked clients (the batched executor), `active` [clients] masks the parameter move of clients
    that have finished their steps (None: all move).
    """
    if local.weight_decay:
        d = torch._foreach_add(d, p, alpha=local.weight_decay)
    if momentum_buf is not None:
        torch._foreach_mul_(momentum_buf, local.momentum)
        torch._foreach_add_(momentum_buf, d)
        d = momentum_buf
    if active is not None:
        d = torch._foreach_mul(d, [active.view(-1, *([1] * (t.dim() - 1))).to(t.dtype) for t in d])
    if isinstance(lr, torch.Tensor):  # a captured step reads its learning rate from a device buffer
        torch._foreach_add_(p, torch._foreach_mul(d, lr), alpha=-1.0)
    else:
        torch._foreach_add_(p, d, alpha=-lr)


def train_sequential(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    received: Params,
    buffers: Params,
    jobs: Sequence[ClientJob],
    local: LocalTraining,
    algorithm: Algorithm,
    server_state: dict[str, Any],
    round_: int,
    loss_fn: LossFn = cross_entropy,
) -> list[ClientOutcome]:
    names = [n for n, _ in model.named_parameters()]
    plist = [p for _, p in model.named_parameters()]
    named_buffers = list(model.named_buffers())
    use_direction = has_correction(algorithm)
    mean_loss = batch_mean(loss_fn)
    model.train()
    outcomes = []
    for job in jobs:
        with torch.no_grad():
            for p, n in zip(plist, names):
                p.copy_(received[n])
            for n, b in named_buffers:
                b.copy_(buffers[n])
        momentum_buf = [torch.zeros_like(p) for p in plist] if local.momentum else None
        losses = []  # kept on the device: one host sync per client, not per step
        lrs = [local.lr_at(round_, k) for k in range(len(job.batches))]
        for k, idx in enumerate(_batch_indices(job, x.device)):
            xb, yb = x[idx], y[idx]
            if local.augment:
                xb = AUGMENTATIONS[local.augment](xb, job.augment_gen)
            loss = mean_loss(model(xb), yb)
            grads = torch.autograd.grad(loss, plist)
            losses.append(loss.detach())
            with torch.no_grad():
                if use_direction:
                    direction = algorithm.local_direction(
                        dict(zip(names, plist)), dict(zip(names, grads)), received, job.state, server_state,
                        _grad_at(model, mean_loss, xb, yb),
                    )
                    grads = [direction[n] for n in names]
                sgd_step(plist, list(grads), momentum_buf, lrs[k], local)
        lr_sum = float(sum(lrs))
        outcomes.append(ClientOutcome(
            params={n: p.detach().clone() for n, p in zip(names, plist)},
            buffers={n: b.detach().clone() for n, b in named_buffers},
            loss=float(torch.stack(losses).mean()), lr_sum=lr_sum,
        ))
    return outcomes


def _batch_indices(job: ClientJob, device: torch.device) -> list[torch.Tensor]:
    """The client's mini-batches as training-set indices, built on the host in one pass and moved once."""
    flat = np.concatenate([job.indices[pos] for pos in job.batches])
    return list(torch.from_numpy(flat).to(device).split([len(pos) for pos in job.batches]))


def _grad_at(model: nn.Module, mean_loss: LossFn, xb: torch.Tensor, yb: torch.Tensor) -> Callable[[Params], Params]:
    """The current mini-batch's gradient at other parameters q (for methods like STEM)."""

    def grad_at(q: Params) -> Params:
        with torch.enable_grad():
            leaves = {k: v.detach().requires_grad_() for k, v in q.items()}
            loss = mean_loss(functional_call(model, leaves, (xb,)), yb)
            return dict(zip(leaves, torch.autograd.grad(loss, list(leaves.values()))))

    return grad_at


def _stack(dicts: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Stack a list of (nested) tensor dicts along a new leading client dimension."""
    out: dict[str, Any] = {}
    for key, first in dicts[0].items():
        if isinstance(first, torch.Tensor):
            out[key] = torch.stack([d[key] for d in dicts])
        elif isinstance(first, dict):
            out[key] = _stack([d[key] for d in dicts])
        else:
            raise ValueError(f"the vmap executor can only stack tensor client state; {key!r} is {type(first).__name__}")
    return out


def train_vmap(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    received: Params,
    buffers: Params,
    jobs: Sequence[ClientJob],
    local: LocalTraining,
    algorithm: Algorithm,
    server_state: dict[str, Any],
    round_: int,
    loss_fn: LossFn = cross_entropy,
    *,
    capture: bool = False,
) -> list[ClientOutcome]:
    model.train()
    c, steps = len(jobs), [len(j.batches) for j in jobs]
    p = {n: v.detach().unsqueeze(0).repeat(c, *([1] * v.dim())) for n, v in received.items()}
    states = _stack([j.state for j in jobs]) if jobs[0].state else {}
    names, plist = list(p), list(p.values())
    momentum_buf = [torch.zeros_like(v) for v in plist] if local.momentum else None
    grads_of, directions_of = _batched_gradients(model, loss_fn, algorithm, received, server_state)
    idx_all, wts_all, active_all = _padded_batches(jobs, local.batch_size, x.device)  # on the device once a round
    loss_sum = torch.zeros(c, device=x.device)  # accumulated on the device: no host sync inside the loop
    lrs, use_direction = [local.lr_at(round_, k) for k in range(max(steps))], has_correction(algorithm)

    def step(xb: torch.Tensor, yb: torch.Tensor, wb: torch.Tensor, active: torch.Tensor, lr: float | torch.Tensor,
             masked: bool) -> None:
        """One local step of every client; `masked`: clients past their last step keep their state. A captured
        step writes the client states in place (a graph replays fixed addresses)."""
        nonlocal states
        grads, losses = grads_of(p, xb, yb, wb)
        d = grads
        if use_direction:
            d, stepped = directions_of(p, grads, states, xb, yb, wb)
            stepped = _where_active(active, stepped, states) if masked else stepped
            if capture:
                _copy_into(states, stepped)
            else:
                states = stepped
        with torch.no_grad():
            sgd_step(plist, [d[n] for n in names], momentum_buf, lr, local, active if masked else None)
            loss_sum.add_(losses.detach() * active)

    if capture:
        if local.augment:
            raise ValueError("a captured step cannot draw augmentations (each client's own host-side stream); "
                             "use executor='vmap'")
        _captured_steps(lambda idx, wts, active, lr: step(x[idx], y[idx], wts, active, lr, masked=True),
                        (idx_all, wts_all, active_all), lrs, x.device)
    else:
        for k in range(max(steps)):
            xb = _augmented(x[idx_all[k]], jobs, k, local)
            step(xb, y[idx_all[k]], wts_all[k], active_all[k], lrs[k], masked=any(k >= s for s in steps))
    for ci, job in enumerate(jobs):
        job.state.update(_unstack(states, ci))
    losses_done = loss_sum.cpu().tolist()
    return [ClientOutcome(params={n: v[ci].clone() for n, v in p.items()}, buffers={},
                          loss=losses_done[ci] / steps[ci], lr_sum=float(sum(lrs[: steps[ci]])))
            for ci in range(c)]


def _batched_gradients(model: nn.Module, loss_fn: LossFn, algorithm: Algorithm, received: Params,
                       server_state: dict[str, Any]) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """Every client's (gradient, loss) of its padded mini-batch, and every client's local direction with its
    client state after the step, each one call over the stacked clients."""

    def masked_loss(params: Params, xb: torch.Tensor, yb: torch.Tensor, wb: torch.Tensor) -> torch.Tensor:
        per_sample = loss_fn(functional_call(model, params, (xb,)), yb)
        return (per_sample * wb).sum() / wb.sum().clamp_min(1.0)

    def direction_of(params: Params, grads: Params, state: dict[str, Any], xb: torch.Tensor, yb: torch.Tensor,
                     wb: torch.Tensor) -> tuple[Params, dict[str, Any]]:
        """One client's direction and its client state after the step (per-step state such as STEM's
        recursive momentum lives in the client state, which the batched executor threads through)."""
        state = dict(state)
        d = algorithm.local_direction(params, grads, received, state, server_state,
                                      lambda q: grad(masked_loss)(q, xb, yb, wb))
        return d, state

    return vmap(grad_and_value(masked_loss), randomness="different"), vmap(direction_of)


def _captured_steps(step: Callable[[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor], None],
                    batches: tuple[torch.Tensor, torch.Tensor, torch.Tensor], lrs: list[float],
                    device: torch.device) -> None:
    """`step(idx, wts, active, lr)` for every step of the round, through `run_steps`: its inputs live in static
    buffers, refilled before each step (a graph replays fixed addresses)."""
    idx_all, wts_all, active_all = batches
    idx, wts, active = idx_all[0].clone(), wts_all[0].clone(), active_all[0].clone()
    lr = torch.zeros((), device=device)

    def load(k: int) -> None:
        idx.copy_(idx_all[k])
        wts.copy_(wts_all[k])
        active.copy_(active_all[k])
        lr.fill_(lrs[k])

    run_steps(lambda: step(idx, wts, active, lr), load, len(lrs), device)


def _augmented(xb: torch.Tensor, jobs: Sequence[ClientJob], k: int, local: LocalTraining) -> torch.Tensor:
    """Step k's stacked inputs with each client's real samples augmented from its own stream, in the sequential
    executor's order (`xb` itself where the run has no augmentation)."""
    if local.augment:
        for ci, job in enumerate(jobs):
            if k < len(job.batches):
                n = len(job.batches[k])
                xb[ci, :n] = AUGMENTATIONS[local.augment](xb[ci, :n], job.augment_gen)
    return xb


def train_graph(*args: Any, **kwargs: Any) -> list[ClientOutcome]:
    """The batched executor with its step captured in a CUDA graph (see the module docstring)."""
    return train_vmap(*args, **kwargs, capture=True)


WARMUP_STEPS = 3  # uncaptured steps before a capture: cuBLAS and cuDNN choose their kernels and workspaces
MIN_CAPTURED_STEPS = 8  # a round of fewer steps runs uncaptured: warm-up and capture would cost what replays save


def run_steps(step: Callable[[], None], load: Callable[[int], None], n: int, device: torch.device) -> None:
    """`load(k); step()` for k = 0..n-1; on a CUDA device with at least `MIN_CAPTURED_STEPS` steps, the steps after
    the warm-up are replays of one captured `step()` (which reads and writes only buffers that outlive it)."""
    if device.type != "cuda" or n < MIN_CAPTURED_STEPS:
        for k in range(n):
            load(k)
            step()
        return
    warm = torch.cuda.Stream(device)  # PyTorch's rule: warm up on a side stream before capturing
    warm.wait_stream(torch.cuda.current_stream(device))
    with torch.cuda.stream(warm):
        for k in range(WARMUP_STEPS):
            load(k)
            step()
    torch.cuda.current_stream(device).wait_stream(warm)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # records the step's kernels; runs none of them
        step()
    for k in range(WARMUP_STEPS, n):
        load(k)
        graph.replay()


def _copy_into(target: dict[str, Any], source: dict[str, Any]) -> None:
    """Copy a (nested) stacked state into the buffers of `target`, in place."""
    for k, v in source.items():
        _copy_into(target[k], v) if isinstance(v, dict) else target[k].copy_(v)


def _where_active(active: torch.Tensor, new: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """Clients that have finished their steps keep their state (per-client rows of a stacked state)."""
    out = {}
    for k, v in new.items():
        out[k] = _where_active(active, v, old[k]) if isinstance(v, dict) else torch.where(
            active.view(-1, *([1] * (v.dim() - 1))), v, old[k])
    return out


def _unstack(stacked: dict[str, Any], ci: int) -> dict[str, Any]:
    """Client ci's slice of a stacked (nested) state dict, copied out of the stack."""
    return {k: _unstack(v, ci) if isinstance(v, dict) else v[ci].clone() for k, v in stacked.items()}


def _padded_batches(jobs: Sequence[ClientJob], bsz: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """Sample indices [steps, clients, bsz], their weights (1 real, 0 padding) and [steps, clients] activity."""
    steps = max(len(j.batches) for j in jobs)
    idx = np.zeros((steps, len(jobs), bsz), dtype=np.int64)
    wts = np.zeros((steps, len(jobs), bsz), dtype=np.float32)
    for ci, job in enumerate(jobs):
        for k, pos in enumerate(job.batches):
            idx[k, ci, : len(pos)] = job.indices[pos]
            wts[k, ci, : len(pos)] = 1.0
    active = torch.from_numpy(wts.max(axis=2) > 0)
    return torch.from_numpy(idx).to(device), torch.from_numpy(wts).to(device), active.to(device)


def has_correction(algorithm: Algorithm) -> bool:
    return type(algorithm).local_direction is not Algorithm.local_direction or (
        type(algorithm).correction is not Algorithm.correction
    )




@dataclass
class ClientGroup:
    """One federation's clients in a stacked round: the model they received, the algorithm's client view (what
    the executors call `server_state`) and their jobs. Groups from several federations train in one batched step."""

    received: Params
    view: dict[str, Any]
    jobs: Sequence[ClientJob]


def train_stacked(model: nn.Module, x: torch.Tensor, y: torch.Tensor, groups: Sequence[ClientGroup],
                  local: LocalTraining, algorithm: Algorithm, round_: int, loss_fn: LossFn = cross_entropy, *,
                  capture: bool = False) -> list[list[ClientOutcome]]:
    """Every group's clients in one batched step, each group's outcomes in its jobs' order. A lone group's
    received model and view are shared by its clients, as in `train_vmap`; with several groups each client reads
    its own group's (stacked per client; a view's non-tensor values must agree across the groups: `view_constants`)."""
    if capture and local.augment:
        raise ValueError("a captured step cannot draw augmentations (each client's own host-side stream); "
                         "use executor='vmap'")
    model.train()
    jobs = [job for group in groups for job in group.jobs]
    steps = [len(j.batches) for j in jobs]
    counts = [len(group.jobs) for group in groups]
    no_inputs: tuple[Any, Any, tuple[Any, Any]] = (None, None, (None, None))
    anchors, views, shared_dims = _group_inputs(groups, counts) if has_correction(algorithm) else no_inputs
    p = {n: torch.cat([g.received[n].detach().unsqueeze(0).repeat(len(g.jobs), *([1] * v.dim()))
                       for g in groups]) for n, v in groups[0].received.items()}
    batch = _StackedBatch(model, x, y, p, _stack([j.state for j in jobs]) if jobs[0].state else {}, local,
                          algorithm, loss_fn, anchors, views, shared_dims)
    idx_all, wts_all, active_all = _padded_batches(jobs, local.batch_size, x.device)  # moved once per round
    lrs = [local.lr_at(round_, k) for k in range(max(steps))]
    if capture:
        _captured_steps(lambda idx, wts, active, lr: batch.step(idx, wts, active, lr, ragged=True),
                        (idx_all, wts_all, active_all), lrs, x.device)
    else:
        for k in range(max(steps)):
            ragged = any(k >= s for s in steps)  # some client is done: mask its move and keep its state
            augment = [(job.augment_gen, len(job.batches[k]) if k < s else 0) for job, s in zip(jobs, steps)]
            batch.step(idx_all[k], wts_all[k], active_all[k], lrs[k], ragged=ragged,
                       augment=augment if local.augment else None)
    outcomes = batch.outcomes(jobs, steps, lrs)
    bounds = np.cumsum([0, *counts])
    return [outcomes[bounds[i]:bounds[i + 1]] for i in range(len(groups))]


class _StackedBatch:
    """The stacked clients' parameters, momentum buffers, algorithm states and loss sums, and their one batched
    step (`step`), which the uncaptured loop calls with each step's inputs and a captured round with its static
    buffers."""

    def __init__(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, p: Params, states: dict[str, Any],
                 local: LocalTraining, algorithm: Algorithm, loss_fn: LossFn, anchors: Params | None,
                 views: dict[str, Any] | None, shared_dims: tuple[Any, Any]) -> None:
        self.x, self.y, self.p, self.states, self.local = x, y, p, states, local
        self.anchors, self.views, self.use_direction = anchors, views, has_correction(algorithm)
        self.names = list(p)
        self.plist = [p[n] for n in self.names]
        self.momentum_buf = [torch.zeros_like(v) for v in self.plist] if local.momentum else None
        self.loss_sum = torch.zeros(len(self.plist[0]), device=x.device)  # on the device: no host sync per step

        def masked_loss(params: Params, xb: torch.Tensor, yb: torch.Tensor, wb: torch.Tensor) -> torch.Tensor:
            per_sample = loss_fn(functional_call(model, params, (xb,)), yb)
            return (per_sample * wb).sum() / wb.sum().clamp_min(1.0)

        def direction_of(params: Params, grads: Params, state: dict[str, Any], xb: torch.Tensor, yb: torch.Tensor,
                         wb: torch.Tensor, anchor: Params, view: dict[str, Any]) -> tuple[Params, dict[str, Any]]:
            """One client's direction and its client state after the step (per-step state such as STEM's
            recursive momentum lives in the client state, which the batched step threads through)."""
            state = dict(state)
            d = algorithm.local_direction(params, grads, anchor, state, view,
                                          lambda q: grad(masked_loss)(q, xb, yb, wb))
            return d, state

        self.grads_of = vmap(grad_and_value(masked_loss), randomness="different")
        self.directions_of = vmap(direction_of, in_dims=(0, 0, 0, 0, 0, 0, *shared_dims))

    def step(self, idx: torch.Tensor, wts: torch.Tensor, active: torch.Tensor, lr: float | torch.Tensor, *,
             ragged: bool, augment: list[tuple[torch.Generator | None, int]] | None = None) -> None:
        """One local step of every client: `ragged` masks the clients that are done (`active`); `augment` gives
        each client's augmentation stream and real samples this step (0: done)."""
        xb, yb = self.x[idx], self.y[idx]
        for ci, (gen, n) in enumerate(augment or ()):  # each client's real samples, from its own stream
            if n:
                xb[ci, :n] = AUGMENTATIONS[self.local.augment](xb[ci, :n], gen)
        grads, losses = self.grads_of(self.p, xb, yb, wts)
        d = grads
        if self.use_direction:
            d, stepped = self.directions_of(self.p, grads, self.states, xb, yb, wts, self.anchors, self.views)
            _copy_into(self.states, _where_active(active, stepped, self.states) if ragged else stepped)
        with torch.no_grad():
            sgd_step(self.plist, [d[n] for n in self.names], self.momentum_buf, lr, self.local,
                     active if ragged else None)
            self.loss_sum.add_(losses.detach() * active)

    def outcomes(self, jobs: Sequence[ClientJob], steps: Sequence[int], lrs: Sequence[float]) -> list[ClientOutcome]:
        """Each client's trained parameters, mean loss and learning-rate sum; its algorithm state into its job."""
        for ci, job in enumerate(jobs):
            job.state.update(_unstack(self.states, ci))
        losses = self.loss_sum.cpu().tolist()
        return [ClientOutcome(params={n: v[ci].clone() for n, v in self.p.items()}, buffers={},
                              loss=losses[ci] / steps[ci], lr_sum=float(sum(lrs[: steps[ci]])))
                for ci in range(len(jobs))]


def _group_inputs(groups: Sequence[ClientGroup], counts: Sequence[int]) -> tuple[Any, Any, tuple[Any, Any]]:
    """(anchors, views, their vmap in_dims): a lone group's received model and view as they are (shared by its
    clients), several groups' stacked per client."""
    if len(groups) == 1:
        return groups[0].received, groups[0].view, (None, None)
    anchors, anchor_dims = _per_client([g.received for g in groups], counts, "received model")
    views, view_dims = _per_client([g.view for g in groups], counts, "client view")
    return anchors, views, (anchor_dims, view_dims)


def _per_client(values: Sequence[Any], counts: Sequence[int], where: str) -> tuple[Any, Any]:
    """One value per group -> (the value per client, its vmap in_dims): tensors stacked, each group's repeated
    for its clients; dicts item by item; anything else shared, and equal across the groups."""
    first = values[0]
    if isinstance(first, torch.Tensor):
        return torch.cat([v.unsqueeze(0).expand(n, *v.shape) for v, n in zip(values, counts)]), 0
    if isinstance(first, dict):
        items = {k: _per_client([v[k] for v in values], counts, f"{where}[{k!r}]") for k in first}
        return {k: v for k, (v, _) in items.items()}, {k: d for k, (_, d) in items.items()}
    if any(v != first for v in values):
        raise ValueError(f"the groups' {where} differ ({values!r}): groups train together only where their "
                         "views' non-tensor values agree (`view_constants`)")
    return first, None


def view_constants(view: dict[str, Any]) -> tuple[tuple[str, Any], ...]:
    """The non-tensor values of a client view, by key path: groups whose views share them train together."""
    out: list[tuple[str, Any]] = []
    for key, value in view.items():
        if isinstance(value, dict):
            out += [(f"{key}.{k}", v) for k, v in view_constants(value)]
        elif not isinstance(value, torch.Tensor):
            out.append((key, value))
    return tuple(out)
