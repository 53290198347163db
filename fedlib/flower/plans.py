"""A run spec's two sides, built the way `fedlib.runs.execute` builds them, for the Flower adapters."""
from __future__ import annotations

import functools
import json
from pathlib import Path

from fedlib.engine.federation import Federation, open_federation
from fedlib.flower.wire import to_blob
from fedlib.runs import RunPlan, RunSpec, build_run


def open_spec(spec: RunSpec, root: str | Path | None = None) -> tuple[RunPlan, Federation]:
    """The spec's plan and a fresh federation (round 0). Clients train one at a time in Flower, so the
    sequential executor runs them whatever the spec's `executor` says (the vmap executor agrees with it up
    to float reassociation, tests/test_federation.py)."""
    plan = build_run(spec, root)
    return plan, open_federation(plan.model_fn, plan.data, **{**plan.kwargs, "executor": "sequential"})


@functools.lru_cache(maxsize=4)
def client_federation(spec_json: str, root: str | None) -> tuple[RunPlan, Federation, bytes]:
    """One federation per spec and process, for the client app, with its client side's fresh state (as a
    `wire` blob, so no call can write into it): the federation carries no client's state between calls (each
    call loads its client's own state from the Flower context, or the fresh one, and saves it back)."""
    plan, fed = open_spec(RunSpec.from_json(json.loads(spec_json)), root)
    return plan, fed, to_blob(fed.clients.state_dict())


def spec_json(spec: RunSpec) -> str:
    return json.dumps(spec.to_json(), sort_keys=True)
