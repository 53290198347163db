"""The evidence ledger on a tiny gpu-like profile on the CPU: piece with a budget -> ledger -> read back -> claims;
a budget that fits nothing; two pieces in a row; a damaged entry; an entry computed by other code; the priority
declarations of every paper; the committed expected results; the ledger's size extrapolated to the gpu profile."""
from __future__ import annotations

import io
import itertools
import json
import shutil
import tarfile
from collections.abc import Callable, Iterator
from dataclasses import replace
from pathlib import Path

import pandas as pd
import pytest
import torch
from headline_parts import assert_selects_exactly, headlines_and_parts, runs_of_part
from test_reproduce import load_reproduce

from fedlib.app.from_ledger import LEDGER_DIGEST_LABEL, rendered_claims
from fedlib.app.options import duration
from fedlib.app.plan import fabricated_if_missing, missing_datasets, plan_runs, unloadable
from fedlib.claims.ledger_verdicts import judged_headlines, ledger_verdicts, verdicts_markdown
from fedlib.dryrun import NotebookReport, print_priority
from fedlib.grids import notebook_parameters, notebook_specs
from fedlib.grids import combination
from fedlib.ledger import piece as piece_module
from fedlib.ledger.cpu_record import CpuVerdicts, claim_id, read_current
from fedlib.ledger.entries import (BUDGET_BYTES, COMMIT_VAR, MANIFEST, PROVENANCE, Ledger, LedgerError, changed_since,
                                   git_commit, held_records, read_entry_archive)
from fedlib.ledger.piece import Observation, Rates, run_piece
from fedlib.ledger.priority import REST, check_headlines, prioritized
from fedlib.ledger.results import headline_results, results_block, results_pages, scales
from fedlib.ledger.status import (devices_note, expected_results, headline_status, held_devices, stale_lines,
                                  stale_notes)
from fedlib.paper import Headline, declared, paper
from fedlib.papers.quickstart import QuickstartParams, experiments
from fedlib.runs import Keys, RunStore
from fedlib.runs.archive import export_entries, unpack
from fedlib.runs.entry import describe, read_manifest
from fedlib.runs.spec import run_name
from fedlib.runs.store import read_checkpointed

ROOT = Path(__file__).resolve().parents[1]
KEYS = Keys()  # how a piece keys its runs (no data root given: the data-root rule)
TINY = QuickstartParams(rounds=2, num_clients=4, clients_per_round=2, batch_size=64, seeds=(0, 1, 2), device="cpu")


def tiny_ranked(params: QuickstartParams = TINY):
    return prioritized({"quickstart": experiments(params)})


@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """One piece over the tiny profile with room for all of it (no rate given: the first run starts unestimated)."""
    tmp = tmp_path_factory.mktemp("filled")
    out = io.StringIO()
    report = run_piece(tiny_ranked(), Ledger(tmp / "ledger"), RunStore(tmp / "runs"), 600, out=out)
    return tmp, report, out.getvalue()


def copy_ledger(filled, dest: Path) -> Ledger:
    shutil.copytree(filled[0] / "ledger", dest)
    return Ledger(dest)


def test_piece_fills_the_ledger_and_the_claims_read_it(filled):
    tmp, report, printed = filled
    ranked = tiny_ranked()
    assert [r.spec for r, *_ in report.added] == [r.spec for r in ranked] and report.left == []  # none batched
    assert "started, its pace measured as it runs" in printed and "client-steps/s measured in this piece" in printed
    assert f"created the ledger folder {tmp / 'ledger'}" in printed
    assert set(report.rates) == {"cpu"} and report.rates["cpu"] > 0
    ledger, store = Ledger(tmp / "ledger"), RunStore(tmp / "runs")
    entries = ledger.entries()
    assert len(entries) == len(ranked)
    for entry in entries:  # the records are the store's, bit for bit; provenance says where and how
        for name, frame in store.load(KEYS(entry.spec)).items():
            pd.testing.assert_frame_equal(entry.records[name], frame)
        prov = entry.provenance
        assert prov["device"] == "cpu" and prov["client_steps"] == int(entry.records["clients"]["steps"].sum())
        assert prov["wall_s"] > 0 and prov["code_version"] == json.loads(KEYS(entry.spec).context)["code"]
        assert {"torch", "cuda", "commit", "device_name", "data", "definitions", "finished"} <= set(prov)
        assert "fedlib.engine.federation.run_federation" in prov["definitions"]
    specs = [r.spec for r in ranked]
    from_ledger, from_store = ledger.records(specs), tidy_from_store(specs, store)
    pd.testing.assert_frame_equal(from_ledger["rounds"], from_store["rounds"])
    table = judged_headlines("quickstart", TINY, from_ledger, None)  # what --from-ledger renders
    assert len(table) == 2 and table["evidence"].str.startswith("3 seeds paired").all()  # every guard passed


def tidy_from_store(specs, store):
    from fedlib.runs.runner import tidy

    return tidy([KEYS(spec) for spec in specs], store)


def test_a_missing_run_reads_not_testable_k_of_n(filled, tmp_path):
    ledger = copy_ledger(filled, tmp_path / "ledger")
    scaffold2 = next(e for e in ledger.entries() if e.spec.get("labels")["algorithm"] == "SCAFFOLD" and e.spec.seed == 2)
    scaffold2.path.unlink()
    assert ledger.reindex()[0] == [f"removed {scaffold2.path.name}"]  # an entry removed: its line goes too
    grids = {"quickstart": experiments(TINY)}
    q1, q2 = headline_status(grids, held_devices(ledger.entries()))
    assert q1.verdict_input() == "not testable: 5 of 6 runs computed (missing: algorithm=SCAFFOLD seed=2)"
    assert q2.verdict_input() == "all 6 runs computed"
    table = judged_headlines("quickstart", TINY, ledger.records(grids["quickstart"]), None)
    q1 = table[table["claim"].str.startswith("Q1")].iloc[0]
    assert q1["evidence"].startswith("1 of 6 runs not computed yet: algorithm=SCAFFOLD seed=2") and q1["verdict"].startswith("not testable")


def test_a_budget_that_fits_nothing_starts_nothing(tmp_path):
    out = io.StringIO()
    report = run_piece(tiny_ranked(), Ledger(tmp_path / "ledger"), RunStore(tmp_path / "runs"), 60, rate=1e-3, out=out)
    assert report.added == [] and len(report.skipped) == len(report.left) == 9
    assert "not started (cannot finish)" in out.getvalue() and "given (--rate)" in out.getvalue()
    assert Ledger(tmp_path / "ledger").paths() == [] and not (tmp_path / "runs").exists()


