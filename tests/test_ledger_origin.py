"""Evidence that proves its origin: every ledger archive against its line in the committed index (`INDEX.tsv`).

Each attack found by the audit is refused naming the archive: records edited with the manifest re-hashed, a
provenance claiming another device, a second entry of one run under another data fingerprint, an archive the index
does not list, an index line whose archive is gone. Two writers adding at once keep the index whole; the committed
ledger verifies against the committed index; its corrections are recorded beside it."""
from __future__ import annotations

import io
import json
import shutil
import threading
from pathlib import Path

import pandas as pd
import pytest
from test_ledger import rewrite, set_provenance, tiny_ranked

from fedlib.ledger import cli
from fedlib.ledger import entries as entries_module
from fedlib.ledger.entries import (MANIFEST, PROVENANCE, Ledger, LedgerError, index_line, provenance,
                                   read_entry_archive)
from fedlib.ledger.index import HEADER, INDEX, read_index, write_index
from fedlib.ledger.piece import run_piece
from fedlib.runs import Keys, RunStore
from fedlib.runs.archive import export_entries, unpack
from fedlib.runs.entry import describe, file_sha256, read_manifest
from fedlib.runs.spec import KeyedRun, RunSpec

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = ROOT / "evidence" / "gpu"


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A ledger of three tiny runs written by a piece (which writes the index), and its run store."""
    tmp = tmp_path_factory.mktemp("small")
    report = run_piece(tiny_ranked()[:3], Ledger(tmp / "ledger"), RunStore(tmp / "runs"), 600, rate=1e3,
                       out=io.StringIO())
    assert len(report.added) == 3
    return tmp


def copy_of(small, dest: Path) -> Ledger:
    shutil.copytree(small / "ledger", dest)
    return Ledger(dest)


def rehash(folder: Path) -> None:
    """The manifest's size and SHA-256 of every file made to agree with the files as they are now."""
    manifest = read_manifest(folder)
    for name, listed in manifest["files"].items():
        listed.update({k: v for k, v in describe(folder / name).items() if k in ("bytes", "sha256")})
    (folder / MANIFEST).write_text(json.dumps(manifest))


def refused(ledger: Ledger) -> str:
    with pytest.raises(LedgerError) as err:
        ledger.entries()
    return str(err.value)


def test_a_piece_writes_the_index_and_the_ledger_reads_as_proven(small):
    ledger = Ledger(small / "ledger")
    entries, problems = ledger.check()
    assert problems == [] and len(entries) == 3
    assert (small / "ledger" / INDEX).read_text().splitlines()[0] == HEADER
    index = read_index(ledger.root)
    assert set(index) == {p.name for p in ledger.paths()}
    for entry in entries:
        line = index[entry.path.name]
        assert line == index_line(entry, file_sha256(entry.path))
        assert (line.device, line.spec_key, line.experiment) == ("cpu", entry.spec.key(), "quickstart")


def test_records_edited_with_the_manifest_rehashed_are_refused_naming_the_archive(small, tmp_path):
    ledger = copy_of(small, tmp_path / "ledger")
    target = ledger.paths()[1]

    def edit(folder: Path) -> None:
        rounds = pd.read_csv(folder / "rounds.csv")
        rounds.loc[rounds.index[-1], "test_acc"] = 0.999
        rounds.to_csv(folder / "rounds.csv", index=False)
        rehash(folder)

    rewrite(target, edit)
    assert read_entry_archive(target).records["rounds"]["test_acc"].iloc[-1] == 0.999  # the archive alone: intact
    said = refused(ledger)
    assert f"{target}: SHA-256" in said and f"differs from its line in {INDEX}" in said
    assert said.count("\n") == 1  # one line for the ledger, one naming the archive


