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
import json
import math
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import asdict
from typing import Any, Union

import numpy as np
import pandas as pd
import torch
from torch import nn

from fedlib import params as P
from fedlib.algorithms.base import Algorithm
from fedlib.channel import Downlink, Link, Uplink
from fedlib.codecs.base import FLOAT_BITS
from fedlib.contracts import (SERVER, Checkpoint, ClientBehavior, ClientJob, ClientResult, Diagnostics, FederatedData, Hook,
                              LayerDiagnostics, LocalRun, LocalTraining, RoundContext, RoundInfo, RunResult, layer_table)
from fedlib.executors import LossFn, cross_entropy, train_sequential, train_vmap
from fedlib.params import Params
from fedlib.seeding import Seeds

Sampler = Callable[[int, int, np.random.Generator], np.ndarray]


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


def choose_executor(model: nn.Module, algorithm: Algorithm, device: torch.device) -> str:
    """What a whole run costs, cold start included. On a GPU, the batched executor wherever it applies (the
    sequential loop is launch-bound there: one H100 idled ~87% of a FedShift round). On a CPU, the sequential
    loop: in a fresh process the batched path's first call imports torch._dynamo (~1.1 s) and pads uneven
    clients, and even warmed rounds lost to the sequential ones (`make bench` measures both)."""
    if device.type == "cuda" and algorithm.vmap_compatible and not list(model.buffers()):
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
    client_behavior: ClientBehavior | None = None,
    loss_fn: LossFn = cross_entropy,
    eval_every: int = 1,
    seed: int = 0,
    executor: str = "auto",
    threads: Union[int, str] = "auto",
    device: str | torch.device = "cpu",
    progress: bool = True,
    checkpoint: Checkpoint | None = None,
) -> RunResult:
    """Simulate `rounds` rounds of federated training and return the tidy record.

    `executor` ("sequential", "vmap", "auto") and `threads` (an int or "auto") pick how clients are
    trained; "auto" is the batched executor on a GPU and the sequential one on a CPU (see `choose_executor`).
    `device` ("cpu", "cuda", "auto") holds the model, the data and the training; codecs that declare
    `device_generic` (every built-in codec) encode there too, with a device generator seeded from the run's
    keyed noise streams (see `fedlib.channel`): the same distributions on any device, not the same values.
    A run whose loss turns non-finite is flagged: the record's `diverged` column is true from that round on.
    `checkpoint` (see `Checkpoint`) saves the run's state every `checkpoint.every` rounds and resumes from
    the last save: every draw is keyed by (purpose, round, client), so the continuation is exact.
    """
    local, uplink, downlink = local or LocalTraining(), uplink or Link(), downlink or Link(payload="weights")
    _check_options(rounds, executor, threads, downlink_receivers, aggregation_weights, eval_every)
    seeds, device, n_clients = Seeds(seed), resolve_device(device), data.num_clients
    ds, sample = data.dataset, make_sampler(sampler, n_clients)
    x_train, y_train, x_test, y_test = (t.to(device) for t in (ds.x_train, ds.y_train, ds.x_test, ds.y_test))
    with torch.random.fork_rng():
        torch.manual_seed(seeds.int("init"))
        model = model_fn().to(device)
    executor, threads = _resolve_executor(model, algorithm, executor, threads, device)
    train = train_sequential if executor == "sequential" else train_vmap

    with torch_threads(threads):
        w: Params = {k: v.detach().clone() for k, v in model.named_parameters()}
        buffers: Params = {k: v.detach().clone() for k, v in model.named_buffers()}
        server_state = algorithm.init_server_state(w, n_clients)
        client_states: dict[int, dict[str, Any]] = {}
        up, down = Uplink(uplink, seeds, device), Downlink(downlink, seeds, device, w)
        history: list[dict[str, Any]] = []
        client_rows: list[dict[str, Any]] = []
        layer_rows: list[dict[str, Any]] = []
        saved = checkpoint.load() if checkpoint is not None else None
        if saved is not None:
            w, buffers, server_state, client_states = saved["w"], saved["buffers"], saved["server_state"], saved["clients"]
            up.residuals, down.held = saved["residuals"], saved["held"]
            history, client_rows = json.loads(saved["history"]), json.loads(saved["client_rows"])
            layer_rows = json.loads(saved["layer_rows"])
            if client_behavior is not None and hasattr(client_behavior, "load_state_dict"):
                client_behavior.load_state_dict(saved["behavior"])
        bar = _progress(rounds, algorithm.name, progress, initial=len(history))
        for r in range(len(history), rounds):
            t_round, ctx = time.perf_counter(), RoundContext(r, n_clients, device=device)
            ids = _sample_clients(sample, r, n_clients, seeds)
            received, w = down.receive(algorithm.broadcast(w, server_state), w, r, history)
            view = algorithm.client_view(server_state, ctx)  # all a client reads from the server this round
            jobs = []
            for i in ids:
                state = client_states.setdefault(int(i), algorithm.init_client_state(w))
                algorithm.start_client(state, view, ctx.for_client(int(i)))
                idx = data.client_indices[i]
                jobs.append(ClientJob(int(i), idx, local.schedule(len(idx), seeds.numpy("batches", r, int(i))), state,
                                      seeds.torch("augment", r, int(i)) if local.augment else None))
            t_train = time.perf_counter()
            outcomes = train(model, x_train, y_train, received, buffers, jobs, local, algorithm, view, r, loss_fn)
            if device.type == "cuda":
                torch.cuda.synchronize(device)  # train_s is the GPU's time too, not only the launches
            t_train = time.perf_counter() - t_train

            results, codecs, up_bits, up_payload, extra_bits = [], [], 0, 0, 0
            for job, out in zip(jobs, outcomes):
                cctx, n_i = ctx.for_client(job.client), len(job.indices)
                run = LocalRun(len(job.batches), out.lr_sum, n_i, local.epochs_of(len(job.batches), n_i))
                extras = algorithm.finish_client(received, out.params, job.state, view, run, cctx)
                sent = out.params if client_behavior is None else client_behavior(
                    cctx, received, out.params, seeds.torch("behavior", r, job.client))
                update, tx = up.upload(sent, received, r, job.client, history)
                results.append(ClientResult(job.client, n_i, run.steps, update, out.loss, extras))
                codecs.append(tx.codec)
                bits_extra = _tensor_bits(extras) + _tensor_bits(out.buffers)
                up_bits, up_payload, extra_bits = up_bits + tx.bits, up_payload + tx.payload_bits, extra_bits + bits_extra
                client_rows.append({"round": r + 1, "client": job.client, "n_samples": n_i, "steps": run.steps,
                                    "loss": out.loss, "bits_up": tx.bits, "payload_bits_up": tx.payload_bits,
                                    "bits_up_extra": bits_extra, "codec": getattr(tx.codec, "name", type(tx.codec).__name__),
                                    **{k: v for k, v in extras.items() if isinstance(v, (int, float))}})
                layer_rows += _layer_rows(r + 1, job.client, tx.info)

            wts = _aggregation_weights(results, aggregation_weights)
            weights = torch.tensor(wts, dtype=torch.float64)
            aggregated = algorithm.aggregate(w, results, weights, server_state, ctx)
            if buffers:
                buffers = _average_buffers([o.buffers for o in outcomes], wts.tolist())
            info = RoundInfo(ctx, w, results, weights, codecs, aggregated)
            w, diagnostics = aggregated, {}
            for hook in hooks:
                w, diag = hook(w, info)
                scalars, per_layer = _split_diagnostics(diag, hook)
                diagnostics.update(scalars)
                layer_rows += _layer_rows(r + 1, SERVER, per_layer)
            w = down.publish(algorithm.broadcast(w, server_state), w, r + 1, history)

            acc = loss = float("nan")
            due = (r + 1) % eval_every == 0 or r + 1 == rounds
            if due:
                evaluated = algorithm.eval_params(down.clients_model(w), server_state)
                acc, loss = evaluate(model, evaluated, buffers, x_test, y_test, loss_fn)
            train_loss = float(np.dot(wts, [res.loss for res in results]))
            history.append({
                "round": r + 1, "test_acc": acc, "test_loss": loss, "train_loss": train_loss,
                "diverged": _diverged(history, train_loss, loss, due, r + 1),
                "clients": len(ids), "bits_up": up_bits, "payload_bits_up": up_payload,
                "bits_down": sum(t.bits for t in down.sent), "payload_bits_down": sum(t.payload_bits for t in down.sent),
                "receivers": len(ids) if downlink_receivers == "selected" else n_clients,
                "bits_up_extra": extra_bits, "bits_down_extra": algorithm.client_view_bits(view),
                "train_s": t_train, "wall_s": time.perf_counter() - t_round,
                **algorithm.diagnostics(server_state), **diagnostics,
            })
            layer_rows += _layer_rows(r + 1, SERVER, {f"down/{k}": v for t in down.sent for k, v in t.info.items()})
            bar.set_postfix(acc=f"{acc:.3f}" if acc == acc else "-")
            bar.update()
            if checkpoint is not None and (r + 1) % checkpoint.every == 0 and r + 1 < rounds:
                checkpoint.save({"w": w, "buffers": buffers, "server_state": server_state, "clients": client_states,
                                 "residuals": up.residuals, "held": down.held, "history": _json(history),
                                 "client_rows": _json(client_rows), "layer_rows": _json(layer_rows),
                                 "behavior": getattr(client_behavior, "state_dict", dict)()})
        bar.close()

    config = {"algorithm": repr(algorithm), "rounds": rounds, "local": {k: (v if not callable(v) else repr(v))
              for k, v in asdict(local).items()}, "sampler": repr(sampler), "uplink": repr(uplink),
              "downlink": repr(downlink), "aggregation_weights": aggregation_weights, "seed": seed,
              "executor": executor, "threads": threads, "device": str(device), "num_clients": n_clients, "dataset": ds.name}
    return RunResult(rounds=pd.DataFrame(history), clients=pd.DataFrame(client_rows), params=w,
                     server_state=server_state, config=config, layers=layer_table(layer_rows))


