"""A piece: the next runs of a profile, in priority order, computed and exported into the ledger within a time budget.

`run_piece` skips every run the ledger holds (same spec and data fingerprint), then takes the others in priority
order (`fedlib.ledger.priority`). Before each it estimates the run's minutes from its local SGD steps
(`fedlib.grids.client_steps`) and a client-steps/s rate: first found, one measured on earlier whole runs of the same
(dataset, model, algorithm, codecs) combination on this kind of device (this piece's finished runs and the ledger's
entries), then of the same experiment, then the `rate` given (stated by the user). A run whose estimate does not
fit in what is left of the budget is skipped (named, with its estimate) and the next one is tried; a run of which
no rate is known is started. A started run is watched at about `WATCH_POINTS` checkpoints (`Watch`): it is stopped
only when the rounds it has left cannot finish in the time left even at the fastest pace it has kept between two
checkpoints, and not before it has run a tenth of the time left at its start, so a busy moment of the machine, which
slows some rounds, does not stop it. A stopped run's checkpoint stays in the run store. A finished run goes into
the run store (`fedlib.runs.execute`: a run interrupted mid-way resumes from its checkpoint if the store travels with
it, and restarts otherwise) and is exported into the ledger with its provenance at once, so a piece killed at its
time limit keeps every run it finished.

Pieces running at once on one ledger never compute a run twice: each claims a run before starting it
(`fedlib.ledger.claims`), leaves a run another live piece claims, and, once it holds the claim, skips a run whose
entry another piece wrote meanwhile. A missing ledger folder is created where its parent folder exists.

A run pinned to a GPU (device "cuda") is not started on a machine without one; a run on device "auto" (the gpu
profile's) runs on whatever this machine has, and its provenance says which: a CPU fills the ledger too, only
slower. `recompute_stale` puts first the runs whose ledger entry was computed by other code than today's for that
spec.
"""
from __future__ import annotations

import math
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import torch

from fedlib.grids import client_steps, combination
from fedlib.ledger.claims import Claims
from fedlib.ledger.entries import BUDGET_BYTES, Ledger, LedgerEntry, entry_name, provenance, read_entry_archive
from fedlib.ledger.priority import REST, Ranked
from fedlib.runs.build import build_run
from fedlib.runs.execute import Stop, execute
from fedlib.runs.fingerprint import code_version, data_fingerprint, device_type
from fedlib.runs.spec import RunSpec, run_name
from fedlib.runs.store import RunStore


@dataclass(frozen=True)
class Observation:
    """Client-steps a whole run took, and its seconds, on a kind of device."""

    combination: tuple[str, ...]
    experiment: str
    device: str
    steps: int
    seconds: float


def observed(entry: LedgerEntry) -> Observation | None:
    """What the entry's provenance measured (None without a wall time)."""
    wall, steps = entry.provenance.get("wall_s"), entry.provenance.get("client_steps")
    if not isinstance(wall, (int, float)) or not isinstance(steps, int) or wall <= 0 or steps <= 0:
        return None
    return Observation(combination(entry.spec), entry.spec.experiment, str(entry.provenance.get("device")), steps,
                       float(wall))


class Rates:
    """Client-steps/s for a spec: measured on whole runs (same combination, then same experiment, on the same device
    kind), else the stated `given` rate, else None."""

    def __init__(self, given: float | None, seen: Sequence[Observation] = ()) -> None:
        if given is not None and not given > 0:
            raise ValueError(f"--rate must be a positive number of client-steps per second, got {given}")
        self.given = given
        self.seen = list(seen)

    def add(self, obs: Observation) -> None:
        self.seen.append(obs)

    def rate(self, spec: RunSpec, device: str | None = None) -> tuple[float, str] | None:
        """(client-steps/s, where it comes from) for `spec` on `device` (None: where the spec runs here), None when
        nothing is measured or given."""
        device = device or device_type(spec.device)
        levels = (("this combination", lambda o: o.combination == combination(spec)),
                  (f"experiment {spec.experiment}", lambda o: o.experiment == spec.experiment))
        for what, same in levels:
            found = [o for o in self.seen if o.device == device and same(o)]
            if found:
                return (sum(o.steps for o in found) / sum(o.seconds for o in found),
                        f"measured on {len(found)} run(s) of {what} ({device})")
        return (self.given, "given (--rate)") if self.given is not None else None

    def measured(self) -> dict[str, float]:
        """Device kind -> client-steps/s over the whole runs observed on it."""
        devices = sorted({o.device for o in self.seen})
        return {d: sum(o.steps for o in self.seen if o.device == d)
                / sum(o.seconds for o in self.seen if o.device == d) for d in devices}


