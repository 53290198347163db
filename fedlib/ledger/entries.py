"""The evidence ledger: a folder committed with the repository (`evidence/gpu/`) holding one archive per finished run.

An entry is `<experiment>-<spec key>-<data fingerprint>.tar.gz`: a run store export (`fedlib.runs.archive`) of exactly
one store entry, so it is read and verified as store entries are (`manifest.json` with every file's size and
SHA-256; the spec and the manifest's context hash to the folder's key), holding the run's record tables as CSV
(gzip-compressed in the archive; no model weights, no checkpoints), `spec.json`, and `provenance.json`, listed in
the manifest like every other file:

    {"device": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "torch": "2.13.0", "cuda": "12.8",
     "commit": "a890034...", "uncommitted_changes": false, "code_version": <the store key's code hash>,
     "data": <the data fingerprint>, "definitions": {"fedlib.federation.run_federation": <digest>, ...},
     "wall_s": 41.2, "client_steps": 120000, "finished": "2026-11-27T14:02:11Z", "fedlib_version": "0.1.0"}

An entry matches a run by its spec and data fingerprint (the file's name), never by the store key: the key also
covers the code and the machine, which differ between the GPU that computed a run and the CPU that judges it.
When today's code for the spec differs from the entry's `code_version`, the entry is still used, and `changed_since`
names the definitions that changed (from the per-definition digests in `definitions`). Every read verifies the
whole entry; a damaged one raises `LedgerError` naming the archive and the member.
"""
from __future__ import annotations

import hashlib
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

import fedlib
from fedlib.paths import checkout
from fedlib.runs.archive import ArchiveError, export_entries, unpack
from fedlib.runs.entry import (MANIFEST, DamagedEntryError, Records, describe, read_manifest, verify_entry,
                               verify_keyed_entry, write_atomic)
from fedlib.runs.fingerprint import code_roots, hashed_packages, reached_definitions
from fedlib.runs.runner import tidy_runs
from fedlib.runs.spec import RunSpec
from fedlib.runs.store import MARKER, TEMP_PREFIX, RunStore

PROVENANCE = "provenance.json"
SUFFIX = ".tar.gz"
# What the whole gpu profile's ledger may take in the repository: a few tens of MB (tests/test_ledger.py extrapolates
# a measured entry to the profile's runs against it; a piece prints the ledger's size against it).
BUDGET_BYTES = 40 * 2**20
COMMIT_VAR = "FEDLIB_COMMIT"  # the commit of a copy sent to another machine (scripts/gpu_lease.sh sets it)
README, INDEX = "README.md", "INDEX.tsv"  # what a ledger folder may hold beside its archives
CLAIMS = ".claims"  # the pieces' claims on the runs they compute (`fedlib.ledger.claims`)


class NotALedgerError(ValueError):
    """A path given as a ledger that is none: nothing is read from it or written into it."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        super().__init__(f"{path} is not a ledger: {problem}")


class LedgerError(ValueError):
    """A ledger entry that cannot be used: "<archive>: <problem>"."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        super().__init__(f"{path}: {problem}")


@dataclass(frozen=True)
class LedgerEntry:
    path: Path
    key: str  # the run store key it was computed under, on the machine that computed it
    spec: RunSpec
    records: Records
    provenance: Mapping[str, Any]

    @property
    def data(self) -> str:
        return str(self.provenance["data"])

    @property
    def commit(self) -> str:
        return str(self.provenance.get("commit", "unknown"))


def entry_name(spec: RunSpec, data: str) -> str:
    return f"{spec.experiment}-{spec.key()}-{data}{SUFFIX}"


def definition_digests(spec: RunSpec, root: str | Path | None = None) -> dict[str, str]:
    """"module.name" -> digest of each definition the spec's store key hashes (`fedlib.runs.fingerprint`)."""
    reached = reached_definitions(code_roots(spec, root), hashed_packages(spec))
    return {f"{module}.{name}": hashlib.sha256(dump.encode()).hexdigest()[:12]
            for (module, name), dump in sorted(reached.items())}


