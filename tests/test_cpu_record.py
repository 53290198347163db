"""The cpu profile's verdicts beside the ledger's (`fedlib.ledger.cpu_record`): read from a hand-made cpu results
folder with their reasons (criterion, evidence, p-value, seeds), written as the record and read back, shown as the
"cpu verdict" column; every bad input refused naming its file (a missing folder or claims table, a truncated or
garbled table, an unreadable p-value or seed count, a stamp of another profile, a claim id twice); a record of the
former columns refused in one line saying how to rebuild it, and `reproduce --from-ledger` working without it."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest
from test_reproduce import load_reproduce

from fedlib import report
from fedlib.ledger.cpu_record import (COLUMNS, FORMER_COLUMNS, REBUILD, TO_BE_REBUILT, CpuRecordError,
                                      CpuRecordPredatesRules, CpuVerdicts, claim_id, predates_rules, read_cpu_results,
                                      read_current, read_record, write_record)
from fedlib.claims.ledger_verdicts import verdicts_markdown

STAMP = "profile `cpu`, commit `abc1234`, 2026-11-27 19:10 UTC, vm (x86_64, 2 CPUs, no GPU), no -p overrides"
SCALE = "digits, mlp, 4 clients/round, 2 rounds, 3 seeds"
QUICKSTART = [("Q1 SCAFFOLD is at least as accurate as FedAvg", "SCAFFOLD >= FedAvg", "+0.4 points", "paired gain",
               "3 seeds paired", "0.012", "3", report.REPRODUCED),
              ("Q2 FedProx with small mu (=0.01) stays close to FedAvg", "|gap| small", "0.1 points", "TOST",
               "3 seeds paired, the gap, \"quoted\"", "0.2", "3", report.INCONCLUSIVE)]
NO_EVIDENCE = ("Q1 SCAFFOLD is at least as accurate as FedAvg", "holds", "40.70 vs 4.14", "an exact check", "", "-",
               "-", report.NOT_REPRODUCED)  # a claim whose judge gives no evidence text, runs no test (mucsc's "Thm 2 proof")
COMMITTED = Path(__file__).resolve().parents[1] / "evidence" / "cpu" / "verdicts.csv"
BEFORE_THE_RULES = (f"evidence/cpu/verdicts.csv predates the current verdict rules; rebuild it with {REBUILD}"
                    if predates_rules(COMMITTED) else "")


def cpu_results(root: Path, notebook: str = "quickstart", rows=QUICKSTART, stamp: str = STAMP, status: str = "ok",
                scale: str = SCALE) -> Path:
    """A cpu results folder as `reproduce --profile cpu --results root` leaves it, for one notebook."""
    folder = root / "cpu" / notebook
    folder.mkdir(parents=True, exist_ok=True)
    pd.DataFrame(rows, columns=report.COLUMNS).to_csv(folder / "claims.csv", index=False)
    (folder / "stamp.json").write_text(json.dumps({"status": status, "seconds": 1.0, "stamp": stamp}))
    (folder / "scale.json").write_text(json.dumps({"here": scale, "paper": "cifar10"}))
    return root


def test_a_cpu_run_is_recorded_and_read_back(tmp_path):
    results = cpu_results(tmp_path / "results")
    (results / "cpu" / "flower").mkdir()  # a notebook without declared claims: nothing to record, no error
    rows = read_cpu_results(results)
    assert list(rows.columns) == COLUMNS
    assert rows.values.tolist() == [
        ["quickstart", "Q1", report.REPRODUCED, "+0.4 points", "paired gain", "3 seeds paired", "0.012", "3", STAMP,
         SCALE],
        ["quickstart", "Q2", report.INCONCLUSIVE, "0.1 points", "TOST", "3 seeds paired, the gap, \"quoted\"", "0.2",
         "3", STAMP, SCALE]]
    record = read_record(write_record(rows, tmp_path / "cpu" / "verdicts.csv"), "evidence/cpu/verdicts.csv")
    pd.testing.assert_frame_equal(record.rows, rows)
    assert record.verdict("quickstart", "Q1") == report.REPRODUCED and record.verdict("quickstart", "Q3") == "-"
    assert record.stamps() == {STAMP: ["quickstart"]} and record.scales() == {"quickstart": SCALE}
    bare = read_cpu_results(cpu_results(tmp_path / "bare", rows=[NO_EVIDENCE], scale=""))  # no evidence, no scale
    assert bare[["claim_id", "verdict", "evidence", "p_value", "seeds", "scale"]].values.tolist() == \
        [["Q1", report.NOT_REPRODUCED, "", "-", "-", ""]]
    assert read_record(write_record(bare, tmp_path / "bare.csv")).verdict("quickstart", "Q1") == report.NOT_REPRODUCED


def test_claim_ids_are_the_longest_declared_id_the_text_starts_with():
    assert claim_id("mucsc", "C5 iid traffic to target: MUCSC < 20%") == "C5 iid"
    assert claim_id("mucsc", "C3b adapted levels (min J) beat uniform levels") == "C3b"
    assert claim_id("mucsc", "C3' coordinate descent on J") == "C3'"
    assert claim_id("mucsc", "Thm 2 proof step (34)") == "Thm 2 proof"
    assert claim_id("fedaq", "C7b (ours) Joint FedAQ") == "C7b" and claim_id("fedaq", "C7 8-bit is best") == "C7"
    assert claim_id("fedaq", "C99 not declared") is None and claim_id("fedaq", "C7x") is None


def test_a_missing_results_folder_or_claims_table_is_named(tmp_path):
    with pytest.raises(CpuRecordError, match=r"results/cpu: not a folder: give --cpu-results the --results folder"):
        read_cpu_results(tmp_path / "results")
    (tmp_path / "results" / "cpu" / "flower").mkdir(parents=True)
    with pytest.raises(CpuRecordError, match="holds no folder of a notebook with claims"):
        read_cpu_results(tmp_path / "results")
    results = cpu_results(tmp_path / "results")
    (results / "cpu" / "quickstart" / "claims.csv").unlink()
    with pytest.raises(CpuRecordError, match=r"quickstart/claims.csv: missing; render it again \(`python scripts/"
                                             r"reproduce.py --profile cpu --only quickstart"):
        read_cpu_results(results)


@pytest.mark.parametrize("damage, said", [
    (lambda text: text[:text.index("paired gain") + 3], "row 1 has no verdict"),  # cut inside a row: its last cells
    (lambda text: text[:text.index('"quoted') + 4], "not a readable CSV table"),  # cut inside a quoted cell
    (lambda text: text[:text.rindex("inconclusive") + 5], "quickstart Q2 FedProx with small mu .*: verdict 'incon' is "
                                                         "not one the judge gives"),
    (lambda text: text.split("\n", 1)[1], "has columns"),  # the header lost
    (lambda text: "", "not a readable CSV table"),
    (lambda text: "\x00\xff garbage", "has columns"),
])
def test_a_truncated_or_garbled_claims_table_is_refused_naming_it(tmp_path, damage, said):
    results = cpu_results(tmp_path / "results")
    table = results / "cpu" / "quickstart" / "claims.csv"
    table.write_text(damage(table.read_text()))
    with pytest.raises(CpuRecordError, match=rf"quickstart/claims.csv: .*{said}.*render it again"):
        read_cpu_results(results)


def test_a_stamp_of_another_profile_or_a_failed_rendering_is_refused(tmp_path):
    gpu = cpu_results(tmp_path / "gpu", stamp=STAMP.replace("`cpu`", "`gpu`"))
    with pytest.raises(CpuRecordError, match=r"quickstart/stamp.json: stamped by profile\(s\) \['gpu'\], not `cpu`: "
                                             "give the --results folder of a `reproduce --profile cpu` run"):
        read_cpu_results(gpu)
    rejudged = cpu_results(tmp_path / "rejudged", stamp=f"claims judged again ({STAMP}, --claims-only) from the "
                                                        f"evidence rendered {STAMP.replace('`cpu`', '`quick`')}")
    with pytest.raises(CpuRecordError, match=r"\['cpu', 'quick'\]"):
        read_cpu_results(rejudged)
    with pytest.raises(CpuRecordError, match="status 'FAILED: boom', not 'ok'"):
        read_cpu_results(cpu_results(tmp_path / "failed", status="FAILED: boom"))
    unstamped = cpu_results(tmp_path / "unstamped")
    (unstamped / "cpu" / "quickstart" / "stamp.json").write_text("{")
    with pytest.raises(CpuRecordError, match="quickstart/stamp.json: not readable JSON"):
        read_cpu_results(unstamped)


def test_a_claim_id_twice_in_one_notebook_is_refused_a_row_of_no_declared_claim_left_out(tmp_path):
    twice = cpu_results(tmp_path / "twice", rows=[QUICKSTART[0], QUICKSTART[1], QUICKSTART[0]])
    with pytest.raises(CpuRecordError, match="quickstart/claims.csv: quickstart gives claim Q1 twice"):
        read_cpu_results(twice)
    theorem = ("Theorem 1: f(z_{t+1}) <= f(z_t)", "holds", "-", "checked", "toy", "-", "-", report.PARTLY)  # TACO's
    extra = cpu_results(tmp_path / "extra", rows=[QUICKSTART[0], theorem, theorem])
    assert read_cpu_results(extra)["claim_id"].tolist() == ["Q1"]
    cut = cpu_results(tmp_path / "cut", rows=[QUICKSTART[0], theorem[:-1] + ("partly",)])  # left out, still checked
    with pytest.raises(CpuRecordError, match="quickstart Theorem 1: .*verdict 'partly' is not one the judge gives"):
        read_cpu_results(cut)


def test_a_missing_or_damaged_record_is_refused_saying_how_to_write_it(tmp_path):
    with pytest.raises(CpuRecordError, match=r"verdicts.csv: missing; write it with `python scripts/reproduce.py "
                                             r"--profile gpu --from-ledger --write-expected --cpu-results"):
        read_record(tmp_path / "verdicts.csv")
    rows = read_cpu_results(cpu_results(tmp_path / "results"))
    path = write_record(pd.concat([rows, rows.iloc[:1]]), tmp_path / "verdicts.csv")
    with pytest.raises(CpuRecordError, match="quickstart gives claim Q1 twice; write it with"):
        read_record(path)
    path.write_text(path.read_text()[:-30])  # cut inside the last row's quoted stamp
    with pytest.raises(CpuRecordError, match="verdicts.csv: not a readable CSV table .*; write it with"):
        read_record(path)
    write_record(rows, path).write_text(path.read_text().replace(report.REPRODUCED, "reproduce"))
    with pytest.raises(CpuRecordError, match="verdicts.csv: quickstart Q1: verdict 'reproduce' is not one the judge"):
        read_record(path)


def test_the_cpu_verdict_stands_beside_each_judged_claim(tmp_path):
    """Q1's cpu verdict beside the ledger's, "-" for Q2 (none recorded), fedaq's recorded claim not shown (the
    headlines judged here do not name it); the cpu run's stamp and scale said once above the tables."""
    rows = read_cpu_results(cpu_results(tmp_path / "results", rows=[QUICKSTART[0]]))
    fedaq = rows.assign(notebook="fedaq", claim_id="C4a", verdict=report.NOT_REPRODUCED, scale="digits, lenet")
    cpu = CpuVerdicts("evidence/cpu/verdicts.csv", pd.concat([rows, fedaq], ignore_index=True))
    judged = pd.DataFrame([(q[0], q[1], "+1.2 points", q[3], "on the gpu", "0.09", "4", report.INCONCLUSIVE)
                           for q in QUICKSTART], columns=report.COLUMNS)
    text = verdicts_markdown({"quickstart": judged, "taco": "the ledger holds none of its runs"}, "gpu", cpu)
    assert "| claim | paper | measured | verdict | cpu verdict | criterion | evidence | p-value | seeds |" in text
    assert f"| {QUICKSTART[0][0]} | SCAFFOLD >= FedAvg | +1.2 points | ⚠️ inconclusive | ✅ reproduced " \
           "| paired gain | on the gpu | 0.09 | 4 |" in text
    assert "| ⚠️ inconclusive | - | TOST | on the gpu | 0.09 | 4 |" in text  # Q2: no cpu verdict recorded
    # taco not judged: each of its 6 headline claims (C1-C3, C5-C7) counts as not testable, its runs not computed
    assert ("**Summary**: 8 headline claims judged on the ledger's runs: 6 · not testable: runs not computed yet, 2 ⚠️ "
            "inconclusive.") in text
    assert "C4a" not in text and text.count(STAMP) == 1
    assert f"stamped {STAMP} (quickstart, fedaq). It holds none of taco." in text
    assert f"small-scale analogues, not the paper's scale (quickstart: {SCALE}; fedaq: digits, lenet)" in text
    assert text.index("cpu verdict**") < text.index("### quickstart")


