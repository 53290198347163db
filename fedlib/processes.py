"""The processes a command started, found by a mark in their environment, and stopping them.

A process inherits its parent's environment, so a variable set for a command marks every process it starts,
including those that detach into a session of their own and outlive it (Flower's local SuperLink, Ray's raylet and
agents), which neither the command's process group nor its child list still holds. Linux only (reads /proc).
"""
from __future__ import annotations

import os
import signal
import time
import uuid
from collections.abc import Iterable
from pathlib import Path

MARK_VARIABLE = "FEDLIB_PROCESS_MARK"
PROC = Path("/proc")


def require_proc() -> None:
    """Raise OSError where processes cannot be found by their environment (no Linux /proc)."""
    if not (PROC / "self" / "environ").is_file():
        raise OSError("finding the processes a command leaves behind needs Linux's /proc, which this system lacks")


def new_mark() -> str:
    return uuid.uuid4().hex


def marked_processes(mark: str, variable: str = MARK_VARIABLE) -> list[int]:
    """The ids of the live processes (this one excepted) whose environment sets `variable` to `mark`."""
    entry = f"{variable}={mark}".encode()
    found = []
    for environ in PROC.glob("[0-9]*/environ"):
        pid = int(environ.parent.name)
        try:
            if pid != os.getpid() and entry in environ.read_bytes().split(b"\0"):
                found.append(pid)
        except OSError:  # gone meanwhile, or another user's
            continue
    return found


def _alive(pid: int) -> bool:
    """Running, not a zombie (a zombie only waits for its parent to read its exit status)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return False
    return stat.rpartition(")")[2].split()[0] != "Z"


def _signal(pids: Iterable[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            continue


def stop_marked(mark: str, grace_s: float = 10.0, variable: str = MARK_VARIABLE) -> list[int]:
    """Stop every process marked `mark`: SIGTERM, then SIGKILL for those still running after `grace_s` seconds.
    Repeated while marked processes remain (a dying process's parent may start another). Returns the ids stopped."""
    stopped: list[int] = []
    for _ in range(5):
        pids = marked_processes(mark, variable)
        if not pids:
            break
        stopped += pids
        _signal(pids, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        while time.monotonic() < deadline and any(_alive(pid) for pid in pids):
            time.sleep(0.1)
        _signal([pid for pid in pids if _alive(pid)], signal.SIGKILL)
    return stopped
