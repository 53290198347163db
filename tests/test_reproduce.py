"""scripts/reproduce.py end to end on the quickstart notebook: a failing notebook is named with its error and
cell in REPORT.md, and REPORT.md shows only the profile that ran."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def load_reproduce():
    spec = importlib.util.spec_from_file_location("reproduce", ROOT / "scripts" / "reproduce.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_report_names_the_failure_and_shows_only_this_profile(tmp_path):
    results = tmp_path / "results"
    stale = results / "cpu" / "quickstart"  # another profile's table, and a stale one of this profile
    stale.mkdir(parents=True)
    (stale / "claims.csv").write_text("claim,paper_value,measured,criterion,evidence,verdict\n"
                                      "OTHER PROFILE CLAIM,x,y,z,w,reproduced\n")
    (results / "quick" / "quickstart").mkdir(parents=True)
    (results / "quick" / "quickstart" / "claims.csv").write_text(
        "claim,paper_value,measured,criterion,evidence,verdict\nSTALE CLAIM,x,y,z,w,reproduced\n")
    code = load_reproduce().main(["--profile", "quick", "--only", "quickstart", "--results", str(results),
                                  "-p", "lr", "-1.0"])
    assert code == 1
    report = (results / "REPORT.md").read_text()
    assert "Profile `quick`" in report and "commit `" in report
    assert "| quickstart | FAILED: ValueError: lr must be a finite number in (0, inf), got -1.0 (cell [" in report
    assert "OTHER PROFILE CLAIM" not in report and "STALE CLAIM" not in report


def test_a_second_reproduce_computes_no_run_says_so_and_writes_the_same_claims(tmp_path, capsys):
    results = tmp_path / "results"
    argv = ["--profile", "quick", "--only", "quickstart", "--results", str(results), "-p", "rounds", "2",
            "-p", "num_clients", "4", "-p", "clients_per_round", "2"]
    reproduce = load_reproduce()
    assert reproduce.main(argv) == 0
    assert "[quickstart] 3 runs: 0 from the store, 3 to compute" in capsys.readouterr().out
    first = (results / "quick" / "quickstart" / "claims.csv").read_text()
    assert reproduce.main(argv) == 0
    assert "[quickstart] 3 runs: 3 from the store, 0 to compute" in capsys.readouterr().out
    assert (results / "quick" / "quickstart" / "claims.csv").read_text() == first
