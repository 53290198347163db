"""One run store entry on disk: its record tables, `spec.json` and the `manifest.json` that vouches for them.

An entry folder holds one CSV per record table, `spec.json`, and `manifest.json`:

    {"key": <the folder's name>, "fedlib_version": "0.1.0", "context": <what the key covers besides the spec>,
     "files": {"rounds.csv": {"bytes": 5120, "sha256": "...", "rows": 6, "columns": 31}, "spec.json": {...}, ...}}

A table without rows also lists its columns' "dtypes" (a header-only CSV carries none), so it reads back typed.

A ledger's entry adds `provenance.json` (`fedlib.ledger.entries`). Nothing else belongs in an entry: a file of
another kind (a `.py`, say, which Python could import from a store inside the working folder) is refused even
when the manifest lists it.

`write_entry` writes all of them into a folder (the store then renames that folder into place);
`verify_entry` checks that the folder holds exactly the listed files, each of a kind an entry holds, with their
sizes and checksums;
`read_entry` verifies and reads the tables back. Anything wrong raises `DamagedEntryError` naming the file.
"""
from __future__ import annotations

import hashlib
import json
import os
import uuid
from pathlib import Path
from typing import Any

import pandas as pd

import fedlib
from fedlib.runs.spec import RunSpec

Records = dict[str, pd.DataFrame]  # table name -> frame ("rounds", "clients", ...)

MANIFEST = "manifest.json"
SPEC = "spec.json"
PROVENANCE = "provenance.json"  # a ledger entry's (fedlib.ledger.entries)
TABLE_SUFFIX = ".csv"  # a record table's file: <table name>.csv
# Floats read back bit for bit: pandas 3 does so by default (and deprecates the option), pandas 2 needs it.
_EXACT_FLOATS: dict[str, Any] = {"float_precision": "round_trip"} if int(pd.__version__.split(".")[0]) < 3 else {}


class DamagedEntryError(ValueError):
    """A run store entry is incomplete or altered: the message is "<file>: <problem>"."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path, self.problem = Path(path), problem
        super().__init__(f"{path}: {problem}")


def write_atomic(path: Path, content: str | bytes) -> None:
    """Write `path` whole or not at all: a temporary beside it, flushed to disk, then renamed over it. A reader
    (or a later run after a full disk or a crash) sees the old file or the new one, never a truncated one.
    An OSError names `path`."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")
    data = content.encode() if isinstance(content, str) else content
    try:
        with open(tmp, "wb") as out:
            out.write(data)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, path)
    except OSError as err:
        tmp.unlink(missing_ok=True)
        raise OSError(err.errno, f"cannot write {path} ({err.strerror or err}); the earlier file, if any, is "
                                 "unchanged: free disk space or make the folder writable, then run again") from err


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def describe(path: Path, frame: pd.DataFrame | None = None) -> dict[str, Any]:
    entry: dict[str, Any] = {"bytes": path.stat().st_size, "sha256": file_sha256(path)}
    if frame is not None:
        entry.update(rows=len(frame), columns=len(frame.columns))
        if frame.empty and len(frame.columns):
            entry["dtypes"] = {str(c): str(t) for c, t in frame.dtypes.items()}
    return entry


def write_entry(folder: Path, key: str, context: str, spec_json: dict[str, Any], records: Records) -> None:
    """Write `records`, the spec and the manifest into the existing, empty `folder` (manifest last).
    `context` is what the key hashes besides the spec (`fedlib.runs.fingerprint.key_context`)."""
    files: dict[str, dict[str, Any]] = {}
    for name, frame in records.items():
        path = folder / f"{name}{TABLE_SUFFIX}"
        frame.to_csv(path, index=False)
        files[path.name] = describe(path, frame)
    spec_path = folder / SPEC
    spec_path.write_text(json.dumps(spec_json, indent=1, sort_keys=True))
    files[SPEC] = describe(spec_path)
    manifest = {"key": key, "fedlib_version": fedlib.__version__, "context": context, "files": files}
    (folder / MANIFEST).write_text(json.dumps(manifest, indent=1, sort_keys=True))


def read_manifest(folder: Path) -> dict[str, Any]:
    path = folder / MANIFEST
    if not path.is_file():
        raise DamagedEntryError(path, "missing: an entry without its manifest cannot be verified")
    try:
        manifest = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DamagedEntryError(path, f"not a JSON manifest ({err})") from err
    if not isinstance(manifest, dict) or not isinstance(manifest.get("files"), dict) or "key" not in manifest:
        raise DamagedEntryError(path, "a manifest is an object with 'key' and 'files'")
    return manifest


