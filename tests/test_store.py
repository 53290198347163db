"""The run store's integrity: manifests verified on every read, damaged entries moved aside and recomputed,
checkpoints tied to their spec, atomic saves under concurrent writers, write failures that name the path."""
from __future__ import annotations

import errno
import json
import multiprocessing
import os
import warnings
from pathlib import Path

import pandas as pd
import pytest
import torch

from fedlib.core.contracts import LAYER_COLUMNS, MODEL, SERVER, layer_table
from fedlib.runs import Keys, RunSpec, RunStore, run_specs, tidy
from fedlib.runs.entry import MANIFEST, DamagedEntryError
from fedlib.runs.store import DAMAGED, IN_PROGRESS, MARKER, TEMP_PREFIX, DamagedEntryWarning

KEYS = Keys(fixed="test")  # every spec's key context here: "test" (the store computes no key)


def spec(seed: int = 0, algorithm: str = "fedavg", rounds: int = 3) -> RunSpec:
    return RunSpec.make("quickstart", "digits", ("dirichlet", {"num_clients": 4, "alpha": 0.5, "min_size": 10}),
                        ("mlp", {"hidden": [8]}), (algorithm, {}), rounds, seed,
                        local={"lr": 0.05, "batch_size": 32, "epochs": 1}, loop={"executor": "sequential"},
                        labels={"algorithm": algorithm})


def records(n: int = 3) -> dict[str, pd.DataFrame]:
    return {"rounds": pd.DataFrame({"round": range(n), "acc": [0.125 * (i + 1) for i in range(n)]}),
            "clients": pd.DataFrame({"round": [0] * n, "client": range(n), "loss": [0.5] * n})}


@pytest.fixture
def stored(tmp_path):
    store = RunStore(tmp_path)
    return store, store.save(KEYS(spec()), records())


def test_a_saved_entry_has_a_manifest_and_reads_back(stored):
    store, folder = stored
    manifest = json.loads((folder / MANIFEST).read_text())
    assert manifest["key"] == folder.name == KEYS(spec()).key
    assert manifest["fedlib_version"]
    assert set(manifest["files"]) == {"rounds.csv", "clients.csv", "spec.json"}
    assert manifest["files"]["rounds.csv"]["rows"] == 3 and len(manifest["files"]["rounds.csv"]["sha256"]) == 64
    assert store.has(KEYS(spec()))
    for name, frame in records().items():
        pd.testing.assert_frame_equal(store.load(KEYS(spec()))[name], frame, check_exact=True)


def truncate(path):
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def edit(path):  # same size, one value changed: only the checksum can tell
    path.write_text(path.read_text().replace("0.125", "0.925"))


DAMAGE = {
    "missing rounds": ("rounds.csv", lambda p: p.unlink(), "missing"),
    "missing clients": ("clients.csv", lambda p: p.unlink(), "missing"),
    "truncated": ("rounds.csv", truncate, "truncated"),
    "edited": ("rounds.csv", edit, "SHA-256"),
    "emptied": ("clients.csv", lambda p: p.write_bytes(b""), "0 bytes"),
    "garbage": ("rounds.csv", lambda p: p.write_bytes(os.urandom(64)), "bytes"),
    "no manifest": (MANIFEST, lambda p: p.unlink(), "without its manifest"),
    "garbage manifest": (MANIFEST, lambda p: p.write_text("{not json"), "not a JSON manifest"),
    "unlisted file": ("extra.csv", lambda p: p.write_text("a\n1\n"), "not listed"),
    "spec edited": ("spec.json", lambda p: p.write_text(p.read_text().replace('"rounds": 3', '"rounds": 4')),
                    "spec.json"),
}


@pytest.mark.parametrize("kind", sorted(DAMAGE))
def test_a_damaged_entry_is_never_served_but_moved_aside_with_a_warning(stored, kind):
    store, folder = stored
    name, damage, says = DAMAGE[kind]
    damage(folder / name)
    with pytest.warns(DamagedEntryWarning, match=f"{folder.name}.*moved to .*{DAMAGED}"):
        with pytest.raises(DamagedEntryError, match=says) as err:
            store.load(KEYS(spec()))
    assert str(err.value).startswith(str(folder / name)) or name == "spec.json"  # the error names the file
    assert not folder.exists()
    (aside,) = (store.root / DAMAGED).iterdir()
    assert aside.name.startswith(folder.name + "-") and (aside / "spec.json").exists()  # kept for inspection
    assert not store.has(KEYS(spec()))  # so run_specs recomputes it


