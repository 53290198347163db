"""The evidence ledger: a folder committed with the repository (`evidence/gpu/`) holding one archive per finished run.

An entry is `<experiment>-<spec key>-<data fingerprint>.tar.gz`: a run store export (`fedlib.runs.archive`) of exactly
one store entry, so it is read and verified as store entries are (`manifest.json` with every file's size and
SHA-256; the spec and the manifest's context hash to the folder's key), holding the run's record tables as CSV
(gzip-compressed in the archive; no model weights, no checkpoints), `spec.json`, and `provenance.json`, listed in
the manifest like every other file:

    {"device": "cuda", "device_name": "NVIDIA H100 80GB HBM3", "torch": "2.13.0", "cuda": "12.8",
     "commit": "a890034...", "uncommitted_changes": false, "code_version": <the store key's code hash>,
     "data": <the data fingerprint>, "definitions": {"fedlib.engine.federation.run_federation": <digest>, ...},
     "wall_s": 41.2, "client_steps": 120000, "seed_batch": 1, "resumed_after_round": 0,
     "numerics": {"cudnn_tf32": true, "matmul_tf32": false, "cudnn_benchmark": false, "cudnn_deterministic": false},
     "finished": "2026-11-27T14:02:11Z", "fedlib_version": "0.1.0"}

`uncommitted_changes` says whether tracked files other than the ledger's own differed from `commit` (None: the
commit was named by the sender of a copy). A piece rewrites the ledger's tracked index with every entry, so CPU
entries written before 2026-11-30 18:30 UTC, which counted the index, mostly say true without any code change; what
code ran is in `definitions`, which `--from-ledger` compares with today's.

`numerics` (`fedlib.runs.fingerprint.numerics`) states the switches that set how the run's float32 arithmetic was
done: on a GPU, torch's defaults run cuDNN's convolutions in TF32 (10 bits of mantissa in the products) and matrix
products in full float32. Entries written before the field (2026-11-30) were computed by `python -m fedlib piece` in
fresh processes, where nothing sets these switches: they ran under those defaults. Since then a run under any other
setting is also keyed apart (its manifest's context names what differed from the defaults).

`wall_s` and `client_steps` are what the piece that exported the entry computed: for a run it resumed from a
checkpoint (`resumed_after_round` > 0), the rounds after that one, so that client-steps over wall seconds is the pace
of the computation. Entries written before that field count a resumed run's every client-step against the last
piece's seconds alone: their pace reads too fast (docs/ledger.md names them).

`seed_batch` is how many seeds of the run's cell trained together in one batch (`fedlib.engine.seed_batch`; 1: alone,
and absent from entries written before batching); a batched seed's `wall_s` is its share of the batch's wall time by
client-steps, so client-steps over wall seconds is the pace of the batch as a whole.

An entry matches a run by its spec and data fingerprint (the file's name), never by the store key: the key also
covers the code and the machine, which differ between the GPU that computed a run and the CPU that judges it.
When today's code for the spec differs from the entry's `code_version`, the entry is still used, and `changed_since`
names the definitions that changed (from the per-definition digests in `definitions`).

An entry proves its origin by its line in the ledger's index (`fedlib.ledger.index`, committed and reviewed like
code): every read (`Ledger.entries`, whatever serves the ledger: `--from-ledger`, `--headlines-only`, a notebook's
`ledger` parameter, a piece) checks each archive's SHA-256 against its line, then verifies the whole entry, its
provenance's device, torch and numeric switches against the manifest's context (what its run was keyed under), and
that no two entries hold one run (one spec, whatever the data fingerprint). Any problem refuses the whole ledger,
every problem named on its own line with its archive: a ledger with one entry that cannot prove its origin serves
nothing, since leaving out that entry alone would change what the rest decides (a claim missing a run, or a forged
run beside the genuine).
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
from fedlib.ledger.index import (INDEX, IndexLine, MalformedIndexError, is_one_line, locked, read_index,
                                 write_index)
from fedlib.paths import checkout
from fedlib.runs.archive import ArchiveError, export_entries, unpack
from fedlib.runs.entry import (MANIFEST, PROVENANCE, SPEC, DamagedEntryError, Records, describe, file_sha256,
                               read_manifest, verify_entry, verify_keyed_entry, write_atomic)
from fedlib.runs.fingerprint import (code_roots, code_version, hashed_packages, numerics, off_default,
                                     reached_definitions)
from fedlib.runs.runner import tidy_runs
from fedlib.runs.spec import KeyedRun, RunSpec
from fedlib.runs.store import MARKER, TEMP_PREFIX, RunStore

SUFFIX = ".tar.gz"
# What the whole gpu profile's ledger may take in the repository: a few tens of MB (tests/test_ledger.py extrapolates
# a measured entry to the profile's runs against it; a piece prints the ledger's size against it).
BUDGET_BYTES = 40 * 2**20
INDEX_COMMAND = "python -m fedlib.ledger index"  # writes or checks a ledger's index (`fedlib.ledger.cli`)
CPU_NAME = "CPU "  # how `device_name` begins for a CPU (a provenance naming a GPU on a CPU-keyed run is refused)
COMMIT_VAR = "FEDLIB_COMMIT"  # the commit of a copy sent to another machine (scripts/gpu_lease.sh sets it)
README = "README.md"
# Reviewed records about the entries beside them: what was corrected after a machine wrote them, and the digests
# as recorded (scripts/recompute_recorded_digests.py).
CORRECTIONS, RECORDED_DEFINITIONS = "CORRECTIONS.md", "recorded-definitions.json"
RECORDS = (README, INDEX, CORRECTIONS, RECORDED_DEFINITIONS)  # what a ledger folder may hold beside its archives
CLAIMS = ".claims"  # the pieces' claims on the runs they compute (`fedlib.ledger.claims`)


class NotALedgerError(ValueError):
    """A path given as a ledger that is none: nothing is read from it or written into it."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        super().__init__(f"{path} is not a ledger: {problem}")


