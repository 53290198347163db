"""`python -m fedlib.runs ls|verify|gc|export|import`, and archives that must not be imported."""
from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import tarfile

import pandas as pd
import pytest

from fedlib.runs import Keys, RunSpec, RunStore
from fedlib.runs.archive import ArchiveError, import_entries
from fedlib.runs.cli import main
from fedlib.runs.store import DAMAGED, MARKER


def spec(seed: int = 0, algorithm: str = "fedavg") -> RunSpec:
    return RunSpec.make("quickstart", "digits", ("dirichlet", {"num_clients": 4, "alpha": 0.5}), ("mlp", {}),
                        (algorithm, {}), 3, seed, labels={"algorithm": algorithm, "cell": f"s{seed}"})


def records(n: int = 3) -> dict[str, pd.DataFrame]:
    return {"rounds": pd.DataFrame({"round": range(n), "acc": [0.5] * n}), "clients": pd.DataFrame({"c": range(n)})}


OLD_CODE = json.dumps({"code": "0123456789abcdef"})  # a code version no current spec has
HERE = Keys()  # the keys of this process's code, data and environment (what run_specs keys with by default)
OLD = Keys(fixed=OLD_CODE)  # the keys of entries computed by code that is gone


@pytest.fixture
def store(tmp_path):
    """Two current entries and one computed by code that is gone."""
    store = RunStore(tmp_path / "runs")
    store.save(HERE(spec(0)), records())
    store.save(HERE(spec(1, "scaffold")), records())
    store.save(OLD(spec(2)), records())
    return store


def run(store: RunStore, *args: str) -> int:
    return main(["--root", str(store.root), *args])


def test_ls_lists_every_entry_with_its_labels(store, capsys):
    assert run(store, "ls") == 0
    out = capsys.readouterr().out
    assert HERE(spec(1, "scaffold")).key in out and "algorithm=scaffold,cell=s1" in out
    assert "3 entries" in out


def test_verify_moves_damaged_entries_aside_and_fails(store, capsys):
    assert run(store, "verify") == 0 and "3 intact, 0 damaged" in capsys.readouterr().out
    (store.folder(HERE(spec(0))) / "clients.csv").write_text("c\n9\n9\n9\n")
    assert run(store, "verify") == 1
    out = capsys.readouterr().out
    assert f"damaged {HERE(spec(0)).key}" in out and "clients.csv" in out and "2 intact, 1 damaged" in out
    assert not store.folder(HERE(spec(0))).exists() and len(list((store.root / DAMAGED).iterdir())) == 1


def test_gc_deletes_only_entries_whose_code_version_is_gone(store, capsys):
    old = store.folder(OLD(spec(2)))
    legacy = store.root / "00aa00aa00aa00aa00aa00aa"  # an older store's entry: spec and tables, no manifest
    legacy.mkdir()
    (legacy / "spec.json").write_text(json.dumps(spec(3).to_json()))
    assert run(store, "gc") == 0 and old.exists()  # listing is the default
    out = capsys.readouterr().out
    assert f"would delete {old.name}: code version 0123456789abcdef, now" in out
    assert f"kept {legacy.name}: not an intact entry" in out  # no manifest: not provably the store's own
    assert run(store, "gc", "--dry-run") == 0 and old.exists()
    assert run(store, "gc", "--delete") == 0
    assert not old.exists() and legacy.exists() and store.has(HERE(spec(0))) and store.has(HERE(spec(1, "scaffold")))
    assert "1 stale entries deleted" in capsys.readouterr().out


