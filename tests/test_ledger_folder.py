"""What makes a folder a ledger (`Ledger.require`): its archives, README.md, INDEX.tsv, the pieces' claims and
temporaries; anything else, a missing folder, a file or a run store is refused in one line naming the path, by
`--ledger` as by the notebooks' `ledger` parameter (tests/test_notebook_runs.py). A piece creates a missing ledger
folder in an existing one and says so; reading never creates it."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from test_reproduce import load_reproduce

from fedlib.ledger.entries import CLAIMS, README, Ledger, NotALedgerError
from fedlib.ledger.index import write_index
from fedlib.runs.store import MARKER, TEMP_PREFIX

ENTRY = "quickstart-0123456789abcdef01234567-0123456789abcdef.tar.gz"


@pytest.fixture(scope="module")
def reproduce():
    return load_reproduce()


def a_ledger(root: Path) -> Path:
    """A folder with what a ledger may hold (the archive's bytes do not matter to the folder's check)."""
    root.mkdir()
    (root / ENTRY).write_bytes(b"")
    (root / README).write_text("# A ledger\n")
    write_index(root, [])
    (root / CLAIMS).mkdir()
    (root / CLAIMS / "quickstart-x.claim").write_text("{}")
    (root / f"{TEMP_PREFIX}abc").mkdir()
    return root


def a_run_store(root: Path) -> Path:
    root.mkdir()
    (root / MARKER).write_text(json.dumps({"fedlib_run_store": 1}))
    return root


def a_results_folder(root: Path) -> Path:
    root.mkdir()
    a_run_store(root / "runs")
    (root / "REPORT.md").write_text("# Reproduction report\n")
    return root


def test_a_folder_of_archives_readme_index_and_claims_is_a_ledger_and_an_empty_folder_an_empty_one(tmp_path):
    Ledger(a_ledger(tmp_path / "ledger")).require()
    (tmp_path / "empty").mkdir()
    assert Ledger(tmp_path / "empty").paths() == []


@pytest.mark.parametrize("make, said", [
    (lambda p: p, "no such folder"),
    (lambda p: p.write_text("x") and p, "a file, not a folder"),
    (a_run_store, f"it is a run store (it has {MARKER})"),
    (a_results_folder, "it holds 'REPORT.md' and 1 more, and a ledger holds only"),
    (lambda p: (a_ledger(p) / "notes.txt").write_text("x") and p, "it holds 'notes.txt', and a ledger holds only"),
    (lambda p: (a_ledger(p) / "sub.tar.gz").mkdir() or p, "it holds 'sub.tar.gz'")])
def test_what_is_no_ledger_is_refused_naming_it(tmp_path, make, said):
    path = make(tmp_path / "given")
    with pytest.raises(NotALedgerError, match=f"^{re.escape(f'{path} is not a ledger: {said}')}"):
        Ledger(path).entries()


def test_a_piece_creates_a_missing_ledger_folder_only_in_an_existing_one(tmp_path):
    assert Ledger(tmp_path / "new").create() and (tmp_path / "new").is_dir()
    assert not Ledger(tmp_path / "new").create()  # there now: an empty ledger
    with pytest.raises(NotALedgerError, match=f"no such folder; .* and {re.escape(str(tmp_path / 'absent'))} is none"):
        Ledger(tmp_path / "absent" / "new").create()
    assert not (tmp_path / "absent").exists()
    with pytest.raises(NotALedgerError, match="run store"):
        Ledger(a_run_store(tmp_path / "store")).create()


@pytest.mark.parametrize("mode", [["--from-ledger", "--headlines-only"], ["--dry-run"], ["--piece", "--budget", "1m"]])
@pytest.mark.parametrize("make", [lambda p: p / "missing" / "deeper", lambda p: p.joinpath("file").write_text("x")
                                  and p / "file", lambda p: a_run_store(p / "store"), lambda p: a_results_folder(
                                      p / "results")])
def test_reproduce_refuses_a_ledger_option_that_is_no_ledger_in_one_line_before_anything(reproduce, tmp_path, capsys,
                                                                                      mode, make):
    path = make(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    code = reproduce.main(["--profile", "gpu", "--only", "quickstart", *mode, "--ledger", str(path), "--results",
                           str(tmp_path / "out")])
    captured = capsys.readouterr()
    assert code == 2 and captured.err.startswith(f"reproduce: error: --ledger: {path} is not a ledger: ")
    assert captured.err.count("\n") == 1 and "The ledger is empty" not in captured.out
    assert sorted(tmp_path.rglob("*")) == before  # nothing created, nothing written


def test_reading_an_empty_ledger_creates_nothing_and_says_it_is_empty(reproduce, tmp_path, capsys):
    (tmp_path / "ledger").mkdir()
    code = reproduce.main(["--profile", "gpu", "--only", "quickstart", "--from-ledger", "--headlines-only", "--ledger",
                           str(tmp_path / "ledger"), "--results", str(tmp_path / "out")])
    assert code == 0 and "The ledger is empty" in capsys.readouterr().out
    assert list((tmp_path / "ledger").iterdir()) == []
