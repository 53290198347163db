"""Which piece is computing which run of a ledger, so that pieces running at once on one ledger never compute a run
twice.

A piece claims a run before it starts it: `<ledger>/.claims/<entry name>.claim` (the entry's archive name without
`.tar.gz`), holding {"pid", "host", "started"}, created only where no claim exists (a hard link to a file written
whole: no reader sees a claim half written). The piece removes its claim once the run is in the ledger or abandoned.
A run claimed by a live piece is left to it. A claim whose piece is gone is stale and taken over: its process is
dead on this host, or alive but started after the claim was written (the pid given again, after the piece died or
the machine restarted), or, another host's (whose processes cannot be asked), it is older than
`FOREIGN_CLAIM_AGE_S` (`fedlib.runs.store.writer_gone`), so a killed piece leaves no run claimed for ever. Taking
over holds a lock (`flock`, which the system releases when its holder dies), so two pieces never both take over one
stale claim.
Claims are git-ignored (`.gitignore`: `.claims/`) and a ledger's folder check (`Ledger.require`) allows them.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import socket
import tempfile
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from pathlib import Path

from fedlib.ledger.entries import CLAIMS, SUFFIX
from fedlib.runs.store import TEMP_PREFIX, writer_gone

LOCK = ".lock"  # in it: the lock taking over a stale claim holds
FOREIGN_CLAIM_AGE_S = 24 * 3600.0  # another host's claim older than this is left over from a dead piece
TAKE_TRIES = 3


@dataclass(frozen=True)
class Holder:
    """The process holding a claim."""

    pid: str
    host: str
    started: str

    def __str__(self) -> str:
        return f"pid {self.pid} on {self.host}, since {self.started}"


def this_process() -> Holder:
    return Holder(str(os.getpid()), socket.gethostname(), time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()))


class Claims:
    """The claims on the runs of the ledger folder `ledger_root` (which must exist)."""

    def __init__(self, ledger_root: str | Path) -> None:
        self.folder = Path(ledger_root) / CLAIMS

    def path(self, run: str) -> Path:
        return self.folder / f"{run.removesuffix(SUFFIX)}.claim"

    def claim(self, run: str) -> Holder | None:
        """Claim the run whose ledger entry is named `run` for this process: None once it holds the claim, else the
        live piece that holds it."""
        self.folder.mkdir(exist_ok=True)
        for _ in range(TAKE_TRIES):
            if self._create(run, this_process()):
                return None
            with self._lock():
                held = self.holder(run)
                if held is not None and not writer_gone(held.host, held.pid, self.path(run), FOREIGN_CLAIM_AGE_S):
                    return held
                self.path(run).unlink(missing_ok=True)  # stale (or unreadable, or just released): taken over
        raise OSError(f"cannot claim {self.path(run)}: it keeps changing under concurrent pieces")

    def why_left(self, run: str, holder: Holder) -> str:
        """Why the run `run` claimed by `holder` is left to it, and, where the holder is another host's piece (which
        this one cannot ask), how to free the claim sooner."""
        why = f"another piece is computing it ({holder})"
        if holder.host == socket.gethostname():
            return why
        return (f"{why}; another host's claim is taken over {FOREIGN_CLAIM_AGE_S / 3600:g} h after it was made: if "
                f"that piece is gone, delete {self.path(run)}")

    def release(self, run: str) -> None:
        """Remove this process's claim on `run` (a claim another piece took over stays)."""
        with self._lock():
            held = self.holder(run)
            if held is not None and (held.pid, held.host) == (str(os.getpid()), socket.gethostname()):
                self.path(run).unlink(missing_ok=True)

    def holder(self, run: str) -> Holder | None:
        """Who holds the claim on `run`; None where there is none, or it is no claim this module wrote."""
        try:
            found = json.loads(self.path(run).read_text())
            return Holder(str(found["pid"]), str(found["host"]), str(found["started"]))
        except (OSError, ValueError, TypeError, KeyError):  # none there, or garbage
            return None

    def _create(self, run: str, holder: Holder) -> bool:
        """Make `holder`'s claim on `run` where none exists (True), written whole before it appears."""
        fd, tmp = tempfile.mkstemp(dir=self.folder, prefix=TEMP_PREFIX)
        try:
            with os.fdopen(fd, "w") as file:
                json.dump(asdict(holder), file)
            os.link(tmp, self.path(run))
            return True
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)

    @contextlib.contextmanager
    def _lock(self) -> Iterator[None]:
        with open(self.folder / LOCK, "a") as file:
            fcntl.flock(file, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(file, fcntl.LOCK_UN)