def changed_since(entry: LedgerEntry, today: Mapping[str, str]) -> list[str]:
    """The definitions whose digest differs between the entry's provenance and `today` (`definition_digests`),
    those gone ("(gone)") and those new ("(new)")."""
    then = entry.provenance.get("definitions") or {}
    changed = [name for name in sorted(set(then) & set(today)) if then[name] != today[name]]
    return changed + [f"{n} (gone)" for n in sorted(set(then) - set(today))] + \
        [f"{n} (new)" for n in sorted(set(today) - set(then))]


def git_commit() -> tuple[str, bool | None]:
    """(the commit of the code running here, whether tracked files differ from it): $FEDLIB_COMMIT where it is set
    (a copy sent to another machine: the sender names its commit, and whatever .git travelled with the copy may
    be older) and None; else this checkout's commit and its state; else "unknown" and None."""
    if os.environ.get(COMMIT_VAR):
        return os.environ[COMMIT_VAR], None
    found = checkout()
    try:
        run = {"cwd": found, "capture_output": True, "text": True, "check": True}
        commit = subprocess.run(["git", "rev-parse", "HEAD"], **run).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], **run).stdout.strip())
        return commit, dirty
    except (OSError, subprocess.CalledProcessError):
        return "unknown", None


def device_name(device: str) -> str:
    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"CPU {platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def provenance(spec: RunSpec, store: RunStore, root: str | Path | None, wall_s: float,
               client_steps: int) -> dict[str, Any]:
    """Where and how `spec`'s run in `store` was computed (the module docstring's fields)."""
    context = json.loads(store.context(spec))
    commit, dirty = git_commit()
    return {"device": context["device"], "device_name": device_name(context["device"]), "torch": torch.__version__,
            "cuda": torch.version.cuda, "commit": commit, "uncommitted_changes": dirty,
            "code_version": context["code"], "data": context["data"], "definitions": definition_digests(spec, root),
            "wall_s": round(wall_s, 3), "client_steps": int(client_steps),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "fedlib_version": fedlib.__version__}


class Ledger:
    """The ledger folder `root`: its entries' archives, and beside them only its README.md, its INDEX.tsv, the
    pieces' claims and the temporaries of entries being written; an empty folder is an empty ledger. Every read
    checks the folder first (`require`); a piece creates a missing one (`create`)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def strangers(self) -> list[Path]:
        """What the folder holds that no ledger does."""
        own = {README, INDEX, CLAIMS}
        return sorted(p for p in self.root.iterdir() if p.name not in own and not p.name.startswith(TEMP_PREFIX)
                      and not (p.name.endswith(SUFFIX) and p.is_file()))

    def require(self, *, creatable: bool = False) -> None:
        """Raise `NotALedgerError` unless `root` is a ledger folder, or, `creatable`, a missing folder in an
        existing one (a piece creates it)."""
        what = "give a ledger folder such as evidence/gpu"
        if not self.root.exists():
            if creatable and self.root.parent.is_dir():
                return
            raise NotALedgerError(self.root, f"no such folder; {what}" + (
                f" (a piece creates a missing ledger folder only in an existing folder, and {self.root.parent} is "
                "none)" if creatable else ""))
        if not self.root.is_dir():
            raise NotALedgerError(self.root, f"a file, not a folder; {what}")
        if (self.root / MARKER).exists():
            raise NotALedgerError(self.root, f"it is a run store (it has {MARKER}); {what}")
        strangers = self.strangers()
        if strangers:
            more = f" and {len(strangers) - 1} more" if len(strangers) > 1 else ""
            raise NotALedgerError(self.root, f"it holds {strangers[0].name!r}{more}, and a ledger holds only "
                                             f"<experiment>-<spec key>-<data>{SUFFIX} archives, {README} and "
                                             f"{INDEX}; {what}")

    def create(self) -> bool:
        """Make the ledger folder where it is missing and its parent exists (True: made now); `NotALedgerError`
        where the path is no ledger, or its parent is missing."""
        self.require(creatable=True)
        try:
            self.root.mkdir()
        except FileExistsError:
            return False
        return True

    def paths(self) -> list[Path]:
        """The entries' archives (`NotALedgerError` where the folder is no ledger)."""
        self.require()
        return sorted(self.root.glob(f"*{SUFFIX}"))

    def entries(self) -> list[LedgerEntry]:
        """Every entry, verified (`LedgerError` for the first damaged one)."""
        return [read_entry_archive(path) for path in self.paths()]

    def digest(self) -> str:
        """sha256 over every archive's name and bytes: what a file rendered from this ledger names."""
        h = hashlib.sha256()
        for path in self.paths():
            h.update(path.name.encode() + b"\0" + hashlib.sha256(path.read_bytes()).digest())
        return h.hexdigest()

    def size_bytes(self) -> int:
        return sum(path.stat().st_size for path in self.paths())

    def records(self, specs: Sequence[RunSpec]) -> Records:
        """`held_records` of the ledger's entries (each archive read and verified)."""
        return held_records(self.entries(), specs)

    def add(self, store: RunStore, spec: RunSpec, prov: Mapping[str, Any]) -> Path:
        """Export `spec`'s store entry with `prov` as its provenance into the ledger (replacing an entry of the same
        spec and data, e.g. a stale one recomputed); written whole or not at all. The folder must exist (`create`)."""
        folder = store.folder(spec)
        verify_entry(folder)
        target = self.root / entry_name(spec, prov["data"])
        with tempfile.TemporaryDirectory(dir=self.root, prefix=TEMP_PREFIX) as tmp:
            copy = Path(tmp) / folder.name
            shutil.copytree(folder, copy)
            manifest = read_manifest(copy)
            manifest.pop("origin", None)
            (copy / PROVENANCE).write_text(json.dumps(dict(prov), indent=1, sort_keys=True))
            manifest["files"][PROVENANCE] = describe(copy / PROVENANCE)
            write_atomic(copy / MANIFEST, json.dumps(manifest, indent=1, sort_keys=True))
            archive = Path(tmp) / target.name
            export_entries(store, [copy], archive)
            os.replace(archive, target)
        return target