def verify_entry(folder: Path) -> dict[str, Any]:
    """The entry's manifest, after checking its key is the folder's name and every file is there, alone,
    with its recorded size and SHA-256."""
    manifest = read_manifest(folder)
    if manifest["key"] != folder.name:
        raise DamagedEntryError(folder / MANIFEST, f"written for key {manifest['key']}, filed under {folder.name}")
    listed = manifest["files"]
    if SPEC not in listed or "rounds.csv" not in listed:
        raise DamagedEntryError(folder / MANIFEST, f"lists {sorted(listed)}; an entry has spec.json and rounds.csv")
    foreign = sorted(name for name in listed if name not in (SPEC, PROVENANCE) and not name.endswith(TABLE_SUFFIX))
    if foreign:
        raise DamagedEntryError(folder / foreign[0], f"not a file a run store entry holds (record tables as "
                                                     f"*{TABLE_SUFFIX}, {SPEC}, {PROVENANCE}): refused, though the "
                                                     "manifest lists it")
    present = {p.name for p in folder.iterdir()} - {MANIFEST}
    unlisted = sorted(present - set(listed))
    if unlisted:
        raise DamagedEntryError(folder / unlisted[0], "not listed in the manifest")
    for name, expected in sorted(listed.items()):
        path = folder / name
        if name not in present:
            raise DamagedEntryError(path, "missing")
        size = path.stat().st_size
        if size != expected.get("bytes"):
            raise DamagedEntryError(path, f"{size} bytes, the manifest says {expected.get('bytes')} "
                                          "(truncated or edited)")
        if file_sha256(path) != expected.get("sha256"):
            raise DamagedEntryError(path, "content differs from the manifest's SHA-256 (edited)")
    return manifest


def _read_table(path: Path, expected: dict[str, Any]) -> pd.DataFrame:
    if expected.get("rows") == 0 and expected.get("columns") == 0:
        return pd.DataFrame()  # an empty table is written as an empty line, which read_csv refuses
    try:
        frame = pd.read_csv(path, **_EXACT_FLOATS)
    except (ValueError, UnicodeDecodeError) as err:  # pandas' parser and empty-data errors are ValueErrors
        raise DamagedEntryError(path, f"not a readable CSV ({err})") from err
    if (len(frame), len(frame.columns)) != (expected.get("rows"), expected.get("columns")):
        raise DamagedEntryError(path, f"{len(frame)} rows x {len(frame.columns)} columns, the manifest says "
                                      f"{expected.get('rows')} x {expected.get('columns')}")
    dtypes = expected.get("dtypes")
    if frame.empty and dtypes is not None:  # entries written before dtypes were listed read as before
        if not isinstance(dtypes, dict) or sorted(dtypes) != sorted(str(c) for c in frame.columns):
            raise DamagedEntryError(path, f"the manifest's dtypes {dtypes!r} do not name this table's columns")
        try:
            frame = frame.astype(dtypes)
        except (TypeError, ValueError) as err:
            raise DamagedEntryError(path, f"the manifest's dtypes {dtypes!r} are not pandas dtypes ({err})") from err
    return frame


def read_entry(folder: Path) -> tuple[dict[str, Any], Records]:
    """(stored spec JSON, record tables) of a verified entry."""
    manifest = verify_entry(folder)
    try:
        spec_json = json.loads((folder / SPEC).read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise DamagedEntryError(folder / SPEC, f"not JSON ({err})") from err
    tables = {name[:-len(TABLE_SUFFIX)]: _read_table(folder / name, expected)
              for name, expected in sorted(manifest["files"].items()) if name.endswith(TABLE_SUFFIX)}
    return spec_json, tables


def verify_keyed_entry(folder: Path) -> tuple[dict[str, Any], Records]:
    """`read_entry`, and the stored spec with the manifest's context hashes to the folder's name: the entry is
    what its key says (a record edited with its manifest rehashed, or another spec filed under a key, fails)."""
    spec_json, records = read_entry(folder)
    try:
        spec = RunSpec.from_json(spec_json)
    except (ValueError, KeyError, TypeError) as err:
        raise DamagedEntryError(folder / SPEC, f"not a run spec ({err})") from err
    context = read_manifest(folder).get("context", "")
    if not isinstance(context, str) or spec.key(context) != folder.name:
        raise DamagedEntryError(folder / SPEC, "its spec and the manifest's context do not hash to the key")
    return spec_json, records