class LedgerError(ValueError):
    """A ledger entry, or a ledger, that cannot be used: "<archive or index>: <problem>"."""

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
    spec_sha256: str  # of its spec.json, as its manifest lists it (verified)

    @property
    def data(self) -> str:
        return str(self.provenance["data"])

    @property
    def commit(self) -> str:
        return str(self.provenance.get("commit", "unknown"))


def entry_name(spec: RunSpec, data: str) -> str:
    return f"{run_prefix(spec)}{data}{SUFFIX}"


def run_prefix(spec: RunSpec) -> str:
    """What the names of every entry of `spec`'s run begin with, whatever its data fingerprint."""
    return f"{spec.experiment}-{spec.key()}-"


def index_line(entry: LedgerEntry, archive_sha256: str) -> IndexLine:
    """The entry's line in the ledger's index (`fedlib.ledger.index`); ValueError for a value a line cannot hold."""
    prov = entry.provenance
    return IndexLine(entry.path.name, entry.spec.experiment, entry.spec.key(), entry.spec_sha256,
                     str(prov.get("device")), str(prov.get("device_name")), entry.commit, archive_sha256)


def definition_digests(spec: RunSpec, root: str | Path | None = None) -> dict[str, str]:
    """"module.name" -> digest of each definition the spec's store key hashes (`fedlib.runs.fingerprint`)."""
    reached = reached_definitions(code_roots(spec, root), hashed_packages(spec))
    return {f"{module}.{name}": hashlib.sha256(dump.encode()).hexdigest()[:12]
            for (module, name), dump in sorted(reached.items())}


def changed_since(entry: LedgerEntry, today: Mapping[str, str]) -> list[str]:
    """The definitions whose digest differs between the entry's provenance and `today` (`definition_digests`),
    those gone ("(gone)") and those new ("(new)"). One gone from a module and new in another under the same name
    has moved: with the same digest it is neither; the only one of its name on both sides, with another digest, it
    reads as changed under today's name ("(moved from <module>)")."""
    then = entry.provenance.get("definitions") or {}
    gone, new = ({n: a[n] for n in set(a) - set(b)} for a, b in ((then, today), (today, then)))
    unchanged = {(_short(n), d) for n, d in gone.items()} & {(_short(n), d) for n, d in new.items()}
    gone, new = ({n: d for n, d in found.items() if (_short(n), d) not in unchanged} for found in (gone, new))
    moved = {n: was for n in new if len(was := [g for g in gone if _short(g) == _short(n)]) == 1
             and [m for m in new if _short(m) == _short(n)] == [n]}
    changed = [name for name in set(then) & set(today) if then[name] != today[name]]
    changed += [f"{n} (moved from {was[0].rpartition('.')[0]})" for n, was in moved.items()]
    moved_from = {was[0] for was in moved.values()}
    return sorted(changed) + [f"{n} (gone)" for n in sorted(gone) if n not in moved_from] + \
        [f"{n} (new)" for n in sorted(new) if n not in moved]