WATCH_POINTS = 40  # a started run is watched at about this many checkpoints (a run of fewer rounds: at each)
GRACE = 0.1  # the share of the time left at its start that a run runs before its pace may stop it


class Watch:
    """A started run's pace, measured as it goes (`fedlib.runs.execute`'s watch): called with the rounds done at
    each checkpoint, it raises `Stop` when the `rounds` left cannot finish by `deadline` (a `clock` reading) even
    at the fastest pace the run has kept between two checkpoints. The first checkpoint only starts the timing
    (what precedes it includes the run's start-up), and nothing stops the run before it has had `GRACE` of the
    time left at its start: a busy moment of the machine slows some rounds, not the fastest, and passes."""

    def __init__(self, rounds: int, deadline: float, clock: Callable[[], float]) -> None:
        self.rounds, self.deadline, self.clock = rounds, deadline, clock
        began = clock()
        self.grace_until = began + GRACE * max(deadline - began, 0.0)
        self.last: tuple[int, float] | None = None  # rounds done, clock reading at the last checkpoint
        self.fastest = math.inf  # seconds per round

    def __call__(self, done: int) -> None:
        now = self.clock()
        if self.last is not None and done > self.last[0]:
            self.fastest = min(self.fastest, (now - self.last[1]) / (done - self.last[0]))
            need, left = (self.rounds - done) * self.fastest, self.deadline - now
            if need > left and now >= self.grace_until:
                raise Stop(f"after round {done} of {self.rounds}, the rounds left take at least {span(need)} at its "
                           f"fastest pace so far ({self.fastest:.2f} s a round), {span(max(left, 0))} left; its "
                           "checkpoint stays in the run store")
        self.last = (done, now)


def span(seconds: float) -> str:
    return f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min"


def describe_run(ranked: Ranked) -> str:
    backs = f" [{ranked.backs}]" if ranked.rank != REST else ""
    return f"{ranked.notebook}{backs} {run_name(ranked.spec)}"


@dataclass
class PieceReport:
    added: list[tuple[Ranked, Path, float, int]] = field(default_factory=list)  # run, entry, seconds, client-steps
    skipped: list[tuple[Ranked, str]] = field(default_factory=list)  # run, why
    left: list[Ranked] = field(default_factory=list)  # runs the ledger still lacks after the piece
    rates: dict[str, float] = field(default_factory=dict)  # device kind -> client-steps/s over this piece's runs

    def skip(self, r: Ranked, why: str, said: str, out: TextIO) -> None:
        self.skipped.append((r, why))
        print(f"[piece] {said}: {describe_run(r)}: {why}", file=out, flush=True)


def held_by(ledger_entries: Sequence[LedgerEntry], spec: RunSpec, data: str) -> LedgerEntry | None:
    return next((e for e in ledger_entries if e.spec == spec and e.data == data), None)


def pending(ranked: Sequence[Ranked], held: Mapping[RunSpec, LedgerEntry | None], roots: Mapping[str, str | None],
            recompute_stale: bool, out: TextIO) -> list[Ranked]:
    """The runs of `ranked` the ledger does not hold, after (with `recompute_stale`) those it holds from other code
    than today's."""
    todo = [r for r in ranked if held[r.spec] is None]
    if not recompute_stale:
        return todo
    stale = [r for r in ranked if (e := held[r.spec]) is not None
             and e.provenance.get("code_version") != code_version(r.spec, roots.get(r.notebook))]
    print(f"[piece] {len(stale)} stale ledger entries to recompute first", file=out, flush=True)
    return stale + todo


def written_meanwhile(path: Path, held: LedgerEntry | None, spec: RunSpec, root: str | None) -> bool:
    """Whether another piece wrote the run's entry `path` since the ledger was read: any, where it held none (`held`);
    else one computed by today's code."""
    return path.exists() and (held is None or read_entry_archive(path).provenance.get("code_version")
                              == code_version(spec, root))


