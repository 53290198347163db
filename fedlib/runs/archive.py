"""Move run store entries between machines as tar archives (`python -m fedlib.runs export|import`).

An archive holds entry folders as `<key>/<file>` members, regular files only. Export verifies each entry
first. Import reads the whole archive into a temporary folder of the store, refusing any member that is
not a plain file or folder one level under a key (absolute paths, `..`, links, devices) and any member
larger than `MAX_MEMBER_BYTES`, or members that together would unpack to more than `unpack_limit` (a bounded
multiple of the archive's own size); then it checks every entry as `verify` does (its files against its manifest,
and its spec with the manifest's context hashed to its key) and places the intact ones (an entry already in the
store stays as it is); an entry that fails is reported and not imported. A truncated or corrupt archive, or a
full disk while unpacking (the error names the file), imports nothing.

An imported entry keeps its origin: `"origin": {"archive": <file name>, "imported": <UTC time>}` in its manifest
(the manifest vouches for the entry's files, not for itself, so the entry stays intact); `origin` reads it.
"""
from __future__ import annotations

import gzip
import json
import re
import tarfile
import time
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from fedlib.runs.entry import (MANIFEST, DamagedEntryError, read_manifest, verify_entry, verify_keyed_entry,
                               write_atomic)
from fedlib.runs.store import KEY, RunStore, _remove

FILE = re.compile(r"^[A-Za-z0-9_.-]+$")
MAX_MEMBER_BYTES = 1 << 30  # a record table is megabytes; anything near this is no run store entry
MAX_EXPANSION = 200  # CSV tables compress about 5-20x: an archive unpacking to 200x its size is no store export
MIN_UNPACK_BYTES = 256 << 20  # what any archive may unpack to, however small


class ArchiveError(ValueError):
    """An archive that cannot be imported: "<archive>: <problem>"."""

    def __init__(self, archive: str | Path, problem: str) -> None:
        self.problem = problem
        super().__init__(f"{archive}: {problem}")


@dataclass
class ImportReport:
    imported: list[str] = field(default_factory=list)
    already_there: list[str] = field(default_factory=list)
    rejected: dict[str, str] = field(default_factory=dict)  # key -> why


def export_entries(store: RunStore, folders: Iterable[Path], archive: Path) -> list[str]:
    """Write the (verified) entry folders to `archive` (gzip if it ends in .gz or .tgz); return their keys."""
    folders = list(folders)
    for folder in folders:
        verify_entry(folder)  # DamagedEntryError names the file
    mode = "w:gz" if archive.name.endswith((".gz", ".tgz")) else "w"
    with tarfile.open(archive, mode) as tar:
        for folder in folders:
            for path in sorted(folder.iterdir()):
                tar.add(path, arcname=f"{folder.name}/{path.name}", recursive=False)
    return [folder.name for folder in folders]


def _member_path(archive: Path, member: tarfile.TarInfo) -> PurePosixPath:
    path = PurePosixPath(member.name)
    if not (member.isfile() or member.isdir()):
        raise ArchiveError(archive, f"member {member.name!r} is a link or a special file: refused")
    if path.is_absolute() or ".." in path.parts or len(path.parts) > 2 or not KEY.match(path.parts[0]):
        raise ArchiveError(archive, f"member {member.name!r} is not <key>/<file> of a run store entry: refused")
    if len(path.parts) == 2 and (member.isdir() or not FILE.match(path.parts[1])):
        raise ArchiveError(archive, f"member {member.name!r} is not a plain file name: refused")
    if member.size > MAX_MEMBER_BYTES:
        raise ArchiveError(archive, f"member {member.name!r} holds {member.size} bytes, over {MAX_MEMBER_BYTES}")
    return path


def unpack_limit(archive: Path) -> int:
    """The most bytes `archive` may unpack to: `MAX_EXPANSION` times its size, at least `MIN_UNPACK_BYTES`."""
    return max(MIN_UNPACK_BYTES, MAX_EXPANSION * archive.stat().st_size)


def unpack(archive: Path, into: Path) -> None:
    limit, total, target = unpack_limit(archive), 0, into
    try:
        with tarfile.open(archive) as tar:
            for member in tar:
                path = _member_path(archive, member)
                target = into.joinpath(*path.parts)
                if member.isdir():
                    target.mkdir(exist_ok=True)
                    continue
                total += member.size
                if total > limit:
                    raise ArchiveError(archive, f"its members unpack to more than {limit} bytes ({MAX_EXPANSION} "
                                                "times the archive's size): no run store export; nothing imported")
                target.parent.mkdir(exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None  # a regular file member
                with source, open(target, "xb") as out:
                    while block := source.read(1 << 20):
                        out.write(block)
    except FileExistsError as err:
        raise ArchiveError(archive, f"member {err.filename} appears twice: refused") from err
    except OSError as err:  # a full disk or an unwritable store, while unpacking
        raise ArchiveError(archive, f"cannot write {target} ({err.strerror or err}); nothing imported: free disk "
                                    "space or make the run store writable, then import again") from err
    except (tarfile.TarError, EOFError, zlib.error, gzip.BadGzipFile) as err:
        raise ArchiveError(archive, f"truncated or corrupt archive ({type(err).__name__}: {err}); "
                                    "nothing imported") from err


def import_entries(store: RunStore, archive: Path) -> ImportReport:
    """Import `archive`'s intact entries into `store` (see the module docstring)."""
    if not archive.is_file():
        raise FileNotFoundError(f"no archive {archive}")
    staging = store.temporary()
    report = ImportReport()
    try:
        unpack(archive, staging)
        for unpacked in sorted(staging.iterdir()):
            try:
                verify_keyed_entry(unpacked)
            except DamagedEntryError as damage:
                report.rejected[unpacked.name] = str(damage).replace(str(staging), str(archive))
                continue
            _record_origin(unpacked, archive)
            store.place(unpacked, store.root / unpacked.name)  # renames it, unless an intact entry is there
            (report.already_there if unpacked.exists() else report.imported).append(unpacked.name)
    finally:
        _remove(staging)
    return report


def _record_origin(folder: Path, archive: Path) -> None:
    manifest = read_manifest(folder)
    manifest["origin"] = {"archive": archive.name, "imported": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
    write_atomic(folder / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))


def origin(folder: Path) -> dict[str, str] | None:
    """Where an entry came from: its manifest's `origin` (the archive it was imported from), None if computed
    here (or unreadable: `verify` says why)."""
    try:
        found = read_manifest(folder).get("origin")
    except DamagedEntryError:
        return None
    return found if isinstance(found, dict) else None