def _check_options(rounds: int, executor: str, threads: Union[int, str], downlink_receivers: str,
                   aggregation_weights: str, eval_every: int) -> None:
    if isinstance(rounds, bool) or not isinstance(rounds, (int, np.integer)) or rounds < 1:
        raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")
    if executor not in ("sequential", "vmap", "auto"):
        raise ValueError(f"executor must be 'sequential', 'vmap' or 'auto', got {executor!r}")
    if threads != "auto" and (not isinstance(threads, int) or threads < 1):
        raise ValueError(f"threads must be a positive integer or 'auto', got {threads!r}")
    if downlink_receivers not in ("selected", "all"):
        raise ValueError(f"downlink_receivers must be 'selected' or 'all', got {downlink_receivers!r}")
    if aggregation_weights not in ("samples", "uniform"):
        raise ValueError(f"aggregation_weights must be 'samples' or 'uniform', got {aggregation_weights!r}")
    if isinstance(eval_every, bool) or not isinstance(eval_every, (int, np.integer)) or eval_every < 1:
        raise ValueError(f"eval_every must be an integer >= 1, got {eval_every!r}")


def _resolve_executor(model: nn.Module, algorithm: Algorithm, executor: str, threads: Union[int, str],
                      device: torch.device) -> tuple[str, int]:
    executor = choose_executor(model, algorithm, device) if executor == "auto" else executor
    if executor == "vmap" and not algorithm.vmap_compatible:
        raise ValueError(f"{algorithm.name} needs per-step state the vmap executor does not carry; use executor='sequential'")
    if executor == "vmap" and len(list(model.buffers())) > 0:
        raise ValueError("the vmap executor needs a model without buffers (no BatchNorm); use executor='sequential'")
    return executor, choose_threads(model) if threads == "auto" else int(threads)


def _layer_rows(round_: int, client: int, info: LayerDiagnostics) -> list[dict[str, Any]]:
    """Rows of the layer table (`fedlib.contracts.LAYER_COLUMNS`) from per-layer diagnostics."""
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

