"""Dry run of whole notebook grids: every spec built, every distinct combination run for one round, on fabricated files.

    python -m fedlib.dryrun --profile full [--only taco] [--steps 2] [--notebooks FOLDER]

The notebooks folder (the notebooks' jupytext sources and their `profiles/`) is `--notebooks`, else the fedlib
checkout's `notebooks/`, else the working folder or its `notebooks/` subfolder (see `notebooks_folder`), so the
dry run works from an installed package too.

For each notebook, the parameters are its parameters dataclass's defaults updated with the profile's YAML (as
`scripts/reproduce.py` gives them), and the grid is its `Paper`'s `experiments(params)`. The dry run

1. writes fabricated files of every file-based dataset the grids name (`fedlib.data.fabricate`: the real
   formats and sample shapes, random content, fewer samples) to a temporary data root;
2. builds every cell of the grid (a spec but its seed: `build_run`: dataset, split, model, algorithm, links, the
   paper's plan) on its first seed, and draws the split of every other seed (a seed draws the split; each split
   once: a grid of hundreds of runs holds a few dozen splits), which gives every spec's local SGD steps;
3. runs each distinct (dataset, model, algorithm, uplink codec, downlink codec) combination of the notebook once,
   on the CPU, for one round of `steps` local steps of the federation's first 2 clients, both training
   (`one_round_rate`), record tables included (`reproduce --dry-run`: only the combinations of runs meant for a
   CPU; those of runs meant for a GPU are built, their minutes estimated from the ledger);
4. prints per notebook the grid's runs, its local SGD steps at full size, and estimated times: on this CPU from
   the rates step 3 measured (client-steps per second of each combination), and where each run runs (a GPU; a
   CPU for a spec pinned to one) at the client-steps/s whole runs of its combination, else of its experiment,
   measured in the ledger's entries (`--ledger`, `fedlib.ledger.piece.Rates`), else `--rate`; runs of which no
   rate is known are counted apart, with the range of whole runs measured on one H200 (`GPU_RATES`). Last, the
   runs in the order a piece computes them, each headline run with its minutes, and the total: the sum of those
   lines; then, per claim that reads runs, whether it
    can decide at the profile's seeds ("decidable at N seeds" or "cannot decide: <why>",
    `fedlib.claims.decidability`).

Local SGD steps count client-steps: per run, rounds x clients per round x local steps per client per round, the
last from the spec's `steps`, or its `epochs` over each client's share of the real training set (the fabricated
split's client shares scaled to `REAL_TRAIN_SIZES`; exact where the fabricated set has the real size, an
approximation for FEMNIST writers and Shakespeare roles, whose real sizes vary per user). The exit code is 0
when every cell built, every split drew and every combination ran, 1 otherwise (each failure is printed with its
spec).
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
import time
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from fedlib.claims.decidability import notebook_decidability
from fedlib.core.contracts import FederatedData
from fedlib.data import datasets
from fedlib.data.fabricate import REAL_TRAIN_SIZES, fabricate_for
from fedlib.engine.federation import run_federation
from fedlib.grids import client_steps, combination, notebook_parameters, notebook_specs
from fedlib.ledger.entries import Ledger
from fedlib.ledger.piece import Rates, describe_run, observed
from fedlib.ledger.priority import REST, prioritized
from fedlib.paper import papers
from fedlib.paths import checkout
from fedlib.runs import RunSpec
from fedlib.runs.build import RunPlan, build_run, build_split
from fedlib.runs.spec import Component, freeze

# GPU throughput in client-steps per second (low, high) for the estimates: the range of whole runs (evaluation and
# codecs included) the ledger's pieces measured on one H200 at commit a8e9184 (2026-11-27; evidence/leases/):
# 584 for MUCSC's 5-step rounds, up to 3,877 for FedAQ's 40-round runs. Estimated GPU time is steps / rate.
GPU_RATES = (584.0, 3_877.0)


def notebook_names(folder: Path) -> tuple[str, ...]:
    """Every notebook in `folder`: the stems of its jupytext sources (`<name>.py`)."""
    return tuple(sorted(p.stem for p in folder.glob("*.py")))


def is_notebooks_folder(folder: Path) -> bool:
    return (folder / "profiles").is_dir() and bool(notebook_names(folder))


def notebooks_folder(given: str | Path | None = None) -> Path:
    """`given`; else the checkout's notebooks/ (`fedlib.paths.checkout`); else the working folder, or its
    notebooks/ subfolder, when it holds notebook sources and a profiles/ folder. Raises FileNotFoundError naming
    what was looked for."""
    if given is not None:
        folder = Path(given).expanduser()
        if not is_notebooks_folder(folder):
            raise FileNotFoundError(f"--notebooks {folder}: not a notebooks folder (it needs the notebooks' "
                                    f"<name>.py sources and a profiles/ folder)")
        return folder
    found = checkout()
    candidates = [*([found / "notebooks"] if found is not None else []), Path.cwd(), Path.cwd() / "notebooks"]
    for folder in candidates:
        if is_notebooks_folder(folder):
            return folder
    raise FileNotFoundError(f"no notebooks folder found (looked in {', '.join(str(c) for c in candidates)}): give "
                            f"--notebooks FOLDER, a folder with the notebooks' <name>.py sources and profiles/ "
                            f"(the repository's notebooks/)")


ONE_ROUND_CLIENTS = 2  # clients a one-round run trains: a client-step costs the same whether 2 or 100 train a round


def one_round(spec: RunSpec, steps: int) -> RunSpec:
    """`spec` cut to one round of `steps` local steps per client for `ONE_ROUND_CLIENTS` clients drawn uniformly,
    on the CPU with one thread."""
    local = {k: v for k, v in spec.get("local").items() if k != "epochs"}
    loop = spec.get("loop")
    loop.update({"threads": 1} if "threads" in loop else {})
    return spec.with_(rounds=1, local=freeze({**local, "steps": steps}, "local"), loop=freeze(loop, "loop"),
                      device="cpu", sampler=Component.of("uniform", {"clients": ONE_ROUND_CLIENTS}))


def one_round_rate(spec: RunSpec, steps: int, root: Path) -> float:
    """Client-steps/s of `spec`'s `one_round`, record tables included, on its federation cut to the first
    `ONE_ROUND_CLIENTS` clients: every client of the cut trains the round, so an algorithm that needs every client
    (TACO) runs as in its grid, and a round costs 2 clients' steps whatever the grid's client count."""
    plan = build_run(one_round(spec, steps), root)
    data = FederatedData(plan.data.dataset, plan.data.client_indices[:ONE_ROUND_CLIENTS])
    result = run_federation(plan.model_fn, data, progress=False, **plan.kwargs)
    for collect in plan.collect:
        collect(result)
    return float(result.clients["steps"].sum()) / max(float(result.rounds["train_s"].sum()), 1e-9)


def full_size_steps(spec: RunSpec, plan: RunPlan) -> int:
    """Local SGD steps of the full-size run: `client_steps` with the clients' shares scaled to the real training set."""
    fabricated = len(plan.dataset.y_train)
    return client_steps(spec, plan, train_scale=REAL_TRAIN_SIZES.get(spec.dataset, fabricated) / fabricated)


