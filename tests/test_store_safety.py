"""The store commands touch only what is the store's own: a marked root, entry folders by name and content,
deletion only when asked. Every dangerous try runs on a temporary folder."""
from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
import warnings

import pandas as pd
import pytest

from fedlib.runs import Keys, RunSpec, RunStore
from fedlib.runs.cli import main
from fedlib.runs.store import DAMAGED, MARKER, DamagedEntryWarning

OLD_CODE = json.dumps({"code": "0123456789abcdef"})  # a code version no current spec has
HERE = Keys()  # the keys of this process's code, data and environment
OLD = Keys(fixed=OLD_CODE)  # the keys of an entry written by code that is gone
TEST = Keys(fixed="test")


def spec(seed: int = 0) -> RunSpec:
    return RunSpec.make("quickstart", "digits", ("dirichlet", {"num_clients": 4, "alpha": 0.5}), ("mlp", {}), ("fedavg", {}), 3,
                        seed, labels={"cell": f"s{seed}"})


def records() -> dict[str, pd.DataFrame]:
    return {"rounds": pd.DataFrame({"round": range(3), "acc": [0.5] * 3})}


def tree(root, files: dict[str, str]) -> None:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)


def snapshot(root) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture
def results(tmp_path):
    """A results folder as reproduce leaves it: rendered notebooks and the store one level down, with one
    current and one stale entry."""
    root = tmp_path / "results"
    tree(root, {"cpu/taco/claims.csv": "claim,verdict\n", "cpu/taco/stamp.json": "{}", "REPORT.md": "# report\n"})
    store = RunStore(root / "runs")
    store.save(HERE(spec(0)), records())
    store.save(OLD(spec(1)), records())
    return root


def cli(*args: str) -> tuple[int, str, str]:
    proc = subprocess.run([sys.executable, "-m", "fedlib.runs", *args], capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def test_a_store_is_marked_with_its_first_entry(tmp_path):
    store = RunStore(tmp_path / "runs")
    assert not store.is_store()
    store.save(HERE(spec()), records())
    assert store.is_store() and (tmp_path / "runs" / MARKER).is_file()


@pytest.mark.parametrize("command", ["gc", "verify", "ls"])
def test_a_results_folder_one_level_above_the_store_is_refused(results, command, capsys):
    before = snapshot(results)
    assert main([command, "--root", str(results)] + (["--delete"] if command == "gc" else [])) == 2
    err = capsys.readouterr().err
    assert f"{results} is not a run store" in err and "mark --root" in err
    assert snapshot(results) == before


def test_gc_on_a_copy_of_a_checkout_touches_nothing(tmp_path, capsys):
    checkout = tmp_path / "checkout"
    tree(checkout, {"fedlib/__init__.py": "", "notebooks/taco.py": "# notebook\n", "data/mnist/train.gz": "x",
                    "tests/test_x.py": "", "README.md": "# fedlib\n"})
    before = snapshot(checkout)
    for command in (["gc", "--delete"], ["verify"], ["ls"]):
        assert main([*command, "--root", str(checkout)]) == 2
    assert "is not a run store" in capsys.readouterr().err
    assert snapshot(checkout) == before


def test_gc_lists_by_default_and_deletes_only_stale_entries_when_asked(results, capsys):
    store = RunStore(results / "runs")
    stale = store.folder(OLD(spec(1)))
    tree(store.root, {"my-analysis/notes.md": "mine\n", "README.txt": "mine too\n"})
    assert main(["gc", "--root", str(store.root)]) == 0  # options after the command too
    out = capsys.readouterr().out
    assert f"would delete {stale.name}" in out and "left alone my-analysis" in out and "left alone README.txt" in out
    assert "gc --delete" in out and stale.exists()
    assert main(["--root", str(store.root), "gc", "--delete"]) == 0
    assert f"deleted {stale.name}" in capsys.readouterr().out
    assert not stale.exists() and store.has(HERE(spec(0)))
    assert (store.root / "my-analysis" / "notes.md").read_text() == "mine\n"
    assert (store.root / "README.txt").exists() and (results / "cpu" / "taco" / "claims.csv").exists()


def test_gc_keeps_an_entry_folder_that_holds_a_file_it_did_not_write(results, capsys):
    store = RunStore(results / "runs")
    stale = store.folder(OLD(spec(1)))
    (stale / "notes.md").write_text("my notes on this run\n")
    legacy = store.root / "00aa00aa00aa00aa00aa00aa"  # named as a key, no manifest: not provably an entry
    tree(legacy, {"spec.json": json.dumps(spec(3).to_json())})
    assert main(["gc", "--delete", "--root", str(store.root)]) == 0
    out = capsys.readouterr().out
    assert f"kept {stale.name}: not an intact entry" in out and "notes.md" in out
    assert f"kept {legacy.name}" in out and "0 stale entries deleted" in out
    assert (stale / "notes.md").exists() and (legacy / "spec.json").exists()


def test_verify_moves_only_damaged_entries_and_leaves_other_folders(results, capsys):
    store = RunStore(results / "runs")
    tree(store.root, {"my-analysis/notes.md": "mine\n"})
    (store.folder(HERE(spec(0))) / "rounds.csv").write_text("round,acc\n0,0.99\n")
    assert main(["verify", "--root", str(store.root)]) == 1
    out = capsys.readouterr().out
    assert f"damaged {HERE(spec(0)).key}" in out and "left alone my-analysis" in out and "1 intact, 1 damaged" in out
    assert (store.root / "my-analysis" / "notes.md").exists()
    assert [p.name.split("-")[0] for p in (store.root / DAMAGED).iterdir()] == [HERE(spec(0)).key]


@pytest.mark.parametrize("command", ["ls", "verify", "gc"])
def test_a_mistyped_root_is_an_error(tmp_path, command):
    rc, out, err = cli(command, "--root", str(tmp_path / "reslts" / "runs"))
    assert rc == 2 and "is not a folder: no run store there" in err and "Traceback" not in err


def test_an_unmarked_store_is_marked_on_request_and_a_folder_with_other_things_is_not(results, capsys):
    store = RunStore(results / "runs")
    (store.root / MARKER).unlink()  # a store written before stores were marked
    assert main(["ls", "--root", str(store.root)]) == 2 and "mark --root" in capsys.readouterr().err
    assert main(["mark", "--root", str(results)]) == 2  # one level too high: not marked
    assert "not a store entry" in capsys.readouterr().err and not (results / MARKER).exists()
    assert main(["mark", "--root", str(store.root)]) == 0 and store.is_store()
    assert main(["ls", "--root", str(store.root)]) == 0 and "2 entries" in capsys.readouterr().out


def test_a_read_only_store_with_a_damaged_entry_still_reads(tmp_path, monkeypatch):
    store = RunStore(tmp_path / "runs")
    store.save(TEST(spec(0)), records())
    store.save(TEST(spec(1)), records())
    (store.folder(TEST(spec(1))) / "rounds.csv").write_text("round,acc\n0,0.99\n")

    def read_only(*args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system")

    monkeypatch.setattr(os, "rename", read_only)  # as on a read-only mount (root ignores file permissions)
    monkeypatch.setattr(os, "mkdir", read_only)
    reader = RunStore(store.root)  # reading with the same keys
    with pytest.warns(DamagedEntryWarning, match="cannot be moved aside .Read-only"):
        assert not reader.has(TEST(spec(1)))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert reader.load(TEST(spec(0)))["rounds"]["acc"].tolist() == [0.5] * 3
    assert store.folder(TEST(spec(1))).exists()  # left where it was