def test_two_pieces_in_a_row_compute_no_run_twice(tmp_path, monkeypatch):
    executed = []
    real = piece_module.execute
    monkeypatch.setattr(piece_module, "execute", lambda run, *a, **k: executed.append(run.spec) or real(run, *a, **k))
    ledger, store = Ledger(tmp_path / "ledger"), RunStore(tmp_path / "runs")
    # A clock advancing 10 s per reading: the first run takes 30 s (three readings: its start, its one checkpoint,
    # its end); the first piece's budget fits no second run once that rate is measured.
    first = run_piece(tiny_ranked(), ledger, store, 35, rate=1e3, clock=itertools.count(0.0, 10.0).__next__,
                      out=io.StringIO())
    assert len(first.added) == 1 and len(first.left) == 8 and len(first.skipped) == 8
    before = {p.name: p.read_bytes() for p in ledger.paths()}
    second = run_piece(tiny_ranked(), ledger, store, 10_000, out=io.StringIO())
    assert len(second.added) == 8 and second.left == []
    assert sorted(map(str, executed)) == sorted(map(str, (r.spec for r in tiny_ranked())))  # each exactly once
    assert all(p.read_bytes() == before[p.name] for p in ledger.paths() if p.name in before)


def rewrite(archive: Path, change) -> None:
    """Unpack a ledger archive, let `change(folder)` edit it, and pack it back under the same name."""
    work = archive.parent / "work"
    work.mkdir()
    unpack(archive, work)
    (folder,) = list(work.iterdir())
    change(folder)
    export_entries(RunStore(work), [folder], archive) if (folder / MANIFEST).exists() else None
    shutil.rmtree(work)


def test_a_damaged_entry_is_refused_naming_the_file(filled, tmp_path):
    ledger = copy_ledger(filled, tmp_path / "ledger")
    first, second = ledger.paths()[:2]
    first.write_bytes(first.read_bytes()[:-100])
    with pytest.raises(LedgerError, match=first.name):
        ledger.entries()
    with pytest.raises(LedgerError, match=first.name):  # a piece does not start on a damaged ledger
        run_piece(tiny_ranked(), ledger, RunStore(tmp_path / "runs"), 600, out=io.StringIO())
    first.unlink()

    def edit_a_record(folder: Path) -> None:  # a record edited, its manifest left as it was: packs, but is refused
        rounds = folder / "rounds.csv"
        rounds.write_text(rounds.read_text().replace("0.", "1.", 1))
        with tarfile.open(second, "w:gz") as tar:
            for path in sorted(folder.iterdir()):
                tar.add(path, arcname=f"{folder.name}/{path.name}")
        shutil.rmtree(folder)

    rewrite(second, edit_a_record)
    with pytest.raises(LedgerError, match=rf"{second.name}: damaged member \w+/rounds.csv"):
        read_entry_archive(second)


def set_provenance(archive: Path, **changes) -> None:
    def change(folder: Path) -> None:
        prov = json.loads((folder / PROVENANCE).read_text())
        for key, value in changes.items():
            prov[key] = value(prov[key]) if callable(value) else value
        (folder / PROVENANCE).write_text(json.dumps(prov))
        manifest = read_manifest(folder)
        manifest["files"][PROVENANCE] = describe(folder / PROVENANCE)
        (folder / MANIFEST).write_text(json.dumps(manifest))

    rewrite(archive, change)


def test_a_definition_moved_unchanged_to_another_module_leaves_its_entries_fresh(filled, tmp_path):
    """The entry recorded quickstart's plan in another module, with today's digest, under another code version (one
    computed before keys stopped hashing where a definition lives): moved, not changed, so not stale; its digest
    edited too: changed, under today's name and where it was; a name that two modules define today: gone and new."""
    ledger = copy_ledger(filled, tmp_path / "ledger")
    old = ledger.entries()[0]
    here, there = "fedlib.papers.quickstart.plan", "fedlib.papers.quickstart_before.plan"
    set_provenance(old.path, code_version="0" * 16,
                   definitions=lambda d: {(there if n == here else n): v for n, v in d.items()})
    ledger.reindex()
    entry = read_entry_archive(old.path)
    today = {(here if n == there else n): v for n, v in entry.provenance["definitions"].items()}
    assert changed_since(entry, today) == [] and stale_notes(ledger.entries(), lambda spec: None) == []
    assert changed_since(entry, {**today, here: "edited"}) == [f"{here} (moved from fedlib.papers.quickstart_before)"]
    twice = "fedlib.papers.quickstart_twice.plan"
    assert changed_since(entry, {**today, here: "edited", twice: "edited"}) == \
        [f"{there} (gone)", f"{here} (new)", f"{twice} (new)"]


def test_an_entry_of_other_code_is_used_said_stale_and_recomputed_on_request(filled, tmp_path):
    ledger = copy_ledger(filled, tmp_path / "ledger")
    old = ledger.entries()[3]
    set_provenance(old.path, commit="0123456789abcdef", code_version="0000000000000000",
                   definitions=lambda d: {**d, "fedlib.engine.federation.run_federation": "edited"})
    with pytest.raises(LedgerError, match=f"{old.path.name}: SHA-256"):  # edited: refused until vouched for
        ledger.entries()
    assert ledger.reindex()[0] == [f"changed {old.path.name}: commit, archive_sha256"]
    entry = read_entry_archive(old.path)
    assert changed_since(entry, {**entry.provenance["definitions"], "fedlib.engine.federation.run_federation": "x"}) == \
        ["fedlib.engine.federation.run_federation"]
    notes = stale_notes(ledger.entries(), lambda spec: None)
    assert [(e.path, note) for e, note in notes] == \
        [(old.path, "computed at commit 0123456789; changed since: fedlib.engine.federation.run_federation")]
    assert stale_lines(notes) == [f"quickstart {run_name(old.spec)} ({old.path.name}): {notes[0][1]}"]
    row = expected_results({"quickstart": experiments(TINY)}, ledger.entries(), "ledger", "tiny",
                           {e.spec: note for e, note in notes}).splitlines()
    said = f"all 6 runs computed; {run_name(old.spec)} computed at commit 0123456789; changed since: " \
           "fedlib.engine.federation.run_federation |"
    assert [line.endswith(said) for line in row if line.startswith("| quickstart | Q")] == \
        [old.spec.get("labels")["algorithm"] != "FedProx", old.spec.get("labels")["algorithm"] != "SCAFFOLD"]
    store = RunStore(tmp_path / "runs")
    kept = run_piece(tiny_ranked(), ledger, store, 600, out=io.StringIO())
    assert kept.added == [] and kept.left == []  # still used: matched by spec and data
    redone = run_piece(tiny_ranked(), ledger, store, 600, recompute_stale=True, out=io.StringIO())
    assert [r.spec for r, *_ in redone.added] == [old.spec]
    assert stale_notes(ledger.entries(), lambda spec: None) == []


def test_every_paper_declares_headline_runs_on_three_seeds_of_its_gpu_profile():
    for notebook in declared():
        assert paper(notebook).headlines, f"paper {notebook!r} declares no headlines"
        specs = notebook_specs(notebook, notebook_parameters(notebook, "gpu"))
        check_headlines(notebook, specs)
        ids = {claim.id for claim in paper(notebook).claims}
        for headline in paper(notebook).headlines:
            named = headline.claim_ids()
            assert named <= ids, f"{notebook}: {headline.claims} names claims it does not declare"


