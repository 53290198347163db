"""A notebook's run stage (`fedlib.notebook_runs`): which runs the records hold, and what a section says of those
it lacks; served from a ledger, nothing is computed (the whole flow: tests/test_ledger.py)."""
from __future__ import annotations

import re

import pandas as pd
import pytest

from fedlib import notebook_runs
from fedlib.notebook_runs import NotebookRecords, notebook_records
from fedlib.paper_params import ParameterError
from fedlib.papers.quickstart import QuickstartParams, experiments
from fedlib.runs.spec import named_runs, run_name
from fedlib.runs.store import MARKER

TINY = QuickstartParams(rounds=2, num_clients=4, clients_per_round=2, batch_size=64, seeds=(0, 1), device="cpu")
SPECS = experiments(TINY)  # 6 runs: FedAvg, FedProx, SCAFFOLD x 2 seeds


@pytest.fixture
def notes(monkeypatch):
    said: list[str] = []
    monkeypatch.setattr(notebook_runs, "_note", said.append)
    return said


def held(specs) -> NotebookRecords:
    """Records holding `specs` of SPECS, one row each, keyed k<index>."""
    keys = {s: f"k{SPECS.index(s)}" for s in specs}
    rounds = pd.DataFrame({"run": list(keys.values()), "round": 1, "test_acc": 0.5})
    return NotebookRecords({"rounds": rounds} if keys else {}, SPECS, keys, "the ledger L")


def test_complete_and_shown_say_what_a_section_lacks(notes):
    records = held(SPECS[:4])
    lacking = "; ".join(run_name(s) for s in SPECS[4:])
    assert records.lacking(SPECS) == SPECS[4:] and records.complete(SPECS[:4], "Fig. 1") and notes == []
    assert records.shown(SPECS[:4], "Fig. 1") and notes == []  # all held: no note
    assert records.shown(SPECS, "Fig. 2")
    assert notes == [f"**Fig. 2: from 4 of its 6 runs**; the ledger L lacks {lacking}."]
    assert not records.complete(SPECS, "Table 2")
    assert notes[1] == f"**Table 2: not shown.** Of its 6 runs, the ledger L holds 4; missing: {lacking}."
    assert not held([]).shown(SPECS, "Fig. 3")
    assert notes[2] == f"**Fig. 3: not shown.** Of its 6 runs, the ledger L holds 0; missing: {named_runs(SPECS)}."
    assert named_runs(SPECS, shown=2).endswith(" and 4 more")


def test_select_and_table_give_the_rows_of_held_runs_or_empty_named_columns():
    records = held(SPECS[:3])
    assert list(records.select(SPECS[1:5])["rounds"]["run"]) == ["k1", "k2"]
    assert records.table("rounds", ["test_acc"]) is records["rounds"]
    empty = held([]).table("rounds", ["round", "test_acc"])
    assert empty.empty and list(empty.columns) == ["algorithm", "seed", "run", "round", "test_acc"]


def test_served_from_a_ledger_nothing_is_computed(tmp_path, capsys):
    """An empty ledger folder: every run named missing, none computed, no store written."""
    (tmp_path / "ledger").mkdir()
    params = QuickstartParams(**{**TINY.__dict__, "ledger": str(tmp_path / "ledger"),
                                 "runs_root": str(tmp_path / "runs")})
    records = notebook_records(SPECS, params, progress=False)
    assert records.held == frozenset() and "rounds" not in records and not (tmp_path / "runs").exists()
    assert "6 runs: 0 from the ledger" in capsys.readouterr().err


@pytest.mark.parametrize("given, said", [("missing", "no such folder"), ("file", "a file, not a folder"),
                                         ("runs", "it is a run store"), ("results", "it holds 'REPORT.md'")])
def test_a_ledger_parameter_that_is_no_ledger_is_refused_naming_the_parameter_and_the_path(tmp_path, given, said):
    """Nothing is computed or created in its stead (tests/test_ledger_folder.py: what a ledger is)."""
    (tmp_path / "file").write_text("x")
    (tmp_path / "results" / "runs").mkdir(parents=True)
    (tmp_path / "results" / "REPORT.md").write_text("# Reproduction report\n")
    (tmp_path / "results" / "runs" / MARKER).write_text("{}")
    path = tmp_path / ("results/runs" if given == "runs" else given)
    before = sorted(tmp_path.rglob("*"))
    params = QuickstartParams(**{**TINY.__dict__, "ledger": str(path), "runs_root": str(tmp_path / "store")})
    with pytest.raises(ParameterError, match=f"^QuickstartParams.ledger: {re.escape(str(path))} is not a ledger: "
                                             f"{re.escape(said)}"):
        notebook_records(SPECS, params, progress=False)
    assert sorted(tmp_path.rglob("*")) == before


def test_the_flower_notebook_refuses_a_ledger():
    """Its result is the parity of two loops it runs itself: no ledger can stand in for them."""
    from fedlib.papers.flower import FlowerParams

    with pytest.raises(ParameterError, match="FlowerParams.ledger: .* leave ledger out"):
        FlowerParams(ledger="evidence/gpu")
    assert FlowerParams().ledger is None
