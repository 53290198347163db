"""Execute one keyed spec (`fedlib.runs.spec.KeyedRun`) into the store: build it (`fedlib.runs.build`), run it
(resuming from its checkpoint if there is one), file its records under its key; or one cell's seeds (`seed_cells`)
as one batch (`execute_cell`, `fedlib.engine.seed_batch`), each filed under its own key with the records it has
alone. Running many specs (locally, in worker processes, on Ray) is `fedlib.runs.runner.run_specs`."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from fedlib.engine.federation import Federation, open_federation, run_federation
from fedlib.engine.seed_batch import batches_seeds, run_seed_batch, what_differs
from fedlib.runs.build import Plans, RunPlan, build_run, records_of
from fedlib.runs.entry import Records
from fedlib.runs.spec import KeyedRun, RunSpec
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


def execute(run: KeyedRun, store: RunStore, *, root: str | Path | None = None, checkpoint_every: int = 10,
            progress: bool = False, watch: Callable[[int], None] | None = None, plan: RunPlan | None = None
            ) -> Records:
    """Run one keyed spec (resuming from its checkpoint if there is one), store its records under its key and
    return them. `root`: where it reads its datasets (as it was keyed). `watch`, where given, is called with the
    rounds done at each checkpoint; it stops the run by raising `Stop`. `plan`: the spec's run as the caller built it
    (`Plans.take`; None: built here)."""
    plan = build_run(run.spec, root) if plan is None else plan
    checkpoint = store.checkpoint(run, checkpoint_every)
    result = run_federation(plan.model_fn, plan.data, progress=progress,
                            checkpoint=checkpoint if watch is None else Watched(checkpoint, watch), **plan.kwargs)
    store.save(run, records_of(plan, result))
    return store.load(run)


def seed_cells(runs: Sequence[KeyedRun]) -> list[list[KeyedRun]]:
    """`runs` grouped by cell: the runs whose specs differ only by seed, in the order of each cell's first run."""
    cells: dict[RunSpec, list[KeyedRun]] = {}
    for run in runs:
        cells.setdefault(run.spec.with_(seed=0), []).append(run)
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


def execute_batch(runs: Sequence[KeyedRun], batch: tuple[list[RunPlan], list[Federation]], store: RunStore, *,
                  checkpoint_every: int = 10, progress: bool = False, watch: Callable[[int], None] | None = None
                  ) -> list[Records]:
    """Run a cell's `batch` (`cell_batch`) into the store, each run filed under its own key, and return their
    records. `watch`, where given, is called with the rounds done after each checkpoint of the last seed (every seed
    has then saved its own); it stops the batch by raising `Stop`."""
    plans, feds = batch
    checkpoints: list[Any] = [store.checkpoint(run, checkpoint_every) for run in runs]
    if watch is not None:
        checkpoints[-1] = Watched(checkpoints[-1], watch)
    results = run_seed_batch(feds, checkpoints, plans[0].kwargs.get("executor", "auto"), progress)
    for run, plan, result in zip(runs, plans, results):
        store.save(run, records_of(plan, result))
    return [store.load(run) for run in runs]


def execute_cell(runs: Sequence[KeyedRun], store: RunStore, plans: Plans, *, checkpoint_every: int = 10,
                 progress: bool = False) -> None:
    """Run one cell's keyed runs (`seed_cells`) into the store, built in `plans` (where keying them may have built
    them already): as one batch where `cell_batch` says so, else one after another (`execute`). Each is filed under
    its own key."""
    batch = cell_batch([run.spec for run in runs], plans)
    if batch is not None:
        execute_batch(runs, batch, store, checkpoint_every=checkpoint_every, progress=progress)
        return
    for run in runs:
        execute(run, store, root=plans.root, checkpoint_every=checkpoint_every, progress=progress,
                plan=plans.take(run.spec))