def test_priority_takes_every_papers_first_headline_first_and_each_run_once():
    ranked = tiny_ranked()
    assert [r.spec.get("labels")["algorithm"] for r in ranked] == ["FedAvg", "SCAFFOLD"] * 3 + ["FedProx"] * 3
    assert [r.backs for r in ranked] == ["Q1"] * 6 + ["Q2"] * 3
    other = QuickstartParams(rounds=3, seeds=(0,), device="cpu")
    both = prioritized({"quickstart": experiments(TINY), "flower": experiments(other)})  # no headlines: REST
    assert [r.rank for r in both] == [0] * 6 + [1] * 3 + [REST] * 3
    with pytest.raises(ValueError, match="headline 'Q1' .* on 1 seed"):
        check_headlines("quickstart", experiments(other))


def test_priority_takes_the_parts_a_headline_orders_first_first_then_its_other_runs():
    """FedShift's first headline orders C2's runs (the baselines at 32+4) first, then the rest of C1's (32+8), then
    C3's, each in the grid's order, and its status lists them so; a part must name the headline's own claims and
    select runs on >= 3 seeds."""
    params = notebook_parameters("fedshift", "gpu")
    ranked = [r for r in prioritized({"fedshift": notebook_specs("fedshift", params)}) if r.rank == 0]
    cells = [tuple(r.spec.get("labels")[k] for k in ("method", "quantizer", "bits", "shift")) for r in ranked]
    assert cells[:12] == [(m, "kmeans", b, False) for b in (4, 8) for m in ("fedavg", "fedef") for _ in range(3)]
    assert [r.spec.seed for r in ranked[:6]] == [0, 1, 2] * 2
    assert len(ranked) == 48 and {c[3] for c in cells[12:]} == {False, True} and {r.backs for r in ranked} == {
        "C3, C2, C1"}
    status = headline_status({"fedshift": notebook_specs("fedshift", params)}, {})[0]
    assert status.runs == tuple(r.spec for r in ranked)  # what it misses, named in the order a piece computes it
    headline = paper("fedshift").headlines[0]
    with pytest.raises(ValueError, match="part 'C9' names claims the headline does not"):
        replace(headline, first=(Headline("C9", {"bits": ("4",)}),))
    one_seed = replace(headline, first=(Headline("C2", {"bits": ("4",), "seed": ("0",)}),))
    declared_once = replace(paper("fedshift"), headlines=(one_seed,))
    with pytest.MonkeyPatch.context() as m:
        m.setattr("fedlib.ledger.priority.paper", lambda name: declared_once)
        with pytest.raises(ValueError, match=r"headline 'C3, C2, C1', its part 'C2', selects .* on 1 seed\(s\) \[0\]"):
            check_headlines("fedshift", notebook_specs("fedshift", params))


def test_a_claim_a_part_names_counts_the_runs_it_reads_and_names_their_devices(monkeypatch):
    """FedShift's first headline holding 5 of C2's 6 runs, 2 of them from a CPU: C2 reads 5 of its 6, C1 (its part
    at 32+4 and 32+8) 5 of 12, C3 (no part: the headline's) 5 of 48, each naming both devices; so does the results
    table's cell, the claims not testable, C3's saying they are its headline's; a claim judged on them names its
    devices beside its value."""
    params = notebook_parameters("fedshift", "gpu")
    grids = {"fedshift": notebook_specs("fedshift", params)}
    c2 = [r.spec for r in prioritized(grids)][:5]
    held = dict(zip(c2, ["CPU x86_64 (2 cores)"] * 2 + ["NVIDIA H200"] * 3))
    status = headline_status(grids, held)[0]
    both = " (2 on CPU x86_64 (2 cores), 3 on NVIDIA H200)"
    counts = {c: (len(status.of_claim(c).runs), status.of_claim(c).present, devices_note(status.of_claim(c).devices))
              for c in ("C2", "C1", "C3")}
    assert counts == {"C2": (6, tuple(c2), both), "C1": (12, tuple(c2), both), "C3": (48, tuple(c2), both)}
    assert status.of_claim("C3") is status and [status.of_part(p).claims for p in status.headline.first] == ["C2", "C1"]
    assert status.of_part(status.headline.first[1]) == status.of_claim("C1")
    cpu = committed_cpu_record()
    rows = {r.claim_id: r for r in headline_results({"fedshift": params}, {"fedshift": "none judged"}, [status], cpu)}
    assert [(rows[c].gpu_runs, rows[c].gpu_devices) for c in ("C2", "C1", "C3")] == [
        ("5 of 6 runs computed", both), ("5 of 12 runs computed", both),
        ("5 of 48 runs computed", " (its headline's runs: 2 on CPU x86_64 (2 cores), 3 on NVIDIA H200)")]
    block = results_block(list(rows.values()), cpu, {"fedshift": "a scale"})
    assert f"runs not computed yet: 5 of 12 runs computed{both} |" in block
    judged = pd.DataFrame({"claim": ["C2 Fed-EF is the best baseline at the lowest bit width"],
                           "verdict": ["reproduced"], "measured": ["fedef 82.6, fedavg 78.1"], "paper_value": ["-"]})
    c2_row = next(r for r in headline_results({"fedshift": params}, {"fedshift": judged}, [status], cpu)
                  if r.claim_id == "C2")
    assert results_block([c2_row], cpu, {"fedshift": "a scale"}).count(f"reproduced: fedef 82.6, fedavg 78.1{both} |") == 1


NOTEBOOKS = sorted(p.stem for p in (ROOT / "notebooks").glob("*.py"))


def gpu_plan() -> tuple[dict, dict]:
    params = {name: notebook_parameters(name, "gpu") for name in NOTEBOOKS}
    return params, {name: notebook_specs(name, params[name]) for name in NOTEBOOKS}


def committed_cpu_record() -> CpuVerdicts:
    """The committed cpu record as `reproduce --from-ledger` reads it ("to be rebuilt" while it predates the rules)."""
    return read_current(ROOT / "evidence" / "cpu" / "verdicts.csv", "evidence/cpu/verdicts.csv")


@pytest.fixture(scope="module")
def committed_ledger() -> Iterator[tuple[list, str | None]]:
    """The committed ledger's entries, read once, and a data root for their datasets (fabricated once where this
    machine lacks them)."""
    entries = Ledger(ROOT / "evidence" / "gpu").entries()
    with fabricated_if_missing({e.spec.dataset for e in entries}) as root:
        yield entries, root


@pytest.fixture(scope="module")
def judged_ledger(committed_ledger) -> tuple[dict, dict, list, dict]:
    """The committed ledger's headline claims judged once, for the tests that compare committed files with them:
    (the gpu profile's parameters, its grids, the ledger's entries, the judged tables)."""
    params, grids = gpu_plan()
    entries, root = committed_ledger
    return params, grids, entries, ledger_verdicts(params, grids, entries, root)


