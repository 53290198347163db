"""The federated round loop: sample, downlink, local training, uplink, aggregate, hooks, evaluate.

One round (see docs/runs.md, "The library"):

    sent      = algorithm.broadcast(w)                  -> downlink Link (codec, exact bits)
    received  = what the clients decode
    trained_i = local SGD from `received` with the algorithm's correction   (executor: sequential | vmap)
    update_i  = uplink Link(trained_i - received or trained_i)               (codec per client, exact bits)
    w         = algorithm.aggregate(w, updates, weights) -> post-aggregation hooks -> evaluate

Every random draw comes from `Seeds(seed)` streams keyed by (purpose, round, client), so a run is a
pure function of its arguments; the sequential executor is bitwise reproducible.
"""
from __future__ import annotations

import contextlib
import json
import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, Union

import numpy as np
import pandas as pd
import torch
from torch import nn

from fedlib.algorithms.base import Algorithm
from fedlib.codecs.base import FLOAT_BITS
from fedlib.core import params as P
from fedlib.core.contracts import (SERVER, Checkpoint, ClientBehavior, ClientJob, ClientOutcome, ClientResult,
                                   Diagnostics, FederatedData, Hook, LayerDiagnostics, LocalRun, LocalTraining,
                                   RoundContext, RoundInfo, RunResult, layer_table)
from fedlib.core.params import Params
from fedlib.core.seeding import Seeds
from fedlib.data import Dataset
from fedlib.engine.channel import Downlink, Link, Uplink
from fedlib.engine.executors import LossFn, has_correction, cross_entropy, train_graph, train_sequential, train_vmap
from fedlib.validate import instance

Sampler = Callable[[int, int, np.random.Generator], np.ndarray]
CHECKPOINT_FORMAT = 2  # of `Federation.state_dict`; 2: the two sides' own state_dicts (1: one flat hand-kept list)


def make_sampler(spec: Union[int, float, Sampler], num_clients: int) -> Sampler:
    """int K: K clients uniformly without replacement; float f: fraction f; callable: used as is."""
    if callable(spec):
        return spec
    if isinstance(spec, bool) or not isinstance(spec, (int, float)):
        raise ValueError(f"sampler must be an int, a float fraction or a callable, got {spec!r}")
    k = spec if isinstance(spec, int) else max(1, round(spec * num_clients))
    if isinstance(spec, float) and not 0 < spec <= 1:
        raise ValueError(f"a participation fraction must be in (0, 1], got {spec}")
    if not 1 <= k <= num_clients:
        raise ValueError(f"cannot sample {k} clients per round from {num_clients}")
    if k == num_clients:
        return lambda r, n, rng: np.arange(n)
    return lambda r, n, rng: np.sort(rng.choice(n, size=k, replace=False))


DEFAULT_THREADS = torch.get_num_threads()  # torch's own choice at import (the core count)


def _has_conv(model: nn.Module) -> bool:
    return any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules())


def choose_executor(model: nn.Module, algorithm: Algorithm, device: torch.device, local: LocalTraining) -> str:
    """What a whole run costs, cold start included. On a GPU, the batched executor wherever it applies (the
    sequential loop is launch-bound there: one H100 idled ~87% of a FedShift round), with its step captured in a
    CUDA graph for plain SGD steps (`make bench-gpu` measures the three); an algorithm that corrects the local
    direction keeps the uncaptured batched step until a GPU battery has shown its captured step equal. On a CPU,
    the sequential loop: in a fresh process the batched path's first call imports torch._dynamo (~1.1 s) and
    pads uneven clients, and even warmed rounds lost to the sequential ones (`make bench` measures both)."""
    if device.type == "cuda" and algorithm.vmap_compatible and not list(model.buffers()):
        return "graph" if not has_correction(algorithm) and not local.augment else "vmap"
    return "sequential"


def choose_threads(model: nn.Module) -> int:
    """One thread for dense models (overhead-bound: extra threads only add synchronisation); torch's
    default for convolutional models (compute-bound: two threads measured ~1.7x one on 2 cores)."""
    return DEFAULT_THREADS if _has_conv(model) else 1


