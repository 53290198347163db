"""A claims bundle saved beside its claims table, and read back to judge again without executing the notebook.

`save(bundle, folder)` writes `folder/evidence/`: `manifest.json` (the bundle's class, and per field its kind and
file) and one file per table: DataFrames and Series as CSV (floats written exactly; dtypes and index columns
recorded in the manifest), numbers, strings and containers of them as JSON (NaN and inf allowed; mapping keys and
tuples keep their types), numeric arrays as JSON with their dtype, and dataclasses and containers holding tables
as folders. `load(folder)` rebuilds the bundle; the bundle class must be `fedlib.paper.bundle.Bundle` or a subclass in
a paper's folder (`fedlib.papers`) and every other class a dataclass of a `fedlib` module, so a data file never chooses which code runs.
"""
from __future__ import annotations

import dataclasses
import hashlib
import importlib
import json
import os
import re
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from fedlib.paper.bundle import Bundle

FOLDER = "evidence"


class EvidenceError(ValueError):
    """A saved evidence folder that cannot be read back: the message names the file and what to do."""


def _plain(value: Any) -> Any:
    """JSON-ready copy of a value `_is_plain` accepts: mappings (their keys' types kept), tuples, lists, numbers."""
    if isinstance(value, Mapping):
        return {"__pairs__": [[_plain(k), _plain(v)] for k, v in value.items()]}
    if isinstance(value, tuple):
        return {"__tuple__": [_plain(v) for v in value]}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _typed(value: Any) -> Any:
    """The inverse of `_plain`."""
    if isinstance(value, dict) and set(value) == {"__pairs__"}:
        return {_hashable(_typed(k)): _typed(v) for k, v in value["__pairs__"]}
    if isinstance(value, dict) and set(value) == {"__tuple__"}:
        return tuple(_typed(v) for v in value["__tuple__"])
    if isinstance(value, list):
        return [_typed(v) for v in value]
    return value