def test_reproduce_writes_the_record_from_a_cpu_run_or_names_what_is_wrong(tmp_path, capsys):
    reproduce = load_reproduce()
    record = tmp_path / "verdicts.csv"
    (tmp_path / "ledger").mkdir()  # an empty ledger
    common = ["--profile", "gpu", "--only", "quickstart", "--from-ledger", "--headlines-only", "--ledger", str(tmp_path / "ledger"),
              "--results", str(tmp_path / "out"), "--cpu-record", str(record)]
    assert reproduce.main([*common, "--cpu-results", str(tmp_path / "nothing")]) == 2
    assert "nothing/cpu: not a folder" in capsys.readouterr().err and not record.exists()
    assert reproduce.main(common) == 2  # no record yet: never an empty column
    assert f"{record}: missing; write it with" in capsys.readouterr().err
    assert reproduce.main([*common, "--cpu-results", str(cpu_results(tmp_path / "results"))]) == 0
    assert f"wrote {record}" in capsys.readouterr().out
    assert read_record(record).verdict("quickstart", "Q1") == report.REPRODUCED
    assert STAMP in (tmp_path / "out" / "REPORT.md").read_text()
    former_record(record)  # a record before the current rules: the gpu verdicts stand, the cpu column says so
    assert reproduce.main(common) == 0
    assert capsys.readouterr().err.count("predates the current verdict rules") == 1
    assert f"Column **cpu verdict**: \"{TO_BE_REBUILT}\"" in (tmp_path / "out" / "REPORT.md").read_text()
    assert reproduce.main(["--profile", "gpu", "--cpu-results", str(tmp_path)]) == 2
    assert "--cpu-results is for --from-ledger" in capsys.readouterr().err


