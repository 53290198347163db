"""Execute one spec into the store: build it (`fedlib.runs.build`), run it (resuming from its checkpoint if
there is one), file its records. Running many specs (locally, in worker processes, on Ray) is
`fedlib.runs.runner.run_specs`."""
from __future__ import annotations

from pathlib import Path

from fedlib.federation import run_federation
from fedlib.runs.build import build_run, records_of
from fedlib.runs.entry import Records
from fedlib.runs.spec import RunSpec
from fedlib.runs.store import RunStore


def execute(spec: RunSpec, store: RunStore, *, root: str | Path | None = None, checkpoint_every: int = 10,
            progress: bool = False) -> Records:
    """Run one spec (resuming from its checkpoint if there is one), store its records and return them."""
    store = store.reading(root)
    plan = build_run(spec, root)
    result = run_federation(plan.model_fn, plan.data, progress=progress,
                            checkpoint=store.checkpoint(spec, checkpoint_every), **plan.kwargs)
    store.save(spec, records_of(plan, result))
    return store.load(spec)
