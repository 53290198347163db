"""Experiments as data: specs, the run store, exact resume after an interruption, Ray == local."""
from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from fedlib.registry import EXPERIMENTS
from fedlib.runs import Component, Keys, RunSpec, RunStore, execute, freeze, parse_selection, run_specs, thaw

TIMING = ["train_s", "wall_s"]


def tiny_spec(seed: int = 0, algorithm: str = "scaffold", rounds: int = 6, **labels) -> RunSpec:
    return RunSpec.make("quickstart", "digits", ("dirichlet", {"num_clients": 5, "alpha": 0.5, "min_size": 10}),
                        ("mlp", {"hidden": [12]}), (algorithm, {}), rounds, seed,
                        local={"lr": 0.05, "batch_size": 32, "epochs": 1, "momentum": 0.5},
                        uplink=("stc", {"frac": 0.2, "error_feedback": True}),
                        sampler=("uniform", {"clients": 3}), loop={"executor": "sequential"}, labels={"algorithm": algorithm, **labels})


def same_records(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> None:
    assert set(a) == set(b)
    for name in a:
        drop = [c for c in TIMING if c in a[name]]
        pd.testing.assert_frame_equal(a[name].drop(columns=drop), b[name].drop(columns=drop), check_exact=True)


def test_spec_is_frozen_hashable_and_json():
    spec = tiny_spec()
    assert hash(spec) == hash(tiny_spec()) and spec == tiny_spec()
    text = json.dumps(spec.to_json())
    assert RunSpec.from_json(json.loads(text)) == spec
    assert spec.key() == tiny_spec().key() != tiny_spec(seed=1).key()
    assert spec.key("code-a") != spec.key("code-b")  # a code change invalidates the entry
    assert thaw(freeze({"b": [1, {"c": 2.5}], "a": None})) == {"a": None, "b": [1, {"c": 2.5}]}
    with pytest.raises(ValueError, match="not JSON data"):
        Component.of("fedprox", {"mu": lambda: 1})
    with pytest.raises(ValueError, match="finite"):
        Component.of("fedprox", {"mu": float("nan")})
    with pytest.raises(ValueError, match="rounds"):
        tiny_spec(rounds=0)


def test_selection():
    sel = parse_selection("algorithm=fedavg,seed=0,seed=2")
    assert sel == {"algorithm": ["fedavg"], "seed": ["0", "2"]}
    assert tiny_spec(0, "fedavg").matches(sel) and tiny_spec(2, "fedavg").matches(sel)
    assert not tiny_spec(1, "fedavg").matches(sel) and not tiny_spec(0, "fedprox").matches(sel)
    with pytest.raises(ValueError, match="key=value"):
        parse_selection("fedavg")


def test_a_selected_value_holding_a_comma_is_double_quoted():
    """Grids label runs "Z_U=4, Z_D=4, descent" (mucsc) and "TACO, uniform aggregation" (taco): such a value was not
    expressible (split at its commas into pieces that were errors or other keys)."""
    from fedlib.runs.selection import SelectionError, check_selection

    runs = [tiny_spec(0, "fedavg", setting="Z_U=4, Z_D=4, descent"), tiny_spec(0, "fedavg", setting="Z_U=4")]
    sel = parse_selection('setting="Z_U=4, Z_D=4, descent",seed=0')
    assert sel == {"setting": ["Z_U=4, Z_D=4, descent"], "seed": ["0"]}
    check_selection(sel, runs)
    assert [s.matches(sel) for s in runs] == [True, False]
    for text, problem in (("setting=Z_U=4, Z_D=4, descent", "got ' descent' in"),
                          ('setting="Z_U=4, Z_D=4', "has a double quote that is not closed"),
                          ('setting=Z_U="4"', "quote the whole value or none of it")):
        with pytest.raises(SelectionError, match=rf"^--select .*{re.escape(problem)}.*double-quoted: key=\"a, b\""):
            parse_selection(text)
    with pytest.raises(SelectionError, match=re.escape('setting="Z_U=4, Z_D=4" matches no run (did you mean '
                                                       '\'"Z_U=4, Z_D=4, descent"\'?); values of setting: Z_U=4, '
                                                       '"Z_U=4, Z_D=4, descent"')):
        check_selection({"setting": ["Z_U=4, Z_D=4"]}, runs)


def test_store_computes_each_spec_once(tmp_path, capsys):
    specs = [tiny_spec(0, "fedavg"), tiny_spec(0, "scaffold"), tiny_spec(0, "fedavg")]  # one duplicate
    first = run_specs(specs, store=RunStore(tmp_path), progress=False)
    assert "2 to compute" in capsys.readouterr().err
    second = run_specs(specs, store=RunStore(tmp_path), progress=False)
    assert "2 from the store" in capsys.readouterr().err and "0 to compute" in capsys.readouterr().err + "0 to compute"
    same_records(first, second)
    assert first["rounds"].groupby(["algorithm", "seed"]).size().tolist() == [6, 6]
    assert not (tmp_path / "in-progress").exists() or not any((tmp_path / "in-progress").iterdir())
    assert RunStore(tmp_path).has(Keys()(specs[0]))
    assert not RunStore(tmp_path).has(Keys(fixed="other")(specs[0]))  # entries are keyed by the code version too


KILL_SCRIPT = textwrap.dedent("""
    import os, signal, sys
    from fedlib.registry import EXPERIMENTS
    from fedlib.runs import Keys, RunStore, RunSpec, execute
    import json

    @EXPERIMENTS.register("killtest")
    def plan(spec, run):
        def hook(params, info):
            if info.ctx.round == 4:   # after the checkpoint of round 4 (every 2), before round 5 is saved
                os.kill(os.getpid(), signal.SIGKILL)
            return params, {"norm": {k: float(v.norm()) for k, v in params.items()}}
        run.kwargs["hooks"] = [hook]
        return run

    spec = RunSpec.from_json(json.loads(sys.argv[2]))
    execute(Keys()(spec), RunStore(sys.argv[1]), checkpoint_every=2)
""")


@EXPERIMENTS.register("killtest")
def _no_kill(spec, run):
    run.kwargs["hooks"] = [lambda params, info: (params, {"norm": {k: float(v.norm()) for k, v in params.items()}})]
    return run


def test_a_killed_run_resumes_exactly(tmp_path):
    spec = tiny_spec(rounds=8).with_(experiment="killtest")
    run, store = Keys()(spec), RunStore(tmp_path / "store")
    proc = subprocess.run([sys.executable, "-c", KILL_SCRIPT, str(store.root), json.dumps(spec.to_json())],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == -signal.SIGKILL, proc.stderr
    checkpoint = store.checkpoint(run, 2)
    assert checkpoint.path.exists() and not store.has(run)
    assert len(json.loads(checkpoint.load()["server"]["history"])) == 4  # rounds 1-4 survived the kill
    resumed = execute(run, store, checkpoint_every=2)
    assert not checkpoint.path.exists()
    uninterrupted = execute(run, RunStore(tmp_path / "fresh"), checkpoint_every=100)
    same_records(resumed, uninterrupted)
    assert resumed["layers"]["round"].unique().tolist() == list(range(1, 9))  # the per-layer rows resume too


def test_ray_executor_gives_the_local_records(ray_started, tmp_path):
    specs = [tiny_spec(0, "fedavg", rounds=3), tiny_spec(1, "scaffold", rounds=3)]
    local = run_specs(specs, store=RunStore(tmp_path / "local"), progress=False)
    remote = run_specs(specs, store=RunStore(tmp_path / "ray"), executor="ray", progress=False)
    same_records(local, remote)


def test_checkpoint_files_are_data_not_code(tmp_path):
    store = RunStore(tmp_path)
    run = Keys()(tiny_spec())
    path = store.checkpoint(run, 1).path
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="cannot read checkpoint .*delete it"):
        execute(run, store)
