"""Execute one spec into the store: build it (`fedlib.runs.build`), run it (resuming from its checkpoint if
there is one), file its records; or one cell's seeds (`seed_cells`) as one batch (`execute_cell`,
`fedlib.engine.seed_batch`), each filed under its own key with the records it has alone. Running many specs
(locally, in worker processes, on Ray) is `fedlib.runs.runner.run_specs`."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from fedlib.engine.federation import Federation, open_federation, run_federation
from fedlib.engine.seed_batch import batches_seeds, run_seed_batch, what_differs
from fedlib.runs.build import Plans, RunPlan, build_run, records_of
from fedlib.runs.entry import Records
from fedlib.runs.spec import RunSpec
from fedlib.runs.store import FileCheckpoint, RunStore, rounds_done


class Stop(Exception):
    """Raised by an `execute` watch to stop a run at a checkpoint: the checkpoint is saved, so the next execute of
    the spec on this store resumes it."""


class Watched:
    """A run's checkpoint (`fedlib.core.contracts.Checkpoint`) that, after each save, calls `watch` with the
    rounds done."""

    def __init__(self, checkpoint: FileCheckpoint, watch: Callable[[int], None]) -> None:
        self.checkpoint, self.watch, self.every = checkpoint, watch, checkpoint.every

    def load(self) -> dict[str, Any] | None:
        return self.checkpoint.load()

    def save(self, state: dict[str, Any]) -> None:
        self.checkpoint.save(state)
        self.watch(rounds_done(state) or 0)


def execute(spec: RunSpec, store: RunStore, *, root: str | Path | None = None, checkpoint_every: int = 10,
            progress: bool = False, watch: Callable[[int], None] | None = None, plan: RunPlan | None = None
            ) -> Records:
    """Run one spec (resuming from its checkpoint if there is one), store its records and return them. `watch`,
    where given, is called with the rounds done at each checkpoint; it stops the run by raising `Stop`. `plan`: the
    spec's run as the caller built it (`Plans.take`; None: built here)."""
    store = store.reading(root)
    plan = build_run(spec, root) if plan is None else plan
    checkpoint = store.checkpoint(spec, checkpoint_every)
    result = run_federation(plan.model_fn, plan.data, progress=progress,
                            checkpoint=checkpoint if watch is None else Watched(checkpoint, watch), **plan.kwargs)
    store.save(spec, records_of(plan, result))
    return store.load(spec)


def seed_cells(specs: Sequence[RunSpec]) -> list[list[RunSpec]]:
    """`specs` grouped by cell: the specs that differ only by seed, in the order of each cell's first spec."""
    cells: dict[RunSpec, list[RunSpec]] = {}
    for spec in specs:
        cells.setdefault(spec.with_(seed=0), []).append(spec)
    return list(cells.values())


def seeds_batch(plan: RunPlan) -> bool:
    """Whether `fedlib.engine.seed_batch.batches_seeds` trains the seeds of `plan`'s cell as one batch (the model it
    builds to look at draws from a forked random state: the process's own is left as it was)."""
    with torch.random.fork_rng(devices=[]):
        model = plan.model_fn()
    return batches_seeds(model, plan.algorithm, plan.device, plan.kwargs.get("executor", "auto"))


def cell_batch(specs: Sequence[RunSpec], plans: Plans) -> tuple[list[RunPlan], list[Federation]] | None:
    """The plans and opened federations of one cell's specs (`seed_cells`) where they train as one batch:
    `seeds_batch` says so for the cell's run and its seeds' federations can share a step (`what_differs`: a plan
    may derive the learning rate from the seed's split); None otherwise. The specs' runs come from `plans`, which
    keeps them where they do not train as one batch (`Plans.take` for each then)."""
    if len(specs) < 2 or not seeds_batch(plans(specs[0])):
        return None
    taken = [plans.take(spec) for spec in specs]
    feds = [open_federation(plan.model_fn, plan.data, **plan.kwargs) for plan in taken]
    return (taken, feds) if what_differs(feds) is None else None


def execute_batch(specs: Sequence[RunSpec], batch: tuple[list[RunPlan], list[Federation]], store: RunStore, *,
                  root: str | Path | None = None, checkpoint_every: int = 10, progress: bool = False,
                  watch: Callable[[int], None] | None = None) -> list[Records]:
    """Run a cell's `batch` (`cell_batch`) into the store, each spec filed under its own key, and return their
    records. `watch`, where given, is called with the rounds done after each checkpoint of the last seed (every seed
    has then saved its own); it stops the batch by raising `Stop`."""
    store = store.reading(root)
    plans, feds = batch
    checkpoints: list[Any] = [store.checkpoint(spec, checkpoint_every) for spec in specs]
    if watch is not None:
        checkpoints[-1] = Watched(checkpoints[-1], watch)
    results = run_seed_batch(feds, checkpoints, plans[0].kwargs.get("executor", "auto"), progress)
    for spec, plan, result in zip(specs, plans, results):
        store.save(spec, records_of(plan, result))
    return [store.load(spec) for spec in specs]


def execute_cell(specs: Sequence[RunSpec], store: RunStore, *, root: str | Path | None = None,
                 checkpoint_every: int = 10, progress: bool = False) -> None:
    """Run one cell's specs (`seed_cells`) into the store: as one batch where `cell_batch` says so, else one after
    another (`execute`). Each is filed under its own key."""
    plans = Plans(root)
    batch = cell_batch(specs, plans)
    if batch is not None:
        execute_batch(specs, batch, store, root=root, checkpoint_every=checkpoint_every, progress=progress)
        return
    for spec in specs:
        execute(spec, store, root=root, checkpoint_every=checkpoint_every, progress=progress, plan=plans.take(spec))
