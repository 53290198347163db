"""Seeds in one batch: the federations of runs that differ only by seed, trained in lockstep, every seed's selected
clients in one batched step (`fedlib.engine.executors.train_stacked`).

Each seed keeps its own federation (`fedlib.engine.federation.open_federation`): its split, initial model, sampler,
codecs, hooks, algorithm and client states, keyed random streams, evaluation and record. A round opens on every
seed's server, each seed's client side builds its jobs from its own streams, one batched step trains them all,
and each seed's server closes its round with its own clients' replies. So every seed draws exactly what it draws
alone, and its clients follow the same batches and arithmetic as in the batched executor alone (`train_vmap`;
bitwise: `tests/test_seed_batch.py`); against the sequential executor, what a run uses alone on a CPU, they are
equal up to float reassociation (the conformance battery's 1e-5 over two rounds). No arithmetic mixes clients,
so a seed that diverges (non-finite values) leaves the others' numbers unchanged.

`batches_seeds` is the rule that picks it (measured by `benchmarks/bench_seed_batch.py`; docs/speed.md).
"""
from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

import torch
from torch import nn

from fedlib.algorithms.base import Algorithm
from fedlib.core.contracts import Checkpoint, ClientJob, ClientOutcome, LocalTraining, RunResult
from fedlib.engine.executors import ClientGroup, has_correction, train_stacked, view_constants
from fedlib.engine.federation import Federation, RoundStart, _progress, _resume, torch_threads

BATCHED_EXECUTORS = ("vmap", "graph")


def batches_seeds(model: nn.Module, algorithm: Algorithm, device: torch.device, executor: str) -> bool:
    """Whether a cell's seeds train as one batch. Never where the run asks for the sequential executor or the
    batched step cannot run it (an algorithm that is not `vmap_compatible`, a model with buffers); always where it
    asks for a batched executor (each seed then gets bitwise what it gets alone); under "auto", on a GPU (alone it
    already runs batched) and on a CPU for models without convolutions, where `benchmarks/bench_seed_batch.py`
    measured the batch faster than the sequential runs at every cpu-profile scale (convolutional models, which
    already keep both cores busy with two threads, were slower batched)."""
    if executor == "sequential" or not algorithm.vmap_compatible or list(model.buffers()):
        return False
    if executor in BATCHED_EXECUTORS or device.type == "cuda":
        return True
    return not any(isinstance(m, nn.modules.conv._ConvNd) for m in model.modules())


def captures(fed: Federation, executor: str) -> bool:
    """Whether the batch's step is captured in a CUDA graph: as `choose_executor` decides for a run alone."""
    clients = fed.clients
    if executor == "auto":
        return fed.server.device.type == "cuda" and not has_correction(clients.algorithm) and not clients.local.augment
    return executor == "graph"


class _Collected:
    """A client side's executor that trains nothing: it keeps the round's group for the batch and returns the list
    the batch fills with the group's outcomes."""

    def __init__(self) -> None:
        self.group: ClientGroup | None = None
        self.outcomes: list[ClientOutcome] = []

    def __call__(self, model: nn.Module, x: torch.Tensor, y: torch.Tensor, received: dict[str, torch.Tensor],
                 buffers: dict[str, torch.Tensor], jobs: Sequence[ClientJob], local: LocalTraining,
                 algorithm: Algorithm, view: dict[str, Any], round_: int, loss_fn: Any) -> list[ClientOutcome]:
        self.group, self.outcomes = ClientGroup(received, view, jobs), []
        return self.outcomes