def test_a_provenance_claiming_another_device_is_refused_naming_the_archive(small, tmp_path):
    ledger = copy_of(small, tmp_path / "ledger")
    first, second = ledger.paths()[:2]
    set_provenance(first, device="cuda", device_name="NVIDIA H200")  # the context says cpu
    set_provenance(second, device_name="NVIDIA H200")  # a cpu run named as a GPU
    index = read_index(ledger.root)
    assert index is not None
    said = refused(ledger)
    assert f"{first}: SHA-256" in said and f"{second}: SHA-256" in said
    changes, problems = ledger.reindex()  # vouching for them is refused too: the index stays as it was
    assert changes == [] and read_index(ledger.root) == index
    assert [str(p) for p in problems] == [
        f"{first}: {PROVENANCE} names device cuda, the manifest's context (what its run was keyed under) cpu: a "
        "provenance that does not describe its run",
        f"{second}: {PROVENANCE} names device cpu and the device NVIDIA H200: a provenance that does not describe its "
        "run"]


def rekeyed(archive: Path, data: str, accuracy: float) -> Path:
    """A forged copy of `archive`'s run as if computed on data `data` (context, key, folder, provenance and name
    agreeing), its accuracy set to `accuracy`, its manifest re-hashed."""
    work = archive.parent / "work"
    work.mkdir()
    unpack(archive, work)
    (folder,) = list(work.iterdir())
    manifest = read_manifest(folder)
    manifest["context"] = json.dumps({**json.loads(manifest["context"]), "data": data}, sort_keys=True)
    manifest["key"] = RunSpec.from_json(json.loads((folder / "spec.json").read_text())).key(manifest["context"])
    (folder / MANIFEST).write_text(json.dumps(manifest))
    prov = json.loads((folder / PROVENANCE).read_text())
    (folder / PROVENANCE).write_text(json.dumps({**prov, "data": data}))
    rounds = pd.read_csv(folder / "rounds.csv")
    rounds["test_acc"] = accuracy
    rounds.to_csv(folder / "rounds.csv", index=False)
    rehash(folder)
    folder = folder.rename(folder.with_name(manifest["key"]))
    forged = archive.with_name(f"{archive.name.removesuffix('.tar.gz').rsplit('-', 1)[0]}-{data}.tar.gz")
    export_entries(RunStore(work), [folder], forged)
    shutil.rmtree(work)
    return forged


def test_a_second_entry_of_one_run_is_refused_naming_both(small, tmp_path):
    ledger = copy_of(small, tmp_path / "ledger")
    genuine = ledger.paths()[0]
    forged = rekeyed(genuine, "ffffffffffffffff", 0.111)
    assert read_entry_archive(forged).spec == read_entry_archive(genuine).spec
    said = refused(ledger)
    assert f"{forged}: not in" in said
    index = read_index(ledger.root)
    forged_line = index_line(read_entry_archive(forged), file_sha256(forged))
    write_index(ledger.root, [*index.values(), forged_line])  # indexed too: still one run twice
    said = refused(ledger)
    assert f"{forged}: holds the same run as {genuine.name} (data ffffffffffffffff and" in said
    _, problems = ledger.reindex()
    assert [p.path for p in problems] == [forged]


def test_a_piece_refuses_to_add_a_second_entry_of_a_run_under_other_data(small, tmp_path):
    ledger = copy_of(small, tmp_path / "ledger")
    store = RunStore(small / "runs")
    genuine = ledger.paths()[0]
    run = Keys()(read_entry_archive(genuine).spec)  # keyed as the piece keyed it
    held = rekeyed(genuine, "ffffffffffffffff", 0.111)  # the ledger holds the run as computed on other data
    genuine.unlink()
    with pytest.raises(LedgerError, match=rf"{genuine.name}: the ledger holds this run already as {held.name}"):
        ledger.add(store, run, provenance(run, None, 1.0, 1))
    assert not genuine.exists() and len(ledger.paths()) == 3


def test_an_archive_the_index_lacks_and_a_line_without_its_archive_are_refused(small, tmp_path):
    ledger = copy_of(small, tmp_path / "ledger")
    first, second, third = ledger.paths()
    index = read_index(ledger.root)
    write_index(ledger.root, [line for name, line in index.items() if name != first.name])
    third.unlink()
    said = refused(ledger)
    assert f"{first}: not in {ledger.root / INDEX}" in said
    assert f"{third}: listed in {INDEX} but missing" in said
    assert second.name not in said
    (ledger.root / INDEX).unlink()  # no index at all: every archive named
    assert all(f"{p}: not in" in refused(ledger) for p in (first, second))