def test_export_then_import_merges_entries(store, tmp_path, capsys):
    archive = tmp_path / "grid.tar.gz"
    assert run(store, "export", str(archive), "--select", "algorithm=fedavg") == 0
    assert "exported 2 entries" in capsys.readouterr().out
    other = RunStore(tmp_path / "other")
    other.save(HERE(spec(0)), records())  # already there: kept as it is
    assert run(other, "import", str(archive)) == 0
    assert "imported 1 entries" in (out := capsys.readouterr().out) and "1 already there" in out
    pd.testing.assert_frame_equal(other.load(OLD(spec(2)))["rounds"], records()["rounds"], check_exact=True)
    assert not other.has(HERE(spec(1, "scaffold")))  # not selected
    assert sorted(p.name for p in other.root.iterdir()) == sorted(
        [MARKER, HERE(spec(0)).key, OLD(spec(2)).key])  # no temporaries left


def test_export_select_is_strict_like_reproduce(store, tmp_path, capsys):
    archive = tmp_path / "none.tar"
    assert run(store, "export", str(archive), "--select", "algorithm=nosuch") == 2
    err = capsys.readouterr().err
    assert "--select: algorithm=nosuch matches no run" in err and "fedavg" in err and not archive.exists()
    assert run(store, "export", str(archive), "--select", "algoritm=fedavg") == 2
    assert "did you mean 'algorithm'" in capsys.readouterr().err
    for unreadable in ("fedavg", 'cell="s1'):  # were a ValueError traceback
        assert run(store, "export", str(archive), "--select", unreadable) == 2
        assert capsys.readouterr().err.startswith("python -m fedlib.runs export: error: --select ")
    assert run(store, "export", str(archive), "--select", 'cell="s1"') == 0  # a quoted value without a comma too


def test_options_go_before_or_after_the_command(store):
    for args in (["--root", str(store.root), "ls"], ["ls", "--root", str(store.root)]):
        proc = subprocess.run([sys.executable, "-m", "fedlib.runs", *args], capture_output=True, text=True,
                              timeout=300)
        assert proc.returncode == 0 and "3 entries" in proc.stdout, proc.stderr


def test_a_missing_archive_is_a_one_line_error(store, tmp_path, capsys):
    assert run(store, "import", str(tmp_path / "nosuch.tar")) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "nosuch.tar" in err


def test_a_damaged_entry_is_not_exported(store, tmp_path, capsys):
    (store.folder(HERE(spec(0))) / "rounds.csv").unlink()
    assert main(["--root", str(store.root), "export", str(tmp_path / "a.tar")]) == 1
    assert "rounds.csv: missing" in capsys.readouterr().err and not (tmp_path / "a.tar").exists()


def tar_with(path, members: list[tuple[tarfile.TarInfo, bytes | None]]) -> None:
    with tarfile.open(path, "w") as tar:
        for info, data in members:
            info.size = len(data) if data is not None else 0
            tar.addfile(info, io.BytesIO(data) if data is not None else None)


def test_an_archive_entry_that_fails_its_manifest_is_rejected(store, tmp_path, capsys):
    archive = tmp_path / "grid.tar"
    assert run(store, "export", str(archive)) == 0
    edited = tmp_path / "edited.tar"
    key = HERE(spec(1, "scaffold")).key
    with tarfile.open(archive) as source, tarfile.open(edited, "w") as out:
        for member in source:
            data = source.extractfile(member).read()
            if member.name == f"{key}/rounds.csv":
                data = data.replace(b"0.5", b"0.9")
            out.addfile(member, io.BytesIO(data))
    other = RunStore(tmp_path / "other")
    assert run(other, "import", str(edited)) == 1
    out = capsys.readouterr().out
    assert f"rejected {key}: {edited}" in out and "rounds.csv" in out and "imported 2 entries" in out
    assert not (other.root / key).exists()