@contextlib.contextmanager
def torch_threads(n: int) -> Iterator[None]:
    """Run with n intra-op threads (1 is fastest for small models on 2 cores: see `make bench`)."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@torch.inference_mode()
def evaluate(model: nn.Module, params: Params, buffers: Params, x: torch.Tensor, y: torch.Tensor,
             loss_fn: LossFn = cross_entropy, batch_size: int = 2048) -> tuple[float, float]:
    """Accuracy (NaN for regression targets) and mean loss of `params` on (x, y)."""
    load_state(model, params, buffers)
    model.eval()
    correct, loss = 0, 0.0
    for i in range(0, len(y), batch_size):
        out, target = model(x[i : i + batch_size]), y[i : i + batch_size]
        loss += float(loss_fn(out, target).sum())
        if not target.is_floating_point():
            correct += int((out.argmax(1) == target).sum())
    accuracy = correct / len(y) if not y.is_floating_point() else float("nan")
    return accuracy, loss / len(y)


def load_state(model: nn.Module, params: Params, buffers: Params) -> None:
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(params[name])
        for name, b in model.named_buffers():
            b.copy_(buffers[name])


def _tensor_bits(obj: Any) -> int:
    """32 bits per value of every tensor in a (nested) dict of extras."""
    if isinstance(obj, torch.Tensor):
        return FLOAT_BITS * obj.numel()
    if isinstance(obj, dict):
        return sum(_tensor_bits(v) for v in obj.values())
    return 0


def _average_buffers(buffers: Sequence[Params], weights: Sequence[float]) -> Params:
    """Float buffers (BatchNorm statistics) are averaged like weights; counters take the maximum."""
    out = {}
    for name, first in buffers[0].items():
        if first.is_floating_point():
            out[name] = P.weighted_sum([{name: b[name]} for b in buffers], weights)[name]
        else:
            out[name] = torch.stack([b[name] for b in buffers]).max(0).values
    return out


@dataclass
class ClientReply:
    """What one client returns to the server after a round: its decoded upload (the update as the server
    reconstructs it, extras at full precision), its model buffers, the uplink codec it encoded with, its
    record row, whose bit counts are those of the message the codec produced where the client encoded it, and
    the message's per-layer diagnostics (rows of the layer table)."""

    result: ClientResult
    buffers: Params
    codec: Any
    row: dict[str, Any]
    layers: list[dict[str, Any]]


@dataclass
class RoundStart:
    """What the server decided at the start of a round: who trains, the model they receive, the algorithm's
    declared view (all a client reads from the server) and when the round started."""

    ctx: RoundContext
    ids: np.ndarray
    received: Params
    view: dict[str, Any]
    started: float


