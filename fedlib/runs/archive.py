"""Move run store entries between machines as tar archives (`python -m fedlib.runs export|import`).

An archive holds entry folders as `<key>/<file>` members, regular files only. Export verifies each entry
first. Import reads the whole archive into a temporary folder of the store, refusing any member that is
not a plain file or folder one level under a key (absolute paths, `..`, links, devices) and any member
larger than `MAX_MEMBER_BYTES`, then verifies every entry against its manifest and places the intact ones
(an entry already in the store stays as it is); a damaged entry is reported and not imported. A truncated
or corrupt archive imports nothing.
"""
from __future__ import annotations

import gzip
import re
import tarfile
import zlib
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from fedlib.runs.entry import DamagedEntryError, verify_entry
from fedlib.runs.store import RunStore, _remove

KEY = re.compile(r"^[0-9a-f]{24}$")
FILE = re.compile(r"^[A-Za-z0-9_.-]+$")
MAX_MEMBER_BYTES = 2 << 30  # a record table is megabytes; anything near this is no run store entry


class ArchiveError(ValueError):
    """An archive that cannot be imported: "<archive>: <problem>"."""

    def __init__(self, archive: str | Path, problem: str) -> None:
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


def _unpack(archive: Path, into: Path) -> None:
    try:
        with tarfile.open(archive) as tar:
            for member in tar:
                path = _member_path(archive, member)
                target = into.joinpath(*path.parts)
                if member.isdir():
                    target.mkdir(exist_ok=True)
                    continue
                target.parent.mkdir(exist_ok=True)
                source = tar.extractfile(member)
                assert source is not None  # a regular file member
                with source, open(target, "xb") as out:
                    while block := source.read(1 << 20):
                        out.write(block)
    except FileExistsError as err:
        raise ArchiveError(archive, f"member {err.filename} appears twice: refused") from err
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
        _unpack(archive, staging)
        for unpacked in sorted(staging.iterdir()):
            try:
                verify_entry(unpacked)
            except DamagedEntryError as damage:
                report.rejected[unpacked.name] = str(damage).replace(str(staging), str(archive))
                continue
            store.place(unpacked, store.root / unpacked.name)  # renames it, unless an intact entry is there
            (report.already_there if unpacked.exists() else report.imported).append(unpacked.name)
    finally:
        _remove(staging)
    return report