def test_a_truncated_archive_imports_nothing(store, tmp_path):
    archive = tmp_path / "grid.tar.gz"
    run(store, "export", str(archive))
    archive.write_bytes(archive.read_bytes()[: archive.stat().st_size // 2])
    other = RunStore(tmp_path / "other")
    with pytest.raises(ArchiveError, match=f"{archive}: truncated or corrupt archive.*nothing imported"):
        import_entries(other, archive)
    assert list(other.root.iterdir()) == []


KEY = "0123456789abcdef01234567"


@pytest.mark.parametrize("member, problem", [
    (tarfile.TarInfo("../evil.csv"), "not <key>/<file>"),
    (tarfile.TarInfo(f"/{KEY}/rounds.csv"), "not <key>/<file>"),
    (tarfile.TarInfo(f"{KEY}/../../evil.csv"), "not <key>/<file>"),
    (tarfile.TarInfo(f"{KEY}/sub/rounds.csv"), "not <key>/<file>"),
    (tarfile.TarInfo("notakey/rounds.csv"), "not <key>/<file>"),
])
def test_an_archive_member_outside_an_entry_is_refused(tmp_path, member, problem):
    archive = tmp_path / "evil.tar"
    tar_with(archive, [(member, b"x\n")])
    store = RunStore(tmp_path / "runs")
    with pytest.raises(ArchiveError, match=problem):
        import_entries(store, archive)
    assert not (tmp_path / "evil.csv").exists() and list(store.root.iterdir()) == []


@pytest.mark.parametrize("kind", [tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE])
def test_links_and_special_files_are_refused(tmp_path, kind):
    link = tarfile.TarInfo(f"{KEY}/rounds.csv")
    link.type, link.linkname = kind, "/etc/passwd"
    archive = tmp_path / "links.tar"
    tar_with(archive, [(link, None)])
    with pytest.raises(ArchiveError, match="link or a special file"):
        import_entries(RunStore(tmp_path / "runs"), archive)


def test_the_module_runs_as_a_command(store):
    proc = subprocess.run([sys.executable, "-m", "fedlib.runs", "--root", str(store.root), "ls"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert "3 entries" in proc.stdout


def _rewrite_archive(archive, edited, edit) -> None:
    """Copy `archive` to `edited`, passing each member's (name, bytes) through `edit`."""
    with tarfile.open(archive) as source, tarfile.open(edited, "w") as out:
        for member in source:
            data = edit(member.name, source.extractfile(member).read())
            member.size = len(data)
            out.addfile(member, io.BytesIO(data))


def test_an_edited_record_with_a_rehashed_manifest_and_another_context_is_rejected(store, tmp_path, capsys):
    """The key covers the spec and the context (code, data, environment), not the records: records edited with
    their manifest rehashed under an unchanged spec and context cannot be told from computed ones (such entries
    keep their origin and REPORT.md names the notebooks resting on them); one whose context was edited too is
    rejected."""
    import hashlib

    archive, edited = tmp_path / "grid.tar", tmp_path / "edited.tar"
    assert run(store, "export", str(archive)) == 0
    key = HERE(spec(1, "scaffold")).key
    forged = b"round,acc\n0,0.999\n1,0.999\n2,0.999\n"

    def edit(name: str, data: bytes) -> bytes:
        if name == f"{key}/rounds.csv":
            return forged
        if name == f"{key}/manifest.json":  # a forger who also rehashes the manifest
            manifest = json.loads(data)
            manifest["files"]["rounds.csv"].update(bytes=len(forged), sha256=hashlib.sha256(forged).hexdigest())
            manifest["context"] = json.dumps({"code": "forged"})
            return json.dumps(manifest).encode()
        return data

    _rewrite_archive(archive, edited, edit)
    other = RunStore(tmp_path / "other")
    assert run(other, "import", str(edited)) == 1
    assert f"rejected {key}" in (out := capsys.readouterr().out) and "do not hash to the key" in out
    assert not (other.root / key).exists()


def test_another_spec_under_a_key_is_rejected(store, tmp_path, capsys):
    archive, edited = tmp_path / "grid.tar", tmp_path / "edited.tar"
    assert run(store, "export", str(archive)) == 0
    key = HERE(spec(0)).key
    other_spec = json.dumps(spec(7).to_json(), indent=1, sort_keys=True).encode()

    def edit(name: str, data: bytes) -> bytes:
        import hashlib

        if name == f"{key}/spec.json":
            return other_spec
        if name == f"{key}/manifest.json":
            manifest = json.loads(data)
            manifest["files"]["spec.json"].update(bytes=len(other_spec), sha256=hashlib.sha256(other_spec).hexdigest())
            return json.dumps(manifest).encode()
        return data

    _rewrite_archive(archive, edited, edit)
    other = RunStore(tmp_path / "other")
    assert run(other, "import", str(edited)) == 1
    assert f"rejected {key}" in capsys.readouterr().out and not (other.root / key).exists()


def test_an_archive_that_expands_far_beyond_its_size_is_refused(tmp_path, monkeypatch):
    import gzip

    from fedlib.runs import archive as archive_module

    monkeypatch.setattr(archive_module, "MIN_UNPACK_BYTES", 1 << 20)
    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w") as tar:
        for i in range(4):
            info = tarfile.TarInfo(f"{KEY}/t{i}.csv")
            info.size = 1 << 20
            tar.addfile(info, io.BytesIO(b"0" * info.size))
    bomb = tmp_path / "bomb.tar.gz"
    bomb.write_bytes(gzip.compress(raw.getvalue()))
    assert bomb.stat().st_size < 20_000
    store = RunStore(tmp_path / "runs")
    with pytest.raises(ArchiveError, match="unpack to more than 1048576 bytes"):
        import_entries(store, bomb)
    assert list(store.root.iterdir()) == []


def test_a_full_disk_while_importing_names_the_file(store, tmp_path, monkeypatch):
    import builtins
    import errno

    archive = tmp_path / "grid.tar"
    assert run(store, "export", str(archive)) == 0
    real_open = builtins.open

    def full(path, mode="r", *args, **kwargs):
        if "x" in mode:
            raise OSError(errno.ENOSPC, "No space left on device", str(path))
        return real_open(path, mode, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", full)
    other = RunStore(tmp_path / "other")
    with pytest.raises(ArchiveError, match=r"cannot write .*/[0-9a-f]{24}/.* \(No space left on device\)"):
        import_entries(other, archive)
    assert list(other.root.iterdir()) == []


def test_an_imported_entry_keeps_its_origin_and_stays_intact(store, tmp_path):
    from fedlib.runs.archive import origin

    archive = tmp_path / "grid.tar"
    assert run(store, "export", str(archive)) == 0
    other = RunStore(tmp_path / "other")
    import_entries(other, archive)
    assert origin(other.folder(HERE(spec(0))))["archive"] == "grid.tar"
    assert origin(store.folder(HERE(spec(0)))) is None  # computed here
    assert other.has(HERE(spec(0))) and main(["verify", "--root", str(other.root)]) == 0


def test_ls_and_run_specs_say_which_entries_were_imported(store, tmp_path, capsys):
    """An imported entry kept its origin, but `ls` and run_specs served it like one computed here."""
    from fedlib.runs import run_specs

    archive = tmp_path / "grid.tar"
    assert run(store, "export", str(archive), "--select", "seed=0") == 0
    other = RunStore(tmp_path / "other")
    import_entries(other, archive)
    other.save(HERE(spec(1, "scaffold")), records())  # computed here
    capsys.readouterr()
    assert run(other, "ls") == 0
    lines = capsys.readouterr().out.splitlines()
    imported = [line for line in lines if HERE(spec(0)).key in line]
    assert len(imported) == 1 and re.search(r"  imported from grid\.tar at \d{4}-\d\d-\d\dT", imported[0])
    assert not any("imported" in line for line in lines if HERE(spec(1, "scaffold")).key in line)
    assert lines[-1].startswith(f"2 entries in {other.root}, 1 imported from archives (the store checks each entry's "
                                "files and key, not that its records came from running its spec)")
    run_specs([spec(0), spec(1, "scaffold")], store=other, progress=False)
    assert f"2 runs: 2 from the store ({other.root}; 1 of them imported from grid.tar), 0 to compute" in \
        capsys.readouterr().err