class ClientSide:
    """The client side of a round: local training from the received model with the client's keyed streams
    (batches per (round, client), augmentation, behaviour), then the uplink encode with the client's own
    error-feedback residual. fedlib's loop runs it for every selected client; a Flower ClientApp for one."""

    def __init__(self, *, model: nn.Module, data: FederatedData, x: torch.Tensor, y: torch.Tensor,
                 algorithm: Algorithm, local: LocalTraining, up: Uplink, seeds: Seeds,
                 train: Callable[..., list[ClientOutcome]], behavior: ClientBehavior | None, loss_fn: LossFn) -> None:
        self.model, self.data, self.x, self.y, self.algorithm, self.local = model, data, x, y, algorithm, local
        self.up, self.seeds, self.train_fn, self.behavior, self.loss_fn = up, seeds, train, behavior, loss_fn
        _check_stateful("client_behavior", behavior)
        self.states: dict[int, dict[str, Any]] = {}  # the algorithm's persistent client state, by client

    def state_dict(self) -> dict[str, Any]:
        """Everything the client side carries from one round to the next (the one list of it: a checkpoint
        saves it, a Flower client keeps it in its context): the algorithm's client states and the uplink's
        error-feedback residuals, by client, and the client behaviour's memory (None if it keeps none)."""
        return {"algorithm": self.states, "residuals": self.up.residuals, "behavior": _state_of(self.behavior)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from `state_dict()`'s value (containers are copied: the caller's dicts are not written to)."""
        _require(state, ("algorithm", "residuals", "behavior"), "client side")
        self.states, self.up.residuals = dict(state["algorithm"]), dict(state["residuals"])
        _restore(self.behavior, state["behavior"])

    def train(self, start: RoundStart, buffers: Params) -> tuple[list[ClientJob], list[ClientOutcome]]:
        """Local training of the round's clients (`start.ids`) from `start.received`."""
        r, local, seeds, algorithm = start.ctx.round, self.local, self.seeds, self.algorithm
        jobs = []
        for i in start.ids:
            state = self.states.setdefault(int(i), algorithm.init_client_state(start.received))
            algorithm.start_client(state, start.view, start.ctx.for_client(int(i)))
            idx = self.data.client_indices[i]
            jobs.append(ClientJob(int(i), idx, local.schedule(len(idx), seeds.numpy("batches", r, int(i))), state,
                                  seeds.torch("augment", r, int(i)) if local.augment else None))
        outcomes = self.train_fn(self.model, self.x, self.y, start.received, buffers, jobs, local, algorithm,
                                 start.view, r, self.loss_fn)
        return jobs, outcomes

    def replies(self, start: RoundStart, jobs: Sequence[ClientJob], outcomes: Sequence[ClientOutcome],
                history: Sequence[dict[str, Any]]) -> list[ClientReply]:
        """The uploads: the algorithm's extras, the client behaviour, the uplink encode with exact bits."""
        ctx, received, view, r, local, out_replies = start.ctx, start.received, start.view, start.ctx.round, self.local, []
        for job, out in zip(jobs, outcomes):
            cctx, n_i = ctx.for_client(job.client), len(job.indices)
            run = LocalRun(len(job.batches), out.lr_sum, n_i, local.epochs_of(len(job.batches), n_i))
            extras = self.algorithm.finish_client(received, out.params, job.state, view, run, cctx)
            sent = out.params if self.behavior is None else self.behavior(
                cctx, received, out.params, self.seeds.torch("behavior", r, job.client))
            update, tx = self.up.upload(sent, received, r, job.client, history)
            bits_extra = _tensor_bits(extras) + _tensor_bits(out.buffers)
            row = {"round": r + 1, "client": job.client, "n_samples": n_i, "steps": run.steps,
                   "loss": out.loss, "bits_up": tx.bits, "payload_bits_up": tx.payload_bits,
                   "bits_up_extra": bits_extra, "codec": getattr(tx.codec, "name", type(tx.codec).__name__),
                   **{k: v for k, v in extras.items() if isinstance(v, (int, float))}}
            out_replies.append(ClientReply(ClientResult(job.client, n_i, run.steps, update, out.loss, extras),
                                           out.buffers, tx.codec, row, _layer_rows(r + 1, job.client, tx.info)))
        return out_replies