@dataclass
class NotebookReport:
    notebook: str
    runs: int = 0
    steps: int = 0
    combinations: int = 0  # combinations run one round
    built_only: int = 0  # combinations of runs meant for a GPU, built and not run (`cpu_rounds_only`)
    cpu_seconds: float = 0.0
    failures: list[str] = field(default_factory=list)
    steps_of: dict[RunSpec, int] = field(default_factory=dict)  # each spec built: its local SGD steps at full size


def _failure(what: str, spec: RunSpec, err: BaseException) -> str:
    where = traceback.extract_tb(err.__traceback__)[-1]
    return (f"{what} failed for {combination(spec)} (labels {spec.get('labels')}): {type(err).__name__}: {err} "
            f"[{Path(where.filename).name}:{where.lineno}]")


def dry_run_notebook(notebook: str, profile: str, root: Path, steps: int, folder: Path | None = None,
                     cpu_rounds_only: bool = False) -> NotebookReport:
    """Build every spec of `notebook`'s grid under `profile` (read from the notebooks `folder`) and run each
    distinct combination once, or with `cpu_rounds_only` only those of runs meant for a CPU (`device_type_of`;
    files under `root` must exist: see `fabricate_for`)."""
    report = NotebookReport(notebook)
    specs = notebook_specs(notebook, notebook_parameters(notebook, profile, notebooks=folder))
    report.runs = len(specs)
    steps_of = report.steps_of
    cells: dict[RunSpec, RunPlan] = {}  # a grid cell (a spec but its seed) -> its first seed's build
    splits: dict[tuple, FederatedData] = {}  # (dataset, split, seed) -> the split drawn
    for spec in specs:
        try:
            cell = cells.get(spec.with_(seed=0))
            if cell is None:
                plan = cells[spec.with_(seed=0)] = build_run(spec, root)
                splits.setdefault((spec.dataset, spec.split, spec.seed), plan.data)
            else:  # another seed of a built cell: only its split differs (a seed draws the split)
                key = (spec.dataset, spec.split, spec.seed)
                if key not in splits:
                    splits[key] = build_split(spec, cell.dataset)
                data = splits[key]
                plan = dataclasses.replace(cell, spec=spec, data=data)
            steps_of[spec] = full_size_steps(spec, plan)
        except Exception as err:  # noqa: BLE001 - every failure is reported, the dry run goes on
            report.failures.append(_failure("build", spec, err))
    report.steps = sum(steps_of.values())
    representatives = {combination(s): s for s in reversed(list(steps_of))}  # the first spec of each combination
    if cpu_rounds_only:
        everything = len(representatives)
        representatives = {k: s for k, s in representatives.items() if device_type_of(s) == "cpu"}
        report.built_only = everything - len(representatives)
    rates: dict[tuple, float] = {}
    for key, spec in representatives.items():
        try:
            rates[key] = one_round_rate(spec, steps, root)
        except Exception as err:  # noqa: BLE001
            report.failures.append(_failure("one round", spec, err))
    report.combinations = len(rates)
    report.cpu_seconds = sum(n / rates[combination(s)] for s, n in steps_of.items() if combination(s) in rates)
    return report


