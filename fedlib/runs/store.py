"""The run store: every finished run's records under `results/runs/`, keyed by content.

Layout: `<root>/<key>/` with `spec.json`, one CSV per record table (`rounds.csv`, `clients.csv`, and any
tables the experiment collects) and `manifest.json` (sizes, row counts and SHA-256 of each, the key, the
fedlib version: `fedlib.runs.entry`); `<root>/in-progress/<key>.pt` holds a running spec's checkpoint.
The store files a run under the key its caller hands it (`fedlib.runs.spec.KeyedRun`) and computes none: whoever
builds the run keys it (`fedlib.runs.fingerprint.Keys`). The key hashes the spec and its context: the code the
spec's run reaches (its engine, plan, algorithm, codecs, model and loader, without comments or docstrings), the
contents of the data files it reads, the torch version, device type, CPU kernel capability and, where torch picks
it, the thread count. A change there makes the entries it could affect stale (recomputed on the next request, never
silently reused); what the run does not reach (display helpers, record readers, other papers and components,
notebooks) does not.

A store is marked by its `.fedlib-run-store` file (`MARKER`, written with its first entry): the store commands
(`python -m fedlib.runs`) refuse a folder without it, and treat as entries only folders named as a key.

Every read verifies the entry against its manifest; a damaged entry (a file missing, truncated, edited or
unlisted, no manifest) is never served: it is moved to `<root>/.damaged/<key>-<time>/` with a
`DamagedEntryWarning` naming the file (in a read-only store it stays, skipped with the warning, and the other
entries still read), and `has` says False so `run_specs` recomputes it. Saves write a uniquely named temporary
folder and rename it into place: a reader sees a whole entry or none, and a second writer of the same key keeps
the first entry. Temporaries of processes that died are removed when a store is first used. A checkpoint
carries its spec and its key and is refused for any other, or when it holds as many rounds as the spec runs or
more. Nothing read from the store is executed: records are CSV, checkpoints load with
`torch.load(weights_only=True)`.

What the store can and cannot prove. The manifest proves an entry is whole and unchanged since its manifest was
written (damage, truncation, a partial copy, an edit without rehashing); `verify` and `import` also prove that its
spec and recorded context hash to its folder's name (no entry filed under another spec's or environment's key).
The key covers the spec and the context, not the records, and nothing is signed: whoever can write a store or an
archive can replace a record CSV and rehash the manifest, and no check here can tell those records from computed
ones. An imported entry carries its origin (`fedlib.runs.archive.origin`: the archive's name and when), which `ls`,
`run_specs` and REPORT.md show; it marks honest imports, not hostile edits (it is a manifest field, removable like
any other). Records are as trustworthy as whoever could write the store: to be sure of one, delete its entry and
compute it again.
"""
from __future__ import annotations

import errno
import json
import os
import re
import shutil
import socket
import time
import uuid
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from fedlib.paths import results_root
from fedlib.runs.entry import SPEC, DamagedEntryError, Records, read_entry, verify_entry, write_atomic, write_entry
from fedlib.runs.spec import KeyedRun, RunSpec
from fedlib.validate import instance

TEMP_PREFIX = ".writing-"  # + host-pid-random: a save or checkpoint being written
DAMAGED = ".damaged"  # where damaged entries are moved
IN_PROGRESS = "in-progress"
FOREIGN_TEMP_AGE_S = 3600.0  # another host's temporary older than this is left over from a dead process
START_SLACK_S = 5.0  # a process's start time read from /proc may be off by the boot time's rounding and clock steps
MARKER = ".fedlib-run-store"  # the file that makes a folder a run store (written with its first entry)
KEY = re.compile(r"^[0-9a-f]{24}$")  # an entry folder's name: `RunSpec.key`



class DamagedEntryWarning(UserWarning):
    """A damaged store entry was moved aside (it will be recomputed)."""


