"""The federated round loop: sample, downlink, local training, uplink, aggregate, hooks, evaluate.

One round (see DESIGN.md "Architecture"):

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
import math
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Union

import numpy as np
import pandas as pd
import torch
from torch import nn

from fedlib import params as P
from fedlib.algorithms.base import Algorithm, ClientResult, LocalRun
from fedlib.channel import Link, LinkContext, Transmission, transmit
from fedlib.codecs.base import FLOAT_BITS, Codec
from fedlib.data import Dataset
from fedlib.executors import ClientJob, LossFn, cross_entropy, train_sequential, train_vmap
from fedlib.params import Params
from fedlib.seeding import Seeds

Sampler = Callable[[int, int, np.random.Generator], np.ndarray]


@dataclass
class LocalTraining:
    """Client-side SGD. Exactly one of `epochs` and `steps` sets the amount of local work."""

    lr: Union[float, Callable[[int, int], float]] = 0.05  # a constant, or lr(round, local_step)
    batch_size: int = 32
    epochs: float | None = 1.0
    steps: int | None = None
    momentum: float = 0.0  # heavy ball, as torch.optim.SGD (dampening 0); reset every round
    weight_decay: float = 0.0

    def __post_init__(self) -> None:
        if (self.epochs is None) == (self.steps is None):
            raise ValueError("LocalTraining needs exactly one of epochs=... or steps=... (set the other to None)")
        if self.epochs is not None and self.epochs <= 0:
            raise ValueError(f"epochs must be > 0, got {self.epochs}")
        if self.steps is not None and self.steps < 1:
            raise ValueError(f"steps must be >= 1, got {self.steps}")
        if self.batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {self.batch_size}")
        if not callable(self.lr) and self.lr <= 0:
            raise ValueError(f"lr must be > 0, got {self.lr}")
        if not 0 <= self.momentum < 1:
            raise ValueError(f"momentum must be in [0, 1), got {self.momentum}")

    def lr_at(self, round_: int, step: int) -> float:
        return float(self.lr(round_, step)) if callable(self.lr) else float(self.lr)

    def schedule(self, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        """The mini-batch index lists of one client for one round (reshuffled every epoch)."""
        per_epoch = math.ceil(n / self.batch_size)
        if self.steps is not None:
            total, epochs = self.steps, math.ceil(self.steps / per_epoch)
        else:
            total, epochs = max(1, round(self.epochs * per_epoch)), math.ceil(self.epochs)
        batches: list[np.ndarray] = []
        for _ in range(epochs):
            perm = rng.permutation(n)
            batches += [perm[i : i + self.batch_size] for i in range(0, n, self.batch_size)]
        return batches[:total]


@dataclass
class FederatedData:
    """A dataset and the training-set indices each client holds."""

    dataset: Dataset
    client_indices: list[np.ndarray]

    def __post_init__(self) -> None:
        if not self.client_indices:
            raise ValueError("FederatedData needs at least one client")
        n = len(self.dataset.y_train)
        for i, idx in enumerate(self.client_indices):
            if len(idx) == 0:
                raise ValueError(f"client {i} holds no samples; use a partitioner with min_size >= 1")
            if np.min(idx) < 0 or np.max(idx) >= n:
                raise ValueError(f"client {i} has indices outside the training set (size {n})")
        self.client_indices = [np.asarray(idx, dtype=np.int64) for idx in self.client_indices]

    @property
    def num_clients(self) -> int:
        return len(self.client_indices)

    @property
    def sizes(self) -> np.ndarray:
        return np.array([len(idx) for idx in self.client_indices])


@dataclass
class RoundInfo:
    """What a post-aggregation hook sees."""

    round: int
    before: Params
    results: list[ClientResult]
    weights: torch.Tensor
    client_codecs: list[Codec]
    aggregated: Params


Hook = Callable[[Params, RoundInfo], tuple[Params, dict[str, float]]]


@dataclass
class RunResult:
    rounds: pd.DataFrame
    clients: pd.DataFrame
    params: Params
    server_state: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)

    @property
    def final_accuracy(self) -> float:
        return float(self.rounds["test_acc"].dropna().iloc[-1])


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


def choose_executor(model: nn.Module, algorithm: Algorithm) -> str:
    """vmap for small dense models (measured ~1.9x the sequential loop for an MLP on digits), sequential
    for convolutional models (vmap measured ~1.8x slower for a small CNN), for models with buffers
    (BatchNorm) and for algorithms with per-step state."""
    if algorithm.vmap_compatible and not list(model.buffers()) and not _has_conv(model):
        return "vmap"
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


def run_federation(
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
    client_behavior: Callable[[int, Params, Params, torch.Generator], Params] | None = None,
    loss_fn: LossFn = cross_entropy,
    eval_every: int = 1,
    seed: int = 0,
    executor: str = "auto",
    threads: Union[int, str] = "auto",
    device: str | torch.device = "cpu",
    progress: bool = True,
) -> RunResult:
    """Simulate `rounds` rounds of federated training and return the tidy record.

    `executor` ("sequential", "vmap", "auto") and `threads` (an int or "auto") pick how clients are
    trained; "auto" uses what `make bench` measured on a 2-core CPU (see `choose_executor`).

    `device` ("cpu", "cuda", "auto") holds the model, the data and the training; codecs always
    encode on the CPU (their noise comes from CPU generator streams), so a run's compression is the
    same on any device.
    """
    local = local or LocalTraining()
    uplink = uplink or Link()
    downlink = downlink or Link(payload="weights")
    if rounds < 1:
        raise ValueError(f"rounds must be >= 1, got {rounds}")
    if executor not in ("sequential", "vmap", "auto"):
        raise ValueError(f"executor must be 'sequential', 'vmap' or 'auto', got {executor!r}")
    if threads != "auto" and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer or 'auto', got {threads!r}")
    if downlink_receivers not in ("selected", "all"):
        raise ValueError(f"downlink_receivers must be 'selected' or 'all', got {downlink_receivers!r}")
    if aggregation_weights not in ("samples", "uniform"):
        raise ValueError(f"aggregation_weights must be 'samples' or 'uniform', got {aggregation_weights!r}")
    if eval_every < 1:
        raise ValueError(f"eval_every must be >= 1, got {eval_every}")

    seeds = Seeds(seed)
    ds = data.dataset
    device = resolve_device(device)
    x_train, y_train = ds.x_train.to(device), ds.y_train.to(device)
    x_test, y_test = ds.x_test.to(device), ds.y_test.to(device)
    n_clients = data.num_clients
    sample = make_sampler(sampler, n_clients)

    with torch.random.fork_rng():
        torch.manual_seed(seeds.int("init"))
        model = model_fn().to(device)
    executor = choose_executor(model, algorithm) if executor == "auto" else executor
    threads = choose_threads(model) if threads == "auto" else threads
    if executor == "vmap" and not algorithm.vmap_compatible:
        raise ValueError(f"{algorithm.name} needs per-step state the vmap executor does not carry; use executor='sequential'")
    if executor == "vmap" and len(list(model.buffers())) > 0:
        raise ValueError("the vmap executor needs a model without buffers (no BatchNorm); use executor='sequential'")

    with torch_threads(threads):
        w: Params = {k: v.detach().clone() for k, v in model.named_parameters()}
        global_buffers: Params = {k: v.detach().clone() for k, v in model.named_buffers()}
        server_state = algorithm.init_server_state(w, n_clients)
        client_states: dict[int, dict[str, Any]] = {}
        residuals: dict[int, Params] = {}
        held = P.clone(w)  # what clients hold, for downlink payload "update"
        history: list[dict[str, Any]] = []
        client_rows: list[dict[str, Any]] = []

        bar = _progress(rounds, algorithm.name, progress)
        for r in range(rounds):
            t_round = time.perf_counter()
            ids = np.asarray(sample(r, n_clients, seeds.numpy("sampling", r)), dtype=np.int64)
            if len(ids) == 0 or len(np.unique(ids)) != len(ids) or ids.min() < 0 or ids.max() >= n_clients:
                raise ValueError(f"sampler returned invalid client ids {ids!r} in round {r}")
            ids = np.sort(ids)

            # ---- downlink ----
            # "weights": the model is sent every round. "update": the change is sent at the end of the
            # previous round (below), so that what is evaluated is what the clients hold; only the initial
            # model, which clients share by construction, needs no message unless broadcast() alters it.
            down_sent: list[Transmission] = []
            if downlink.payload == "weights":
                dtx = _transmit(downlink.codec_for(LinkContext(round=r, client=None, history=history)),
                                algorithm.broadcast(w, server_state), downlink.granularity,
                                seeds.torch("downlink", r), device)
                down_sent.append(dtx)
                received = dtx.decoded
            else:
                if r == 0 and not _equal(algorithm.broadcast(w, server_state), held):
                    w, held = _send_update(downlink, algorithm, w, held, server_state, r, history, seeds, device,
                                           down_sent)
                received = held
            extras_down = algorithm.broadcast_extras(server_state)

            # ---- local training ----
            jobs = []
            for i in ids:
                state = client_states.setdefault(int(i), algorithm.init_client_state(w))
                idx = data.client_indices[i]
                jobs.append(ClientJob(client=int(i), indices=idx,
                                      batches=local.schedule(len(idx), seeds.numpy("batches", r, int(i))), state=state))
            t_train = time.perf_counter()
            train = train_sequential if executor == "sequential" else train_vmap
            outcomes = train(model, x_train, y_train, received, global_buffers, jobs, local, algorithm,
                             server_state, r, loss_fn)
            t_train = time.perf_counter() - t_train

            # ---- uplink ----
            results, codecs, up_bits, extra_bits, trained_buffers = [], [], 0, 0, []
            for job, out in zip(jobs, outcomes):
                i, n_i = job.client, len(job.indices)
                run = LocalRun(steps=len(job.batches), lr_sum=out.lr_sum, n_samples=n_i,
                               epochs=len(job.batches) * local.batch_size / n_i if local.steps else float(local.epochs))
                extras = algorithm.finish_client(received, out.params, job.state, server_state, run)
                upload = out.params
                if client_behavior is not None:
                    upload = client_behavior(i, received, out.params, seeds.torch("behavior", r, i))
                codec = uplink.codec_for(LinkContext(round=r, client=i, history=history))
                x = P.sub(upload, received) if uplink.payload == "update" else upload
                if uplink.error_feedback:
                    x = P.add(x, residuals.get(i) or P.zeros_like(x))
                utx = _transmit(codec, x, uplink.granularity, seeds.torch("uplink", r, i), device)
                if uplink.error_feedback:
                    residuals[i] = P.sub(x, utx.decoded)
                update = utx.decoded if uplink.payload == "update" else P.sub(utx.decoded, received)
                results.append(ClientResult(client=i, n_samples=n_i, steps=run.steps, update=update,
                                            loss=out.loss, extras=extras))
                codecs.append(codec)
                bits_extra = _tensor_bits(extras) + _tensor_bits(out.buffers)
                up_bits += utx.bits
                extra_bits += bits_extra
                trained_buffers.append(out.buffers)
                client_rows.append({"round": r + 1, "client": i, "n_samples": n_i, "steps": run.steps,
                                    "loss": out.loss, "bits_up": utx.bits, "bits_up_extra": bits_extra,
                                    "codec": getattr(codec, "name", type(codec).__name__),
                                    **{k: v for k, v in extras.items() if isinstance(v, (int, float))},
                                    **utx.info})

            # ---- server ----
            sizes = np.array([res.n_samples for res in results], dtype=np.float64)
            wts = sizes / sizes.sum() if aggregation_weights == "samples" else np.full(len(results), 1 / len(results))
            weights = torch.tensor(wts, dtype=torch.float64)
            aggregated = algorithm.aggregate(w, results, weights, server_state)
            if global_buffers:
                global_buffers = _average_buffers(trained_buffers, wts.tolist())
            info = RoundInfo(round=r + 1, before=w, results=results, weights=weights, client_codecs=codecs,
                             aggregated=aggregated)
            w = aggregated
            row: dict[str, Any] = {}
            for hook in hooks:
                w, diag = hook(w, info)
                row.update(diag)
            if downlink.payload == "update":  # next round's model, sent now (see the downlink step)
                w, held = _send_update(downlink, algorithm, w, held, server_state, r + 1, history, seeds, device,
                                       down_sent)

            receivers = len(ids) if downlink_receivers == "selected" else n_clients
            acc = loss = float("nan")
            if (r + 1) % eval_every == 0 or r + 1 == rounds:
                acc, loss = evaluate(model, algorithm.eval_params(w, server_state), global_buffers, x_test, y_test,
                                     loss_fn)
            history.append({
                "round": r + 1, "test_acc": acc, "test_loss": loss,
                "train_loss": float(np.dot(wts, [res.loss for res in results])),
                "clients": len(ids), "bits_up": up_bits, "bits_down": sum(t.bits for t in down_sent), "receivers": receivers,
                "bits_up_extra": extra_bits, "bits_down_extra": _tensor_bits(extras_down),
                "train_s": t_train, "wall_s": time.perf_counter() - t_round,
                **{f"down/{k}": v for t in down_sent for k, v in t.info.items()},
                **algorithm.diagnostics(server_state), **row,
            })
            bar.set_postfix(acc=f"{acc:.3f}" if acc == acc else "-")
            bar.update()
        bar.close()

    config = {"algorithm": repr(algorithm), "rounds": rounds, "local": {k: (v if not callable(v) else repr(v))
              for k, v in asdict(local).items()}, "sampler": repr(sampler), "uplink": repr(uplink),
              "downlink": repr(downlink), "aggregation_weights": aggregation_weights, "seed": seed,
              "executor": executor, "threads": threads, "device": str(device), "num_clients": n_clients, "dataset": ds.name}
    return RunResult(rounds=pd.DataFrame(history), clients=pd.DataFrame(client_rows), params=w,
                     server_state=server_state, config=config)


def resolve_device(device: str | torch.device) -> torch.device:
    """"auto" picks CUDA when available; asking for CUDA without it is an error, not a fallback."""
    if str(device) == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError("device='cuda' but torch sees no CUDA GPU here; use device='cpu' (or 'auto')")
    return device


def _send_update(link: Link, algorithm: Algorithm, w: Params, held: Params, server_state: dict[str, Any], r: int,
                 history: list[dict[str, Any]], seeds: Seeds, device: torch.device,
                 sent_log: list[Transmission]) -> tuple[Params, Params]:
    """Downlink payload "update": send broadcast(w) - held; clients add the decoded change. Without error
    feedback the server adopts the clients' model (everyone holds the same weights); with it, the server
    keeps w and the compression error is carried into the next message."""
    sent = algorithm.broadcast(w, server_state)
    codec = link.codec_for(LinkContext(round=r, client=None, history=history))
    tx = _transmit(codec, P.sub(sent, held), link.granularity, seeds.torch("downlink", r), device)
    sent_log.append(tx)
    held = P.add(held, tx.decoded)
    if not link.error_feedback:
        w = P.add(w, P.sub(held, sent))
    return w, held


def _equal(a: Params, b: Params) -> bool:
    return all(torch.equal(a[k], b[k]) for k in a)


def _transmit(codec: Codec, x: Params, granularity: str, gen: torch.Generator, device: torch.device) -> Transmission:
    """Codecs run on CPU tensors; the decoded values come back to the training device."""
    if device.type == "cpu":
        return transmit(codec, x, granularity, gen)
    tx = transmit(codec, {k: v.cpu() for k, v in x.items()}, granularity, gen)
    tx.decoded = {k: v.to(device) for k, v in tx.decoded.items()}
    return tx


def _progress(total: int, desc: str, enabled: bool) -> Any:
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, disable=not enabled, leave=False)
