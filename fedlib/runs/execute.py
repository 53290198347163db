"""Execute one spec into the store: build it (`fedlib.runs.build`), run it (resuming from its checkpoint if
there is one), file its records. Running many specs (locally, in worker processes, on Ray) is
`fedlib.runs.runner.run_specs`."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from fedlib.federation import run_federation
from fedlib.runs.build import build_run, records_of
from fedlib.runs.entry import Records
from fedlib.runs.spec import RunSpec
from fedlib.runs.store import FileCheckpoint, RunStore, rounds_done


class Stop(Exception):
    """Raised by an `execute` watch to stop a run at a checkpoint: the checkpoint is saved, so the next execute of
    the spec on this store resumes it."""


class Watched:
    """A run's checkpoint (`fedlib.contracts.Checkpoint`) that, after each save, calls `watch` with the rounds done."""

    def __init__(self, checkpoint: FileCheckpoint, watch: Callable[[int], None]) -> None:
        self.checkpoint, self.watch, self.every = checkpoint, watch, checkpoint.every

    def load(self) -> dict[str, Any] | None:
        return self.checkpoint.load()

    def save(self, state: dict[str, Any]) -> None:
        self.checkpoint.save(state)
        self.watch(rounds_done(state) or 0)


def execute(spec: RunSpec, store: RunStore, *, root: str | Path | None = None, checkpoint_every: int = 10,
            progress: bool = False, watch: Callable[[int], None] | None = None) -> Records:
    """Run one spec (resuming from its checkpoint if there is one), store its records and return them. `watch`,
    where given, is called with the rounds done at each checkpoint; it stops the run by raising `Stop`."""
    store = store.reading(root)
    plan = build_run(spec, root)
    checkpoint = store.checkpoint(spec, checkpoint_every)
    result = run_federation(plan.model_fn, plan.data, progress=progress,
                            checkpoint=checkpoint if watch is None else Watched(checkpoint, watch), **plan.kwargs)
    store.save(spec, records_of(plan, result))
    return store.load(spec)