def former_record(path: Path) -> Path:
    """A record as written before the current verdict rules: `FORMER_COLUMNS`, a retired verdict wording."""
    pd.DataFrame([["fedaq", "C1", "not testable at this scale", "29.1%", STAMP, SCALE]],
                 columns=FORMER_COLUMNS).to_csv(path, index=False)
    return path


def test_a_record_of_the_former_columns_is_refused_in_one_line_saying_how_to_rebuild_it(tmp_path):
    old = former_record(tmp_path / "verdicts.csv")
    assert predates_rules(old)
    with pytest.raises(CpuRecordPredatesRules) as refused:
        read_record(old)
    said = str(refused.value)
    assert "\n" not in said and said == (f"{old}: predates the current verdict rules (no criterion, evidence, p-value "
                                         f"or seeds); rebuild it with `{REBUILD}`")
    assert REBUILD.startswith("python scripts/reproduce.py --profile cpu --results results && ") \
        and REBUILD.endswith("--profile gpu --from-ledger --write-expected --cpu-results results")
    stale = read_current(old, "evidence/cpu/verdicts.csv")
    assert stale.predates == said and stale.rows.empty and stale.verdict("fedaq", "C1") == TO_BE_REBUILT
    current = write_record(read_cpu_results(cpu_results(tmp_path / "results")), tmp_path / "current.csv")
    assert not predates_rules(current) and read_current(current).predates == ""
    narrower = tmp_path / "narrower.csv"  # another header than the former one: a damaged record, not an old one
    narrower.write_text(",".join(FORMER_COLUMNS[:-1]) + "\nfedaq,C1,reproduced,1,s\n")
    with pytest.raises(CpuRecordError, match="has columns") as damaged:
        read_current(narrower)
    assert not isinstance(damaged.value, CpuRecordPredatesRules)