def held_records(entries: Sequence[LedgerEntry], specs: Sequence[RunSpec]) -> Records:
    """The tidy records (`fedlib.runs.runner.tidy_runs`, the entry's store key as `run`) of those of `specs` that
    `entries` hold, whatever their data fingerprint (a machine without the dataset cannot check it)."""
    held = {entry.spec: entry for entry in entries}
    return tidy_runs((spec, held[spec].key, held[spec].records) for spec in specs if spec in held)


def read_entry_archive(path: Path) -> LedgerEntry:
    """The verified entry in the archive `path`; `LedgerError` naming the archive (and the member) if damaged."""
    with tempfile.TemporaryDirectory(prefix="fedlib-ledger-") as tmp:
        try:
            unpack(path, Path(tmp))
        except ArchiveError as err:
            raise LedgerError(path, f"not a readable ledger archive: {err.problem}") from err
        folders = list(Path(tmp).iterdir())
        if len(folders) != 1:
            raise LedgerError(path, f"holds {len(folders)} run store entries; a ledger entry holds exactly one")
        folder = folders[0]
        try:
            spec_json, records = verify_keyed_entry(folder)
            manifest = read_manifest(folder)
            if PROVENANCE not in manifest["files"]:
                raise DamagedEntryError(folder / MANIFEST, f"lists no {PROVENANCE}")
            prov = json.loads((folder / PROVENANCE).read_text())
            key = folder.name
        except DamagedEntryError as damage:
            raise LedgerError(path, f"damaged member {damage.path.relative_to(tmp)}: {damage.problem}") from damage
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise LedgerError(path, f"{PROVENANCE} is not JSON ({err})") from err
    spec = RunSpec.from_json(spec_json)
    data = json.loads(manifest.get("context", "{}")).get("data")
    if not isinstance(prov, dict) or prov.get("data") != data:
        raise LedgerError(path, f"{PROVENANCE} names data {prov.get('data') if isinstance(prov, dict) else None}, "
                                f"the manifest's context {data}")
    if path.name != entry_name(spec, data):
        raise LedgerError(path, f"holds the run {entry_name(spec, data)}: filed under another name")
    return LedgerEntry(path, key, spec, records, prov)