class ServerSide:
    """The server side of a round: `open_round` samples the round's clients from the keyed sampling stream,
    sends the downlink and takes the algorithm's client view; `close_round` takes the clients' replies in
    sorted client order and aggregates, runs the hooks, publishes the downlink update, evaluates and appends
    the record row. It owns the global model, the server state and the record."""

    def __init__(self, *, model: nn.Module, n_clients: int, x_test: torch.Tensor, y_test: torch.Tensor,
                 algorithm: Algorithm, rounds: int, sample: Sampler, down: Downlink, seeds: Seeds,
                 hooks: Sequence[Hook], loss_fn: LossFn, eval_every: int, aggregation_weights: str,
                 downlink_receivers: str, device: torch.device) -> None:
        self.model, self.n_clients, self.x_test, self.y_test, self.algorithm = model, n_clients, x_test, y_test, algorithm
        self.rounds, self.sample, self.down, self.seeds, self.hooks, self.loss_fn = rounds, sample, down, seeds, hooks, loss_fn
        self.eval_every, self.aggregation_weights, self.downlink_receivers = eval_every, aggregation_weights, downlink_receivers
        self.device = device
        _check_stateful("sampler", sample)
        for i, hook in enumerate(hooks):
            _check_stateful(f"hooks[{i}]", hook)
        self.w: Params = {k: v.detach().clone() for k, v in model.named_parameters()}
        self.buffers: Params = {k: v.detach().clone() for k, v in model.named_buffers()}
        self.server_state = algorithm.init_server_state(self.w, n_clients)
        self.history: list[dict[str, Any]] = []
        self.client_rows: list[dict[str, Any]] = []
        self.layer_rows: list[dict[str, Any]] = []

    def state_dict(self) -> dict[str, Any]:
        """Everything the server side carries from one round to the next (the one list of it): the global
        model and buffers, the algorithm's server state, the model the clients hold (downlink), the record
        rows (as JSON text: plain data that loads without code) and the memory of a stateful sampler or hook."""
        return {"w": self.w, "buffers": self.buffers, "algorithm": self.server_state, "held": self.down.held,
                "history": _json(self.history), "client_rows": _json(self.client_rows),
                "layer_rows": _json(self.layer_rows), "sampler": _state_of(self.sample),
                "hooks": [_state_of(hook) for hook in self.hooks]}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from `state_dict()`'s value."""
        _require(state, ("w", "buffers", "algorithm", "held", "history", "client_rows", "layer_rows", "sampler",
                         "hooks"), "server side")
        if len(state["hooks"]) != len(self.hooks):
            raise ValueError(f"the saved server side has {len(state['hooks'])} hooks' states, this run has "
                             f"{len(self.hooks)} hooks: it was saved by another run")
        self.w, self.buffers, self.server_state = state["w"], state["buffers"], state["algorithm"]
        self.down.held = state["held"]
        self.history, self.client_rows = json.loads(state["history"]), json.loads(state["client_rows"])
        self.layer_rows = json.loads(state["layer_rows"])
        _restore(self.sample, state["sampler"])
        for hook, saved in zip(self.hooks, state["hooks"]):
            _restore(hook, saved)

    def open_round(self, r: int) -> RoundStart:
        t_round, ctx = time.perf_counter(), RoundContext(r, self.n_clients, device=self.device)
        algorithm, server_state = self.algorithm, self.server_state
        ids = _sample_clients(self.sample, r, self.n_clients, self.seeds)
        received, self.w = self.down.receive(algorithm.broadcast(self.w, server_state), self.w, r, self.history)
        view = algorithm.client_view(server_state, ctx)  # all a client reads from the server this round
        return RoundStart(ctx, ids, received, view, t_round)

    def close_round(self, start: RoundStart, replies: Sequence[ClientReply], t_train: float) -> dict[str, Any]:
        """Aggregate the replies (any order: they are sorted by client) and append the round's record row."""
        replies = sorted(replies, key=lambda rep: rep.result.client)
        got = [rep.result.client for rep in replies]
        if got != start.ids.tolist():
            raise ValueError(f"round {start.ctx.round}: replies from clients {got}, but clients {start.ids.tolist()} "
                             "were selected; every selected client must reply exactly once")
        ctx, ids, view, w, down, algorithm = start.ctx, start.ids, start.view, self.w, self.down, self.algorithm
        server_state, history, r, rounds = self.server_state, self.history, start.ctx.round, self.rounds
        results, codecs = [rep.result for rep in replies], [rep.codec for rep in replies]
        up_bits = sum(rep.row["bits_up"] for rep in replies)
        up_payload = sum(rep.row["payload_bits_up"] for rep in replies)
        extra_bits = sum(rep.row["bits_up_extra"] for rep in replies)
        self.client_rows.extend(rep.row for rep in replies)
        self.layer_rows.extend(row for rep in replies for row in rep.layers)

        wts = _aggregation_weights(results, self.aggregation_weights)
        weights = torch.tensor(wts, dtype=torch.float64)
        aggregated = algorithm.aggregate(w, results, weights, server_state, ctx)
        if self.buffers:
            self.buffers = _average_buffers([rep.buffers for rep in replies], wts.tolist())
        info = RoundInfo(ctx, w, results, weights, codecs, aggregated)
        w, diagnostics = aggregated, {}
        for hook in self.hooks:
            w, diag = hook(w, info)
            scalars, per_layer = _split_diagnostics(diag, hook)
            diagnostics.update(scalars)
            self.layer_rows += _layer_rows(r + 1, SERVER, per_layer)
        w = down.publish(algorithm.broadcast(w, server_state), w, r + 1, history)
        self.w = w

        acc = loss = float("nan")
        due = (r + 1) % self.eval_every == 0 or r + 1 == rounds
        if due:
            evaluated = algorithm.eval_params(down.clients_model(w), server_state)
            acc, loss = evaluate(self.model, evaluated, self.buffers, self.x_test, self.y_test, self.loss_fn)
        train_loss = float(np.dot(wts, [res.loss for res in results]))
        history.append({
            "round": r + 1, "test_acc": acc, "test_loss": loss, "train_loss": train_loss,
            "diverged": _diverged(history, train_loss, loss, due, r + 1),
            "clients": len(ids), "bits_up": up_bits, "payload_bits_up": up_payload,
            "bits_down": sum(t.bits for t in down.sent), "payload_bits_down": sum(t.payload_bits for t in down.sent),
            "receivers": len(ids) if self.downlink_receivers == "selected" else self.n_clients,
            "bits_up_extra": extra_bits, "bits_down_extra": algorithm.client_view_bits(view),
            "train_s": t_train, "wall_s": time.perf_counter() - start.started,
            **algorithm.diagnostics(server_state), **diagnostics,
        })
        self.layer_rows += _layer_rows(r + 1, SERVER, {f"down/{k}": v for t in down.sent for k, v in t.info.items()})
        return history[-1]