def test_has_moves_a_damaged_entry_aside_and_run_specs_recomputes_it(tmp_path, capsys):
    store = RunStore(tmp_path)
    first = run_specs([spec()], store=store, progress=False)  # keyed by Keys(): this process's code, data, environment
    (store.folder(Keys()(spec())) / "rounds.csv").write_text("round,acc\n0,0.999\n")
    with pytest.warns(DamagedEntryWarning, match="rounds.csv"):
        again = run_specs([spec()], store=store, progress=False)
    assert "1 to compute" in capsys.readouterr().err
    pd.testing.assert_frame_equal(first["rounds"].drop(columns=["train_s", "wall_s"]),
                                  again["rounds"].drop(columns=["train_s", "wall_s"]), check_exact=True)
    assert len(list((tmp_path / DAMAGED).iterdir())) == 1


def test_an_empty_table_round_trips(tmp_path):
    store = RunStore(tmp_path)
    store.save(KEYS(spec()), {"rounds": records()["rounds"], "clients": pd.DataFrame()})
    assert store.load(KEYS(spec()))["clients"].empty


def test_the_layer_table_round_trips_full_and_empty_with_its_dtypes(tmp_path):
    store = RunStore(tmp_path)
    rows = [{"round": 1, "client": 0, "layer": "fc.weight", "key": "range", "value": 0.1 + 0.2},
            {"round": 1, "client": SERVER, "layer": MODEL, "key": "down/range", "value": float("nan")},
            {"round": 2, "client": SERVER, "layer": "fc.bias", "key": "shift/numel", "value": 10.0}]
    for seed, table in ((0, layer_table(rows)), (1, layer_table([]))):
        store.save(KEYS(spec(seed)), {**records(), "layers": table})
        pd.testing.assert_frame_equal(store.load(KEYS(spec(seed)))["layers"], table, check_exact=True)
    runs = [KEYS(spec(0)), KEYS(spec(1))]
    both = tidy(runs, store)["layers"]  # a run without per-layer rows adds none, keeps the dtypes
    pd.testing.assert_frame_equal(both[list(LAYER_COLUMNS)], layer_table(rows), check_exact=True)
    assert both["run"].unique().tolist() == [KEYS(spec(0)).key]


def test_an_entry_written_before_tables_listed_dtypes_still_loads(tmp_path):
    store = RunStore(tmp_path)
    folder = store.save(KEYS(spec()), {**records(), "layers": layer_table([])})
    manifest = json.loads((folder / MANIFEST).read_text())
    del manifest["files"]["layers.csv"]["dtypes"]
    (folder / MANIFEST).write_text(json.dumps(manifest))
    assert store.load(KEYS(spec()))["layers"].columns.tolist() == list(LAYER_COLUMNS)  # as before: untyped
    manifest["files"]["layers.csv"]["dtypes"] = {"round": "int64"}  # an edited manifest is caught, not half-applied
    (folder / MANIFEST).write_text(json.dumps(manifest))
    with pytest.warns(DamagedEntryWarning), pytest.raises(DamagedEntryError, match="dtypes"):
        store.load(KEYS(spec()))


def test_a_checkpoint_is_refused_for_another_spec(tmp_path):
    store = RunStore(tmp_path)
    mine, other = store.checkpoint(KEYS(spec(0)), 2), store.checkpoint(KEYS(spec(1)), 2)
    mine.save({"server": {"w": torch.ones(2), "history": "[]"}})
    assert torch.equal(mine.load()["server"]["w"], torch.ones(2))
    other.path.write_bytes(mine.path.read_bytes())  # another run's valid checkpoint copied under this key
    refused = f"{other.path}.*written for store key {KEYS(spec(0)).key}, not .*{KEYS(spec(1)).key}"
    with pytest.raises(ValueError, match=refused):
        other.load()
    assert not list(mine.path.parent.glob(TEMP_PREFIX + "*"))