@dataclass
class Estimate:
    """The minutes of a set of runs where they run (a spec's device: "cpu" on a CPU, else a GPU), each run's at the
    client-steps/s `Rates` gives (measured on whole runs of its combination or experiment, else the given rate);
    runs without a rate are counted apart, with their steps."""

    seconds: dict[str, float] = field(default_factory=dict)  # device kind -> summed seconds of the rated runs
    rated: int = 0
    unrated_steps: dict[str, int] = field(default_factory=dict)  # device kind -> steps of the runs with no rate
    unrated: int = 0

    def add(self, spec: RunSpec, steps: int, rates: Rates) -> float | None:
        """Adds one run; returns its seconds (None without a rate)."""
        device = device_type_of(spec)
        found = rates.rate(spec, device)
        if found is None:
            self.unrated += 1
            self.unrated_steps[device] = self.unrated_steps.get(device, 0) + steps
            return None
        self.rated += 1
        self.seconds[device] = self.seconds.get(device, 0.0) + steps / found[0]
        return steps / found[0]

    def text(self) -> str:
        """"27.0 min on one GPU for 39 runs at measured rates[; 4 runs with no rate: 1,000 steps, ...]"."""
        low, high = GPU_RATES
        parts = [f"{_duration(sec)} {WHERE[device]}" for device, sec in sorted(self.seconds.items())]
        said = (" + ".join(parts) + f" for {self.rated} run(s) at their client-steps/s (measured, or --rate)"
                if parts else "")
        if self.unrated:
            in_range = (lambda steps: f" ({_duration(steps / high)} - {_duration(steps / low)} at {high:,.0f} - "
                        f"{low:,.0f} client-steps/s, the range of whole runs measured on one H200)")
            guess = [f"{steps:,} steps {WHERE[device]}" + (in_range(steps) if device == "cuda" else "")
                     for device, steps in sorted(self.unrated_steps.items())]
            said += ("; " if said else "") + f"{self.unrated} run(s) with no measured rate: " + ", ".join(guess)
        return said