def _hashable(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


def _write_frame(frame: pd.DataFrame, path: Path) -> dict[str, Any]:
    index = [n if n is not None else f"level_{i}" for i, n in enumerate(frame.index.names)]
    keep = not isinstance(frame.index, pd.RangeIndex)
    flat = frame.reset_index(names=index) if keep else frame
    flat.to_csv(path, index=False)
    return {"index": index if keep else [], "index_names": list(frame.index.names) if keep else [],
            "dtypes": {str(c): str(t) for c, t in flat.dtypes.items()}, "columns": [str(c) for c in flat.columns]}


def _read_frame(path: Path, meta: Mapping[str, Any]) -> pd.DataFrame:
    try:
        frame = pd.read_csv(path, dtype={c: t for c, t in meta["dtypes"].items() if t != "bool"})
    except (OSError, ValueError, pd.errors.ParserError) as err:
        raise EvidenceError(f"{path}: unreadable ({err}); run the notebook again to save its evidence") from err
    if [str(c) for c in frame.columns] != meta["columns"]:
        raise EvidenceError(f"{path}: columns {list(frame.columns)} differ from the manifest's {meta['columns']}; "
                            "run the notebook again to save its evidence")
    for col, dtype in meta["dtypes"].items():
        if dtype == "bool":
            frame[col] = frame[col].map({True: True, False: False, "True": True, "False": False}).astype(bool)
    if not meta["index"]:
        return frame
    frame = frame.set_index(meta["index"])
    frame.index.names = meta["index_names"]
    return frame


def _is_plain(value: Any) -> bool:
    """Whether `value` is JSON-ready through `_plain`: numbers, strings, None and containers of them."""
    if isinstance(value, Mapping):
        return all(_is_plain(k) and _is_plain(v) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return all(_is_plain(v) for v in value)
    return value is None or isinstance(value, (bool, int, float, str, np.generic))


def _save_value(value: Any, stem: Path) -> dict[str, Any]:
    """Write `value` at `stem` (+ a suffix, or a folder for a container of tables) and return how to read it."""
    if isinstance(value, pd.Series):
        meta = _write_frame(value.to_frame(name=value.name if value.name is not None else "value"),
                            stem.with_suffix(".csv"))
        return {"kind": "series", "file": stem.with_suffix(".csv").name, "name": _plain(value.name), **meta}
    if isinstance(value, pd.DataFrame):
        return {"kind": "frame", "file": stem.with_suffix(".csv").name, **_write_frame(value, stem.with_suffix(".csv"))}
    if isinstance(value, np.ndarray) and value.dtype.kind in "biuf":
        stem.with_suffix(".json").write_text(json.dumps(value.tolist()))
        return {"kind": "array", "file": stem.with_suffix(".json").name, "dtype": value.dtype.str}
    if _is_plain(value):
        stem.with_suffix(".json").write_text(json.dumps(_plain(value)))
        return {"kind": "json", "file": stem.with_suffix(".json").name}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        stem.mkdir()
        cls = type(value)
        return {"kind": "dataclass", "file": stem.name, "class": f"{cls.__module__}:{cls.__qualname__}",
                "fields": {f.name: _save_value(getattr(value, f.name), stem / f.name)
                           for f in dataclasses.fields(value)}}
    if isinstance(value, (Mapping, list, tuple)):
        stem.mkdir()
        pairs = value.items() if isinstance(value, Mapping) else enumerate(value)
        items = [[_plain(k), _save_value(v, stem / _file_name(k, i))] for i, (k, v) in enumerate(pairs)]
        return {"kind": "mapping" if isinstance(value, Mapping) else type(value).__name__, "file": stem.name,
                "items": items}
    raise TypeError(f"bundle field {stem.name!r}: {type(value).__name__} cannot be saved as evidence; use a "
                    "DataFrame, Series, numeric array, dataclass, mapping, sequence or number")


def _file_name(key: Any, position: int) -> str:
    """A container item's file name: its key where that is a plain name (records/main.csv), else its position."""
    return key if isinstance(key, str) and re.fullmatch(r"[A-Za-z][A-Za-z0-9_-]{0,63}", key) else str(position)


# Where a saved class may come from: a module imported already, or one of the papers' and claims' modules, whose
# import only defines and registers (a file names no other module to import: `fedlib.runs.__main__` would run a CLI).
EVIDENCE_PACKAGES = ("fedlib.claims.", "fedlib.paper.", "fedlib.papers.")
BUNDLE_MODULES = ("fedlib.paper.bundle:", "fedlib.papers.")  # the base and each paper's (in its claims.py)


def _dataclass(name: str, where: Path) -> type:
    """The dataclass `module:Class` names, only from fedlib's modules imported already or `EVIDENCE_PACKAGES`."""
    module, _, qualname = name.partition(":")
    importable = module in sys.modules or (module.startswith(EVIDENCE_PACKAGES)
                                           and "__main__" not in module.split("."))
    if (not module.startswith("fedlib.") or not importable
            or not all(part.isidentifier() for part in qualname.split("."))):
        raise EvidenceError(f"{where}: class {name!r} is not one of fedlib's; this file was not written by fedlib: "
                            "delete the folder and run the notebook again")
    cls: Any = importlib.import_module(module)
    for part in qualname.split("."):
        cls = getattr(cls, part, None)
    if not (isinstance(cls, type) and dataclasses.is_dataclass(cls)):
        raise EvidenceError(f"{where}: {name!r} is not a dataclass (renamed since it was saved?); run the notebook "
                            "again to save its evidence")
    return cls


def _construct(cls: type, values: Mapping[str, Any], where: Path) -> Any:
    """`cls(**values)`; a class that no longer accepts them (changed since the save) is an `EvidenceError`."""
    try:
        return cls(**values)
    except (TypeError, ValueError) as err:
        raise EvidenceError(f"{where}: the saved values do not make a {cls.__qualname__} any more ({err}); run the "
                            "notebook again to save its evidence") from err


def _load_value(meta: Mapping[str, Any], folder: Path) -> Any:
    path = folder / meta["file"]
    kind = meta["kind"]
    if kind in ("frame", "series"):
        frame = _read_frame(path, meta)
        return frame.iloc[:, 0].rename(_typed(meta["name"])) if kind == "series" else frame
    if kind == "dataclass":
        cls = _dataclass(meta["class"], path)
        return _construct(cls, {name: _load_value(m, path) for name, m in meta["fields"].items()}, path)
    if kind in ("mapping", "list", "tuple"):
        values = [(_hashable(_typed(k)), _load_value(m, path)) for k, m in meta["items"]]
        return dict(values) if kind == "mapping" else (list if kind == "list" else tuple)(v for _, v in values)
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise EvidenceError(f"{path}: unreadable ({err}); run the notebook again to save its evidence") from err
    return np.asarray(data, dtype=np.dtype(meta["dtype"])) if kind == "array" else _typed(data)


def save(bundle: Bundle, folder: Path, claims: str) -> Path:
    """Write `bundle`, judged by the claims of the paper named `claims`, to `folder/evidence/` (replacing an
    earlier one only once the new one is complete)."""
    target = Path(folder) / FOLDER
    partial = Path(folder) / f".{FOLDER}.{os.getpid()}"
    shutil.rmtree(partial, ignore_errors=True)
    partial.mkdir(parents=True)
    fields = {f.name: _save_value(getattr(bundle, f.name), partial / f.name) for f in dataclasses.fields(bundle)}
    cls = type(bundle)
    manifest = {"claims": claims, "bundle": f"{cls.__module__}:{cls.__qualname__}", "fields": fields}
    (partial / "manifest.json").write_text(json.dumps(manifest, indent=1))
    old = Path(folder) / f".{FOLDER}.old.{os.getpid()}"
    if target.exists():
        target.rename(old)
    partial.rename(target)
    shutil.rmtree(old, ignore_errors=True)
    return target


def bundle_class(name: str, where: Path) -> type[Bundle]:
    """The `Bundle` (sub)class `module:Class` names, only from `BUNDLE_MODULES`."""
    if not name.startswith(BUNDLE_MODULES):
        raise EvidenceError(f"{where}: bundle class {name!r} is not one of fedlib's papers' bundles; this file was not "
                            "written by fedlib: delete the folder and run the notebook again")
    cls = _dataclass(name, where)
    if not issubclass(cls, Bundle):
        raise EvidenceError(f"{where}: {name!r} is not a Bundle class (renamed since it was saved?); run the notebook "
                            "again to save its evidence")
    return cls


def load(folder: Path) -> tuple[str, Bundle]:
    """(the claims module's name, the bundle) saved by `save` under `folder/evidence/`."""
    root = Path(folder) / FOLDER
    manifest_path = root / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except FileNotFoundError:
        raise EvidenceError(f"{manifest_path}: no saved evidence; run the notebook (reproduce without --claims-only) "
                            "first") from None
    except ValueError as err:
        raise EvidenceError(f"{manifest_path}: not valid JSON ({err}); run the notebook again") from err
    cls = bundle_class(manifest.get("bundle", ""), manifest_path)
    expected = {f.name for f in dataclasses.fields(cls)}
    if set(manifest.get("fields", {})) != expected:
        raise EvidenceError(f"{manifest_path}: fields {sorted(manifest.get('fields', {}))} differ from "
                            f"{cls.__qualname__}'s {sorted(expected)}; run the notebook again to save its evidence")
    values = {name: _load_value(meta, root) for name, meta in manifest["fields"].items()}
    return str(manifest.get("claims", "")), _construct(cls, values, manifest_path)



def digest(folder: Path) -> str | None:
    """SHA-256 of `folder/evidence/` (every file's path and bytes, in path order); None where there is none."""
    root = Path(folder) / FOLDER
    if not root.is_dir():
        return None
    h = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        h.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()