def test_a_second_writer_of_the_same_key_keeps_the_first_entry(stored):
    store, folder = stored
    manifest = (folder / MANIFEST).read_text()
    store.save(KEYS(spec()), records(5))  # e.g. the same run finished on two workers
    assert (folder / MANIFEST).read_text() == manifest and len(store.load(KEYS(spec()))["rounds"]) == 3
    assert not list(store.root.glob(TEMP_PREFIX + "*"))


def test_a_second_writer_replaces_a_damaged_entry(stored):
    store, folder = stored
    (folder / "rounds.csv").unlink()
    with pytest.warns(DamagedEntryWarning):
        store.save(KEYS(spec()), records(5))
    assert len(store.load(KEYS(spec()))["rounds"]) == 5


def test_stale_temporaries_of_dead_processes_are_cleaned(tmp_path):
    dead = multiprocessing.get_context("spawn").Process(target=int)
    dead.start()
    dead.join()
    import socket

    host = socket.gethostname()
    stale_dir = tmp_path / f"{TEMP_PREFIX}{host}-{dead.pid}-abc"
    stale_ckpt = tmp_path / IN_PROGRESS / f"{TEMP_PREFIX}{host}-{dead.pid}-abc.pt"
    live_dir = tmp_path / f"{TEMP_PREFIX}{host}-{os.getpid()}-abc"  # this process may still be writing it
    for path in (stale_dir, live_dir):
        path.mkdir(parents=True)
    stale_ckpt.parent.mkdir()
    stale_ckpt.write_bytes(b"half")
    given_again = tmp_path / f"{TEMP_PREFIX}{host}-{os.getpid()}-def"  # this process's pid, written before it started
    given_again.mkdir()
    os.utime(given_again, (946684800, 946684800))  # 2000-01-01
    store = RunStore(tmp_path)
    assert not store.has(KEYS(spec()))
    assert not stale_dir.exists() and not stale_ckpt.exists() and live_dir.exists() and not given_again.exists()


@pytest.mark.skipif(not Path("/proc/stat").exists(), reason="process start times are read from Linux's /proc")
def test_a_process_start_time_is_when_it_was_spawned():
    import subprocess
    import sys
    import time

    from fedlib.runs.store import process_started_at

    before = time.time()
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    after = time.time()
    try:
        started = process_started_at(child.pid)
        assert started is not None and before - 1.5 <= started <= after + 1.5  # /proc's boot time is whole seconds
    finally:
        child.kill()
        child.wait()
    assert process_started_at(child.pid) is None  # reaped: no such process