WHERE = {"cuda": "on one GPU", "cpu": "on a CPU"}


def datasets_of(notebooks: Sequence[str], profile: str, folder: Path | None = None) -> set[str]:
    return {s.dataset for nb in notebooks for s in notebook_specs(nb, notebook_parameters(nb, profile, notebooks=folder))}


def _duration(seconds: float) -> str:
    return f"{seconds / 3600:,.1f} h" if seconds >= 3600 else f"{seconds / 60:.1f} min"


def print_priority(reports: Sequence[NotebookReport], rates: Rates, out: TextIO) -> None:
    """The runs in the order a piece computes them (`fedlib.ledger.priority`): each headline run with its local SGD
    steps and its minutes at the rate `rates` gives for where it runs (a GPU; a run on device "cpu": a CPU), then
    the rest summed, then the total: the sum of these lines."""
    grids = {r.notebook: list(r.steps_of) for r in reports}
    steps_of = {spec: n for r in reports for spec, n in r.steps_of.items()}
    ranked = prioritized(grids)
    print(f"== priority: {sum(r.rank != REST for r in ranked)} of {len(ranked)} runs back headline claims "
          "(each paper's declared headlines), computed first, in this order:", file=out)
    headline, rest = Estimate(), Estimate()
    for i, r in enumerate(ranked, 1):
        if r.rank == REST:
            rest.add(r.spec, steps_of[r.spec], rates)
            continue
        seconds = headline.add(r.spec, steps_of[r.spec], rates)
        found = rates.rate(r.spec, device_type_of(r.spec))
        minutes = ("minutes unknown" if seconds is None or found is None else
                   f"{seconds / 60:,.1f} min at {found[0]:,.0f} client-steps/s ({found[1]})")
        print(f"  {i:>4}. {describe_run(r)}: {steps_of[r.spec]:,} local SGD steps, {minutes}", file=out)
    rest_steps = sum(steps_of[r.spec] for r in ranked if r.rank == REST)
    print(f"  then {rest.rated + rest.unrated} runs backing no headline claim: {rest_steps:,} local SGD steps"
          + (f", {rest.text()}" if rest.rated + rest.unrated else ""), file=out)
    if headline.unrated:
        print(f"  {headline.unrated} headline run(s) without a measured rate (none in the ledger for their combination "
              "or experiment) and no --rate given: their minutes are not estimated. A piece starts such a run and "
              "stops it only if its own pace cannot finish it in the budget.", file=out)
    total = Estimate()
    for r in ranked:
        total.add(r.spec, steps_of[r.spec], rates)
    print(f"== total: {total.text()} (the sum of the lines above)", file=out)


def print_decidability(notebook: str, profile: str, folder: Path | None, out: TextIO) -> None:
    """Per claim of `notebook` that reads runs, at `profile`'s seeds: "decidable at N seeds" or "cannot decide:
    <why>" (a headline claim marked)."""
    for d in notebook_decidability(notebook, notebook_parameters(notebook, profile, notebooks=folder)):
        print(f"  claim {d.claim}{' (headline)' if d.headline else ''}, {d.rule}: {d.line()}", file=out)


def device_type_of(spec: RunSpec) -> str:
    """"cpu" for a spec pinned to the CPU, else "cuda" (a gpu profile's "auto" means the GPU it is meant for)."""
    return "cpu" if spec.device == "cpu" else "cuda"