def test_the_committed_expected_results_are_what_the_ledger_gives(judged_ledger):
    """The committed file is what the committed ledger and the committed cpu record give today: verdicts first
    (a summary line, then per notebook), the ledger's bookkeeping after."""
    _, grids, entries, tables = judged_ledger
    expected = (ROOT / "notebooks" / "expected-results-gpu.md").read_text()
    verdicts = verdicts_markdown(tables, "gpu", committed_cpu_record())
    assert expected == expected_results(grids, entries, "evidence/gpu", verdicts=verdicts), \
        "rebuild it: make ledger-expected"
    assert expected.index("**Summary**") < expected.index("### fedaq") < expected.index("## What the ledger holds")


def test_the_results_table_of_the_readme_and_docs_is_what_the_evidence_gives(judged_ledger):
    """README.md's and docs/results.md's results table, regenerated from the committed cpu record and ledger, is
    the committed one."""
    params, grids, entries, tables = judged_ledger
    cpu = committed_cpu_record()
    rows = headline_results(params, tables, headline_status(grids, held_devices(entries)), cpu)
    assert len(rows) == sum(len(paper(name).headline_claims()) for name in tables)
    for page, text in results_pages(ROOT, rows, cpu, scales({n: params[n] for n in tables}, cpu)).items():
        assert page.read_text() == text, f"{page.relative_to(ROOT)}: rebuild its results table: make ledger-expected"


def test_headline_claims_from_the_ledger_name_the_runs_they_lack():
    """FedAQ's C1-C3 read the ledger's six joint-mode runs: without one of them, the claims that read it are not
    testable, naming it; runs of a paper none of which the ledger holds say so."""
    params, grids = gpu_plan()
    assert [c.id for c in paper("fedaq").headline_claims()] == ["C1", "C2", "C5", "C6", "C3", "C7", "C7b"]
    ledger = Ledger(ROOT / "evidence" / "gpu")
    records = ledger.records(grids["fedaq"])
    lost = records["rounds"]["run"].iloc[0]
    lost_labels = records["rounds"].loc[records["rounds"]["run"] == lost, ["scheme", "seed"]].iloc[0]
    partial = {name: table[table["run"] != lost] for name, table in records.items()}
    with fabricated_if_missing({"fashion_mnist"}) as root:
        table = judged_headlines("fedaq", params["fedaq"], partial, root)
        table = table.set_index(table["claim"].str.split().str[0])
        held = {entry.spec for entry in ledger.entries()}
        lacking = [spec for spec in grids["taco"] if spec not in held]  # TACO's runs but the ledger's few
        assert judged_headlines("taco", params["taco"], ledger.records(lacking), root) == \
            "the ledger holds none of its runs"
    for claim in ("C2", "C3"):
        assert table.loc[claim, "verdict"].startswith("not testable"), table.loc[claim]
        assert f"scheme={lost_labels['scheme']}" in table.loc[claim, "evidence"]


HELD_PARTS = [(name, rank, part) for name in NOTEBOOKS for rank, part in headlines_and_parts(paper(name).headlines)]


@pytest.mark.parametrize("notebook, rank, part", HELD_PARTS, ids=[f"{n} {part.claims}" for n, _, part in HELD_PARTS])
def test_each_headline_and_part_the_ledger_holds_selects_exactly_the_runs_its_claims_read(
        judged_ledger, committed_ledger, notebook, rank, part):
    """On the committed ledger's own runs, for every paper: where the ledger holds the runs of a headline (or of a part
    it orders first) and of the headlines before it, the judge decides that they are exactly what its claims read
    (`assert_selects_exactly`); the per-paper claims tests check every headline on fabricated records."""
    params, grids, entries, _ = judged_ledger
    declared = paper(notebook).headlines
    held_specs = {entry.spec for entry in entries}
    runs, _ = runs_of_part(declared, rank, part, grids[notebook])
    if not set(runs) <= held_specs:
        pytest.skip(f"the ledger lacks {len(set(runs) - held_specs)} of its {len(runs)} runs")
    records = held_records(entries, runs)
    run_of = {entry.spec: entry.key for entry in entries}  # the key each run's records go by (`held_records`)
    root = committed_ledger[1]

    def verdicts(held) -> list[str]:
        keys = {run_of[spec] for spec in held}
        table = judged_headlines(notebook, params[notebook],
                                 {name: frame[frame["run"].isin(keys)] for name, frame in records.items()}, root)
        ids = table["claim"].map(lambda text: claim_id(notebook, text))
        return list(table.set_index(ids).loc[sorted(part.claim_ids()), "verdict"])

    assert_selects_exactly(declared, rank, part, grids[notebook], verdicts)


def test_the_gpu_profiles_ledger_fits_its_budget(filled, tmp_path):
    """Entry bytes = overhead + bytes per record row, measured on a 2-round and a 6-round run; extrapolated to the
    gpu profile's rounds and client rows. Tables of hooks and collectors (per-layer diagnostics) are not in this
    extrapolation: a real piece's entries measure them."""
    spec2 = tiny_ranked()[0].spec
    six = run_piece(prioritized({"quickstart": experiments(TINY.__class__(**{**vars(TINY), "rounds": 6}))})[:1],
                    Ledger(tmp_path / "ledger"), RunStore(tmp_path / "runs"), 600, rate=1e3, out=io.StringIO())
    entry2 = next(e for e in Ledger(filled[0] / "ledger").entries() if e.spec == spec2)
    entry6 = read_entry_archive(six.added[0][1])

    def rows(entry) -> int:
        return sum(len(frame) for frame in entry.records.values())

    per_row = (entry6.path.stat().st_size - entry2.path.stat().st_size) / (rows(entry6) - rows(entry2))
    overhead = entry2.path.stat().st_size - per_row * rows(entry2)
    assert 0 < per_row < 200 and overhead > 0
    total = 0.0
    for name in declared():
        for spec in notebook_specs(name, notebook_parameters(name, "gpu")):
            per_round = dict(spec.sampler.args).get("clients", 1.0) if spec.sampler else 1.0
            clients = per_round if isinstance(per_round, int) else per_round * spec.split.args["num_clients"]
            total += overhead + per_row * spec.rounds * (1 + clients)
    assert total < BUDGET_BYTES


@pytest.fixture(scope="module")
def reproduce():
    return load_reproduce()


@pytest.mark.parametrize("budget, seconds", [("10m", 600), ("90s", 90), ("1.5h", 5400), ("0.5m", 30)])
def test_reproduce_reads_budgets(reproduce, budget, seconds):
    assert duration(budget) == seconds


@pytest.mark.parametrize("budget, said", [
    ("-5m", "'-5m' is not a positive, finite duration"), ("0m", "'0m' is not a positive, finite duration"),
    ("0", "'0' is not a positive, finite duration"), ("600", "'600' has no unit"),
    ("10x", "'10x' is not a duration"), ("10min", "'10min' is not a duration"), ("ten", "'ten' is not a duration"),
    ("nan", "'nan' is not a positive, finite duration"), ("nanm", "'nanm' is not a positive, finite duration"),
    ("inf", "'inf' is not a positive, finite duration"), ("-infs", "'-infs' is not a positive, finite duration"),
    ("1e308h", "'1e308h' is not a positive, finite duration"), ("", "'' is not a duration")])
