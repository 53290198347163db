"""The component registries: lookup by name, errors that name what is wrong, experiments found by module name."""
from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from fedlib.registry import REGISTRIES, Registry, component_module
from fedlib.runs.runner import experiment_plan
from fedlib.runs.splits import SPLITS

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


def test_component_module_names_the_defining_module():
    assert component_module("split", "dirichlet") == "fedlib.runs.splits"
    experiment_plan("fedshift")  # imports fedlib.papers.fedshift, which registers its split
    assert component_module("split", "parity") == "fedlib.papers.fedshift"
    assert component_module("experiment", "fedshift") == "fedlib.papers.fedshift"
    with pytest.raises(KeyError, match="unknown component kind 'nope'"):
        component_module("nope", "x")
    with pytest.raises(KeyError, match="unknown split 'nope'"):
        component_module("split", "nope")


def test_unknown_experiment_names_the_module_it_looked_for():
    with pytest.raises(ValueError, match=r"no module fedlib\.papers\.no_such_paper"):
        experiment_plan("no_such_paper")


def test_experiment_module_that_registers_nothing_is_an_error(tmp_path, monkeypatch):
    import fedlib.papers

    (tmp_path / "silent_paper.py").write_text("X = 1\n")
    monkeypatch.setattr(fedlib.papers, "__path__", [*fedlib.papers.__path__, str(tmp_path)])
    with pytest.raises(ValueError, match=r"registers no experiment 'silent_paper'"):
        experiment_plan("silent_paper")


def test_each_experiment_is_found_in_a_fresh_process_by_its_name_alone():
    code = ("from fedlib.runs.runner import experiment_plan; from fedlib.runs.splits import SPLITS\n"
            "for name in ('quickstart', 'fedshift', 'taco', 'fedaq', 'mucsc'): experiment_plan(name)\n"
            "print(sorted(SPLITS))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT,
                         env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert out.stdout.strip() == str(sorted(["dirichlet", "iid", "shards", "labels", "natural", "parity", "groups",
                                             "equal_shards", "writers"]))


def test_split_registered_by_a_paper_is_used_and_unknown_split_is_refused():
    from fedlib.data import load_dataset
    from fedlib.runs import RunSpec
    from fedlib.runs.runner import build_split

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
