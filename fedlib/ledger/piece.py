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
slows some rounds, does not stop it. A stopped run's checkpoint stays in the run store. With `long_runs="continue"`
(`--long-runs continue`: a machine whose results folder persists from one piece to the next, a CPU in the
background) a run that cannot finish is neither skipped nor stopped for its pace: it trains until the budget is
spent, stopping at its first checkpoint after that, and the next piece on the same run store resumes it there, so
that pieces shorter than a run still finish it, in priority order. A finished run goes into
the run store (`fedlib.runs.execute`: a run interrupted mid-way resumes from its checkpoint if the store travels with
it, and restarts otherwise) and is exported into the ledger with its provenance at once, so a piece killed at its
time limit keeps every run it finished.

A cell's seeds (runs that differ only by seed) that `fedlib.engine.seed_batch.batches_seeds` trains as one batch (on a
GPU; on a CPU, models without convolutions) are one unit, taken at its first seed's place in the order, estimated,
watched and stopped together, and each seed exported with its own records, as alone (`seed_batches=False`:
`--no-seed-batches`, every run alone).

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
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import torch

from fedlib.grids import client_steps, combination
from fedlib.ledger.claims import Claims
from fedlib.ledger.entries import (BUDGET_BYTES, Ledger, LedgerEntry, changed_today, entry_name, provenance,
                                   read_entry_archive)
from fedlib.ledger.priority import REST, Ranked
from fedlib.runs.build import Plans, RunPlan
from fedlib.runs.execute import Stop, cell_batch, execute, execute_batch, seeds_batch
from fedlib.runs.fingerprint import Keys, data_fingerprint, device_type
from fedlib.runs.spec import KeyedRun, RunSpec, run_name
from fedlib.runs.store import Records, RunStore, rounds_done


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
MIN_START_S = 10.0  # no run starts with less of the budget left: building it alone can take that long
LONG_RUNS = ("skip", "continue")  # what a piece does with a run that cannot finish in its budget


class Watch:
    """A started run's pace, measured as it goes (`fedlib.runs.execute`'s watch): called with the rounds done at
    each checkpoint, it raises `Stop` when the `rounds` left cannot finish by `deadline` (a `clock` reading) even
    at the fastest pace the run has kept between two checkpoints. The first checkpoint only starts the timing
    (what precedes it includes the run's start-up), and nothing stops the run before it has had `GRACE` of the
    time left at its start: a busy moment of the machine slows some rounds, not the fastest, and passes.
    `long_runs` "continue": the run is stopped only at the first checkpoint past `deadline`.
    `report` is handed a progress line at the first checkpoint past each tenth of the rounds: the pace since the
    last such line and the time to the run's end at that pace (what a log of a piece hours long says as it goes)."""

    def __init__(self, rounds: int, deadline: float, clock: Callable[[], float], long_runs: str = "skip",
                 report: Callable[[str], None] = lambda line: None) -> None:
        self.rounds, self.deadline, self.clock, self.long_runs, self.report = rounds, deadline, clock, long_runs, report
        began = clock()
        self.grace_until = began + GRACE * max(deadline - began, 0.0)
        self.last: tuple[int, float] | None = None  # rounds done, clock reading at the last checkpoint
        self.fastest = math.inf  # seconds per round
        self.shown: tuple[int, float] | None = None  # rounds done, clock reading at the last progress line

    def progress(self, done: int, now: float) -> None:
        if self.shown is None:  # the first checkpoint only starts the timing, as for the pace
            self.shown = (done, now)
            return
        since, then = self.shown
        if done * 10 // self.rounds > since * 10 // self.rounds:
            per = (now - then) / (done - since)
            self.report(f"round {done} of {self.rounds}: {per:.1f} s a round since round {since}, about "
                        f"{span((self.rounds - done) * per)} to its end at that pace")
            self.shown = (done, now)

    def __call__(self, done: int) -> None:
        now = self.clock()
        self.progress(done, now)
        if self.long_runs == "continue":
            if now >= self.deadline and done < self.rounds:
                raise Stop(f"after round {done} of {self.rounds}, the budget is spent; its checkpoint stays in the run "
                           "store, where the next piece resumes it")
            return
        if self.last is not None and done > self.last[0]:
            self.fastest = min(self.fastest, (now - self.last[1]) / (done - self.last[0]))
            need, left = (self.rounds - done) * self.fastest, self.deadline - now
            if need > left and now >= self.grace_until:
                raise Stop(f"after round {done} of {self.rounds}, the rounds left take at least {span(need)} at its "
                           f"fastest pace so far ({self.fastest:.2f} s a round), {span(max(left, 0))} left; its "
                           "checkpoint stays in the run store")
        self.last = (done, now)


