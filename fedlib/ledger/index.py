"""The ledger's index, `INDEX.tsv` in the ledger folder: one line per entry, committed and reviewed like code.

    archive  experiment  spec_key  spec_sha256  device  device_name  commit  archive_sha256

(tab-separated, this header first, lines sorted by archive). `spec_sha256` is the SHA-256 of the entry's
`spec.json`, `device` and `device_name` its provenance's, `archive_sha256` the SHA-256 of the archive file. Two
writers only: `Ledger.add` (a piece adding the entry it computed) and `python -m fedlib.ledger index --write`, the
explicit act of vouching for the archives that are there. Each rewrites the file whole (`write_atomic`) while
holding the folder's lock (`locked`: two pieces adding entries at once write their lines one after the other).
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterable, Iterator
from dataclasses import astuple, dataclass, fields
from pathlib import Path

from fedlib.runs.entry import write_atomic

INDEX = "INDEX.tsv"


@dataclass(frozen=True)
class IndexLine:
    archive: str
    experiment: str
    spec_key: str
    spec_sha256: str
    device: str
    device_name: str
    commit: str
    archive_sha256: str

    def __post_init__(self) -> None:
        for column, value in zip(COLUMNS, astuple(self)):
            if not is_one_line(value):
                raise ValueError(f"{INDEX} column {column}: {value!r} is not one line of text")

    def row(self) -> str:
        return "\t".join(astuple(self))

    def differing(self, other: IndexLine) -> list[str]:
        """The columns whose values differ between this line and `other`."""
        return [c for c, mine, theirs in zip(COLUMNS, astuple(self), astuple(other)) if mine != theirs]


def is_one_line(value: object) -> bool:
    """Whether `value` fits in a column of the index: a non-empty text without tabs or line breaks."""
    return isinstance(value, str) and bool(value) and not any(c in value for c in "\t\r\n")


COLUMNS = tuple(f.name for f in fields(IndexLine))
HEADER = "\t".join(COLUMNS)


class MalformedIndexError(ValueError):
    """An index that cannot be read: "<index>: <problem>"."""

    def __init__(self, path: Path, problem: str) -> None:
        self.path, self.problem = path, problem
        super().__init__(f"{path}: {problem}")


def read_index(root: Path) -> dict[str, IndexLine] | None:
    """Archive name -> its line in `root`'s index; None where the folder has no index."""
    path = root / INDEX
    if not path.exists():
        return None
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as err:
        raise MalformedIndexError(path, f"unreadable ({err})") from err
    rows = text.splitlines()
    if not rows or rows[0] != HEADER:
        raise MalformedIndexError(path, f"its first line is not the header {HEADER!r}: write the index again with "
                                        "`python -m fedlib.ledger index --write`")
    lines: dict[str, IndexLine] = {}
    for number, row in enumerate(rows[1:], start=2):
        cells = row.split("\t")
        try:
            if len(cells) != len(COLUMNS):
                raise ValueError(f"{len(cells)} columns, not {len(COLUMNS)}")
            line = IndexLine(*cells)
        except ValueError as err:
            raise MalformedIndexError(path, f"line {number}: {err}") from err
        if line.archive in lines:
            raise MalformedIndexError(path, f"line {number}: {line.archive} is listed twice")
        lines[line.archive] = line
    return lines


def write_index(root: Path, lines: Iterable[IndexLine]) -> None:
    """`root`'s index holding exactly `lines`, written whole or not at all (call it holding `locked(root)`)."""
    rows = sorted(line.row() for line in lines)
    write_atomic(root / INDEX, "\n".join([HEADER, *rows]) + "\n")


@contextlib.contextmanager
def locked(root: Path, shared: bool = False) -> Iterator[None]:
    """The ledger folder `root` held by this process: exclusively to write its index and archives, `shared` to read
    them (a reader sees no archive without its line). An advisory lock on the folder itself: no lock file."""
    handle = os.open(root, os.O_RDONLY)
    try:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        yield
    finally:
        os.close(handle)  # releases the lock