def test_reproduce_refuses_every_other_budget_in_one_line(reproduce, capsys, tmp_path, budget, said):
    code = reproduce.main(["--profile", "gpu", "--piece", "--budget", budget, "--ledger", str(tmp_path / "ledger")])
    err = capsys.readouterr().err
    assert code == 2 and err == f"reproduce: error: --budget {said}; give a positive number and a unit: 600s, 10m or " \
                                "1.5h\n"
    assert not (tmp_path / "ledger").exists()


def test_reproduce_refuses_a_piece_without_a_budget_or_beside_from_ledger(reproduce, capsys):
    assert reproduce.main(["--profile", "gpu", "--piece"]) == 2
    assert "--piece needs --budget" in capsys.readouterr().err
    assert reproduce.main(["--profile", "gpu", "--from-ledger", "--piece", "--budget", "1m"]) == 2


def test_reproduce_from_a_damaged_ledger_names_the_file(reproduce, filled, tmp_path, capsys):
    ledger = copy_ledger(filled, tmp_path / "ledger")
    ledger.paths()[0].write_bytes(b"not an archive")
    code = reproduce.main(["--profile", "gpu", "--only", "quickstart", "--from-ledger", "--ledger", str(ledger.root),
                           "--results", str(tmp_path / "results")])
    assert code == 2 and ledger.paths()[0].name in capsys.readouterr().err


def test_from_a_partial_ledger_the_headlines_are_judged_without_the_datasets_on_labelled_stand_ins(reproduce, tmp_path,
                                                                                                capsys):
    """A ledger of FedShift's two Theorem 1 runs (digits) alone: the judge of its headlines reads the class count of
    Fashion-MNIST, a dataset of the plan that none of these entries reads; where this machine lacks it, it is
    fabricated, and the output and REPORT.md say so."""
    ledger = tmp_path / "ledger"
    ledger.mkdir()
    for entry in Ledger(ROOT / "evidence" / "gpu").entries():
        if entry.spec.dataset == "digits":
            shutil.copy(entry.path, ledger)
    assert Ledger(ledger).reindex()[1] == []  # the user vouches for the two copied entries
    code = reproduce.main(["--profile", "gpu", "--only", "fedshift", "--from-ledger", "--headlines-only", "--ledger",
                           str(ledger), "--results", str(tmp_path / "results")])
    captured = capsys.readouterr()
    assert code == 0, captured.err
    assert "The ledger holds 2 entries" in captured.out and "### fedshift\n" in captured.out
    label = "Datasets this machine lacks (fashion_mnist) were fabricated as stand-ins (random files in their formats)"
    lacking = unloadable({"fashion_mnist"}) == ["fashion_mnist"]
    assert (label in captured.out) == lacking and (label in (tmp_path / "results" / "REPORT.md").read_text()) == lacking


def test_rates_prefer_the_same_combination_then_the_paper_then_the_stated_rate():
    fedavg, scaffold, fedprox = (next(s for s in experiments(TINY) if s.get("labels")["algorithm"] == a)
                                 for a in ("FedAvg", "SCAFFOLD", "FedProx"))
    seen = [Observation(combination(fedavg), "quickstart", "cpu", 600, 2.0),  # 300/s
            Observation(combination(scaffold), "quickstart", "cpu", 100, 1.0),  # 100/s
            Observation(combination(fedavg), "quickstart", "cuda", 9_000, 1.0)]  # another device: never mixed in
    rates = Rates(50.0, seen)
    assert rates.rate(fedavg) == (300.0, "measured on 1 run(s) of this combination (cpu)")
    assert rates.rate(fedprox) == (700 / 3, "measured on 2 run(s) of experiment quickstart (cpu)")
    assert rates.rate(fedavg, "cuda")[0] == 9_000.0
    assert rates.rate(fedprox.with_(experiment="taco")) == (50.0, "given (--rate)")
    assert rates.measured() == {"cpu": 700 / 3, "cuda": 9_000.0}
    assert Rates(None).rate(fedavg) is None
    with pytest.raises(ValueError, match="--rate"):
        Rates(0.0)


def test_the_dry_runs_priority_list_gives_minutes_only_where_a_rate_exists():
    specs = experiments(TINY)
    report = NotebookReport("quickstart", steps_of={spec: 600 for spec in specs})
    fedavg = specs[0]
    out = io.StringIO()
    print_priority([report], Rates(None, [Observation(combination(fedavg), "quickstart", "cpu", 100, 1.0)]), out)
    lines = out.getvalue().splitlines()
    assert lines[0].startswith("== priority: 9 of 9 runs back headline claims")
    assert lines[1].endswith("algorithm=FedAvg seed=0: 600 local SGD steps, 0.1 min at 100 client-steps/s "
                             "(measured on 1 run(s) of this combination (cpu))")  # 600 steps / 100 per s = 6 s
    assert "algorithm=SCAFFOLD seed=0: 600 local SGD steps, 0.1 min" in lines[2]  # the paper's rate: 100/s
    out = io.StringIO()
    print_priority([report], Rates(None), out)
    assert "minutes unknown" in out.getvalue() and "9 headline run(s) without a measured rate" in out.getvalue()


@pytest.mark.skipif(torch.cuda.is_available(), reason="on a GPU machine both runs are GPU runs")
def test_no_run_starts_once_the_budget_is_spent_even_without_a_rate(tmp_path):
    """A run of which no rate is known is started and watched, but not with less than `MIN_START_S` left: on an H200
    lease a piece past its budget started (and at once stopped) one unmeasured run after another for over 100 s."""
    out = io.StringIO()
    report = run_piece(tiny_ranked(), Ledger(tmp_path / "ledger"), RunStore(tmp_path / "runs"),
                       piece_module.MIN_START_S - 1, out=out)
    assert report.added == [] and len(report.skipped) == 9
    assert out.getvalue().count("not started (budget spent)") == 9 and "started, its pace" not in out.getvalue()


def test_a_run_pinned_to_a_gpu_waits_for_one_and_an_auto_run_computes_here(tmp_path):
    ranked = tiny_ranked(TINY.__class__(**{**vars(TINY), "device": "cuda"}))
    out = io.StringIO()
    report = run_piece(ranked, Ledger(tmp_path / "ledger"), RunStore(tmp_path / "runs"), 600, rate=1e3, out=out)
    assert report.added == []
    assert [why for _, why in report.skipped] == ["needs a GPU (device cuda); this machine has none"] * 9
    assert "not started: quickstart [Q1] algorithm=FedAvg seed=0: needs a GPU (device cuda)" in out.getvalue()
    auto = tiny_ranked(TINY.__class__(**{**vars(TINY), "device": "auto"}))[:1]
    report = run_piece(auto, Ledger(tmp_path / "ledger"), RunStore(tmp_path / "runs"), 600, rate=1e3, out=out)
    assert len(report.added) == 1 and report.skipped == []
    assert Ledger(tmp_path / "ledger").entries()[0].provenance["device"] == "cpu"
    assert f"[piece] starts quickstart [Q1] algorithm=FedAvg seed=0 ({TINY.rounds} rounds)" in out.getvalue()


