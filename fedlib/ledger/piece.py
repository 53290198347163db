"""A piece: the next runs of a profile, in priority order, computed and exported into the ledger within a time budget.

`run_piece` skips every run the ledger holds (same spec and data fingerprint), then takes the others in priority
order (`fedlib.ledger.priority`). Before each it estimates the run's minutes from its local SGD steps
(`fedlib.grids.client_steps`) and a client-steps/s rate, and starts it only when the estimate fits in what is left
of the budget; a run that does not fit is skipped (named, with its estimate) and the next one is tried. The rate is,
first found: one measured on earlier runs of the same (dataset, model, algorithm, codecs) combination on this kind
of device (this piece's finished runs and the ledger's entries), then of the same experiment, then the `rate` given
(stated by the user), and else one measured now on the run's first two rounds (`calibrate`). A finished run goes into the
run store (`fedlib.runs.execute`: a run interrupted mid-way resumes from its checkpoint if the store travels with
it, and restarts otherwise) and is exported into the ledger with its provenance at once, so a piece killed at its
time limit keeps every run it finished.

A run pinned to a GPU (device "cuda") is not started on a machine without one; a run on device "auto" (the gpu profile's)
runs on whatever this machine has, and its provenance says which: a CPU fills the ledger too, only slower. `recompute_stale` puts first the runs whose ledger entry was computed by other code than today's for that spec.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import torch

from fedlib.federation import run_federation
from fedlib.grids import client_steps, combination
from fedlib.ledger.entries import BUDGET_BYTES, Ledger, LedgerEntry, provenance
from fedlib.ledger.priority import REST, Ranked
from fedlib.runs.build import build_run
from fedlib.runs.execute import execute
from fedlib.runs.fingerprint import code_version, data_fingerprint, device_type
from fedlib.runs.spec import RunSpec, run_name
from fedlib.runs.store import RunStore


@dataclass(frozen=True)
class Observation:
    """Client-steps a run took, and its seconds, on a kind of device; `calibrated`: estimated from its first rounds
    (`calibrate`), not measured on the whole run."""

    combination: tuple[str, ...]
    experiment: str
    device: str
    steps: int
    seconds: float
    calibrated: bool = False


def observed(entry: LedgerEntry) -> Observation | None:
    """What the entry's provenance measured (None without a wall time)."""
    wall, steps = entry.provenance.get("wall_s"), entry.provenance.get("client_steps")
    if not isinstance(wall, (int, float)) or not isinstance(steps, int) or wall <= 0 or steps <= 0:
        return None
    return Observation(combination(entry.spec), entry.spec.experiment, str(entry.provenance.get("device")), steps,
                       float(wall))


class Rates:
    """Client-steps/s for a spec: measured on whole runs (same combination, then same experiment, on the same device
    kind), else the stated `given` rate, else estimated from a run's first rounds (`calibrate`), else None."""

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
        for calibrated in (False, True):
            if calibrated and self.given is not None:
                return self.given, "given (--rate)"
            for what, same in levels:
                found = [o for o in self.seen if o.device == device and o.calibrated == calibrated and same(o)]
                if found:
                    how = "first rounds timed" if calibrated else "measured"
                    return (sum(o.steps for o in found) / sum(o.seconds for o in found),
                            f"{how} on {len(found)} run(s) of {what} ({device})")
        return None

    def measured(self) -> dict[str, float]:
        """Device kind -> client-steps/s over the whole runs observed on it."""
        devices = sorted({o.device for o in self.seen if not o.calibrated})
        return {d: sum(o.steps for o in self.seen if o.device == d and not o.calibrated)
                / sum(o.seconds for o in self.seen if o.device == d and not o.calibrated) for d in devices}


def calibrate(spec: RunSpec, root: str | Path | None, clock: Callable[[], float], steps: int) -> Observation:
    """The first two rounds of `spec`'s run (one if it has one), timed, as an observation of the whole run of
    `steps` client-steps: its start-up (building the run, and what the first round takes beyond a steady one: CUDA,
    kernels, compilation) plus `steps` at the last round's client-steps per second (its own `wall_s`)."""
    began = clock()
    plan = build_run(spec.with_(rounds=min(2, spec.rounds)), root)
    result = run_federation(plan.model_fn, plan.data, progress=False, **plan.kwargs)
    total = clock() - began
    last = result.rounds.iloc[-1]
    steady = float(result.clients.loc[result.clients["round"] == last["round"], "steps"].sum()) / max(
        float(last["wall_s"]), 1e-9)
    startup = max(total - len(result.rounds) * float(last["wall_s"]), 0.0)
    return Observation(combination(spec), spec.experiment, device_type(spec.device), steps, startup + steps / steady,
                       calibrated=True)


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