def _fail_with(monkeypatch, target, attribute):
    def no_space(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(target, attribute, no_space)


def test_disk_full_names_the_path_and_leaves_nothing(tmp_path, monkeypatch):
    store = RunStore(tmp_path)
    _fail_with(monkeypatch, pd.DataFrame, "to_csv")
    with pytest.raises(OSError, match=f"cannot write {store.folder(KEYS(spec()))} .No space left") as err:
        store.save(KEYS(spec()), records())
    assert err.value.errno == errno.ENOSPC
    assert not store.has(KEYS(spec())) and os.listdir(tmp_path) == []


def test_a_full_disk_while_checkpointing_leaves_no_temporary(tmp_path, monkeypatch):
    checkpoint = RunStore(tmp_path).checkpoint(KEYS(spec()), 1)
    _fail_with(monkeypatch, torch, "save")
    with pytest.raises(OSError, match=f"cannot write {checkpoint.path}"):
        checkpoint.save({"w": torch.ones(1)})
    assert list(checkpoint.path.parent.iterdir()) == []


def test_an_unwritable_store_names_the_path(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "store")
    real_mkdir = type(tmp_path).mkdir

    def refuse(self, *args, **kwargs):
        if self.is_relative_to(store.root):
            raise PermissionError(errno.EACCES, "Permission denied")
        return real_mkdir(self, *args, **kwargs)

    monkeypatch.setattr(type(tmp_path), "mkdir", refuse)
    with pytest.raises(OSError, match=f"cannot write {store.root}/{TEMP_PREFIX}.* .Permission denied.*writable"):
        store.save(KEYS(spec()), records())


STRESS = Keys(fixed="stress")


def _hammer(root: str, worker: int, times: int, queue) -> None:
    warnings.simplefilter("error", DamagedEntryWarning)  # a reader seeing a damaged entry is a failure
    store, run, errors, empty = RunStore(root), STRESS(spec()), [], 0
    for i in range(times):
        try:
            store.save(run, records())
            loaded = store.load(run)
            empty += loaded["rounds"].empty or set(loaded) != {"rounds", "clients"}
        except Exception as err:  # counted and reported: the test asserts there are none
            errors.append(f"worker {worker} step {i}: {type(err).__name__}: {err}")
    queue.put((errors, empty))


def test_concurrent_writers_and_readers_of_one_spec(tmp_path):
    """4 processes x 50 save-then-load of one spec: no failure, no empty read, nothing left behind."""
    processes, times = 4, 50
    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    workers = [ctx.Process(target=_hammer, args=(str(tmp_path), w, times, queue)) for w in range(processes)]
    for w in workers:
        w.start()
    results = [queue.get(timeout=240) for _ in range(processes)]
    for w in workers:
        w.join(timeout=60)
    errors, empty = [e for errs, _ in results for e in errs], sum(n for _, n in results)
    print(f"{processes} processes x {times} saves+loads of one spec: {len(errors)} failures, {empty} empty reads")
    assert (errors, empty) == ([], 0)
    assert sorted(os.listdir(tmp_path)) == [MARKER, STRESS(spec()).key]


def test_a_checkpoint_is_resumed_only_when_spec_key_and_rounds_agree(tmp_path):
    """A 240-round run's checkpoint whose key field was rewritten to a 15-round spec's key is refused."""
    store = RunStore(tmp_path)
    long_run, short_run = spec(rounds=240), spec(rounds=15)
    long_checkpoint = store.checkpoint(KEYS(long_run), 10)
    long_checkpoint.save({"server": {"history": json.dumps([{"round": r} for r in range(230)])}})
    assert len(json.loads(long_checkpoint.load()["server"]["history"])) == 230
    saved = torch.load(long_checkpoint.path, weights_only=True)
    saved["key"] = KEYS(short_run).key  # the key field rewritten
    short = store.checkpoint(KEYS(short_run), 10)
    short.path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(saved, short.path)
    with pytest.raises(ValueError, match="written for another spec"):
        short.load()
    saved["spec"] = json.dumps(short_run.to_json(), sort_keys=True)  # and the spec too
    torch.save(saved, short.path)
    with pytest.raises(ValueError, match="holds 230 finished rounds of a 15-round run"):
        short.load()
    del saved["spec"]  # a checkpoint written before checkpoints named their spec
    saved["key"] = KEYS(long_run).key
    torch.save(saved, long_checkpoint.path)
    with pytest.raises(ValueError, match="before checkpoints named their spec"):
        long_checkpoint.load()


def test_torch_reporting_a_full_disk_while_checkpointing_names_the_path(tmp_path, monkeypatch):
    checkpoint = RunStore(tmp_path).checkpoint(KEYS(spec()), 1)

    def enforce_fail(*args, **kwargs):
        raise RuntimeError("[enforce fail at inline_container.cc:664] . unexpected pos 64 vs 0")

    monkeypatch.setattr(torch, "save", enforce_fail)
    with pytest.raises(OSError, match=f"cannot write {checkpoint.path} .*inline_container.*Free disk space"):
        checkpoint.save({"w": torch.ones(1)})
    assert not list(checkpoint.path.parent.glob(TEMP_PREFIX + "*"))


def test_records_from_another_environment_are_not_filed(tmp_path):
    """A worker that ran with 1 thread (a Ray task) or other CPU kernels: its context differs, the driver refuses."""
    store, run = RunStore(tmp_path), Keys()(spec())  # keyed with this process's context
    here = run.context
    store.check_context(run, here, "in a worker")  # the same environment: accepted
    worker = json.dumps({**json.loads(here), "threads": 1, "cpu_capability": "DEFAULT"}, sort_keys=True)
    with pytest.raises(RuntimeError, match="ran on a Ray worker in another environment .*cpu_capability: 'DEFAULT' "
                                           "there.*threads: 1 there, None here"):
        store.check_context(run, worker, "on a Ray worker")