def _short(name: str) -> str:
    return name.rpartition(".")[2]


def changed_today(entry: LedgerEntry, root: str | Path | None = None) -> list[str]:
    """What makes `entry` stale: nothing ([]) where today's code for its spec is the code that computed it (the
    same code version, or definitions that differ only in where they live); else the definitions changed since
    (`changed_since`), or "definitions not recorded". `root`: where its run is built from, for today's code."""
    if entry.provenance.get("code_version") == code_version(entry.spec, root):
        return []
    if not entry.provenance.get("definitions"):
        return ["definitions not recorded"]
    return changed_since(entry, definition_digests(entry.spec, root))


def git_commit(outputs: Path | None = None) -> tuple[str, bool | None]:
    """(the commit of the code running here, whether tracked files differ from it): $FEDLIB_COMMIT where it is set
    (a copy sent to another machine: the sender names its commit, and whatever .git travelled with the copy may
    be older) and None; else this checkout's commit and its state; else "unknown" and None. Tracked files under
    `outputs` (the ledger a piece writes into, its index among them) do not count: they are what the run adds, not
    the code it ran."""
    if os.environ.get(COMMIT_VAR):
        return os.environ[COMMIT_VAR], None
    found = checkout()
    try:
        run = {"cwd": found, "capture_output": True, "text": True, "check": True}
        commit = subprocess.run(["git", "rev-parse", "HEAD"], **run).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no",
                                     *_all_but(found, outputs)], **run).stdout.strip())
        return commit, dirty
    except (OSError, subprocess.CalledProcessError):
        return "unknown", None


def _all_but(checkout_dir: Path | None, outputs: Path | None) -> list[str]:
    """git pathspecs for the whole checkout but `outputs`, where `outputs` lies inside it (else none: all of it)."""
    if checkout_dir is None or outputs is None:
        return []
    try:
        inside = Path(outputs).resolve().relative_to(checkout_dir.resolve())
    except ValueError:
        return []
    return ["--", ".", f":(exclude){inside.as_posix()}"]


def device_name(device: str) -> str:
    if device == "cuda" and torch.cuda.is_available():
        return torch.cuda.get_device_name(0)
    return f"{CPU_NAME}{platform.processor() or platform.machine()} ({os.cpu_count()} cores)"


