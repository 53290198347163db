"""The component registries: one idiom for every kind, all of fedlib's loaded by one call, errors that name what is
wrong, a user's module named in the spec."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedlib.registry import REGISTRIES, SPLITS, Registry, component_module, load_components
from fedlib.runs.build import experiment_plan
from fedlib.trust import ALLOW_VAR

ROOT = Path(__file__).resolve().parents[1]


def test_registry_finds_what_was_registered_and_refuses_a_second_registration():
    reg: Registry[object] = Registry("test-widget")
    try:
        @reg.register("a")
        def a() -> None: ...

        assert reg["a"] is a and "a" in reg and list(reg) == ["a"] and len(reg) == 1
        assert reg.module_of("a") == __name__
        assert reg.examples("a") == ({},)  # no examples given: build with no arguments

        @reg.register("c", examples=[{"k": 1}, {"k": 2, "m": "x"}])
        def c(k: int, m: str = "") -> None: ...

        examples = reg.examples("c")
        assert examples == ({"k": 1}, {"k": 2, "m": "x"})
        examples[0]["k"] = 99  # a caller's edit stays the caller's
        assert reg.examples("c")[0] == {"k": 1}
        with pytest.raises(KeyError, match="unknown test-widget 'b'"):
            reg.examples("b")
        with pytest.raises(ValueError, match="'a' is registered twice"):
            reg.register("a")(lambda: None)
        with pytest.raises(KeyError, match="unknown test-widget 'b'; registered: a, c"):
            reg["b"]
        with pytest.raises(ValueError, match="kind 'test-widget' exists already"):
            Registry("test-widget")
    finally:
        del REGISTRIES["test-widget"]


def test_override_holds_inside_its_block_only_and_withdraw_forgets():
    reg: Registry[object] = Registry("test-gadget")
    try:
        reg.register("a")(first := object())
        variant = object()
        with reg.override("a", variant):
            assert reg["a"] is variant
        assert reg["a"] is first
        with pytest.raises(RuntimeError), reg.override("a", variant):
            raise RuntimeError("a failing test")
        assert reg["a"] is first  # restored after an exception too
        with pytest.raises(KeyError, match="unknown test-gadget 'b'"), reg.override("b", variant):
            pass
        reg.withdraw("a")
        assert "a" not in reg
        reg.register("a")(first)  # registrable again, no second-registration error
        with pytest.raises(KeyError, match="unknown test-gadget 'b'"):
            reg.withdraw("b")
    finally:
        del REGISTRIES["test-gadget"]


def test_component_module_names_the_defining_module():
    load_components()
    assert component_module("split", "dirichlet") == "fedlib.runs.splits"
    assert component_module("split", "parity") == "fedlib.papers.fedshift"
    assert component_module("experiment", "fedshift") == "fedlib.papers.fedshift"
    assert component_module("dataset", "mnist") == "fedlib.data.datasets"  # a partial: its function's module
    assert component_module("codec", "kmeans") == "fedlib.codecs.kmeans"
    with pytest.raises(KeyError, match="unknown component kind 'nope'"):
        component_module("nope", "x")
    with pytest.raises(KeyError, match="unknown split 'nope'"):
        component_module("split", "nope")


def test_every_kind_has_one_registry_and_every_registry_is_filled_by_fedlib():
    load_components()
    kinds = {"algorithm", "codec", "codec_policy", "model", "dataset", "split", "sampler", "hook", "client_behavior",
             "lr_schedule", "collector", "experiment"}
    assert kinds <= set(REGISTRIES)
    assert all(len(REGISTRIES[kind]) for kind in kinds)


def test_unknown_experiment_says_how_to_register_one():
    with pytest.raises(ValueError, match=r"unknown experiment 'no_such_paper': register its plan with "
                                         r"@EXPERIMENTS.register\('no_such_paper'\)"):
        experiment_plan("no_such_paper")


def test_a_missing_user_module_is_named(monkeypatch):
    monkeypatch.setenv(ALLOW_VAR, "no_such_user_module")  # allowed, so looked for (tests/test_trust.py: refused)
    with pytest.raises(ValueError, match="run spec imports: no module 'no_such_user_module' here"):
        load_components(["no_such_user_module"])


FRESH = ("from fedlib.registry import load_components, REGISTRIES; load_components()\n"
         "print(sorted(REGISTRIES['split']))")


def test_all_of_fedlibs_components_are_registered_by_one_call_in_a_fresh_process():
    out = subprocess.run([sys.executable, "-c", FRESH], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.stdout.strip() == str(sorted(["dirichlet", "iid", "shards", "labels", "natural", "parity", "groups",
                                             "equal_shards", "writers"]))


QUICKSTART_WITH_FREELOADERS = """
from fedlib.runs import RunSpec, build_run
spec = RunSpec.make("quickstart", "digits", ("dirichlet", {"num_clients": 4, "alpha": 0.5, "min_size": 5}),
                    ("mlp", {"hidden": [8]}), ("fedavg", {}), 1, 0, local={"lr": 0.05, "steps": 1},
                    client_behavior=("freeloaders", {"count": 1}))
run = build_run(spec)
print(type(run.client_behavior).__name__)
"""


def test_a_quickstart_spec_naming_tacos_freeloaders_builds_in_a_fresh_process():
    out = subprocess.run([sys.executable, "-c", QUICKSTART_WITH_FREELOADERS], capture_output=True, text=True,
                         cwd=ROOT, env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Freeloaders"


def test_split_registered_by_a_paper_is_used_and_unknown_split_is_refused():
    from fedlib.data import load_dataset
    from fedlib.runs import RunSpec
    from fedlib.runs.build import build_split

    ds = load_dataset("synthetic")
    spec = RunSpec.make("quickstart", "synthetic", ("nope", {"num_clients": 2}), ("mlp", {}), ("fedavg", {}), 1, 0)
    with pytest.raises(ValueError, match="unknown split 'nope' for experiment 'quickstart'"):
        build_split(spec, ds)
    data = build_split(spec.with_(split=spec.split.__class__("iid", spec.split.kwargs)), ds)
    assert data.num_clients == 2 and data.sizes.sum() == len(ds.y_train)
    assert "dirichlet" in SPLITS


def test_engine_names_no_paper():
    pattern = re.compile("fedshift|taco|fedaq|mucsc", re.IGNORECASE)
    hits = [f"{p.name}:{i}" for p in (ROOT / "fedlib" / "runs").glob("*.py")
            for i, line in enumerate(p.read_text().splitlines(), 1) if pattern.search(line)]
    assert hits == []