def train_round(feds: Sequence[Federation], starts: Sequence[RoundStart], capture: bool
                ) -> list[tuple[list[ClientJob], list[ClientOutcome]]]:
    """Each federation's (jobs, outcomes) of its round `starts[i]`: jobs from its own client side, every group whose
    views agree on their non-tensor values (`view_constants`) trained in one batched step."""
    collected, trained = [], []
    for fed, start in zip(feds, starts):
        collect = fed.clients.train_fn = _Collected()
        trained.append(fed.clients.train(start, fed.server.buffers))
        collected.append(collect)
    together: dict[Any, list[tuple[ClientGroup, _Collected]]] = {}
    for collect in collected:
        assert collect.group is not None  # ClientSide.train called its executor
        together.setdefault(view_constants(collect.group.view), []).append((collect.group, collect))
    first = feds[0].clients
    for batch in together.values():
        outcomes = train_stacked(first.model, first.x, first.y, [group for group, _ in batch], first.local,
                                 first.algorithm, starts[0].ctx.round, first.loss_fn, capture=capture)
        for (_, collect), group_outcomes in zip(batch, outcomes):
            collect.outcomes.extend(group_outcomes)
    return trained


def what_differs(feds: Sequence[Federation]) -> str | None:
    """What keeps the federations from one batch, None if nothing: one batched step needs one training set, model
    and local training (a plan may derive the learning rate from the seed's split), one algorithm and rounds."""
    first = feds[0]
    for i, fed in enumerate(feds[1:], 1):
        same = (torch.equal(fed.clients.x, first.clients.x) and torch.equal(fed.clients.y, first.clients.y),
                fed.config["algorithm"] == first.config["algorithm"], fed.config["local"] == first.config["local"],
                fed.server.rounds == first.server.rounds, fed.config["executor"] == first.config["executor"])
        if not all(same):
            what = ("training set", "algorithm", "local training", "rounds", "executor")[same.index(False)]
            return f"seed {fed.config['seed']} has another {what} than seed {first.config['seed']}"
    return None


def run_seed_batch(feds: Sequence[Federation], checkpoints: Sequence[Checkpoint | None], executor: str = "auto",
                   progress: bool = False) -> list[RunResult]:
    """Every federation's rounds, each round's clients of all of them in one batched step; each resumes from its
    own checkpoint and saves to it as `run_federation` does. `executor`: the runs' executor option ("auto",
    "vmap", "graph"), for whether the step is captured. Each seed's `train_s` is the batch's training time times
    its share of the round's client-steps."""
    differs = what_differs(feds)
    if differs is not None:
        raise ValueError(f"run_seed_batch: {differs}; only runs that differ by seed alone train as one batch")
    rounds, capture = feds[0].server.rounds, captures(feds[0], executor)
    with torch_threads(feds[0].threads):
        for fed, checkpoint in zip(feds, checkpoints):
            if checkpoint is not None:
                _resume(fed, checkpoint)
            fed.config.update(executor="graph" if capture else "vmap", seed_batch=len(feds))
        first = min(len(fed.server.history) for fed in feds)
        bar = _progress(rounds, f"{len(feds)} seeds", progress, initial=first)
        for r in range(first, rounds):
            due = [i for i, fed in enumerate(feds) if len(fed.server.history) == r]  # a resumed seed may be ahead
            starts = {i: feds[i].server.open_round(r) for i in due}
            t_train = time.perf_counter()
            trained = train_round([feds[i] for i in due], list(starts.values()), capture)
            if feds[0].server.device.type == "cuda":
                torch.cuda.synchronize(feds[0].server.device)
            t_train = time.perf_counter() - t_train
            steps = [sum(len(job.batches) for job in jobs) for jobs, _ in trained]
            for i, (jobs, outcomes), n in zip(due, trained, steps):
                server, start = feds[i].server, starts[i]
                server.close_round(start, feds[i].clients.replies(start, jobs, outcomes, server.history),
                                   t_train * n / sum(steps))
                if checkpoints[i] is not None and (r + 1) % checkpoints[i].every == 0 and r + 1 < rounds:
                    checkpoints[i].save(feds[i].state_dict())
            bar.update()
        bar.close()
    return [fed.result() for fed in feds]