def test_a_piece_leaves_out_the_runs_of_datasets_this_machine_cannot_load(reproduce, tmp_path, capsys):
    """The gpu profile's Fashion-MNIST runs are left out where the dataset is not installed (as here) and the
    runs on bundled data are still planned: a CPU piece computes FedShift's Theorem 1 runs (digits, device cpu)."""
    if not missing_datasets(plan_runs(["quickstart"], {"quickstart": notebook_parameters(
            "quickstart", "gpu")}, {})):
        pytest.skip("Fashion-MNIST is installed here")
    code = reproduce.main(["--profile", "gpu", "--only", "quickstart", "--piece", "--budget", "1m", "--ledger",
                           str(tmp_path / "ledger"), "--results", str(tmp_path / "results")])
    captured = capsys.readouterr()
    assert code == 0 and "leaves out the runs of the datasets this machine cannot load" in captured.err
    assert "[piece] 0 runs in the plan" in captured.out


def test_a_run_is_stopped_only_when_its_fastest_pace_cannot_finish_and_not_in_its_grace():
    """100 rounds, checkpoints every 2, 600 s budget (grace: its first 60 s). A busy moment (2 rounds in 50 s: 96
    rounds left at 25 s would take 2,400 s) inside the grace does not stop the run; the fast rounds after it set its
    pace. A run whose every checkpoint is slow is stopped once the grace has passed, naming its pace."""
    readings = iter([0.0, 1.0, 51.0, *(51.0 + 0.1 * k for k in range(1, 50))])
    watch = piece_module.Watch(100, 600.0, readings.__next__)
    for done in range(2, 100, 2):
        watch(done)
    assert watch.fastest == pytest.approx(0.05)
    slow = piece_module.Watch(100, 600.0, itertools.count(0.0, 30.0).__next__)  # 15 s a round
    slow(2)  # at 30 s: the timing starts
    with pytest.raises(piece_module.Stop, match=r"after round 4 of 100, the rounds left take at least 24.0 min at its "
                                                r"fastest pace so far \(15.00 s a round\), 9.0 min left"):
        slow(4)  # at 60 s: the grace has passed


def test_a_watched_run_says_at_each_tenth_its_pace_and_the_time_to_its_end():
    """100 rounds, a checkpoint every 2 rounds, 10 s apart: 5 s a round. The first checkpoint only starts the timing;
    then one line at the first checkpoint past each tenth (round 10: 8 rounds in 40 s since round 2; 90 rounds left).
    A run resumed after round 76 first says so at round 80, timed from its first checkpoint (78)."""
    lines: list[str] = []
    watch = piece_module.Watch(100, 1e9, itertools.count(0.0, 10.0).__next__, report=lines.append)
    for done in range(2, 100, 2):
        watch(done)
    assert len(lines) == 9
    assert lines[0] == "round 10 of 100: 5.0 s a round since round 2, about 7.5 min to its end at that pace"
    assert lines[-1] == "round 90 of 100: 5.0 s a round since round 80, about 50.0 s to its end at that pace"
    resumed: list[str] = []
    watch = piece_module.Watch(100, 1e9, itertools.count(0.0, 10.0).__next__, report=resumed.append)
    for done in (78, 80):
        watch(done)
    assert resumed == ["round 80 of 100: 5.0 s a round since round 78, about 100.0 s to its end at that pace"]
    assert piece_module.span(3 * 3600) == "3.0 h" and piece_module.span(7199) == "120.0 min"


def at_checkpoints(monkeypatch, seconds) -> Callable[[], float]:
    """A clock that stands still but for `seconds` (one value per watched checkpoint, then 0.1 s each)."""
    now = [0.0]
    steps = iter(seconds)
    real = piece_module.Watch.__call__

    def watched(self, done: int) -> None:
        now[0] += next(steps, 0.1)
        real(self, done)

    monkeypatch.setattr(piece_module.Watch, "__call__", watched)
    return lambda: now[0]


def test_a_busy_moment_when_a_run_starts_does_not_block_the_piece(tmp_path, monkeypatch):
    """No rate known: the run starts, and a busy moment at its first checkpoints (a timing of them alone would
    estimate it at over 40 min of a 10 min budget) does not stop it."""
    ranked = tiny_ranked(TINY.__class__(**{**vars(TINY), "rounds": 100}))[:1]
    clock = at_checkpoints(monkeypatch, [1.0, 50.0])
    out = io.StringIO()
    report = run_piece(ranked, Ledger(tmp_path / "ledger"), RunStore(tmp_path / "runs"), 600, clock=clock, out=out)
    assert [r.spec for r, *_ in report.added] == [ranked[0].spec] and report.skipped == [], out.getvalue()


def test_a_run_that_cannot_finish_is_stopped_keeping_its_checkpoint_and_a_later_piece_resumes_it(tmp_path,
                                                                                               monkeypatch):
    ranked = tiny_ranked(TINY.__class__(**{**vars(TINY), "rounds": 100}))[:1]
    ledger, store = Ledger(tmp_path / "ledger"), RunStore(tmp_path / "runs")
    out = io.StringIO()
    report = run_piece(ranked, ledger, store, 600, clock=at_checkpoints(monkeypatch, itertools.repeat(30.0)), out=out)
    assert report.added == [] and [r.spec for r, _ in report.skipped] == [ranked[0].spec]
    assert "[piece] stopped: quickstart [Q1] algorithm=FedAvg seed=0: after round 4 of 100" in out.getvalue()
    checkpoint = store.checkpoint(KEYS(ranked[0].spec), 1).path
    assert checkpoint.exists() and ledger.paths() == []
    monkeypatch.undo()
    resumed = []
    real = piece_module.Watch.__call__
    monkeypatch.setattr(piece_module.Watch, "__call__", lambda self, done: resumed.append(done) or real(self, done))
    out = io.StringIO()
    again = run_piece(ranked, ledger, store, 600, out=out)
    assert len(again.added) == 1 and resumed[0] == 6  # from the checkpoint at round 4, not from the start
    assert "[piece] resumes quickstart [Q1] algorithm=FedAvg seed=0 from its checkpoint after round 4 of 100" \
        in out.getvalue()
    assert not checkpoint.exists()