class NotAStoreError(ValueError):
    """A folder given as a run store that is none (no marker): the store commands touch nothing in it."""


def _temp_name(suffix: str = "") -> str:
    return f"{TEMP_PREFIX}{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:12]}{suffix}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def process_started_at(pid: int) -> float | None:
    """When the process `pid` started, in seconds since the epoch, where the system tells (Linux's `/proc`); else
    None."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        boot = next(float(line.split()[1]) for line in Path("/proc/stat").read_text().splitlines()
                    if line.startswith("btime "))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")  # field 22, the start in clock ticks after boot
    except (OSError, StopIteration, ValueError, IndexError):
        return None


def _pid_given_again(pid: int, path: Path) -> bool:
    """Whether the live process `pid` started after `path` was last written, so did not write it: the system gave
    the pid of a writer that died (or of a machine since restarted) to another process."""
    started = process_started_at(pid)
    try:
        return started is not None and started > path.lstat().st_mtime + START_SLACK_S
    except FileNotFoundError:
        return False


def writer_gone(host: str, pid: str, path: Path, foreign_age_s: float = FOREIGN_TEMP_AGE_S) -> bool:
    """Whether the process `pid` of `host` that wrote `path` is gone: on this host, a dead process or a live one that
    started after `path` was written (its pid given again); on another host (whose processes cannot be asked),
    `path` older than `foreign_age_s`."""
    if host == socket.gethostname() and pid.isdigit():
        return not _pid_alive(int(pid)) or _pid_given_again(int(pid), path)
    try:
        return time.time() - path.lstat().st_mtime > foreign_age_s
    except FileNotFoundError:
        return False


def _is_stale(path: Path) -> bool:
    """A temporary whose writer is gone: a dead process of this host, or another host's older than an hour."""
    host, _, pid = path.name[len(TEMP_PREFIX):].rpartition("-")[0].rpartition("-")
    return writer_gone(host, pid, path)


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        try:
            path.unlink(missing_ok=True)
        except OSError:  # a read-only store: left for a writable session to clean
            pass


def _write_error(err: OSError, target: Path) -> OSError:
    return OSError(err.errno, f"cannot write {target} ({err.strerror or err}); nothing was stored there. "
                              "Free disk space or make the run store writable (runs_root), then run again")


def unreadable_reason(err: Exception) -> str:
    """Why a checkpoint file could not be loaded, in one line."""
    return (str(err).strip().splitlines() or [type(err).__name__])[0]


