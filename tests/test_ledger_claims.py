"""Pieces at once on one ledger (`fedlib.ledger.claims`): each run computed once; the claim of a dead piece taken
over, a live piece's left to it; claims never committed."""
from __future__ import annotations

import io
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from test_ledger import tiny_ranked

from fedlib.ledger import piece as piece_module
from fedlib.ledger.claims import FOREIGN_CLAIM_AGE_S, Claims, Holder
from fedlib.ledger.entries import INDEX, Ledger, entry_name
from fedlib.ledger.piece import run_piece
from fedlib.runs.fingerprint import data_fingerprint
from fedlib.runs.store import RunStore

ROOT = Path(__file__).resolve().parents[1]
RUN = "quickstart-0123-abcd.tar.gz"


def dead_pid() -> int:
    """The id of a process of this host that has ended."""
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return process.pid


def write_claim(claims: Claims, run: str, pid: int, host: str = socket.gethostname()) -> None:
    claims.folder.mkdir(parents=True, exist_ok=True)
    claims.path(run).write_text(json.dumps({"pid": pid, "host": host, "started": "2026-11-29T10:00:00Z"}))


def test_a_claim_is_this_processs_until_released_and_a_live_holders_claim_is_left_to_it(tmp_path):
    claims = Claims(tmp_path)
    assert claims.claim(RUN) is None
    mine = claims.holder(RUN)
    assert mine is not None and (mine.pid, mine.host) == (str(os.getpid()), socket.gethostname())
    assert claims.path(RUN).name == "quickstart-0123-abcd.claim"
    assert claims.claim(RUN) == mine  # held by a live process (this one): not claimed again
    claims.release(RUN)
    assert not claims.path(RUN).exists()
    write_claim(claims, RUN, os.getppid())  # another live process of this host
    assert claims.claim(RUN) == Holder(str(os.getppid()), socket.gethostname(), "2026-11-29T10:00:00Z")
    claims.release(RUN)  # not this process's: it stays
    assert claims.holder(RUN).pid == str(os.getppid())


def test_a_stale_claim_is_taken_over(tmp_path):
    """A dead process of this host, another host's claim older than a day, garbage, or a live process of this host
    that started after the claim was written: taken over."""
    claims = Claims(tmp_path)
    write_claim(claims, RUN, dead_pid())
    assert claims.claim(RUN) is None and claims.holder(RUN).pid == str(os.getpid())
    write_claim(claims, RUN, 1, host="elsewhere")
    assert claims.claim(RUN).host == "elsewhere"  # another host's, recent: its process cannot be asked
    old = claims.path(RUN).stat().st_mtime - FOREIGN_CLAIM_AGE_S - 60
    os.utime(claims.path(RUN), (old, old))
    assert claims.claim(RUN) is None and claims.holder(RUN).host == socket.gethostname()
    claims.path(RUN).write_text("{not json")
    assert claims.claim(RUN) is None and claims.holder(RUN).pid == str(os.getpid())
    write_claim(claims, RUN, os.getppid())  # a live process of this host, but the claim is older than it
    os.utime(claims.path(RUN), (946684800, 946684800))  # 2000-01-01: its pid was given again since
    assert claims.claim(RUN) is None and claims.holder(RUN).pid == str(os.getpid())