@pytest.mark.parametrize("column, value, said", [
    ("p_value", "1.5", "p_value '1.5' is not a number in \\[0, 1\\]"),
    ("p_value", "small", "p_value 'small' is not a number"),
    ("seeds", "0", "seeds '0' is not a positive whole number"),
    ("seeds", "2.5", "seeds '2.5' is not a positive whole number"),
])
def test_an_unreadable_p_value_or_seed_count_is_refused_in_results_and_record(tmp_path, column, value, said):
    index = report.COLUMNS.index(column)
    bad = [QUICKSTART[0][:index] + (value,) + QUICKSTART[0][index + 1:], QUICKSTART[1]]
    with pytest.raises(CpuRecordError, match=rf"quickstart/claims.csv: quickstart Q1: {said} .*render it again"):
        read_cpu_results(cpu_results(tmp_path / "results", rows=bad))
    record = write_record(read_cpu_results(cpu_results(tmp_path / "good")), tmp_path / "verdicts.csv")
    record.write_text(record.read_text().replace(f",{QUICKSTART[0][index]},", f",{value},", 1))
    with pytest.raises(CpuRecordError, match=rf"verdicts.csv: quickstart Q1: {said} .*write it with"):
        read_record(record)


@pytest.mark.skipif(bool(BEFORE_THE_RULES), reason=BEFORE_THE_RULES)
def test_the_committed_record_is_read_under_the_current_rules():
    """The committed record reads (the judge's verdicts, readable p-values and seeds), every row a claim its notebook
    declares, stamped by a `reproduce --profile cpu` run."""
    record = read_record(COMMITTED)
    for notebook, claim in record.rows[["notebook", "claim_id"]].itertuples(index=False):
        assert claim_id(notebook, claim) == claim
    assert all("profile `cpu`" in stamp for stamp in record.stamps())