def test_an_index_edited_by_hand_is_refused_naming_what_differs(small, tmp_path):
    ledger = copy_of(small, tmp_path / "ledger")
    path = ledger.paths()[0]
    text = (ledger.root / INDEX).read_text()
    (ledger.root / INDEX).write_text(text.replace(f"{path.name}\tquickstart\t", f"{path.name}\tquickstart\t0", 1))
    assert f"{path}: its spec_key differ from its line in {INDEX}" in refused(ledger)
    (ledger.root / INDEX).write_text(text.replace(HEADER, "archive\tsha256"))
    assert f"{ledger.root / INDEX}: its first line is not the header" in refused(ledger)
    (ledger.root / INDEX).write_text(text + "stray\tline\n")
    assert f"{ledger.root / INDEX}: line 5: 2 columns, not 8" in refused(ledger)


def test_two_writers_adding_at_once_keep_every_line(small, tmp_path, monkeypatch):
    """Each writer reads the index, waits, then writes it: without the folder's lock the later write would drop
    the earlier one's line."""
    ledger, store = Ledger(tmp_path / "ledger"), RunStore(small / "runs")
    ledger.create()
    specs = [read_entry_archive(p).spec for p in Ledger(small / "ledger").paths()]
    runs = [Keys()(spec) for spec in specs]  # keyed as the piece keyed them
    provs = {run.spec: provenance(run, None, 1.0, 1) for run in runs}
    real_read, barrier = entries_module.read_index, threading.Barrier(len(specs), timeout=5)

    def read_then_wait(root):
        found = real_read(root)
        try:
            barrier.wait()  # every writer has read: only a lock keeps them from writing over each other
        except threading.BrokenBarrierError:
            pass  # the others wait on the lock
        return found

    monkeypatch.setattr(entries_module, "read_index", read_then_wait)
    failures: list[BaseException] = []

    def add(run: KeyedRun) -> None:
        try:
            ledger.add(store, run, provs[run.spec])
        except BaseException as err:  # noqa: BLE001 - reported below
            failures.append(err)

    threads = [threading.Thread(target=add, args=(run,)) for run in runs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []
    entries, problems = ledger.check()
    assert problems == [] and sorted(e.spec.key() for e in entries) == sorted(s.key() for s in specs)


def test_the_committed_ledger_proves_its_origin_against_the_committed_index():
    """Fails if a byte of any archive changes, or an archive or a line is added or removed without the other."""
    ledger = Ledger(COMMITTED)
    entries, problems = ledger.check()
    assert problems == [], "\n".join(map(str, problems))
    assert len(entries) == len(ledger.paths()) == len(read_index(COMMITTED)) > 0  # the ledger grows piece by piece
    assert cli.main(["index", "--check", "--ledger", str(COMMITTED)]) == 0


def test_the_cli_indexes_a_ledger_written_without_an_index_and_then_checks_it(small, tmp_path, capsys):
    ledger = copy_of(small, tmp_path / "ledger")
    (ledger.root / INDEX).unlink()  # as a piece of older code leaves it
    assert cli.main(["index", "--check", "--ledger", str(ledger.root)]) == 1
    out = capsys.readouterr().out
    assert out.count(f"not in {ledger.root / INDEX}") == 3 and "0 entries prove their origin, 3 problem(s)" in out
    assert cli.main(["index", "--write", "--ledger", str(ledger.root)]) == 0
    out = capsys.readouterr().out
    assert out.count("added ") == 3 and f"wrote {ledger.root / INDEX}: 3 entries" in out
    assert cli.main(["index", "--check", "--ledger", str(ledger.root)]) == 0
    assert cli.main(["index", "--check", "--ledger", str(tmp_path / "nothing")]) == 2
    assert "is not a folder" in capsys.readouterr().err


def test_every_corrected_entry_is_recorded_in_the_corrections_beside_it():
    """An entry whose provenance was corrected after it was written (`corrected` in provenance.json) is named in
    evidence/gpu/CORRECTIONS.md, and that record names no other."""
    record = (COMMITTED / "CORRECTIONS.md").read_text()
    corrected = {e.path.name for e in Ledger(COMMITTED).entries() if "corrected" in e.provenance}
    named = {p.name for p in Ledger(COMMITTED).paths() if p.name in record}
    assert len(corrected) == 16 and named == corrected


def test_rates_are_each_entrys_client_steps_over_its_wall_seconds_per_scale_and_device():
    from types import SimpleNamespace

    from fedlib.ledger.rates import scale_rates

    def entry(steps: int, wall: float, device: str = "cpu-a", model: str = "cnn") -> SimpleNamespace:
        spec = SimpleNamespace(experiment="quickstart", dataset="fashion_mnist", model=SimpleNamespace(name=model))
        return SimpleNamespace(spec=spec, provenance={"client_steps": steps, "wall_s": wall, "device_name": device})

    rows = scale_rates([entry(3000, 10.0), entry(1000, 10.0), entry(500, 0.0), entry(50, 1.0, "gpu-b"),
                        entry(10, 1.0, model="mlp")])
    assert [(r.model, r.device_name, r.rates, r.client_steps, r.wall_s) for r in rows] == [
        ("cnn", "cpu-a", (100.0, 300.0), 4000, 20.0), ("cnn", "gpu-b", (50.0,), 50, 1.0),
        ("mlp", "cpu-a", (10.0,), 10, 1.0)]  # the entry without a wall time (500 steps) is not a rate
    assert rows[0].line.split()[-6:] == ["2", "4,000", "0.01", "100.0", "200.0", "300.0"]


def test_the_cli_prints_rates_only_of_a_ledger_that_proves_its_origin(small, tmp_path, capsys):
    ledger = copy_of(small, tmp_path / "ledger")
    assert cli.main(["rates", "--ledger", str(ledger.root)]) == 0
    out = capsys.readouterr().out.splitlines()
    steps = [int(e.provenance["client_steps"]) for e in ledger.entries()]
    assert out[0].split()[:4] == ["experiment", "dataset", "model", "device"] and len(out) >= 2
    assert sum(int(line.split()[-5].replace(",", "")) for line in out[1:]) == sum(steps)
    (ledger.root / INDEX).unlink()
    assert cli.main(["rates", "--ledger", str(ledger.root)]) == 1
    out = capsys.readouterr().out
    assert out.count(f"not in {ledger.root / INDEX}") == 3 and "client-steps" not in out


def test_a_provenance_whose_numeric_switches_disagree_with_its_key_is_refused(small, tmp_path):
    """An entry states the switches its run ran under (`numerics`); those off torch's defaults are what its key holds.
    Defaults stated in full, or none stated (entries from before the field), agree with a key that holds none."""
    from fedlib.runs.fingerprint import CUDA_NUMERIC_DEFAULTS

    ledger = copy_of(small, tmp_path / "ledger")
    first, second, third = ledger.paths()[:3]
    set_provenance(first, numerics={**CUDA_NUMERIC_DEFAULTS, "matmul_tf32": True})  # the key says the defaults
    set_provenance(second, numerics="tf32")
    set_provenance(third, numerics=dict(CUDA_NUMERIC_DEFAULTS))
    problems = [str(p) for p in ledger.reindex()[1]]
    assert problems == [
        f"{first}: {PROVENANCE} names numeric switches off torch's defaults {{'matmul_tf32': True}}, the manifest's "
        "context (what its run was keyed under) {}: a provenance that does not describe its run",
        f"{second}: {PROVENANCE} names numeric switches off torch's defaults tf32, the manifest's context (what its "
        "run was keyed under) {}: a provenance that does not describe its run"]