def dry_run(notebooks: Sequence[str], profile: str = "full", *, steps: int = 2, out: TextIO | None = None,
            train_size: int | None = None, folder: str | Path | None = None, rate: float | None = None,
            ledger: str | Path | None = None, cpu_rounds_only: bool = False) -> int:
    """Dry-run `notebooks` under `profile` on fabricated files in a temporary data root; print per notebook its
    runs, local SGD steps and estimated times; return the exit code (0: every spec built and every combination
    ran). `train_size` fabricates that many training samples per dataset instead of `FABRICATED_TRAIN` (faster,
    but a grid's splits may then not draw as on the real files). `out` defaults to the current standard output;
    `folder` is the notebooks folder (`notebooks_folder`; None: each paper's own, `Paper.notebooks`).
    `cpu_rounds_only` runs one round of the combinations of runs meant for a CPU only (the others are built: their
    minutes come from the ledger's GPU rates, and a round on this CPU would take minutes for nothing). Last, the
    priority order (`print_priority`) with minutes at the client-steps/s measured in the `ledger` folder's entries,
    else `rate`."""
    out = sys.stdout if out is None else out
    folder = notebooks_folder(folder) if folder is not None else None
    known = notebook_names(folder) if folder is not None else tuple(p.name for p in papers())
    unknown = sorted(set(notebooks) - set(known))
    if unknown:
        raise ValueError(f"unknown notebook(s) {unknown} in {folder or 'the declared papers'}; choose from {list(known)}")
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    failed = False
    rates = Rates(rate, [o for e in Ledger(ledger).entries() if (o := observed(e)) is not None] if ledger else [])
    reports = []
    with tempfile.TemporaryDirectory(prefix="fedlib-dryrun-") as tmp:
        root = Path(tmp)
        fabricate_for(datasets_of(notebooks, profile, folder), root, train_size)
        for notebook in notebooks:
            start = time.perf_counter()
            r = dry_run_notebook(notebook, profile, root, steps, folder, cpu_rounds_only)
            reports.append(r)
            status = "ok" if not r.failures else f"{len(r.failures)} FAILED"
            built = (f" ({r.built_only} more, of runs meant for a GPU, built only; `python -m fedlib.dryrun` runs "
                     "them one round here)" if r.built_only else "")
            print(f"{notebook} ({profile}): {r.runs:,} runs, {r.steps:,} local SGD steps; "
                  f"{r.combinations} combinations ran one round of {steps} steps{built}: {status} "
                  f"({time.perf_counter() - start:.0f} s)", file=out)
            where = Estimate()
            for spec, n in r.steps_of.items():
                where.add(spec, n, rates)
            here = f"{_duration(r.cpu_seconds)} on this CPU (its one-round rates, measured now); " if r.combinations else ""
            print(f"  estimated: {here}{where.text()}", file=out)
            for failure in r.failures:
                print(f"  FAILED: {failure}", file=out)
            print_decidability(notebook, profile, folder, out)
            failed |= bool(r.failures)
            out.flush()
        print_priority(reports, rates, out)
    datasets._load_cached.cache_clear()  # its entries hold the fabricated sets of a root that is gone
    return 1 if failed else 0


def main(argv: Sequence[str] | None = None, prog: str = "python -m fedlib.dryrun") -> int:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    parser.add_argument("--profile", default="full")
    parser.add_argument("--only", nargs="+", action="extend",
                        help="notebooks: --only a b, or --only a --only b (default: all)")
    parser.add_argument("--steps", type=int, default=2, help="local steps per client in the one-round runs")
    parser.add_argument("--rate", type=float, default=None,
                        help="client-steps/s for the priority list's minutes where the ledger measured none")
    parser.add_argument("--ledger", type=Path, default=None,
                        help="a ledger folder whose entries' measured rates estimate the minutes (e.g. evidence/gpu)")
    parser.add_argument("--notebooks", type=Path, default=None,
                        help="the notebooks folder (sources and profiles/); default: the checkout's notebooks/, or "
                             "the working folder or its notebooks/ subfolder")
    args = parser.parse_args(argv)
    try:
        folder = notebooks_folder(args.notebooks)
        names = list(dict.fromkeys(args.only)) if args.only else notebook_names(folder)
        return dry_run(names, args.profile, steps=args.steps, folder=folder, rate=args.rate, ledger=args.ledger)
    except (FileNotFoundError, ValueError) as err:
        parser.error(str(err))


if __name__ == "__main__":
    sys.exit(main())