def span(seconds: float) -> str:
    return (f"{seconds:.1f} s" if seconds < 120 else f"{seconds / 60:.1f} min" if seconds < 7200 else
            f"{seconds / 3600:.1f} h")


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
             and changed_today(e, roots.get(r.notebook))]
    print(f"[piece] {len(stale)} stale ledger entries to recompute first", file=out, flush=True)
    return stale + todo


def written_meanwhile(path: Path, held: LedgerEntry | None, root: str | None) -> bool:
    """Whether another piece wrote the run's entry `path` since the ledger was read: any, where it held none (`held`);
    else one computed by today's code."""
    return path.exists() and (held is None or not changed_today(read_entry_archive(path), root))


def compute_into(ledger: Ledger, runs: Sequence[KeyedRun], resumed: Sequence[int], store: RunStore, plans: Plans,
                 watch: Callable[[int], Watch], clock: Callable[[], float]
                 ) -> tuple[list[tuple[Path, float, int]], bool]:
    """One cell's keyed `runs` (one run, or seeds of one cell, keyed from `plans`: each built once there, for its key
    and its run), each resumed after the round `resumed` names (0: from the start), computed into `store`, each
    watched by `watch(rounds)` (a `Watch`: `Stop` where they cannot finish), and exported into `ledger`: (its entry,
    seconds, client-steps computed here) per run, and whether they trained as one batch. Seeds that train as one batch
    (`fedlib.runs.execute.cell_batch`) have each its share of the batch's seconds by client-steps, and their
    provenance says how many trained together; others run one after another, each timed alone. A run resumed from
    its checkpoint counts the client-steps of the rounds it computed here, the ones its seconds paid for
    (`computed_steps`)."""
    batch = cell_batch([run.spec for run in runs], plans)
    if batch is None:
        return [compute_alone(ledger, run, after, store, plans, watch, clock)
                for run, after in zip(runs, resumed)], False
    rounds = runs[-1].spec.rounds
    began = clock()
    records = execute_batch(runs, batch, store, checkpoint_every=max(1, rounds // WATCH_POINTS), watch=watch(rounds))
    seconds = max(clock() - began, 1e-9)
    steps = [computed_steps(r, after) for r, after in zip(records, resumed)]
    shares = [seconds * n / max(sum(steps), 1) for n in steps]
    return [(ledger.add(store, run, provenance(run, plans.root, share, n, seed_batch=len(runs), resumed_after=after,
                                                  ledger=ledger.root)),
             share, n) for run, after, share, n in zip(runs, resumed, shares, steps)], True


def compute_alone(ledger: Ledger, run: KeyedRun, resumed_after: int, store: RunStore, plans: Plans,
                  watch: Callable[[int], Watch], clock: Callable[[], float]) -> tuple[Path, float, int]:
    began = clock()
    records = execute(run, store, root=plans.root, progress=False,
                      checkpoint_every=max(1, run.spec.rounds // WATCH_POINTS), watch=watch(run.spec.rounds),
                      plan=plans.take(run.spec))
    seconds = max(clock() - began, 1e-9)
    done = computed_steps(records, resumed_after)
    entry = ledger.add(store, run, provenance(run, plans.root, seconds, done, resumed_after=resumed_after,
                                              ledger=ledger.root))
    return entry, seconds, done


def computed_steps(records: Records, resumed_after: int) -> int:
    """The client-steps of a run's rounds after round `resumed_after` (rounds count from 1): all of them for a run
    computed whole (0), those a run resumed from its checkpoint computed since."""
    clients = records["clients"]
    return int(clients.loc[clients["round"] > resumed_after, "steps"].sum())


def units(todo: Sequence[Ranked], batched: Callable[[Ranked], bool]) -> Iterator[list[Ranked]]:
    """`todo` as the units a piece computes, in priority order: each run alone, except where `batched` (asked once
    per cell, of its first seed) says that its cell's seeds train as one batch: then the cell's seeds together, at
    its first seed's place."""
    cells: dict[tuple[str, RunSpec], list[Ranked]] = {}
    for r in todo:
        cells.setdefault((r.notebook, r.spec.with_(seed=0)), []).append(r)
    together: dict[tuple[str, RunSpec], bool] = {}
    for r in todo:
        cell = (r.notebook, r.spec.with_(seed=0))
        if cell not in together:
            together[cell] = batched(r)
            if together[cell]:
                yield cells[cell]
        if not together[cell]:
            yield [r]


class Piece:
    """One piece's state as it goes: the ledger's entries and this piece's, the rates, the claims and the report."""

    def __init__(self, ranked: Sequence[Ranked], ledger: Ledger, store: RunStore, deadline: float,
                 roots: Mapping[str, str | None], rate: float | None, out: TextIO,
                 clock: Callable[[], float], long_runs: str = "skip") -> None:
        self.ledger, self.store, self.deadline, self.roots, self.out, self.clock = (ledger, store, deadline, roots,
                                                                                    out, clock)
        self.long_runs = long_runs
        self.plans: dict[str | None, Plans] = {}  # each data root's runs, built once for the unit being computed
        self.entries = ledger.entries()  # every entry verified: a damaged one stops the piece, naming its file
        self.data = {r.spec: data_fingerprint(r.spec.dataset, roots.get(r.notebook)) for r in ranked}
        self.held = {r.spec: held_by(self.entries, r.spec, self.data[r.spec]) for r in ranked}
        self.rates = Rates(rate, [o for e in self.entries if (o := observed(e)) is not None])
        self.measured_before = len(self.rates.seen)
        self.report, self.claims = PieceReport(), Claims(ledger.root)

    def skip(self, unit: Sequence[Ranked], why: str, said: str) -> None:
        for r in unit:
            self.report.skip(r, why, said, self.out)

    def unstartable(self, unit: Sequence[Ranked]) -> tuple[str, str] | None:
        """(why, what is said) where the unit is not started: no GPU for it, the budget spent, or an estimate that
        does not fit in what is left of it."""
        first = unit[0]
        if needs_absent_gpu(first):
            return f"needs a GPU (device {first.spec.device}); this machine has none", "not started"
        found, left = self.rates.rate(first.spec), self.deadline - self.clock()
        if left < MIN_START_S:
            return f"{span(max(left, 0))} of the budget left", "not started (budget spent)"
        steps = sum(client_steps(r.spec, self.plan(r)) for r in unit)
        if found is not None and steps / found[0] > left and self.long_runs == "skip":
            return (f"{steps:,} client-steps{f' with its {len(unit)} seeds' if len(unit) > 1 else ''}, "
                    f"{span(steps / found[0])} at {found[0]:,.0f} client-steps/s ({found[1]}); "
                    f"{span(max(left, 0))} left", "not started (cannot finish)")
        return None

    def plan(self, r: Ranked) -> RunPlan:
        """`r`'s run, built once for the unit that holds it (`Plans`)."""
        return self.plans_of(r)(r.spec)

    def plans_of(self, r: Ranked) -> Plans:
        root = self.roots.get(r.notebook)
        return self.plans.setdefault(root, Plans(root))

    def watch(self, rounds: int) -> Watch:
        return Watch(rounds, self.deadline, self.clock, self.long_runs,
                     lambda line: print(f"[piece] {line}", file=self.out, flush=True))

    def claim(self, unit: Sequence[Ranked]) -> list[Ranked]:
        """The runs of `unit` this piece now holds the claim of, and whose entry no other piece wrote meanwhile."""
        mine = []
        for r in unit:
            name = entry_name(r.spec, self.data[r.spec])
            holder = self.claims.claim(name)
            if holder is not None:
                self.skip([r], self.claims.why_left(name, holder), "not started (claimed)")
            elif written_meanwhile(self.ledger.root / name, self.held[r.spec], self.roots.get(r.notebook)):
                self.claims.release(name)
                self.skip([r], "another piece wrote its ledger entry since this piece read the ledger",
                          "not started (computed meanwhile)")
            else:
                mine.append(r)
        return mine

    def compute(self, unit: Sequence[Ranked]) -> None:
        """The unit computed into the ledger, unless it cannot start or is stopped (each run of it named); its runs,
        and the data they hold, go with it."""
        try:
            self.compute_unit(unit)
        finally:
            self.plans.clear()

    def compute_unit(self, unit: Sequence[Ranked]) -> None:
        unstartable = self.unstartable(unit)
        if unstartable is not None:
            self.skip(unit, *unstartable)
            return
        mine = self.claim(unit)
        try:
            if mine:
                if self.rates.rate(mine[0].spec) is None:
                    print(f"[piece] no measured or given rate for {describe_run(mine[0])}: started, its pace "
                          "measured as it runs", file=self.out, flush=True)
                plans = self.plans_of(unit[0])
                keys = Keys.building(plans)  # the unit's runs, built once for their keys and their runs
                runs = [keys(r.spec) for r in mine]
                resumed = [checkpointed_rounds(self.store, run) or 0 for run in runs]
                for r, after in zip(mine, resumed):
                    print(f"[piece] resumes {describe_run(r)} from its checkpoint after round {after} of "
                          f"{r.spec.rounds}" if after else f"[piece] starts {describe_run(r)} ({r.spec.rounds} rounds)",
                          file=self.out, flush=True)
                began = self.clock()
                done, batched = compute_into(self.ledger, runs, resumed, self.store, plans, self.watch, self.clock)
                self.added(mine, done, batched, self.clock() - began)
        except Stop as stop:
            self.skip(mine, str(stop), "stopped")
        finally:
            for r in mine:
                self.claims.release(entry_name(r.spec, self.data[r.spec]))

    def added(self, mine: Sequence[Ranked], done: Sequence[tuple[Path, float, int]], batched: bool,
              wall: float) -> None:
        for r, (path, seconds, n) in zip(mine, done):
            self.rates.add(Observation(combination(r.spec), r.spec.experiment, device_type(r.spec.device), n,
                                       seconds))
            self.report.added.append((r, path, seconds, n))
            print(f"[piece] added {describe_run(r)}: {n:,} client-steps in {seconds:.1f} s ({n / seconds:,.0f}/s)"
                  f"{' (its share of the batch)' if batched else ''} -> {path.name} "
                  f"({path.stat().st_size / 1024:.1f} KiB)", file=self.out, flush=True)
        if batched:
            total = sum(n for _, _, n in done)
            print(f"[piece] {len(mine)} seeds trained as one batch: {total:,} client-steps in {wall:.1f} s "
                  f"({total / wall:,.0f}/s together)", file=self.out, flush=True)


def checkpointed_rounds(store: RunStore, run: KeyedRun) -> int | None:
    """The rounds `run`'s checkpoint in `store` holds (None: no checkpoint, or one that is not resumed, which
    running the spec names)."""
    try:
        state = store.checkpoint(run, 1).load()
    except ValueError:
        return None
    return None if state is None else rounds_done(state)


def needs_absent_gpu(r: Ranked) -> bool:
    return device_type(r.spec.device) == "cuda" and not torch.cuda.is_available()


def run_piece(ranked: Sequence[Ranked], ledger: Ledger, store: RunStore, budget_s: float, *,
              roots: Mapping[str, str | None] | None = None, rate: float | None = None,
              recompute_stale: bool = False, seed_batches: bool = True, long_runs: str = "skip",
              out: TextIO | None = None, clock: Callable[[], float] = time.perf_counter) -> PieceReport:
    """Compute the next runs of `ranked` (priority order) within `budget_s` seconds into `store` and `ledger`;
    `roots`: each notebook's data root (None: the data-root rule); `seed_batches`: a cell's seeds as one batch where
    the rule picks it (`fedlib.engine.seed_batch`); `long_runs`: "skip" or "continue" a run that cannot finish in the
    budget. See the module docstring."""
    if long_runs not in LONG_RUNS:
        raise ValueError(f"long_runs must be one of {LONG_RUNS}, got {long_runs!r}")
    out = sys.stdout if out is None else out
    deadline, roots = clock() + budget_s, roots or {}
    if ledger.create():
        print(f"[piece] created the ledger folder {ledger.root}", file=out, flush=True)
    piece = Piece(ranked, ledger, store, deadline, roots, rate, out, clock, long_runs)
    todo = pending(ranked, piece.held, roots, recompute_stale, out)
    print(f"[piece] {len(ranked)} runs in the plan, {sum(e is not None for e in piece.held.values())} "
          f"held by the ledger ({ledger.root}), {len(todo)} to compute; budget {budget_s / 60:.1f} min",
          file=out, flush=True)

    def batches(r: Ranked) -> bool:
        return seed_batches and not needs_absent_gpu(r) and seeds_batch(piece.plan(r))

    for unit in units(todo, batches):
        piece.compute(unit)
    report, now = piece.report, ledger.entries()
    report.left = [r for r in ranked if held_by(now, r.spec, piece.data[r.spec]) is None]
    report.rates = Rates(None, piece.rates.seen[piece.measured_before:]).measured()  # this piece's runs alone
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
