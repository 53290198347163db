"""Every registered experiment, through its notebook's default parameters: one spec per distinct set of named
components builds and runs (one round, one local step), and its JSON rebuilds the same run in a fresh
process (records equal). A spec that needed code outside itself (a plan patching the run) would differ."""
from __future__ import annotations

import json
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from fedlib.paper import paper, papers
from fedlib.runs import Keys, RunSpec, RunStore, execute
from fedlib.trust import ALLOW_VAR

ROOT = Path(__file__).resolve().parents[1]
# every declared paper's experiment (its grid in fedlib/papers/<x>, its notebook notebooks/<x>.py)
EXPERIMENTS = tuple(sorted(p.name for p in papers()))


def _components(spec: RunSpec) -> tuple:
    named = (spec.sampler, spec.client_behavior, spec.lr_schedule, *spec.hooks, *spec.collectors)
    return (spec.split.name, spec.algorithm.name, spec.uplink.name, spec.downlink.name,
            tuple(c.name for c in named if c is not None))


def _one_round(spec: RunSpec) -> RunSpec:
    local = {k: v for k, v in spec.get("local").items() if k != "epochs"}
    loop = {**spec.get("loop"), "eval_every": 1, "threads": 1}  # one thread: the same float sums in both processes
    return RunSpec.make(spec.experiment, spec.dataset, (spec.split.name, spec.split.args),
                        (spec.model.name, spec.model.args), (spec.algorithm.name, spec.algorithm.args), 1, spec.seed,
                        **{**json.loads(json.dumps(_optional(spec))), "local": {**local, "steps": 1}, "loop": loop},
                        uplink=(spec.uplink.name, spec.uplink.args), downlink=(spec.downlink.name, spec.downlink.args),
                        options=spec.get("options"), labels=spec.get("labels"), device="cpu")


def _optional(spec: RunSpec) -> dict:
    data = spec.to_json()
    out = {k: (data[k]["name"], data[k]["kwargs"]) for k in ("sampler", "client_behavior", "lr_schedule")
           if k in data}
    out.update({k: [(c["name"], c["kwargs"]) for c in data[k]] for k in ("hooks", "collectors") if k in data})
    return out


def representative_specs(experiment: str) -> list[RunSpec]:
    declared = paper(experiment)
    specs = declared.experiments(declared.params())
    firsts = {}
    for spec in specs:
        firsts.setdefault(_components(spec), spec)
    return [_one_round(s) for s in firsts.values()]


def _measured(frame: pd.DataFrame) -> pd.DataFrame:
    """The frame without its wall-clock columns (seconds, "<what>_s"), which no two runs share."""
    return frame.drop(columns=[c for c in frame.columns if str(c).endswith("_s")]).reset_index(drop=True)


def _frames_equal(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> None:
    assert set(a) == set(b)
    for name in a:
        pd.testing.assert_frame_equal(_measured(a[name]), _measured(b[name]), check_exact=True)


FRESH = """
import json, pickle, sys
from pathlib import Path
from fedlib.runs import Keys, RunSpec, RunStore, execute
specs, keys = json.load(open(sys.argv[1])), Keys()
pickle.dump({experiment: [execute(keys(RunSpec.from_json(d)), RunStore(Path(sys.argv[2]) / experiment)) for d in ds]
             for experiment, ds in specs.items()}, open(sys.argv[3], "wb"))
"""


@pytest.fixture(scope="module")
def fresh_process_records(tmp_path_factory) -> dict[str, list[dict[str, pd.DataFrame]]]:
    """Every experiment's representative specs, rebuilt from their JSON and executed in one fresh process (one
    interpreter start for all experiments, each into a store of its own)."""
    tmp = tmp_path_factory.mktemp("fresh")
    (tmp / "specs.json").write_text(json.dumps({e: [s.to_json() for s in representative_specs(e)] for e in EXPERIMENTS}))
    subprocess.run([sys.executable, "-c", FRESH, str(tmp / "specs.json"), str(tmp / "there"), str(tmp / "out.pkl")],
                   check=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT), ALLOW_VAR: ""}, timeout=600)
    return pickle.loads((tmp / "out.pkl").read_bytes())


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_each_spec_runs_and_its_json_rebuilds_the_same_run_in_a_fresh_process(experiment, fresh_process_records,
                                                                               tmp_path):
    specs = representative_specs(experiment)
    assert specs, f"{experiment}: experiments(defaults) gave no spec"
    here = [execute(Keys()(s), RunStore(tmp_path / "here")) for s in specs]
    for a, b in zip(here, fresh_process_records[experiment], strict=True):
        _frames_equal(a, b)


def test_every_registered_component_is_named_by_some_experiment_spec():
    """So the fresh-process test above builds each of them (one spec per distinct component set)."""
    from fedlib.registry import REGISTRIES

    used: dict[str, set[str]] = {}
    for experiment in EXPERIMENTS:
        declared = paper(experiment)
        for spec in declared.experiments(declared.params()):
            used.setdefault("experiment", set()).add(spec.experiment)
            used.setdefault("split", set()).add(spec.split.name)
            for kind in ("sampler", "client_behavior", "lr_schedule"):
                if getattr(spec, kind) is not None:
                    used.setdefault(kind, set()).add(getattr(spec, kind).name)
            used.setdefault("codec_policy", set()).add(spec.uplink.name)
            used.setdefault("hook", set()).update(h.name for h in spec.hooks)
            used.setdefault("collector", set()).update(c.name for c in spec.collectors)
    unused = {kind: sorted(n for n in set(reg) - used.get(kind, set()) if reg.module_of(n).startswith("fedlib."))
              for kind, reg in REGISTRIES.items()  # components registered by tests are theirs to test
              if kind in ("experiment", "split", "sampler", "codec_policy", "client_behavior", "lr_schedule", "hook",
                          "collector")}
    # fedlib.data's schemes the defaults leave out are tested in tests/test_partition.py; MUCSC's "writers"
    # needs FEMNIST's writer ids and is tested in tests/test_mucsc_experiments.py; "natural" (writers, roles) is
    # TACO's Shakespeare column in the full profile, tested in tests/test_tabular_leaf.py
    unused["split"] = [s for s in unused.get("split", [])
                       if s not in ("iid", "shards", "labels", "dirichlet", "writers", "natural")]
    assert not any(unused.values()), f"registered but named by no experiment's default spec: {unused}"