class FileCheckpoint:
    """A run's checkpoint file (see `fedlib.core.contracts.Checkpoint`), tied to its spec and the spec's store key:
    it is resumed only when the spec, the key and the round count agree."""

    def __init__(self, path: Path, every: int, key: str, spec: RunSpec) -> None:
        if every < 1:
            raise ValueError(f"checkpoint every must be >= 1 round, got {every}")
        self.path, self.every, self.key, self.spec = path, every, key, spec

    def load(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        try:
            saved = torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception as err:  # a checkpoint we cannot read is reported, not trusted and not deleted
            raise ValueError(f"cannot read checkpoint {self.path} ({unreadable_reason(err)}); it holds only tensors "
                             "and plain data, so it is not loaded any other way: delete it to restart that "
                             "run") from err
        if not isinstance(saved, dict) or saved.get("key") != self.key or "state" not in saved:
            found = saved.get("key") if isinstance(saved, dict) else None
            raise ValueError(f"checkpoint {self.path} was written for store key {found}, not for this run's "
                             f"{self.key}: it is not resumed; delete it to restart that run")
        if saved.get("spec") != json.dumps(self.spec.to_json(), sort_keys=True):
            raise ValueError(f"checkpoint {self.path} was written for another spec than this run's (or before "
                             "checkpoints named their spec): it is not resumed; delete it to restart that run")
        done = rounds_done(saved["state"])
        if done is None or not 0 <= done < self.spec.rounds:
            raise ValueError(f"checkpoint {self.path} holds {done} finished rounds of a {self.spec.rounds}-round "
                             "run: it is not resumed; delete it to restart that run")
        return saved["state"]

    def save(self, state: dict[str, Any]) -> None:
        tmp = self.path.parent / _temp_name(".pt")
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            torch.save({"key": self.key, "spec": json.dumps(self.spec.to_json(), sort_keys=True), "state": state},
                       tmp)
            os.replace(tmp, self.path)
        except (OSError, RuntimeError) as err:  # torch reports a full disk as a RuntimeError naming no file
            tmp.unlink(missing_ok=True)
            if isinstance(err, OSError):
                raise _write_error(err, self.path) from err
            raise _write_error(OSError(errno.EIO, str(err).splitlines()[0] if str(err) else "write failed"),
                               self.path) from err
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise


def rounds_done(state: Any) -> int | None:
    """How many rounds a checkpointed federation state has finished (its server side's history rows), None if
    unreadable."""
    try:
        history = json.loads(state["server"]["history"])
    except (TypeError, KeyError, ValueError):
        return None
    return len(history) if isinstance(history, list) else None


@dataclass(frozen=True)
class Checkpointed:
    """A checkpoint in a run store, read to say what it holds, not resumed: its file, its run (None where it cannot be
    read), the rounds it finished (None: unknown), why it cannot be read ('' where it can), and when it was written
    (seconds since the epoch). Whether a run resumes it is decided when the run starts (`FileCheckpoint.load`: the
    key, which follows the code, must agree)."""

    path: Path
    spec: RunSpec | None
    done: int | None
    problem: str
    written: float


def read_checkpointed(path: Path, written: float) -> Checkpointed | None:
    """The checkpoint at `path`, None where it is gone (its run finished since the folder was listed)."""
    def unreadable(why: str) -> Checkpointed:
        return Checkpointed(path, None, None, why, written)

    try:
        saved = torch.load(path, map_location="cpu", weights_only=True)
    except FileNotFoundError:
        return None
    except Exception as err:  # a damaged file is named, never loaded any other way
        return unreadable(unreadable_reason(err))
    if not isinstance(saved, dict) or not isinstance(saved.get("spec"), str) or "state" not in saved:
        return unreadable("not a checkpoint that names its run (written by another version?)")
    try:
        spec = RunSpec.from_json(json.loads(saved["spec"]))
    except (ValueError, TypeError, KeyError) as err:
        return unreadable(f"its run spec cannot be read ({err})")
    return Checkpointed(path, spec, rounds_done(saved["state"]), "", written)


class RunStore:
    """The folder `root` of run store entries. It files and finds a run under the key its caller hands it (a
    `KeyedRun`, from `fedlib.runs.fingerprint.Keys`) and computes no key itself."""

    def __init__(self, root: str | Path) -> None:
        instance("RunStore root", root, (str, os.PathLike), "a folder, e.g. RunStore('results/runs')")
        self.root = Path(root)
        self._cleaned = False

    @staticmethod
    def at(root: str | Path | None = None) -> RunStore:
        """The store at `root`, or `runs/` under `fedlib.paths.results_root()` (the checkout's results/, or the
        working folder's outside a checkout), as a notebook's `runs_root` parameter says."""
        if root is not None and str(root) != "":
            return RunStore(root)
        return RunStore(results_root() / "runs")

    def check_context(self, run: KeyedRun, ran_with: str, where: str) -> None:
        """Raise RuntimeError unless the context a run was computed with (`ran_with`, from the process `where` it
        ran) is the one `run` is keyed with here: records are never filed under a key that describes another
        environment (e.g. a worker with fewer threads or other CPU kernels)."""
        if ran_with == run.context:
            return
        try:
            theirs, ours = json.loads(ran_with), json.loads(run.context)
            diff = "; ".join(f"{k}: {theirs.get(k)!r} there, {ours.get(k)!r} here"
                             for k in sorted(set(theirs) | set(ours)) if theirs.get(k) != ours.get(k))
        except (ValueError, AttributeError):
            diff = f"{ran_with!r} there, {run.context!r} here"
        spec = run.spec
        raise RuntimeError(f"run {spec.get('labels') or spec.algorithm.name} (seed {spec.seed}) ran {where} in another "
                           f"environment than this process keys it with ({diff}): its records are not filed here. "
                           "Run it where the environment matches, or pin the differing setting (e.g. -p threads)")

    def folder(self, run: KeyedRun) -> Path:
        return self.root / run.key

    def checkpoint(self, run: KeyedRun, every: int) -> FileCheckpoint:
        return FileCheckpoint(self.root / IN_PROGRESS / f"{run.key}.pt", every, run.key, run.spec)

    def is_store(self) -> bool:
        """True if the root is a run store: it holds the marker file its first save wrote."""
        return (self.root / MARKER).is_file()

    def require_store(self) -> None:
        """Raise `NotAStoreError` unless the root is a marked run store (before anything touches its folders)."""
        if not self.root.is_dir():
            raise NotAStoreError(f"{self.root} is not a folder: no run store there (check --root)")
        if not self.is_store():
            raise NotAStoreError(
                f"{self.root} is not a run store (it has no {MARKER} file; a store gets one with its first entry). "
                f"Check --root: a store is the folder of entry folders, e.g. results/runs. If {self.root} is a store "
                f"written before stores were marked, mark it: python -m fedlib.runs mark --root {self.root}")

    def mark(self) -> None:
        """Make the root a run store (idempotent): the marker file, written atomically."""
        if not self.is_store():
            write_atomic(self.root / MARKER, json.dumps({"fedlib_run_store": 1}) + "\n")

    def entries(self) -> list[Path]:
        """Every entry folder: named as a store key (not the temporaries, checkpoints, damaged entries or
        anything else a user keeps there)."""
        if not self.root.is_dir():
            return []
        return sorted(p for p in self.root.iterdir() if p.is_dir() and not p.is_symlink() and KEY.match(p.name))

    def checkpoints(self) -> list[Checkpointed]:
        """Every checkpoint of the store (runs stopped mid-way, or running now), oldest first, each read to say what
        it holds."""
        found = []
        for path in (self.root / IN_PROGRESS).glob("*.pt"):
            if path.name.startswith(TEMP_PREFIX):
                continue
            try:
                found.append((path.stat().st_mtime, path.name, path))
            except FileNotFoundError:  # its run finished meanwhile (a running piece removes it then)
                continue
        read = (read_checkpointed(path, written) for written, _, path in sorted(found))
        return [c for c in read if c is not None]

    def strangers(self) -> list[Path]:
        """What the root holds that this store did not write: neither an entry, nor its marker, checkpoints,
        temporaries or damaged entries. The store commands leave these alone."""
        own = {MARKER, IN_PROGRESS, DAMAGED, *(entry.name for entry in self.entries())}
        return sorted(p for p in self.root.iterdir() if p.name not in own and not p.name.startswith(TEMP_PREFIX))

    def temporary(self) -> Path:
        """A new, uniquely named empty folder in the store, to write an entry into before `place`."""
        tmp = self.root / _temp_name()
        try:
            tmp.mkdir(parents=True)
        except OSError as err:
            raise _write_error(err, tmp) from err
        return tmp

    def remove(self, folder: Path) -> None:
        """Delete an entry: renamed away first, so no reader sees it half deleted."""
        doomed = self.root / _temp_name()
        os.rename(folder, doomed)
        _remove(doomed)

    def clean_temporaries(self) -> list[Path]:
        """Remove the temporaries (unfinished saves and checkpoints) left by dead processes; return them."""
        found = [*self.root.glob(TEMP_PREFIX + "*"), *(self.root / IN_PROGRESS).glob(TEMP_PREFIX + "*")]
        stale = [path for path in found if _is_stale(path)]
        for path in stale:
            _remove(path)
        return stale

    def _clean_once(self) -> None:
        if not self._cleaned:
            self._cleaned = True
            self.clean_temporaries()

    def quarantine(self, folder: Path, damage: DamagedEntryError) -> Path | None:
        """Move a damaged entry to `<root>/.damaged/<key>-<time>/` with a warning; None if another process
        already moved it."""
        stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime())
        dest = self.root / DAMAGED / f"{folder.name}-{stamp}-{uuid.uuid4().hex[:6]}"
        try:
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.rename(folder, dest)
        except FileNotFoundError:
            return None
        except OSError as err:  # a read-only store: the entry is skipped, the other entries still read
            warnings.warn(f"run store entry {folder} is damaged ({damage}); it cannot be moved aside ({err.strerror}), "
                          "so it is skipped and will be recomputed", DamagedEntryWarning, stacklevel=3)
            return None
        warnings.warn(f"run store entry {folder} is damaged ({damage}); moved to {dest}, it will be recomputed",
                      DamagedEntryWarning, stacklevel=3)
        return dest

    def _read(self, run: KeyedRun) -> Records:
        """`run`'s verified records; a damaged entry is moved aside and its `DamagedEntryError` re-raised."""
        folder = self.folder(run)
        try:
            spec_json, records = read_entry(folder)
            if spec_json != run.spec.to_json():
                raise DamagedEntryError(folder / SPEC, "holds another spec than the one it is filed under")
        except DamagedEntryError as damage:
            self.quarantine(folder, damage)
            raise
        return records

    def has(self, run: KeyedRun) -> bool:
        """True if `run`'s entry is present and intact (a damaged one is moved aside: False)."""
        self._clean_once()
        if not self.folder(run).exists():
            return False
        try:
            self._read(run)
        except DamagedEntryError:
            return False
        return True

    def load(self, run: KeyedRun) -> Records:
        """`run`'s records, verified; `DamagedEntryError` (after moving the entry aside) if damaged."""
        if not self.folder(run).exists():
            raise FileNotFoundError(f"no run store entry {self.folder(run)} for this spec: run it with run_specs")
        return self._read(run)

    def save(self, run: KeyedRun, records: Records) -> Path:
        """Store `records` as `run`'s entry (atomically; if an intact entry is already there, keep it)."""
        if "rounds" not in records:
            raise ValueError("a run's records need a 'rounds' table")
        self._clean_once()
        folder = self.folder(run)
        tmp = self.temporary()
        try:
            write_entry(tmp, run.key, run.context, run.spec.to_json(), records)
        except OSError as err:
            _remove(tmp)
            raise _write_error(err, folder) from err
        except BaseException:
            _remove(tmp)
            raise
        try:
            self.place(tmp, folder)
        finally:
            _remove(tmp)
        self.checkpoint(run, 1).path.unlink(missing_ok=True)
        return folder

    def place(self, tmp: Path, folder: Path) -> None:
        """Rename the written entry `tmp` to `folder` (marking the store as one with its first entry); if an entry
        is there already, keep it when intact, replace it if damaged."""
        try:
            self.mark()
        except OSError as err:
            raise _write_error(err, folder) from err
        for _ in range(3):
            try:
                os.rename(tmp, folder)
                return
            except OSError as err:
                if err.errno not in (errno.EEXIST, errno.ENOTEMPTY):
                    raise _write_error(err, folder) from err
            try:
                verify_entry(folder)
                return  # a second writer of the same key: the first entry stays
            except DamagedEntryError as damage:
                self.quarantine(folder, damage)
            except FileNotFoundError:
                pass  # moved aside by another process meanwhile: try again
        raise OSError(errno.EEXIST, f"cannot place run store entry {folder}: it keeps changing under "
                                    "concurrent writers")