def provenance(run: KeyedRun, root: str | Path | None, wall_s: float, client_steps: int, seed_batch: int = 1,
               resumed_after: int = 0, ledger: Path | None = None) -> dict[str, Any]:
    """Where and how `run` was computed, as keyed (the module docstring's fields): `client_steps` those `wall_s`
    paid for, the rounds after `resumed_after` for a run resumed from its checkpoint; `ledger`: the folder the entry
    goes to (its files are not counted as uncommitted changes)."""
    context, spec = json.loads(run.context), run.spec
    commit, dirty = git_commit(ledger)
    return {"device": context["device"], "device_name": device_name(context["device"]), "torch": torch.__version__,
            "cuda": torch.version.cuda, "commit": commit, "uncommitted_changes": dirty,
            "code_version": context["code"], "data": context["data"], "definitions": definition_digests(spec, root),
            "wall_s": round(wall_s, 3), "client_steps": int(client_steps), "seed_batch": int(seed_batch),
            "resumed_after_round": int(resumed_after), "numerics": numerics(context["device"]),
            "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "fedlib_version": fedlib.__version__}


class Ledger:
    """The ledger folder `root`: its entries' archives, and beside them only its `RECORDS` (README, index,
    corrections), the pieces' claims and the temporaries of entries being written; an empty folder is an empty
    ledger. Every read checks the folder first (`require`); a piece creates a missing one (`create`)."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)

    def strangers(self) -> list[Path]:
        """What the folder holds that no ledger does."""
        own = {*RECORDS, CLAIMS}
        being_written = (TEMP_PREFIX, *(f".{record}." for record in RECORDS))  # an entry, or a record (`write_atomic`)
        return sorted(p for p in self.root.iterdir() if p.name not in own and not p.name.startswith(being_written)
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
                                             f"<experiment>-<spec key>-<data>{SUFFIX} archives and "
                                             f"{', '.join(RECORDS)}; {what}")

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
        """Every entry, each proving its origin (`check`); else `LedgerError` naming every problem, and nothing
        served."""
        entries, problems = self.check()
        if problems:
            raise LedgerError(self.root, f"refused whole, {len(problems)} problem(s); nothing in it is served while "
                                         "an entry cannot prove its origin:\n" + "\n".join(map(str, problems)))
        return entries

    def check(self) -> tuple[list[LedgerEntry], list[LedgerError]]:
        """(the entries that prove their origin, a `LedgerError` per problem): each archive against its line in the
        index (listed, same SHA-256, same columns), each index line against an archive, each entry verified
        (`read_entry_archive`), and no two entries of one run (see the module docstring)."""
        self.require()
        with locked(self.root, shared=True):
            try:
                index = read_index(self.root)
            except MalformedIndexError as err:
                return [], [LedgerError(err.path, err.problem)]
            paths = self.paths()
            problems = [LedgerError(self.root / name, f"listed in {INDEX} but missing: restore it (git checkout), or "
                                                      f"write the index again ({INDEX_COMMAND} --write)")
                        for name in sorted(set(index or {}) - {path.name for path in paths})]
            vouched = []
            for path in paths:
                line, found = (index or {}).get(path.name), file_sha256(path)
                if line is None:
                    problems.append(LedgerError(path, f"not in {self.root / INDEX}: no archive is served that the "
                                                      f"index does not vouch for; review it, then {INDEX_COMMAND} "
                                                      "--write and commit the index"))
                elif line.archive_sha256 != found:
                    problems.append(LedgerError(path, f"SHA-256 {found[:16]}... differs from its line in {INDEX} "
                                                      f"({line.archive_sha256[:16]}...): its bytes changed since it "
                                                      "was indexed; restore it (git checkout) or recompute its run"))
                else:
                    vouched.append((path, line))
            entries, unread = read_entries([path for path, _ in vouched])
        problems += unread
        lines = {path: line for path, line in vouched}
        for entry in entries:
            differ = lines[entry.path].differing(index_line(entry, lines[entry.path].archive_sha256))
            if differ:
                problems.append(LedgerError(entry.path, f"its {', '.join(differ)} differ from its line in {INDEX}"))
        refused = {problem.path for problem in problems}
        return [entry for entry in entries if entry.path not in refused], problems

    def reindex(self) -> tuple[list[str], list[LedgerError]]:
        """Index every archive there is (`python -m fedlib.ledger index --write`: the user vouches for them) when
        each reads as verified and no two hold one run; return (one line per change to the index, the problems:
        where there is one, the index is left as it was)."""
        with locked(self.root):
            entries, problems = read_entries(self.paths())
            if problems:
                return [], problems
            try:
                before = read_index(self.root) or {}
            except MalformedIndexError:
                before = {}
            after = {entry.path.name: index_line(entry, file_sha256(entry.path)) for entry in entries}
            write_index(self.root, after.values())
        return ([f"added {name}" for name in sorted(set(after) - set(before))]
                + [f"changed {name}: {', '.join(after[name].differing(before[name]))}"
                   for name in sorted(set(after) & set(before)) if after[name] != before[name]]
                + [f"removed {name}" for name in sorted(set(before) - set(after))]), []

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

    def add(self, store: RunStore, run: KeyedRun, prov: Mapping[str, Any]) -> Path:
        """Export `run`'s store entry with `prov` as its provenance into the ledger with its line in the index,
        both written whole or not at all, one writer at a time (`fedlib.ledger.index.locked`); the folder must exist
        (`create`). It replaces an entry of the same spec and data (a stale one recomputed: its index line changes
        with it); `LedgerError` naming both where the ledger holds the run under another data fingerprint (a ledger
        holds one entry per run)."""
        folder = store.folder(run)
        verify_entry(folder)
        target = self.root / entry_name(run.spec, prov["data"])
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
            line = index_line(read_entry_archive(archive), file_sha256(archive))
            with locked(self.root):
                other = [p.name for p in self.paths() if p.name.startswith(run_prefix(run.spec)) and p != target]
                if other:
                    raise LedgerError(target, f"the ledger holds this run already as {other[0]} (other data): a "
                                              "ledger holds one entry per run; remove that one first (git rm) to "
                                              "replace it")
                try:
                    lines = read_index(self.root) or {}
                except MalformedIndexError as err:
                    raise LedgerError(err.path, err.problem) from err
                os.replace(archive, target)
                write_index(self.root, {**lines, target.name: line}.values())
        return target


def read_entries(paths: Sequence[Path]) -> tuple[list[LedgerEntry], list[LedgerError]]:
    """(the entries of the archives `paths` that read as verified, a `LedgerError` per one that does not and per two
    that hold one run, naming both)."""
    entries, problems = [], []
    for path in paths:
        try:
            entries.append(read_entry_archive(path))
        except LedgerError as err:
            problems.append(err)
    first: dict[RunSpec, LedgerEntry] = {}
    refused = {problem.path for problem in problems}
    for entry in entries:
        earlier = first.setdefault(entry.spec, entry)
        if earlier is not entry:
            problems.append(LedgerError(entry.path, f"holds the same run as {earlier.path.name} (data "
                                                    f"{entry.data} and {earlier.data}): a ledger holds one entry per "
                                                    "run; remove the one the claims must not rest on"))
            refused |= {entry.path, earlier.path}
    return [entry for entry in entries if entry.path not in refused], problems


def held_records(entries: Sequence[LedgerEntry], specs: Sequence[RunSpec]) -> Records:
    """The tidy records (`fedlib.runs.runner.tidy_runs`, the entry's store key as `run`) of those of `specs` that
    `entries` hold, whatever their data fingerprint (a machine without the dataset cannot check it)."""
    held = {entry.spec: entry for entry in entries}
    return tidy_runs((spec, held[spec].key, held[spec].records) for spec in specs if spec in held)


def read_entry_archive(path: Path) -> LedgerEntry:
    """The verified entry in the archive `path`; `LedgerError` naming the archive (and the member) if damaged, or if
    its provenance's data, device, torch or numeric switches (those off torch's defaults; none where it states none)
    differ from the manifest's context (what its run was keyed under)."""
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
            context = json.loads(manifest["context"])
            key = folder.name
        except DamagedEntryError as damage:
            raise LedgerError(path, f"damaged member {damage.path.relative_to(tmp)}: {damage.problem}") from damage
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise LedgerError(path, f"{PROVENANCE} or the manifest's context is not JSON ({err})") from err
    spec = RunSpec.from_json(spec_json)
    if not isinstance(prov, dict) or not isinstance(context, dict):
        raise LedgerError(path, f"{PROVENANCE} and the manifest's context must be JSON objects")
    for field in ("data", "device", "torch"):
        if prov.get(field) != context.get(field):
            raise LedgerError(path, f"{PROVENANCE} names {field} {prov.get(field)}, the manifest's context (what its "
                                    f"run was keyed under) {context.get(field)}: a provenance that does not describe "
                                    "its run")
    declared = prov.get("numerics", {})
    off = off_default(declared) if isinstance(declared, dict) else declared
    if off != context.get("numerics", {}):
        raise LedgerError(path, f"{PROVENANCE} names numeric switches off torch's defaults {off}, the manifest's "
                                f"context (what its run was keyed under) {context.get('numerics', {})}: a provenance "
                                "that does not describe its run")
    for field in ("device_name", "commit"):  # what the index shows of it: one line of text each
        if not is_one_line(prov.get(field)):
            raise LedgerError(path, f"{PROVENANCE} names {field} {prov.get(field)!r}: not one line of text")
    named_cpu = prov["device_name"].startswith(CPU_NAME)
    if prov["device"] in ("cpu", "cuda") and named_cpu != (prov["device"] == "cpu"):  # other kinds: not told by name
        raise LedgerError(path, f"{PROVENANCE} names device {prov['device']} and the device {prov.get('device_name')}: "
                                "a provenance that does not describe its run")
    if path.name != entry_name(spec, context["data"]):
        raise LedgerError(path, f"holds the run {entry_name(spec, context['data'])}: filed under another name")
    return LedgerEntry(path, key, spec, records, prov, manifest["files"][SPEC]["sha256"])
