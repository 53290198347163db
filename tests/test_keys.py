"""A run is keyed once, by whoever builds it: `Keys` turns a spec into a `KeyedRun`, the store files and finds it
under the key it is handed and computes none, and a ledger piece keys each run from the plan it then runs."""
from __future__ import annotations

import importlib
import io
import json
from collections import Counter

import pandas as pd
import pytest

from fedlib.ledger.entries import Ledger
from fedlib.ledger.piece import run_piece
from fedlib.ledger.priority import prioritized
from fedlib.papers.quickstart import QuickstartParams, experiments
from fedlib.runs import KeyedRun, Keys, RunStore, build, fingerprint
from fedlib.runs.build import Plans
from fedlib.runs.entry import MANIFEST

TINY = QuickstartParams(rounds=2, num_clients=4, clients_per_round=2, batch_size=64, seeds=(0, 1, 2), device="cpu")


def records() -> dict[str, pd.DataFrame]:
    return {"rounds": pd.DataFrame({"round": [0, 1], "test_acc": [0.5, 0.6]})}


@pytest.fixture
def builds(monkeypatch) -> list:
    """The specs `build_run` builds from here on, in a process that has keyed none yet (every route to it counted:
    a `Plans`, keying alone, `execute` without a plan)."""
    monkeypatch.setattr(fingerprint, "_BUILT", {})
    built: list = []
    real = build.build_run

    def counted(spec, root=None):
        built.append(spec)
        return real(spec, root)

    # the module, not the package's `execute` (the function)
    for module in (build, fingerprint, importlib.import_module("fedlib.runs.execute")):
        monkeypatch.setattr(module, "build_run", counted)
    return built


def test_the_store_files_a_run_under_the_key_it_is_handed_and_computes_none(tmp_path):
    spec = experiments(TINY)[0]
    store = RunStore(tmp_path)
    here, there = KeyedRun(spec, "context here"), KeyedRun(spec, "context there")
    folder = store.save(here, records())
    assert folder == store.folder(here) == tmp_path / spec.key("context here") == tmp_path / here.key
    manifest = json.loads((folder / MANIFEST).read_text())
    assert (manifest["key"], manifest["context"]) == (here.key, "context here")
    assert store.has(here) and not store.has(there)  # one spec, another context: another entry, not this one
    with pytest.raises(FileNotFoundError, match=there.key):
        store.load(there)


def test_keys_give_the_context_this_process_runs_with_or_a_fixed_one(tmp_path):
    spec = experiments(TINY)[0]
    assert Keys()(spec).context == fingerprint.key_context(spec)
    assert Keys()(spec).key == spec.key(fingerprint.key_context(spec))
    assert Keys(fixed="test")(spec) == KeyedRun(spec, "test")
    keys = Keys(tmp_path, fixed="test")
    assert keys.reading(None) is keys and keys.reading("") is keys and keys.reading(str(tmp_path)) is keys
    other = keys.reading(tmp_path / "elsewhere")
    assert (other.data_root, other.fixed) == (str(tmp_path / "elsewhere"), "test")
    with pytest.raises(ValueError, match="Keys data_root"):
        Keys(3)  # type: ignore[arg-type]


def test_keying_in_plans_builds_the_run_once_and_hands_that_plan_over(builds):
    spec = experiments(TINY)[0]
    plans = Plans()
    run = Keys.building(plans)(spec)
    assert builds == [spec] and run.context == fingerprint.key_context(spec)
    plans.take(spec)  # the run as keying built it: not built again
    assert builds == [spec]
    Keys()(spec)  # keyed again in this process: its code roots are known, nothing is built
    assert builds == [spec]


def test_a_ledger_piece_builds_each_run_once(builds, tmp_path):
    specs = experiments(TINY)
    report = run_piece(prioritized({"quickstart": specs}), Ledger(tmp_path / "ledger"), RunStore(tmp_path / "runs"),
                       600, out=io.StringIO())
    assert len(report.added) == len(specs)
    assert Counter(builds) == Counter(specs)
    for entry in Ledger(tmp_path / "ledger").entries():  # computed whole: every client-step in its wall time
        assert entry.provenance["resumed_after_round"] == 0
        assert entry.provenance["client_steps"] == entry.records["clients"]["steps"].sum()