def compute_into(ledger: Ledger, spec: RunSpec, store: RunStore, root: str | None, deadline: float,
                 clock: Callable[[], float]) -> tuple[Path, float, int]:
    """`spec` computed into `store`, watched against `deadline` (`Stop` where it cannot finish), and exported into
    `ledger`: (its entry, seconds, client-steps)."""
    began = clock()
    records = execute(spec, store, root=root, progress=False, checkpoint_every=max(1, spec.rounds // WATCH_POINTS),
                      watch=Watch(spec.rounds, deadline, clock))
    seconds = max(clock() - began, 1e-9)
    done = int(records["clients"]["steps"].sum())
    return ledger.add(store, spec, provenance(spec, store, root, seconds, done)), seconds, done


def run_piece(ranked: Sequence[Ranked], ledger: Ledger, store: RunStore, budget_s: float, *,
              roots: Mapping[str, str | None] | None = None, rate: float | None = None,
              recompute_stale: bool = False, out: TextIO | None = None,
              clock: Callable[[], float] = time.perf_counter) -> PieceReport:
    """Compute the next runs of `ranked` (priority order) within `budget_s` seconds into `store` and `ledger`;
    `roots`: each notebook's data root (None: the data-root rule). See the module docstring."""
    out = sys.stdout if out is None else out
    deadline = clock() + budget_s
    roots = roots or {}
    if ledger.create():
        print(f"[piece] created the ledger folder {ledger.root}", file=out, flush=True)
    entries = ledger.entries()  # every entry verified: a damaged one stops the piece, naming its file
    data = {r.spec: data_fingerprint(r.spec.dataset, roots.get(r.notebook)) for r in ranked}
    held = {r.spec: held_by(entries, r.spec, data[r.spec]) for r in ranked}
    todo = pending(ranked, held, roots, recompute_stale, out)
    print(f"[piece] {len(ranked)} runs in the plan, {sum(e is not None for e in held.values())} "
          f"held by the ledger ({ledger.root}), {len(todo)} to compute; budget {budget_s / 60:.1f} min",
          file=out, flush=True)
    seen = [o for e in entries if (o := observed(e)) is not None]
    rates, report, claims = Rates(rate, seen), PieceReport(), Claims(ledger.root)
    for r in todo:
        root, name = roots.get(r.notebook), entry_name(r.spec, data[r.spec])
        if device_type(r.spec.device) == "cuda" and not torch.cuda.is_available():
            report.skip(r, f"needs a GPU (device {r.spec.device}); this machine has none", "not started", out)
            continue
        steps = client_steps(r.spec, build_run(r.spec, root))
        found, left = rates.rate(r.spec), deadline - clock()
        if found is not None and steps / found[0] > left:
            report.skip(r, f"{steps:,} client-steps, {span(steps / found[0])} at {found[0]:,.0f} client-steps/s "
                           f"({found[1]}); {span(max(left, 0))} left", "not started (cannot finish)", out)
            continue
        holder = claims.claim(name)
        if holder is not None:
            report.skip(r, f"another piece is computing it ({holder})", "not started (claimed)", out)
            continue
        try:
            if written_meanwhile(ledger.root / name, held[r.spec], r.spec, root):
                report.skip(r, "another piece wrote its ledger entry since this piece read the ledger",
                            "not started (computed meanwhile)", out)
                continue
            if found is None:
                print(f"[piece] no measured or given rate for {describe_run(r)}: started, its pace measured as it "
                      "runs", file=out, flush=True)
            path, seconds, done = compute_into(ledger, r.spec, store, root, deadline, clock)
        except Stop as stop:
            report.skip(r, str(stop), "stopped", out)
            continue
        finally:
            claims.release(name)
        rates.add(Observation(combination(r.spec), r.spec.experiment, device_type(r.spec.device), done, seconds))
        report.added.append((r, path, seconds, done))
        print(f"[piece] added {describe_run(r)}: {done:,} client-steps in {seconds:.1f} s "
              f"({done / seconds:,.0f}/s) -> {path.name} ({path.stat().st_size / 1024:.1f} KiB)", file=out, flush=True)
    now = ledger.entries()
    report.left = [r for r in ranked if held_by(now, r.spec, data[r.spec]) is None]
    report.rates = Rates(None, rates.seen[len(seen):]).measured()  # after the ledger's: this piece's runs
    print_summary(report, ledger, out)
    return report


def print_summary(report: PieceReport, ledger: Ledger, out: TextIO) -> None:
    added_bytes = sum(path.stat().st_size for _, path, _, _ in report.added)
    print(f"[piece] added {len(report.added)} run(s) ({added_bytes / 1024:.1f} KiB); the ledger holds "
          f"{len(ledger.paths())} entries, {ledger.size_bytes() / 2**20:.2f} MiB of its {BUDGET_BYTES / 2**20:.0f} MiB "
          "budget", file=out)
    headline = [r for r in report.left if r.rank != REST]
    print(f"[piece] left: {len(report.left)} run(s), {len(headline)} of them backing headline claims"
          + (f"; next: {describe_run(report.left[0])}" if report.left else ""), file=out)
    rates = "; ".join(f"{rate:,.0f} on {device}" for device, rate in report.rates.items()) or "none (no run finished)"
    print(f"[piece] client-steps/s measured in this piece: {rates}", file=out, flush=True)