def test_two_pieces_at_once_on_one_ledger_compute_each_run_once(tmp_path, monkeypatch):
    """Two pieces in two threads, each with its own run store, started together on one ledger: their first runs
    are computed at the same time (each waits for the other to start one), and every run is computed once."""
    executed = []
    real = piece_module.execute
    together = threading.Barrier(2, timeout=300)
    started = threading.local()

    def counted(run, *args, **kwargs):
        executed.append(run.spec)
        if not getattr(started, "one", False):
            started.one = True
            together.wait()
        return real(run, *args, **kwargs)

    monkeypatch.setattr(piece_module, "execute", counted)
    ledger, outs, failures = Ledger(tmp_path / "ledger"), [io.StringIO(), io.StringIO()], []

    def piece(i: int) -> None:
        try:
            run_piece(tiny_ranked(), ledger, RunStore(tmp_path / f"runs{i}"), 600, rate=1e3, out=outs[i])
        except BaseException as err:  # reported below, with the thread's output
            failures.append(err)

    threads = [threading.Thread(target=piece, args=(i,)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    printed = outs[0].getvalue() + outs[1].getvalue()
    assert failures == [], printed
    assert sorted(map(str, executed)) == sorted(str(r.spec) for r in tiny_ranked()), printed
    assert len(ledger.entries()) == 9 and "not started (claimed)" in printed
    assert list((ledger.root / ".claims").glob("*.claim")) == []  # every claim released


@pytest.mark.parametrize("holder, computed", [("dead", True), ("alive", False), ("elsewhere", False)])
def test_a_piece_takes_over_a_dead_pieces_claim_and_leaves_a_live_ones(tmp_path, capsys, holder, computed):
    """A dead piece's claim is taken over; a live one's left, and another host's (which cannot be asked) left with
    how to free it."""
    pid = dead_pid() if holder == "dead" else os.getppid()
    host = "elsewhere" if holder == "elsewhere" else socket.gethostname()
    ranked = tiny_ranked()[:1]
    ledger = Ledger(tmp_path / "ledger")
    ledger.create()
    run = entry_name(ranked[0].spec, data_fingerprint(ranked[0].spec.dataset, None))
    write_claim(Claims(ledger.root), run, pid, host)
    out = io.StringIO()
    report = run_piece(ranked, ledger, RunStore(tmp_path / "runs"), 600, rate=1e3, out=out)
    assert len(report.added) == computed
    assert Claims(ledger.root).path(run).exists() != computed  # taken over and released, or left
    if not computed:
        assert f"not started (claimed): quickstart [Q1] algorithm=FedAvg seed=0: another piece is computing it (pid " \
               f"{pid} on {host}, since 2026-11-29T10:00:00Z)" in out.getvalue()
    hint = f"another host's claim is taken over 24 h after it was made: if that piece is gone, delete " \
           f"{Claims(ledger.root).path(run)}"
    assert (hint in out.getvalue()) == (holder == "elsewhere")


def test_a_run_whose_entry_another_piece_wrote_meanwhile_is_not_computed_again(tmp_path, monkeypatch):
    ranked = tiny_ranked()[:1]
    elsewhere = Ledger(tmp_path / "elsewhere")
    run_piece(ranked, elsewhere, RunStore(tmp_path / "runs"), 600, rate=1e3, out=io.StringIO())
    real = Claims.claim

    def finished_first(self: Claims, run: str):  # another piece exports the run after this one read the ledger
        shutil.copy(elsewhere.paths()[0], self.folder.parent)
        shutil.copy(elsewhere.root / INDEX, self.folder.parent)  # with its index line, as a piece writes it
        return real(self, run)

    monkeypatch.setattr(Claims, "claim", finished_first)
    executed = []
    monkeypatch.setattr(piece_module, "execute", lambda run, *a, **k: executed.append(run.spec))
    out = io.StringIO()
    report = run_piece(ranked, Ledger(tmp_path / "ledger"), RunStore(tmp_path / "runs"), 600, rate=1e3, out=out)
    assert executed == [] and report.added == [] and report.left == []
    assert "not started (computed meanwhile): quickstart [Q1] algorithm=FedAvg seed=0: another piece wrote its " \
           "ledger entry since this piece read the ledger" in out.getvalue()


def test_claims_are_not_committed():
    found = subprocess.run(["git", "check-ignore", "-q", "evidence/gpu/.claims/run.claim"], cwd=ROOT)
    assert found.returncode == 0, "claims must be git-ignored: .gitignore lists .claims/"