@dataclass
class Federation:
    """A run's two sides, built once from run_federation's arguments (`open_federation`)."""

    server: ServerSide
    clients: ClientSide
    threads: int
    config: dict[str, Any]

    def state_dict(self) -> dict[str, Any]:
        """The run's state between two rounds, as a checkpoint saves it: both sides' `state_dict`s, versioned."""
        return {"format": CHECKPOINT_FORMAT, "server": self.server.state_dict(), "clients": self.clients.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from `state_dict()`'s value (its format checked by the caller, `run_federation`)."""
        self.server.load_state_dict(state["server"])
        self.clients.load_state_dict(state["clients"])

    def result(self) -> RunResult:
        server = self.server
        return RunResult(rounds=pd.DataFrame(server.history), clients=pd.DataFrame(server.client_rows),
                         params=server.w, server_state=server.server_state, config=self.config,
                         layers=layer_table(server.layer_rows))


def open_federation(
    model_fn: Callable[[], nn.Module],
    data: FederatedData,
    algorithm: Algorithm,
    rounds: int,
    *,
    local: LocalTraining | None = None,
    sampler: Union[int, float, Sampler] = 1.0,
    uplink: Link | None = None,
    downlink: Link | None = None,
    downlink_receivers: str = "selected",
    aggregation_weights: str = "samples",
    hooks: Sequence[Hook] = (),
    client_behavior: ClientBehavior | None = None,
    loss_fn: LossFn = cross_entropy,
    eval_every: int = 1,
    seed: int = 0,
    executor: str = "auto",
    threads: Union[int, str] = "auto",
    device: str | torch.device = "cpu",
) -> Federation:
    """The server and client sides of a run with run_federation's arguments (see there), before round 0.

    `executor` ("sequential", "vmap", "graph", "auto") and `threads` (an int or "auto") pick how clients are
    trained: one after another, batched, or batched with the step captured in a CUDA graph (on a CPU "graph"
    runs the same static step uncaptured); "auto" is a batched executor on a GPU and the sequential one on a CPU
    (see `choose_executor`).
    `device` ("cpu", "cuda", "auto") holds the model, the data and the training; codecs that declare
    `device_generic` (every built-in codec) encode there too, with a device generator seeded from the run's
    keyed noise streams (see `fedlib.engine.channel`): the same distributions on any device, not the same values.
    """
    _check_components(model_fn, data, algorithm, local, uplink, downlink, hooks, client_behavior, loss_fn)
    local, uplink, downlink = local or LocalTraining(), uplink or Link(), downlink or Link(payload="weights")
    _check_options(rounds, executor, threads, downlink_receivers, aggregation_weights, eval_every)
    seeds, device, n_clients = Seeds(seed), resolve_device(device), data.num_clients
    ds, sample = data.dataset, make_sampler(sampler, n_clients)
    x_train, y_train, x_test, y_test = (t.to(device) for t in (ds.x_train, ds.y_train, ds.x_test, ds.y_test))
    with torch.random.fork_rng():
        torch.manual_seed(seeds.int("init"))
        model = model_fn()
        instance("model_fn()", model, nn.Module, "model_fn builds the model, e.g. lambda: build_model(...)")
        model = model.to(device)
        _check_model_fits(model, ds, x_train, y_train, loss_fn)  # in the fork: a model drawing in eval mode changes nothing
    executor, threads = _resolve_executor(model, algorithm, local, executor, threads, device)
    train = {"sequential": train_sequential, "vmap": train_vmap, "graph": train_graph}[executor]
    server = ServerSide(model=model, n_clients=n_clients, x_test=x_test, y_test=y_test, algorithm=algorithm,
                        rounds=rounds, sample=sample, seeds=seeds, hooks=hooks, loss_fn=loss_fn, eval_every=eval_every,
                        down=Downlink(downlink, seeds, device, {k: v.detach() for k, v in model.named_parameters()}),
                        aggregation_weights=aggregation_weights, downlink_receivers=downlink_receivers, device=device)
    clients = ClientSide(model=model, data=data, x=x_train, y=y_train, algorithm=algorithm, local=local,
                         up=Uplink(uplink, seeds, device), seeds=seeds, train=train, behavior=client_behavior,
                         loss_fn=loss_fn)
    config = {"algorithm": repr(algorithm), "rounds": rounds, "local": {k: (v if not callable(v) else repr(v))
              for k, v in asdict(local).items()}, "sampler": repr(sampler), "uplink": repr(uplink),
              "downlink": repr(downlink), "aggregation_weights": aggregation_weights, "seed": seed,
              "executor": executor, "threads": threads, "device": str(device), "num_clients": n_clients, "dataset": ds.name}
    return Federation(server, clients, threads, config)


def run_federation(
    model_fn: Callable[[], nn.Module],
    data: FederatedData,
    algorithm: Algorithm,
    rounds: int,
    *,
    progress: bool = True,
    checkpoint: Checkpoint | None = None,
    **options: Any,
) -> RunResult:
    """Simulate `rounds` rounds of federated training and return the tidy record.

    `options` are `open_federation`'s keywords: local, sampler, uplink, downlink, downlink_receivers,
    aggregation_weights, hooks, client_behavior, loss_fn, eval_every, seed, executor, threads, device.
    Each round is the server side's `open_round`, the client side's training and replies, and the server
    side's `close_round` (the Flower adapters in `fedlib.flower` call the same phases).
    A run whose loss turns non-finite is flagged: the record's `diverged` column is true from that round on.
    `checkpoint` (see `Checkpoint`) saves the run's state every `checkpoint.every` rounds and resumes from
    the last save: every draw is keyed by (purpose, round, client), so the continuation is exact.
    """
    fed = open_federation(model_fn, data, algorithm, rounds, **options)
    server, clients, device = fed.server, fed.clients, fed.server.device
    with torch_threads(fed.threads):
        if checkpoint is not None:
            _resume(fed, checkpoint)
        bar = _progress(rounds, algorithm.name, progress, initial=len(server.history))
        for r in range(len(server.history), rounds):
            start = server.open_round(r)
            t_train = time.perf_counter()
            jobs, outcomes = clients.train(start, server.buffers)
            if device.type == "cuda":
                torch.cuda.synchronize(device)  # train_s is the GPU's time too, not only the launches
            t_train = time.perf_counter() - t_train
            row = server.close_round(start, clients.replies(start, jobs, outcomes, server.history), t_train)
            acc = row["test_acc"]
            bar.set_postfix(acc=f"{acc:.3f}" if acc == acc else "-")
            bar.update()
            if checkpoint is not None and (r + 1) % checkpoint.every == 0 and r + 1 < rounds:
                checkpoint.save(fed.state_dict())
        bar.close()
    return fed.result()


def _resume(fed: Federation, checkpoint: Checkpoint) -> None:
    """Load the checkpoint's last save into `fed`, if there is one; a save of another format is refused."""
    saved = checkpoint.load()
    if saved is None:
        return
    found = saved.get("format") if isinstance(saved, Mapping) else None
    if found != CHECKPOINT_FORMAT:
        where = getattr(checkpoint, "path", checkpoint)
        raise ValueError(f"checkpoint {where} holds run state of format {found!r}, not {CHECKPOINT_FORMAT} (this "
                         "fedlib's): it was written by another fedlib version and is not resumed; delete it to "
                         "restart that run")
    fed.load_state_dict(saved)


def _check_stateful(name: str, component: object) -> None:
    """A component that saves its memory must also restore it, or a resumed run would silently drift."""
    saves, restores = hasattr(component, "state_dict"), hasattr(component, "load_state_dict")
    if saves != restores:
        has, lacks = ("state_dict", "load_state_dict") if saves else ("load_state_dict", "state_dict")
        raise TypeError(f"{name} {component!r} defines {has} but not {lacks}: a component with memory across "
                        "rounds defines both (what to save, how to restore it), one without defines neither")


def _state_of(component: object) -> Any:
    """A stateful component's memory (`state_dict()`), None for a component without one."""
    return component.state_dict() if hasattr(component, "state_dict") else None  # type: ignore[attr-defined]


def _restore(component: object, state: Any) -> None:
    if hasattr(component, "load_state_dict"):
        component.load_state_dict(state)  # type: ignore[attr-defined]


def _require(state: Mapping[str, Any], keys: Sequence[str], side: str) -> None:
    missing = [k for k in keys if k not in state]
    if missing:
        raise ValueError(f"the saved {side} state lacks {missing}: it was not written by this fedlib's "
                         f"state_dict (keys found: {sorted(state)})")


def _check_components(model_fn: Callable[[], nn.Module], data: FederatedData, algorithm: Algorithm,
                      local: LocalTraining | None, uplink: Link | None, downlink: Link | None, hooks: Sequence[Hook],
                      client_behavior: ClientBehavior | None, loss_fn: LossFn) -> None:
    """The run's objects are what the loop calls, checked where they enter rather than where they first fail."""
    if isinstance(model_fn, nn.Module) or not callable(model_fn):
        raise ValueError(f"model_fn must be a function that builds a fresh model (the run seeds its initial weights), "
                         f"e.g. lambda: build_model('mlp', data.dataset.input_shape, data.dataset.num_classes); "
                         f"got {type(model_fn).__name__}")
    instance("data", data, FederatedData, "FederatedData(dataset, client_indices), e.g. from a partitioner")
    instance("algorithm", algorithm, Algorithm, "an algorithm object, e.g. FedAvg() or "
             f"fedlib.algorithms.make_algorithm({algorithm!r})" if isinstance(algorithm, str) else "e.g. FedAvg()")
    instance("local", local, (LocalTraining, type(None)), "LocalTraining(lr=..., batch_size=..., epochs=...)")
    if local is not None:
        try:
            local.check()
        except ValueError as err:
            raise ValueError(f"local: {err} (a LocalTraining field set after it was built is checked when the run "
                             "starts)") from None
    for name, link in (("uplink", uplink), ("downlink", downlink)):
        instance(name, link, (Link, type(None)), f"Link(codec={link!r})" if isinstance(link, str) else "e.g. Link()")
    if isinstance(hooks, (str, bytes)) or not isinstance(hooks, Sequence) or not all(callable(h) for h in hooks):
        raise ValueError(f"hooks must be a list of callables hook(params, info) -> (params, diagnostics), got {hooks!r}")
    if client_behavior is not None and not callable(client_behavior):
        raise ValueError(f"client_behavior must be None or a callable behavior(ctx, received, trained, gen), got "
                         f"{client_behavior!r}")
    if not callable(loss_fn):
        raise ValueError(f"loss_fn must be a callable loss_fn(outputs, targets) -> per-sample losses, got {loss_fn!r}")


def _check_model_fits(model: nn.Module, ds: Dataset, x: torch.Tensor, y: torch.Tensor, loss_fn: LossFn) -> None:
    """One forward pass on one training sample, in eval mode without gradients (no random draw, no buffer
    update, so the run is unchanged): a model built for other inputs or another number of classes is named here."""
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad():
            out = model(x[:1])
    except Exception as err:  # whatever the model raises on inputs it was not built for
        reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
        raise ValueError(f"model_fn's model ({type(model).__name__}) cannot take the inputs of dataset {ds.name!r} "
                         f"(input_shape {tuple(ds.input_shape)}): {reason}; build it for them, e.g. build_model(name, "
                         "data.dataset.input_shape, data.dataset.num_classes)") from err
    finally:
        model.train(was_training)
    if loss_fn is cross_entropy and not y.is_floating_point() and tuple(out.shape) != (1, ds.num_classes):
        raise ValueError(f"model_fn's model ({type(model).__name__}) gives outputs of shape {tuple(out.shape[1:])} per "
                         f"sample, but dataset {ds.name!r} has {ds.num_classes} classes (cross-entropy needs one "
                         f"logit per class): build it with num_classes={ds.num_classes}")


def _check_options(rounds: int, executor: str, threads: Union[int, str], downlink_receivers: str,
                   aggregation_weights: str, eval_every: int) -> None:
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 1:
        raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")
    if executor not in ("sequential", "vmap", "graph", "auto"):
        raise ValueError(f"executor must be 'sequential', 'vmap', 'graph' or 'auto', got {executor!r}")
    if threads != "auto" and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer or 'auto', got {threads!r}")
    if downlink_receivers not in ("selected", "all"):
        raise ValueError(f"downlink_receivers must be 'selected' or 'all', got {downlink_receivers!r}")
    if aggregation_weights not in ("samples", "uniform"):
        raise ValueError(f"aggregation_weights must be 'samples' or 'uniform', got {aggregation_weights!r}")
    if isinstance(eval_every, bool) or not isinstance(eval_every, (int, np.integer)) or eval_every < 1:
        raise ValueError(f"eval_every must be an integer >= 1, got {eval_every!r}")


def _resolve_executor(model: nn.Module, algorithm: Algorithm, local: LocalTraining, executor: str,
                      threads: Union[int, str], device: torch.device) -> tuple[str, int]:
    executor = choose_executor(model, algorithm, device, local) if executor == "auto" else executor
    if executor in ("vmap", "graph") and not algorithm.vmap_compatible:
        raise ValueError(f"{algorithm.name} needs per-step state the batched executors do not carry; "
                         "use executor='sequential'")
    if executor in ("vmap", "graph") and len(list(model.buffers())) > 0:
        raise ValueError(f"the {executor} executor needs a model without buffers (no BatchNorm); use executor='sequential'")
    if executor == "graph" and local.augment:
        raise ValueError(f"the graph executor cannot capture augmentation {local.augment!r} (each client draws it from "
                         "its own host-side stream); use executor='vmap'")
    return executor, choose_threads(model) if threads == "auto" else int(threads)


def _layer_rows(round_: int, client: int, info: LayerDiagnostics) -> list[dict[str, Any]]:
    """Rows of the layer table (`fedlib.core.contracts.LAYER_COLUMNS`) from per-layer diagnostics."""
    return [{"round": round_, "client": client, "layer": layer, "key": key, "value": float(value)}
            for key, per_layer in info.items() for layer, value in per_layer.items()]


def _split_diagnostics(diag: Diagnostics, hook: Hook) -> tuple[dict[str, float], LayerDiagnostics]:
    """A hook's diagnostics as (numbers for the round's row, {layer: number} mappings for the layer table)."""
    scalars: dict[str, float] = {}
    per_layer: LayerDiagnostics = {}
    for key, value in diag.items():
        if not isinstance(value, Mapping):
            scalars[key] = value  # type: ignore[assignment]
            continue
        bad = [(layer, v) for layer, v in value.items()
               if not isinstance(layer, str) or isinstance(v, bool) or not isinstance(v, (int, float, np.number))]
        if bad:
            raise ValueError(f"hook {hook!r} returned diagnostic {key!r} with entry {bad[0]!r}: a per-layer diagnostic "
                             "maps layer names (str) to numbers; return a number for a whole-round value")
        per_layer[key] = dict(value)
    return scalars, per_layer


def _sample_clients(sample: Sampler, r: int, n_clients: int, seeds: Seeds) -> np.ndarray:
    ids = np.asarray(sample(r, n_clients, seeds.numpy("sampling", r)), dtype=np.int64)
    if len(ids) == 0 or len(np.unique(ids)) != len(ids) or ids.min() < 0 or ids.max() >= n_clients:
        raise ValueError(f"sampler returned invalid client ids {ids!r} in round {r}")
    return np.sort(ids)


def _aggregation_weights(results: Sequence[ClientResult], rule: str) -> np.ndarray:
    if rule == "uniform":
        return np.full(len(results), 1 / len(results))
    sizes = np.array([res.n_samples for res in results], dtype=np.float64)
    return sizes / sizes.sum()


def _diverged(history: Sequence[dict[str, Any]], train_loss: float, test_loss: float, evaluated: bool,
              round_: int) -> bool:
    """True from the first round with a non-finite training or test loss on; warns once, at that round."""
    if history and history[-1]["diverged"]:
        return True
    if math.isfinite(train_loss) and (not evaluated or math.isfinite(test_loss)):
        return False
    warnings.warn(f"the run diverged at round {round_}: non-finite loss (train {train_loss}, test {test_loss}); "
                  "later rounds are flagged diverged=True in the record", RuntimeWarning, stacklevel=3)
    return True


def resolve_device(device: str | torch.device) -> torch.device:
    """"auto" picks CUDA when available; asking for CUDA without it is an error, not a fallback."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' but torch sees no CUDA GPU here; use device='cpu' (or 'auto')")
    return device


def _progress(total: int, desc: str, enabled: bool, initial: int = 0) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, initial=initial, desc=desc, disable=not enabled, leave=False)


def _json(rows: list[dict[str, Any]]) -> str:
    """Record rows as JSON (numpy scalars as Python numbers; NaN and infinities kept)."""
    return json.dumps(rows, default=lambda v: v.item() if isinstance(v, np.generic) else str(v))