def held_by(ledger_entries: Sequence[LedgerEntry], spec: RunSpec, data: str) -> LedgerEntry | None:
    return next((e for e in ledger_entries if e.spec == spec and e.data == data), None)


def run_piece(ranked: Sequence[Ranked], ledger: Ledger, store: RunStore, budget_s: float, *,
              roots: Mapping[str, str | None] | None = None, rate: float | None = None,
              recompute_stale: bool = False, out: TextIO | None = None,
              clock: Callable[[], float] = time.perf_counter) -> PieceReport:
    """Compute the next runs of `ranked` (priority order) within `budget_s` seconds into `store` and `ledger`;
    `roots`: each notebook's data root (None: the data-root rule). See the module docstring."""
    out = sys.stdout if out is None else out
    start = clock()
    roots = roots or {}
    entries = ledger.entries()  # every entry verified: a damaged one stops the piece, naming its file
    data = {r.spec: data_fingerprint(r.spec.dataset, roots.get(r.notebook)) for r in ranked}
    held = {r.spec: held_by(entries, r.spec, data[r.spec]) for r in ranked}
    todo = [r for r in ranked if held[r.spec] is None]
    if recompute_stale:
        stale = [r for r in ranked if (e := held[r.spec]) is not None
                 and e.provenance.get("code_version") != code_version(r.spec, roots.get(r.notebook))]
        print(f"[piece] {len(stale)} stale ledger entries to recompute first", file=out, flush=True)
        todo = stale + todo
    print(f"[piece] {len(ranked)} runs in the plan, {sum(e is not None for e in held.values())} "
          f"held by the ledger ({ledger.root}), {len(todo)} to compute; budget {budget_s / 60:.1f} min",
          file=out, flush=True)
    rates = Rates(rate, [o for e in entries if (o := observed(e)) is not None])
    report = PieceReport()
    mine = Rates(None)
    for r in todo:
        root = roots.get(r.notebook)
        if device_type(r.spec.device) == "cuda" and not torch.cuda.is_available():
            report.skipped.append((r, f"needs a GPU (device {r.spec.device}); this machine has none"))
            print(f"[piece] not started: {describe_run(r)}: needs a GPU (device {r.spec.device})", file=out, flush=True)
            continue
        steps = client_steps(r.spec, build_run(r.spec, root))
        found = rates.rate(r.spec)
        if found is None:
            obs = calibrate(r.spec, root, clock, steps)
            rates.add(obs)
            found = rates.rate(r.spec)
            assert found is not None  # the calibration is an observation of this combination
            print(f"[piece] no measured or given rate for {describe_run(r)}: its first rounds, timed, give "
                  f"{obs.steps / obs.seconds:,.0f} client-steps/s over the whole run", file=out, flush=True)
        estimate, left = steps / found[0], budget_s - (clock() - start)
        if estimate > left:
            why = (f"{steps:,} client-steps, {span(estimate)} at {found[0]:,.0f} client-steps/s ({found[1]}); "
                   f"{span(max(left, 0))} left")
            report.skipped.append((r, why))
            print(f"[piece] not started (cannot finish): {describe_run(r)}: {why}", file=out, flush=True)
            continue
        began = clock()
        records = execute(r.spec, store, root=root, progress=False)
        seconds = max(clock() - began, 1e-9)
        done = int(records["clients"]["steps"].sum())
        path = ledger.add(store, r.spec, provenance(r.spec, store, root, seconds, done))
        obs = Observation(combination(r.spec), r.spec.experiment, device_type(r.spec.device), done, seconds)
        rates.add(obs)
        mine.add(obs)
        report.added.append((r, path, seconds, done))
        print(f"[piece] added {describe_run(r)}: {done:,} client-steps in {seconds:.1f} s "
              f"({done / seconds:,.0f}/s) -> {path.name} ({path.stat().st_size / 1024:.1f} KiB)", file=out, flush=True)
    now = ledger.entries()
    report.left = [r for r in ranked if held_by(now, r.spec, data[r.spec]) is None]
    report.rates = mine.measured()
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
