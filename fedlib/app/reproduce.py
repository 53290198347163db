"""`make reproduce`: plan every notebook's runs, compute them into the run store, render the notebooks, write REPORT.md.

`python -m fedlib reproduce` (and scripts/reproduce.py) with its modes `piece` and `from-ledger`: the phases,
`--select` and `--claims-only` are described in docs/notebooks.md; a piece, `--from-ledger` and `--dry-run` in
docs/ledger.md.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fedlib.app import notebooks
from fedlib.app.from_ledger import from_ledger
from fedlib.app.options import (CPU_RECORD, UsageError, absolute, duration, ledger_option, parse_args,
                                parse_overrides)
from fedlib.app.plan import (Plan, check_threads, count_steps, imported_runs, missing_datasets, plan_runs,
                             print_plan, run_parameters)
from fedlib.app.render import claims_only, render_all, stamp, write_report
from fedlib.data.roots import ENV_VAR
from fedlib.dryrun import dry_run
from fedlib.grids import BUNDLED_DATASETS
from fedlib.ledger.entries import LedgerError
from fedlib.ledger.piece import run_piece
from fedlib.ledger.priority import prioritized
from fedlib.paper import papers, params_class
from fedlib.paper_params import ParameterError
from fedlib.runs import Keys, RunStore, parse_selection, run_specs
from fedlib.runs.fingerprint import run_threads
from fedlib.runs.pool import default_workers, gpu_count, worker_cap
from fedlib.runs.progress import RunProgress
from fedlib.runs.spec import RunSpec
from fedlib.trust import allow_imports


@dataclass
class Prepared:
    """The plan phase's outcome: the plan, the store it reads, each notebook's papermill parameters."""
    plan: Plan
    store: RunStore
    given: dict[str, dict[str, Any]]
    results: Path


def fail(err: Exception) -> int:
    print(f"reproduce: error: {err}", file=sys.stderr)
    return 2


def main(argv: Sequence[str] | None = None, *, mode: str | None = None, prog: str | None = None) -> int:
    """reproduce with `argv` (default: the command line's); `mode` "piece" or "from_ledger": that subcommand of
    `python -m fedlib`, its flag implied."""
    about = __doc__.splitlines()[0] if mode is None else f"reproduce --{mode.replace('_', '-')}: see reproduce --help"
    args = parse_args(sys.argv[1:] if argv is None else argv, mode, prog, about)
    try:
        allow_imports(*args.allow_import)  # kept in the environment: the notebooks' kernels and workers inherit it
        names, overrides, selection = checked(args)
        if args.claims_only:
            if overrides or selection or args.dry_run:
                raise UsageError("--claims-only judges the saved evidence as it is: leave out -p, --select and "
                                 "--dry-run")
            return claims_only(names if args.only else notebooks.with_claims(names), absolute(args.results),
                               args.profile)
        budget = checked_modes(args)
        if args.from_ledger:
            return ledger_job(args, names, overrides, selection)
        if args.dry_run:
            if overrides or selection or args.piece:
                raise UsageError("--dry-run runs the profiles as they are: leave out -p, --select and --piece")
            return dry_run(names, args.profile, rate=args.rate, ledger=ledger_option(args.ledger).root,
                           cpu_rounds_only=True)
        ledger = ledger_option(args.ledger, creatable=True) if args.piece else None
        prepared = prepare(args, names, overrides, selection)
        if isinstance(prepared, int):
            return prepared
    except (UsageError, ParameterError, ValueError) as err:
        return fail(err)
    print_plan(prepared.plan, args.profile)
    if args.piece:
        try:
            plan = prepared.plan
            run_piece(prioritized({nb.name: nb.specs for nb in plan.notebooks}), ledger, prepared.store, budget,
                      roots={nb.name: nb.params.data_root for nb in plan.notebooks}, rate=args.rate,
                      recompute_stale=args.recompute_stale, seed_batches=not args.no_seed_batches,
                      long_runs=args.long_runs)
        except (LedgerError, ValueError) as err:
            return fail(err)
        return 0
    try:
        compute(args, prepared)
    except ConnectionError as err:  # a Ray cluster that does not answer
        return fail(err)
    return render_phase(args, names, overrides, prepared)


def checked(args: argparse.Namespace) -> tuple[list[str], dict[str, Any], dict[str, list[str]]]:
    """The notebooks (--only's, each once, else every one), the -p overrides and the --select selection; UsageError
    for a value that cannot be used."""
    available = [p.name for p in papers()]
    names = list(dict.fromkeys(args.only)) if args.only else available
    unknown = sorted(set(names) - set(available))
    if unknown:
        raise UsageError(f"unknown notebook(s) {unknown}; available: {available}")
    if args.workers is not None and args.workers < 1:
        raise UsageError(f"--workers must be a positive integer, got {args.workers}")
    if args.select is not None and not parse_selection(args.select):
        raise UsageError(f"--select {args.select!r} selects nothing: give key=value pairs, e.g. seed=0,algorithm=FedAvg")
    return names, parse_overrides(args.parameter), parse_selection(args.select)


def checked_modes(args: argparse.Namespace) -> float | None:
    """A piece's budget in seconds (None without --piece); UsageError for an option given without its mode."""
    if args.piece != (args.budget is not None):
        raise UsageError("--piece needs --budget (e.g. --budget 10m), and --budget is for --piece")
    budget = duration(args.budget) if args.piece else None
    for given, option in ((args.recompute_stale, "--recompute-stale"), (args.long_runs != "skip", "--long-runs")):
        if given and not args.piece:
            raise UsageError(f"{option} is for --piece")
    for given, option in ((args.write_expected, "--write-expected"), (args.cpu_results, "--cpu-results"),
                          (args.cpu_record != CPU_RECORD, "--cpu-record"), (args.headlines_only, "--headlines-only")):
        if given and not args.from_ledger:
            raise UsageError(f"{option} is for --from-ledger")
    return budget


def ledger_job(args: argparse.Namespace, names: list[str], overrides: dict[str, Any],
               selection: Mapping[str, Sequence[str]]) -> int:
    """`--from-ledger`, its options checked."""
    if selection or args.dry_run or args.piece or (overrides and args.write_expected):
        raise UsageError("--from-ledger reads the ledger against the profile's plan: leave out --select, "
                         "--dry-run and --piece (and -p with --write-expected: the committed file is the profile's)")
    if args.only and args.write_expected:
        raise UsageError("--write-expected writes the committed files of every notebook: leave out --only")
    to_render = [] if args.headlines_only else names if args.only else notebooks.with_claims(names)
    return from_ledger(names, args.profile, overrides, ledger_option(args.ledger).root, absolute(args.results),
                       args.write_expected, absolute(args.cpu_record),
                       absolute(args.cpu_results) if args.cpu_results else None, to_render)


def prepare(args: argparse.Namespace, names: list[str], overrides: dict[str, Any],
            selection: Mapping[str, Sequence[str]]) -> Prepared | int:
    """The plan phase: every parameter checked, the runs planned and built (their steps counted); a piece leaves
    out the runs of datasets this machine lacks, anything else stops (2) naming them."""
    if os.environ.get(ENV_VAR):  # the kernels run in notebooks/: a relative FEDLIB_DATA would move with them
        os.environ[ENV_VAR] = str(absolute(os.environ[ENV_VAR]))
    results = absolute(args.results)
    store = RunStore(results / "runs")
    injected = {"profile": args.profile, "results_root": str(results / args.profile), "runs_root": str(store.root),
                "runner": args.executor, "ray_address": args.ray_address}
    given = {name: run_parameters(name, args.profile, overrides, injected) for name in names}  # all checked
    parameters = {name: params_class(name).from_mapping(given[name], f"notebook '{name}'") for name in names}
    plan = plan_runs(names, parameters, selection)
    missing = missing_datasets(plan)
    if missing and args.piece:  # a piece computes what this machine can: the rest is left to another piece
        print("reproduce: this piece leaves out the runs of the datasets this machine cannot load:\n"
              + "\n".join(missing.values()), file=sys.stderr)
        for nb in plan.notebooks:
            nb.specs = [s for s in nb.specs if (s.dataset, nb.params.data_root) not in missing]
    elif missing:
        print("reproduce: the plan reads datasets this machine does not have; nothing was computed:\n"
              + "\n".join(missing.values()) + f"\nThe quick and cpu profiles run on bundled data only "
              f"({', '.join(BUNDLED_DATASETS)}): `PROFILE=cpu make reproduce`.", file=sys.stderr)
        return 2
    check_threads(plan)
    count_steps(plan, store)
    return Prepared(plan, store, given, results)


def compute(args: argparse.Namespace, prepared: Prepared) -> None:
    """The compute phase: the runs not yet in the store, each from the data root its key names; locally, in as many
    worker processes as `--workers` says, else as fill this machine (`default_workers`, per thread count of the
    runs: a CPU runs dense models one per core and convolutional ones one at a time)."""
    store, plan = prepared.store, prepared.plan
    gpus = gpu_count()
    groups = _worker_groups(args, plan, store, gpus)
    count = sum(len(todo) for _, todo in groups.values())
    busy = [(threads, workers, len(todo)) for (_, threads, workers), (_, todo) in groups.items() if todo]
    sizes = [f", {workers} worker(s)" + (f" for {n} run(s) of {threads} thread(s)" if len(busy) > 1 else "")
             for threads, workers, n in busy] if args.executor == "local" else []
    print(f"== compute: {count} runs ({args.executor}{''.join(sizes)})", flush=True)
    steps_of = {s: n for nb in plan.notebooks for s, n in nb.steps_of.items()}
    progress = RunProgress({s: steps_of[s] for _, todo in groups.values() for s in todo})  # a line per finished run
    for (root, _, workers), (specs, todo) in groups.items():
        if todo:  # all of the group's specs, so that run_specs' count of those in the store is the plan's
            run_specs(specs, store=store, executor=args.executor, ray_address=args.ray_address, workers=workers,
                      root=root, progress=False, on_done=progress.done, seed_batches=not args.no_seed_batches)


def _worker_groups(args: argparse.Namespace, plan: Plan, store: RunStore, gpus: int
                   ) -> dict[tuple[str | None, int | None, int], tuple[list[RunSpec], list[RunSpec]]]:
    """(data root, threads, workers) -> (its specs, those not yet in the store). Runs are grouped by thread count
    only where the workers follow it (local runs on a CPU, no `--workers`; else threads is None: one group per data
    root). A group starts no more workers than it has runs to compute, nor than twice the cores (`worker_cap`);
    a given `--workers` that this caps is told so."""
    by_threads = args.workers is None and not gpus and args.executor == "local"
    groups: dict[tuple[str | None, int | None, int], tuple[list[RunSpec], list[RunSpec]]] = {}
    for root, specs in plan.by_data_root().items():
        keys = Keys(root)  # keys read the same files as the runs
        for spec in specs:
            threads = run_threads(spec, root) if by_threads else None
            workers = args.workers or default_workers("cuda" if gpus else "cpu", gpus, threads or 1)
            group = groups.setdefault((root, threads, workers), ([], []))
            group[0].append(spec)
            if not store.has(keys(spec)):
                group[1].append(spec)
    capped = {}
    for (root, threads, workers), (specs, todo) in groups.items():
        cap = worker_cap(len(todo))
        if workers > cap and args.workers is not None:
            print(f"--workers {workers}: {cap} started ({len(todo)} runs, {os.cpu_count()} CPU cores)", flush=True)
        capped[(root, threads, min(workers, cap))] = (specs, todo)
    return capped


def render_phase(args: argparse.Namespace, names: list[str], overrides: dict[str, Any], prepared: Prepared) -> int:
    """The render phase (skipped with --select): every notebook executed; REPORT.md and REPORT.html written."""
    if args.select:
        print("== render: skipped (--select computes runs only; run again without it to render from the store)")
        return 0
    header = stamp(args.profile, overrides, args.select)
    results = prepared.results
    print(f"== render: {len(names)} notebook(s)", flush=True)
    statuses = render_all([(name, prepared.given[name], results / args.profile / name) for name in names], header)
    report = write_report(results, results / args.profile, header, names, imported_runs(prepared.plan, prepared.store))
    print(f"wrote {report}")
    from fedlib.report_html import write_report_html  # nbformat: not on a bare GPU machine, which only runs pieces

    print(f"wrote {write_report_html(report, results / args.profile)}")
    return 1 if any(s != "ok" for s in statuses) else 0