class Hostile:
    """A pickle that would write a file if it were ever unpickled without weights_only."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (self.marker, "executed"))


def test_the_checkpoints_command_says_how_far_each_stopped_run_got_and_names_what_it_cannot_read(tmp_path,
                                                                                                 monkeypatch, capsys):
    """A piece stopped at round 40 of 100 (`--long-runs continue`, its budget spent) leaves a checkpoint the
    command reads without resuming it; a truncated file, a file that names no run and a hostile pickle are each named
    with why, and nothing in them is executed; a checkpoint being written (a temporary) is not listed."""
    from fedlib.ledger import cli

    ranked = tiny_ranked(TINY.__class__(**{**vars(TINY), "rounds": 100}))[:1]
    store = RunStore(tmp_path / "results" / "runs")
    now = [0.0]
    real = piece_module.Watch.__call__
    monkeypatch.setattr(piece_module.Watch, "__call__",
                        lambda self, done: (now.__setitem__(0, now[0] + 30.0), real(self, done)))
    run_piece(ranked, Ledger(tmp_path / "ledger"), store, 600, long_runs="continue", clock=lambda: now[0],
              out=io.StringIO())
    assert cli.main(["checkpoints", "--results", str(tmp_path / "results")]) == 0
    shown = capsys.readouterr().out
    assert "1 checkpoint(s)" in shown
    assert f"quickstart {run_name(ranked[0].spec)}: round 40 of 100, written " in shown
    held = store.checkpoint(KEYS(ranked[0].spec), 1).path
    assert held.name in shown and piece_module.checkpointed_rounds(store, KEYS(ranked[0].spec)) == 40

    folder = held.parent
    (folder / "truncated.pt").write_bytes(held.read_bytes()[: held.stat().st_size // 2])
    torch.save({"state": {}}, folder / "nameless.pt")
    marker = tmp_path / "executed.txt"
    torch.save({"spec": "{}", "state": Hostile(marker)}, folder / "hostile.pt")
    (folder / ".writing-vm-1-abc.pt").write_bytes(b"half written")
    assert cli.main(["checkpoints", "--results", str(tmp_path / "results")]) == 1
    shown = capsys.readouterr().out
    assert "4 checkpoint(s)" in shown and ".writing-" not in shown
    assert "truncated.pt: cannot be read: " in shown
    assert "nameless.pt: cannot be read: not a checkpoint that names its run" in shown
    assert "hostile.pt: cannot be read: " in shown and not marker.exists()
    assert read_checkpointed(folder / "finished-meanwhile.pt", 0.0) is None  # its run ended since the listing
    assert cli.main(["checkpoints", "--results", str(tmp_path / "nothing")]) == 2
    assert "holds no run store (no runs/ folder)" in capsys.readouterr().err


def test_with_long_runs_continue_a_run_longer_than_each_piece_trains_to_each_budgets_end_and_finishes(tmp_path,
                                                                                                    monkeypatch):
    """A 100-round run at 30 s a checkpoint (every 2 rounds: 1,500 s) under pieces of 600 s. By default it is
    stopped once its pace shows it cannot finish (the test above); with "continue" it trains until the budget is
    spent (to round 40, the first checkpoint at or past 600 s), and the third piece on the same store finishes it,
    each piece resuming where the last stopped."""
    ranked = tiny_ranked(TINY.__class__(**{**vars(TINY), "rounds": 100}))[:1]
    ledger, store = Ledger(tmp_path / "ledger"), RunStore(tmp_path / "runs")
    pieces, stops = [], []
    real = piece_module.Watch.__call__

    def at_round(self, done):  # each checkpoint 30 s later; the rounds each piece reached
        pieces[-1].append(done)
        real(self, done)

    for _ in range(3):
        now, pieces = [0.0], [*pieces, []]
        monkeypatch.setattr(piece_module.Watch, "__call__", lambda self, done: (now.__setitem__(0, now[0] + 30.0),
                                                                                  at_round(self, done)))
        out = io.StringIO()
        report = run_piece(ranked, ledger, store, 600, long_runs="continue", clock=lambda: now[0], out=out)
        stops.append(out.getvalue())
    # (the last checkpoint watched is round 98's: the run then ends)
    assert [p[-1] for p in pieces] == [40, 80, 98] and pieces[1][0] == 42 and pieces[2][0] == 82
    assert "after round 40 of 100, the budget is spent; its checkpoint stays in the run store, where the next piece " \
           "resumes it" in stops[0]
    assert len(report.added) == 1 and len(ledger.paths()) == 1
    assert "from its checkpoint after round 40 of 100" in stops[1] and "after round 80 of 100" in stops[2]


def test_long_runs_is_one_of_two_words_and_for_a_piece(reproduce, tmp_path, capsys):
    with pytest.raises(ValueError, match="long_runs must be one of"):
        run_piece([], Ledger(tmp_path / "ledger"), RunStore(tmp_path / "runs"), 60, long_runs="yes")
    assert reproduce.main(["--profile", "quick", "--only", "quickstart", "--long-runs", "continue"]) == 2
    assert "--long-runs is for --piece" in capsys.readouterr().err


def test_the_commit_a_copy_is_sent_with_wins_over_the_git_it_carries(monkeypatch):
    """A GPU machine gets the tree and a .git that can be older than it (seen: an H200 lease recorded the session's
    first commit, 'with uncommitted changes'): the commit the sender names is the one recorded."""
    monkeypatch.delenv(COMMIT_VAR, raising=False)
    here, _ = git_commit()
    assert len(here) == 40
    monkeypatch.setenv(COMMIT_VAR, "f" * 40)
    assert git_commit() == ("f" * 40, None)


def test_a_pieces_own_ledger_files_are_not_uncommitted_changes_but_code_is(tmp_path, monkeypatch):
    """A piece in a checkout rewrites the ledger's tracked index with each entry: the entries after its first must
    not read "uncommitted changes" for that (51 CPU entries did, 2026-11-28/30), while a changed code file must."""
    import subprocess

    repo = tmp_path / "repo"
    (repo / "evidence" / "gpu").mkdir(parents=True)
    (repo / "evidence" / "gpu" / "INDEX.tsv").write_text("archive\n")
    (repo / "code.py").write_text("x = 1\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo)]
    for args in (["init", "-q"], ["add", "-A"], ["commit", "-qm", "one"]):
        subprocess.run(git + args, check=True)
    monkeypatch.delenv(COMMIT_VAR, raising=False)
    monkeypatch.setattr("fedlib.ledger.entries.checkout", lambda: repo)
    ledger = repo / "evidence" / "gpu"
    assert git_commit(ledger)[1] is False
    (ledger / "INDEX.tsv").write_text("archive\nanother\n")
    assert git_commit(ledger)[1] is False and git_commit()[1] is True
    assert git_commit(tmp_path / "elsewhere")[1] is True  # a ledger outside the checkout excludes nothing
    (repo / "code.py").write_text("x = 2\n")
    assert git_commit(ledger)[1] is True


def test_a_paper_without_a_builder_is_said_not_judged():
    """A paper declared without `bundle_from_runs` gets one line saying so, not a verdict."""
    from fedlib.paper import PAPERS

    records = Ledger(ROOT / "evidence" / "gpu").records(experiments(TINY))
    with PAPERS.override("quickstart", replace(paper("quickstart"), bundle_from_runs=None)):
        assert judged_headlines("quickstart", TINY, records, None).startswith(
            "paper 'quickstart' builds no bundle from runs alone yet")
        assert "### quickstart\n\nNot judged from the ledger: paper 'quickstart' builds no bundle" in \
            verdicts_markdown({"quickstart": judged_headlines("quickstart", TINY, records, None)}, "gpu",
                              committed_cpu_record())


# ---- the notebooks rendered from the ledger (`reproduce --from-ledger`) -------------------------------------------
TINY_OVERRIDES = ["-p", "rounds", "2", "-p", "num_clients", "4", "-p", "clients_per_round", "2", "-p", "batch_size",
                  "64", "-p", "seeds", "[0, 1, 2]"]  # the quick profile made TINY


def test_a_notebook_renders_from_the_ledger_computing_nothing_and_names_what_it_lacks(reproduce, filled, tmp_path,
                                                                                     capsys):
    """The piece -> ledger -> render -> claims flow: without FedProx's three runs the notebook still renders, its
    curves and claims from the six runs held, Q2 naming what it lacks, a stale entry said so; no run is computed
    or stored."""
    ledger = copy_ledger(filled, tmp_path / "ledger")
    fedprox = [p for p, e in zip(ledger.paths(), ledger.entries()) if e.spec.get("labels")["algorithm"] == "FedProx"]
    assert len(fedprox) == 3
    for path in fedprox:
        path.unlink()
    ledger.reindex()
    stale = ledger.entries()[0]
    set_provenance(stale.path, commit="0123456789abcdef", code_version="0000000000000000",
                   definitions=lambda d: {**d, "fedlib.engine.federation.run_federation": "edited"})
    ledger.reindex()
    results = tmp_path / "results"
    code = reproduce.main(["--profile", "quick", "--only", "quickstart", "--from-ledger", "--ledger", str(ledger.root),
                           "--results", str(results), *TINY_OVERRIDES])
    assert code == 0, capsys.readouterr().err
    assert not (results / "runs").exists()  # nothing computed, nothing stored
    claims = pd.read_csv(results / "quick" / "quickstart" / "claims.csv").set_index("claim")
    q1, q2 = (claims.loc[[c for c in claims.index if c.startswith(q)][0]] for q in ("Q1", "Q2"))
    assert not q1["verdict"].startswith("not testable") and "not computed" not in q1["evidence"]
    assert q2["verdict"].startswith("not testable") and "3 of 6 runs not computed yet: algorithm=FedProx" in q2["evidence"]
    rendered = (results / "quick" / "quickstart" / "quickstart.ipynb").read_text()
    assert "6 from the ledger" in rendered and "3 not in it (none computed)" in rendered
    assert "1 ledger entry was computed by code that has changed since" in rendered
    assert f"{run_name(stale.spec)} ({stale.path.name}): computed at commit 0123456789; changed since: " \
           "fedlib.engine.federation.run_federation" in rendered
    report = (results / "REPORT.md").read_text()
    assert "--from-ledger" in report and "## quickstart" in report and "# The ledger" in report
    assert "| quickstart | Q2 | 3 of 6 | not testable: 3 of 6 runs computed" in report
    text = rendered_claims(results / "quick", ["quickstart"], ledger, "quick")
    assert ledger.digest() in text and "Q2" in text and "runs not computed yet: algorithm=FedProx" in text


def test_from_the_ledger_a_notebook_without_claims_or_data_is_refused_before_anything_renders(reproduce, filled,
                                                                                             tmp_path, capsys):
    ledger = copy_ledger(filled, tmp_path / "ledger")
    common = ["--from-ledger", "--ledger", str(ledger.root), "--results", str(tmp_path / "results")]
    assert reproduce.main(["--profile", "quick", "--only", "flower", *common]) == 2
    assert "flower declares no claims" in capsys.readouterr().err
    if missing_datasets(plan_runs(["quickstart"], {"quickstart": notebook_parameters(
            "quickstart", "gpu")}, {})):
        assert reproduce.main(["--profile", "gpu", "--only", "quickstart", *common]) == 2
        err = capsys.readouterr().err
        assert "fashion_mnist (read by quickstart)" in err and "--headlines-only" in err
    assert not (tmp_path / "results" / "quick").exists() and not (tmp_path / "results" / "gpu").exists()


def test_a_ledger_digest_changes_with_any_entry(filled, tmp_path):
    ledger = copy_ledger(filled, tmp_path / "ledger")
    before = ledger.digest()
    assert Ledger(filled[0] / "ledger").digest() == before  # the same archives in another folder
    first = ledger.paths()[0]
    first.write_bytes(first.read_bytes() + b"\0")
    changed = ledger.digest()
    ledger.paths()[1].unlink()
    assert len({before, changed, ledger.digest()}) == 3


def test_the_committed_rendered_claims_are_of_todays_ledger_and_agree_with_its_headline_judge(judged_ledger):
    """notebooks/expected-claims-gpu.md was rendered from the committed ledger (its digest), and every headline
    claim there has the verdict the ledger's judge gives it today (the notebook's route and the judge's agree)."""
    text = (ROOT / "notebooks" / "expected-claims-gpu.md").read_text()
    ledger = Ledger(ROOT / "evidence" / "gpu")
    assert f"{LEDGER_DIGEST_LABEL} `{ledger.digest()}`" in text, \
        "rebuild it: python scripts/reproduce.py --profile gpu --from-ledger --write-expected"
    _, _, _, tables = judged_ledger
    checked = 0
    for table in (t for t in tables.values() if not isinstance(t, str)):
        for row in table.itertuples():
            assert f"| {row.verdict} |" in next(line for line in text.splitlines()
                                                 if line.startswith(f"| {row.claim} |")), row.claim
            checked += 1
    assert checked > 10


def test_a_headline_read_from_runs_of_two_devices_names_both():
    assert devices_note(["NVIDIA H200", "CPU x86_64 (2 cores)", "NVIDIA H200"]) == \
        " (1 on CPU x86_64 (2 cores), 2 on NVIDIA H200)"
    assert devices_note(["NVIDIA H200"] * 3) == "" and devices_note([]) == ""


def test_a_piece_builds_each_run_once(tmp_path, monkeypatch):
    """Deciding whether a cell's seeds batch, estimating a unit and running it share one build of each run
    (`fedlib.runs.build.Plans`): counted in every fedlib module that calls `build_run` (keying's own build, cached
    once per process in `fedlib.runs.fingerprint`, aside), over the tiny profile's cells alone and batched."""
    import sys

    from fedlib.runs.build import build_run

    built: list = []

    def counting(spec, root=None):
        built.append(spec)
        return build_run(spec, root)

    for name, module in list(sys.modules.items()):
        if name.startswith("fedlib.") and name != "fedlib.runs.fingerprint" \
                and getattr(module, "build_run", None) is build_run:
            monkeypatch.setattr(module, "build_run", counting)
    for batches in (True, False):
        built.clear()
        ranked = tiny_ranked()
        report = run_piece(ranked, Ledger(tmp_path / f"ledger-{batches}"), RunStore(tmp_path / f"runs-{batches}"), 600,
                           seed_batches=batches, out=io.StringIO())
        assert len(report.added) == len(ranked) == 9
        assert sorted(map(run_name, built)) == sorted(run_name(r.spec) for r in ranked), batches
