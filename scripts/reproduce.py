"""`make reproduce`: plan every notebook's runs, compute them into the run store, render the notebooks, write REPORT.md.

    python scripts/reproduce.py --profile cpu                    # the main job (default)
    python scripts/reproduce.py --profile gpu --only taco        # one notebook
    python scripts/reproduce.py --only quickstart -p rounds 60 -p seeds "[0, 1]"   # overrides (strict YAML 1.2)
    python scripts/reproduce.py --profile cpu --workers 2        # two runs at a time
    python scripts/reproduce.py --profile cpu --no-seed-batches  # every run alone (docs/speed.md)
    python scripts/reproduce.py --profile full --executor ray --ray-address auto    # runs as Ray tasks
    python scripts/reproduce.py --profile full --only fedshift --select seed=0      # part of a grid
    python scripts/reproduce.py --profile full --dry-run         # every full grid built and run one round
    python scripts/reproduce.py --profile cpu --claims-only      # claims judged again from the saved evidence
    python scripts/reproduce.py --profile gpu --piece --budget 10m   # the next runs into the ledger (evidence/gpu/)
    python scripts/reproduce.py --profile gpu --from-ledger      # what the ledger holds of each headline claim
    python scripts/reproduce.py --profile gpu --from-ledger --write-expected --cpu-results results   # + cpu verdicts

Three phases, each printed as it starts:
1. plan: each selected notebook's run specs under the profile (notebooks/profiles/<notebook>/<profile>.yaml, then
   `-p` overrides), de-duplicated across notebooks; runs, local SGD steps and store hits per notebook; every
   dataset the plan reads is checked, and a missing one stops everything before any run, naming where it goes;
2. compute: the runs not yet in the store (`results/runs/`), each from the data root its key names, one line per
   finished run (k of n, elapsed, ETA from the client-steps/s the finished runs measured: `fedlib.runs.progress`);
   `--workers N` processes (at most min(runs, 2 x cores)) or Ray tasks;
3. render: each notebook executed with papermill; it finds every run in the store and builds its tables,
   figures and claims into results/<profile>/<notebook>/.
Interrupting any phase and running the same command again continues where it stopped (finished runs are in the
store, an interrupted run resumes from its checkpoint). REPORT.md lists every notebook of the profile that has
claims: those rendered now and earlier ones, each with the stamp (commit, date, machine, overrides, selection)
of the invocation that rendered it.

`--claims-only` judges every notebook's claims again from the evidence its last rendering saved beside its claims
table (results/<profile>/<notebook>/evidence/: the records and values the claims read), in seconds: after a change
to the judge or a rule, no run is computed and no notebook executed.

`--piece --budget 10m` computes the next runs of the profile that the ledger (`--ledger`, default evidence/gpu/)
lacks, in the priority order the papers declare (`Paper.headlines`), starting a run only when its estimate at
the measured client-steps/s fits in what is left of the budget (a run of which no rate is known is started, and
stopped only when its own pace cannot finish it: `fedlib.ledger.piece`), and exports each finished run into the
ledger (`fedlib.ledger`); `--rate` states a rate for runs of which nothing is measured yet; `--recompute-stale`
recomputes first the entries computed by other code than today's. `--ledger` must name a ledger folder (a piece
creates a missing one inside an existing folder); anything else is refused before anything is done. `--from-ledger`
computes nothing: it reads the ledger (whole, partial or empty; datasets this machine lacks are fabricated as
stand-ins, said so, to build today's code version of each run) and says per headline claim how many of its runs
it holds ("not testable: k of n runs computed", naming the missing ones) and which entries were computed by code
that has changed since, in REPORT.md; `--write-expected` also writes
notebooks/expected-results-<profile>.md. Beside each claim judged on the ledger stands the cpu profile's verdict on
it, from the committed record evidence/cpu/verdicts.csv (`--cpu-record`), which `--cpu-results DIR` first rewrites
from DIR, the `--results` folder of a `reproduce --profile cpu` run (`fedlib.ledger.cpu_record`). `--dry-run` prints the priority order with each run's local SGD steps
and its minutes at the measured (or `--rate`) client-steps/s.

`--select key=value,...` computes only the matching runs (values of one key OR, keys AND, case-insensitive;
keys: seed, experiment, dataset, algorithm, model, device, rounds, or a label/option of the notebook's specs) and
renders no notebook: split a grid across machines, then run without `--select` to render from the store.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import json
import math
import os
import platform
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedlib.claims import evidence
from fedlib.claims.evidence import EvidenceError
from fedlib.claims.ledger_verdicts import ledger_verdicts, verdicts_markdown
from fedlib.data import load_dataset
from fedlib.data.datasets import MissingDatasetError
from fedlib.data.roots import ENV_VAR, data_root
from fedlib.dryrun import dry_run, fabricate_for
from fedlib.grids import (BUNDLED_DATASETS, client_steps, datasets_named, notebook_parameters, notebook_specs,
                          profile_values, read_yaml)
from fedlib.ledger.cpu_record import TO_BE_REBUILT, CpuRecordError, read_cpu_results, read_current, write_record
from fedlib.ledger.entries import Ledger, LedgerError, NotALedgerError, git_commit
from fedlib.ledger.piece import run_piece
from fedlib.ledger.priority import prioritized
from fedlib.ledger.results import headline_results, results_pages, scales
from fedlib.ledger.status import expected_results, headline_status, stale_lines, stale_notes
from fedlib.paper import declared, paper, papers
from fedlib.paper_params import PaperParams, ParameterError, check_names, params_class
from fedlib.report import collect_report, markdown_row
from fedlib.runs import RunSpec, RunStore, build_run, parse_selection, run_specs
from fedlib.runs.archive import origin
from fedlib.runs.entry import write_atomic
from fedlib.runs.pool import default_workers, gpu_count, worker_cap
from fedlib.runs.progress import RunProgress
from fedlib.runs.selection import check_selection
from fedlib.trust import allow_imports, module_option

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
LEDGER = ROOT / "evidence" / "gpu"
LEDGER_DIGEST_LABEL = "Ledger digest (sha256 of its archives):"
CPU_RECORD = ROOT / "evidence" / "cpu" / "verdicts.csv"  # the cpu profile's verdicts shown beside the ledger's
RESULTS_PROFILE = "gpu"  # the ledger whose verdicts stand beside the cpu record's in the results table
PROFILES = ["quick", *sorted({p.stem for p in NOTEBOOKS.glob("profiles/*/*.yaml")} - {"quick"})]
# Parameters that reproduce sets for every notebook: a -p of one of these would be silently replaced.
RUNNER_OWNED = {"profile": "--profile", "results_root": "--results", "runs_root": "--results",
                "runner": "--executor", "ray_address": "--ray-address", "ledger": "--from-ledger --ledger"}


# The kernel logs one warning per start that it talks to papermill over local TCP without encryption; its own
# errors still show.
KERNEL_QUIET = ["--IPKernelApp.log_level=ERROR"]


class UsageError(ValueError):
    """A command-line value that cannot be used; the message says which and what to do."""


def absolute(path: str | Path) -> Path:
    """`path` against the folder reproduce was started from (the notebooks' kernels run in notebooks/)."""
    return Path(path).expanduser().resolve()


def parse_overrides(pairs: Sequence[Sequence[str]]) -> dict[str, Any]:
    """`-p NAME VALUE` pairs as YAML values (`1e6` a number); runner-owned names refused; `data_root` made absolute."""
    overrides = {name: read_yaml(value, f"-p {name} {value if len(value) <= 40 else value[:37] + '...'!r}")
                 for name, value in pairs}
    owned = sorted(set(overrides) & set(RUNNER_OWNED))
    if owned:
        raise UsageError("-p " + ", ".join(f"{n} is set by reproduce itself (use {RUNNER_OWNED[n]})" for n in owned))
    if overrides.get("data_root"):
        overrides["data_root"] = str(absolute(overrides["data_root"]))
    return overrides


def run_parameters(name: str, profile: str, overrides: Mapping[str, Any], injected: Mapping[str, Any]) -> dict:
    """What papermill gives notebook `name`: its profile's values, then the overrides, then reproduce's own values
    (fields of every notebook's parameters, `PaperParams`). Raises `UnknownParameterError` (listing the valid
    names) for a name in the profile or the overrides that the notebook does not declare."""
    check_names(overrides, params_class(name).names(), f"notebook '{name}', -p option")
    return {**profile_values(name, profile), **overrides, **injected}


@dataclass
class NotebookPlan:
    name: str
    params: PaperParams
    specs: list[RunSpec]
    steps_of: dict[RunSpec, int] = field(default_factory=dict)  # each run's local SGD steps
    stored: int = 0  # of its runs, how many the store already holds
    shared: dict[str, int] = field(default_factory=dict)  # earlier notebook -> runs of its that this one reads too


    @property
    def steps(self) -> int:
        return sum(self.steps_of.values())


@dataclass
class Plan:
    notebooks: list[NotebookPlan]
    datasets: dict[str, list[str]] = field(default_factory=dict)  # dataset -> notebooks that read it

    @property
    def specs(self) -> list[RunSpec]:
        return list(dict.fromkeys(s for nb in self.notebooks for s in nb.specs))

    def by_data_root(self) -> dict[str | None, list[RunSpec]]:
        """The plan's runs grouped by the data root their notebook reads (its `data_root` parameter): each group
        is keyed and computed from that root."""
        groups: dict[str | None, list[RunSpec]] = {}
        for nb in self.notebooks:
            groups.setdefault(nb.params.data_root, []).extend(nb.specs)
        return {root: list(dict.fromkeys(specs)) for root, specs in groups.items()}


def plan_runs(names: Sequence[str], parameters: Mapping[str, PaperParams],
              selection: Mapping[str, Sequence[str]]) -> Plan:
    notebooks = [NotebookPlan(name, parameters[name], notebook_specs(name, parameters[name])) for name in names]
    if selection:
        check_selection(selection, [s for nb in notebooks for s in nb.specs])
        for nb in notebooks:
            nb.specs = [s for s in nb.specs if s.matches(selection)]
    plan = Plan(notebooks)
    for nb in notebooks:
        for name in sorted({s.dataset for s in nb.specs} | datasets_named(nb.params)):
            plan.datasets.setdefault(name, []).append(nb.name)
    return plan


def missing_datasets(plan: Plan) -> dict[tuple[str, str | None], str]:
    """(dataset, data root) -> a line saying why this machine cannot load that dataset the plan reads: its files
    are not there (the loader's message says where they go) or a package its loader imports is not installed."""
    lines = {}
    for name, users in sorted(plan.datasets.items()):
        roots = {nb.params.data_root for nb in plan.notebooks if nb.name in users}
        for root in roots:
            try:
                load_dataset(name, root=data_root(root))
            except MissingDatasetError as err:  # its own message speaks of load_dataset's download=True
                fetch = (f"; or fetch them once from {err.url} (https, digests checked): .venv/bin/python -c "
                         f"\"from fedlib.data import load_dataset; load_dataset('{name}', download=True)\""
                         if err.url else "; see data/README.md for how to produce them")
                lines[name, root] = (f"  {name} (read by {', '.join(users)}): missing {', '.join(err.files)} in "
                                     f"{err.where}: put them there (data/README.md, docs/datasets.md){fetch}")
            except (FileNotFoundError, ImportError) as err:
                lines[name, root] = f"  {name} (read by {', '.join(users)}): {err}"
    return lines


THREADS_PER_CORE = 4  # more intra-op threads than this per core only slow a run; torch crashes on thousands


def check_threads(plan: Plan) -> None:
    """UsageError for a run asking for more torch threads than this machine can sensibly run."""
    cap = (os.cpu_count() or 1) * THREADS_PER_CORE
    for nb in plan.notebooks:
        asked = {s.get("loop").get("threads") for s in nb.specs} - {None, "auto"}
        too_many = sorted(t for t in asked if isinstance(t, int) and t > cap)
        if too_many:
            raise UsageError(f"notebook '{nb.name}': threads {too_many[-1]} is more than this machine runs "
                             f"({os.cpu_count()} CPU cores: at most {cap}); set -p threads to 1..{cap} or auto")


def count_steps(plan: Plan, store: RunStore) -> None:
    """Store hits, runs shared with an earlier notebook of the plan, and local SGD steps per notebook; building
    every run here stops a bad parameter before any run."""
    first: dict[RunSpec, str] = {}  # a run not in the store -> the first notebook of the plan that computes it
    for nb in plan.notebooks:
        reading = store.reading(nb.params.data_root)
        for spec in nb.specs:
            if reading.has(spec):
                nb.stored += 1
            elif first.setdefault(spec, nb.name) != nb.name:
                nb.shared[first[spec]] = nb.shared.get(first[spec], 0) + 1
        try:
            nb.steps_of = {s: client_steps(s, build_run(s, nb.params.data_root)) for s in nb.specs}
        except ValueError as err:
            raise UsageError(f"notebook '{nb.name}': {err}") from err


def print_plan(plan: Plan, profile: str) -> None:
    total = plan.specs
    print(f"== plan: profile {profile}, {len(plan.notebooks)} notebook(s), {len(total)} distinct runs", flush=True)
    for nb in plan.notebooks:
        shared = "".join(f", {n} shared with {other} (computed there)" for other, n in nb.shared.items())
        to_compute = len(nb.specs) - nb.stored - sum(nb.shared.values())
        print(f"[{nb.name}] {len(nb.specs)} runs: {nb.stored} from the store{shared}, {to_compute} to compute; "
              f"{nb.steps:,} local SGD steps", flush=True)


def imported_runs(plan: Plan, store: RunStore) -> list[str]:
    """One line per notebook whose runs (some or all) were imported from an archive rather than computed here."""
    lines = []
    for nb in plan.notebooks:
        reading = store.reading(nb.params.data_root)
        archives = [found["archive"] for s in nb.specs if (found := origin(reading.folder(s))) is not None]
        if archives:
            lines.append(f"Runs imported from another machine: [{nb.name}] {len(archives)} of {len(nb.specs)} "
                         f"(from {', '.join(sorted(set(map(str, archives))))}); its claims rest on them.")
    return lines


def stamp(profile: str, overrides: Mapping[str, Any], selection: str | None) -> str:
    import torch

    commit, changed = git_commit()
    dirty = " (with uncommitted changes)" if changed else ""
    gpu = f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", no GPU"
    given = ", ".join(f"-p {k} {json.dumps(v)}" for k, v in overrides.items()) or "no -p overrides"
    chosen = f", --select {selection}" if selection else ""
    return (f"profile `{profile}`, commit `{commit[:7]}`{dirty}, "
            f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, {platform.node() or 'this machine'} "
            f"({platform.machine()}, {os.cpu_count()} CPUs{gpu}), {given}{chosen}")


def failure(err: Exception) -> str:
    """The error and where: papermill's failing cell (execution count and first source line) when it is one."""
    import papermill

    if isinstance(err, papermill.PapermillExecutionError):
        first = next((line for line in err.source.splitlines() if line.strip() and not line.startswith("#")), "")
        return f"{err.ename}: {err.evalue} (cell [{err.exec_count}]: `{first.strip()[:80]}`)"
    return f"{type(err).__name__}: {err}"


def write_stamp(out_dir: Path, status: str, seconds: float, note: str, *, rendered: str | None = None,
                evidence_sha256: str | None = None) -> None:
    """out_dir/stamp.json: how the claims table beside it was made (REPORT.md reads it), written whole or not at
    all (a full disk leaves the earlier stamp). A rendering records its own note and the hash of the evidence it
    saved; a re-judge (`rendered`, `evidence_sha256` given) keeps the rendering's note and hash, so neither nests
    nor drifts."""
    out_dir.mkdir(parents=True, exist_ok=True)
    info = {"status": status, "seconds": round(seconds, 1), "stamp": note,
            "rendered": rendered if rendered is not None else note,
            "evidence_sha256": evidence_sha256 if rendered is not None else evidence.digest(out_dir)}
    write_atomic(out_dir / "stamp.json", json.dumps(info))


def read_stamp(path: Path) -> dict[str, Any] | None:
    """A stamp.json's fields, None if it is unreadable (an interrupted write before stamps were atomic)."""
    try:
        info = json.loads(path.read_text())
        if isinstance(info, dict) and {"status", "seconds", "stamp"} <= set(info):
            float(info["seconds"])
            return info
    except (OSError, ValueError, UnicodeDecodeError, TypeError):
        pass
    return None


def render(name: str, params: dict[str, Any], out_dir: Path, note: str) -> tuple[str, float]:
    """Execute notebook `name` into out_dir; write out_dir/stamp.json; return (status, seconds)."""
    import jupytext  # imported here: a piece (`--piece`) runs on a GPU machine without the notebook tools
    import nbformat
    import papermill

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "claims.csv").unlink(missing_ok=True)  # a failed run must not leave an old table behind
    output = out_dir / f"{name}.ipynb"
    print(f"[{name}] rendering -> {output}", flush=True)
    start = time.perf_counter()
    try:  # executes the jupytext source (the source of truth), not the committed quick-profile copy
        folder = paper(name).notebooks
        nbformat.write(jupytext.read(folder / f"{name}.py"), output)
        papermill.execute_notebook(str(output), str(output), parameters=params, kernel_name="python3",
                                   cwd=str(folder), progress_bar=False, log_output=False,
                                   extra_arguments=KERNEL_QUIET)
        status = "ok"
    except Exception as err:  # report and go on: results of the other notebooks are kept
        status = f"FAILED: {failure(err)}"
    seconds = time.perf_counter() - start
    write_stamp(out_dir, status, seconds, note)
    print(f"[{name}] {status} in {seconds:.0f} s", flush=True)
    return status, seconds


def write_report(results: Path, profile_dir: Path, header: str, rendered: Sequence[str],
                 imported: Sequence[str] = (), tail: str = "") -> Path:
    """REPORT.md: every notebook of this profile with claims, marked rendered now or with its own earlier stamp;
    `imported`: lines saying which notebooks' runs were imported from another machine (`imported_runs`); `tail`:
    markdown after the claims."""
    lines = ["| notebook | status | minutes | rendered |", "|---|---|---|---|"]
    for path in sorted(profile_dir.glob("*/stamp.json")):
        info = read_stamp(path)
        if info is None:
            print(f"reproduce: warning: {path} is not a readable stamp (empty or not JSON: an interrupted write?); "
                  f"its notebook is listed as unknown: render {path.parent.name} again", file=sys.stderr)
            info = {"status": f"unknown: unreadable {path}", "seconds": None, "stamp": "unknown"}
        when = "by this invocation" if path.parent.name in rendered else f"earlier: {info['stamp']}"
        minutes = "-" if info["seconds"] is None else f"{float(info['seconds']) / 60:.1f}"
        cells = [path.parent.name, info["status"], minutes, when]
        lines.append(markdown_row(cells))
    try:
        claims = collect_report(profile_dir)
    except FileNotFoundError as err:
        claims = f"(no claims tables: {err})"
    origins = "".join(f"\n\n{line}" for line in imported)
    report = results / "REPORT.md"
    write_atomic(report, f"# Reproduction report\n\nThis invocation: {header}.{origins}\n\n## Notebooks\n\n"
                 + "\n".join(lines) + "\n\n" + claims + "\n" + tail)
    return report


def judge_again(name: str, out_dir: Path, note: str) -> str:
    """Judge notebook `name`'s claims again from the evidence saved in out_dir; rewrite claims.csv and stamp.json,
    saying whether the evidence still hashes as it did when the notebook rendered it. A stamp.json missing, emptied
    or without the evidence's hash fails the notebook, naming the file (claims.csv is left as it was): the evidence
    cannot be checked against its rendering, and the stamp written then keeps failing until it is rendered again."""
    start = time.perf_counter()
    stamp_file = out_dir / "stamp.json"
    earlier = read_stamp(stamp_file)
    unproven = (f"{stamp_file} is missing" if not stamp_file.exists() else
                f"{stamp_file} is unreadable (empty or not a stamp)" if earlier is None else
                f"{stamp_file} records no hash of the evidence" if earlier.get("evidence_sha256") is None else None)
    earlier = earlier or {}
    rendered, saved = earlier.get("rendered", earlier.get("stamp", "unknown")), earlier.get("evidence_sha256")
    found = evidence.digest(out_dir)
    drift = "; THE EVIDENCE CHANGED since it was rendered (its hash differs)" if saved not in (None, found) else ""
    try:
        module, bundle = evidence.load(out_dir)
        if module != name or name not in declared():
            raise EvidenceError(f"{out_dir / evidence.FOLDER}: evidence of {module!r}, not {name!r}; "
                                f"render {name} again")
        if unproven is None:
            paper(name).judge(bundle).save(out_dir)
        status = "ok" if unproven is None else (f"FAILED: {unproven}: the evidence cannot be checked against its "
                                                f"rendering; render {name} again")
    except EvidenceError as err:
        status = f"FAILED: {err}"
    write_stamp(out_dir, status, time.perf_counter() - start,
                f"claims judged again ({note}) from the evidence rendered {rendered}{drift}", rendered=rendered,
                evidence_sha256=saved)
    print(f"[{name}] claims only: {status}{drift}", flush=True)
    return status


def claims_only(names: Sequence[str], results: Path, profile: str) -> int:
    """`--claims-only`: every selected notebook's claims judged again; REPORT.md rewritten."""
    header = stamp(profile, {}, None) + ", --claims-only"
    print(f"== claims only: {len(names)} notebook(s), from results/{profile}/<notebook>/{evidence.FOLDER}/", flush=True)
    statuses = [judge_again(name, results / profile / name, header) for name in names]
    print(f"wrote {write_report(results, results / profile, header, names)}")
    return 1 if any(s != "ok" for s in statuses) else 0


BUDGET_UNITS = {"s": 1.0, "m": 60.0, "h": 3600.0}


def duration(text: str) -> float:
    """--budget's "600s", "10m" or "1.5h" as seconds; a UsageError, in one line, for anything else: no unit,
    another unit, a number that is not positive and finite, nothing."""
    shape = "give a positive number and a unit: 600s, 10m or 1.5h"
    unit = text[-1:] if text[-1:] in BUDGET_UNITS else ""
    try:
        value = float(text[:len(text) - len(unit)])
    except ValueError:
        raise UsageError(f"--budget {text!r} is not a duration; {shape}") from None
    seconds = value * BUDGET_UNITS.get(unit, 1.0)
    if not (math.isfinite(seconds) and seconds > 0):
        raise UsageError(f"--budget {text!r} is not a positive, finite duration; {shape}")
    if not unit:
        raise UsageError(f"--budget {text!r} has no unit; {shape}")
    return seconds


def budget_joined(argv: Sequence[str]) -> list[str]:
    """`argv` with "--budget VALUE" as "--budget=VALUE": argparse reads a VALUE such as -5m as an option (and says
    only "expected one argument"); joined, `duration` refuses it by name."""
    joined: list[str] = []
    args = iter(argv)
    for arg in args:
        joined.append(arg if arg != "--budget" else f"--budget={next(args, '')}")
    return joined


def ledger_option(path: Path, *, creatable: bool = False) -> Ledger:
    """The ledger folder --ledger names, checked before anything is done (`Ledger.require`; `creatable`: a piece's,
    which it creates where it is missing)."""
    ledger = Ledger(absolute(path))
    try:
        ledger.require(creatable=creatable)
    except NotALedgerError as err:
        raise UsageError(f"--ledger: {err}") from None
    return ledger


def shown(path: Path) -> Path:
    """`path` as the committed files name it: from the repository's root where it lies inside."""
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def from_ledger(names: Sequence[str], profile: str, overrides: Mapping[str, Any], ledger_root: Path, results: Path,
                write_expected: bool, cpu_record: Path, cpu_results: Path | None, to_render: Sequence[str]) -> int:
    """`--from-ledger`: the ledger's entries against the plan of the profile (with the -p `overrides`), per headline
    claim, each judged claim beside the cpu profile's verdict from the record `cpu_record` (first written from the
    cpu run's results folder `cpu_results` where given); stale entries named; the notebooks `to_render` (each must
    declare claims) rendered from the ledger into results/<profile>/ (their datasets must be on this machine);
    REPORT.md written, and with `write_expected` notebooks/expected-results-<profile>.md (and, rendered,
    notebooks/expected-claims-<profile>.md). Computes no run."""
    params = {name: notebook_parameters(name, profile, overrides) for name in names}
    grids = {name: notebook_specs(name, params[name]) for name in names}
    try:
        entries = Ledger(ledger_root).entries()  # every archive read and verified once, for everything below
    except LedgerError as err:
        print(f"reproduce: error: damaged ledger entry, refused: {err}", file=sys.stderr)
        return 2
    if to_render:
        if set(to_render) - set(declared()):
            print(f"reproduce: error: {', '.join(sorted(set(to_render) - set(declared())))} declares no claims and "
                  "runs its own loops: no ledger serves it; leave it out of --only", file=sys.stderr)
            return 2
        missing = missing_datasets(plan_runs(to_render, params, {}))
        if missing:
            print("reproduce: the notebooks read datasets this machine does not have; nothing was rendered:\n"
                  + "\n".join(missing.values()) + "\nGet them (docs/datasets.md), or judge the headline claims "
                  "alone with --headlines-only (no dataset needed).", file=sys.stderr)
            return 2
    try:
        if cpu_results is not None:
            print(f"wrote {write_record(read_cpu_results(cpu_results), cpu_record)}")
        cpu = read_current(cpu_record, str(shown(cpu_record)))
    except CpuRecordError as err:
        print(f"reproduce: error: {err}", file=sys.stderr)
        return 2
    if cpu.predates:
        print(f"reproduce: note: {cpu.predates}; the cpu verdict column reads \"{TO_BE_REBUILT}\"", file=sys.stderr)
    datasets = set(plan_runs(names, params, {}).datasets)  # every one the plan reads, not only the ledger's
    lacking = unloadable(datasets)
    stand_ins = (f"Datasets this machine lacks ({', '.join(lacking)}) were fabricated as stand-ins (random files in "
                 "their formats): they only build each run for today's code version and give the class counts; "
                 "every number here is read from the ledger.") if lacking else ""
    with fabricated_if_missing(datasets) as root:
        notes = stale_notes(entries, lambda spec: root)
        tables = ledger_verdicts(params, grids, entries, root)
    verdicts = verdicts_markdown(tables, profile, cpu)
    table = expected_results(grids, entries, str(shown(ledger_root)), profile, verdicts=verdicts)
    stale = stale_lines(notes)
    report_table = expected_results(grids, entries, str(shown(ledger_root)), profile,
                                    {e.spec: note for e, note in notes}, verdicts=verdicts)
    print(report_table)
    print("Entries computed by code changed since:" + "".join(f"\n  {line}" for line in stale) if stale
          else "No entry was computed by code that has changed since.")
    if stand_ins:
        print(stand_ins)
    if write_expected:
        target = NOTEBOOKS / f"expected-results-{profile}.md"
        write_atomic(target, table)
        print(f"wrote {target}")
        if profile == RESULTS_PROFILE:  # the results table of README.md and docs/results.md
            claims = headline_results(params, tables, headline_status(grids, {e.spec for e in entries}), cpu)
            for page, text in results_pages(ROOT, claims, cpu, scales({n: params[n] for n in tables}, cpu)).items():
                write_atomic(page, text)
                print(f"wrote {page}")
    results.mkdir(parents=True, exist_ok=True)
    stale_md = ("\n## Stale ledger entries\n\n" + "".join(f"- {line}\n" for line in stale)) if stale else ""
    made = f"{stamp(profile, overrides, None)}, --from-ledger {shown(ledger_root)}"
    ledger_md = report_table.split("\n", 2)[2] + stale_md + (f"\n{stand_ins}\n" if stand_ins else "")
    if not to_render:
        report = results / "REPORT.md"
        write_atomic(report, f"# Reproduction report\n\nThis invocation: {made} (no run computed, no notebook "
                             "rendered).\n\n" + ledger_md)
        print(f"wrote {report}")
        return 0
    injected = {"profile": profile, "results_root": str(results / profile), "runs_root": str(results / "runs"),
                "runner": "local", "ray_address": None, "ledger": str(ledger_root)}
    note = f"{made} (no run computed)"
    print(f"== render from the ledger: {len(to_render)} notebook(s)", flush=True)
    statuses = [render(name, run_parameters(name, profile, overrides, injected), results / profile / name, note)[0]
                for name in to_render]
    report = write_report(results, results / profile, note, to_render, tail="\n# The ledger\n" + ledger_md)
    print(f"wrote {report}")
    if write_expected and all(status == "ok" for status in statuses):
        target = NOTEBOOKS / f"expected-claims-{profile}.md"
        write_atomic(target, rendered_claims(results / profile, to_render, Ledger(ledger_root), profile))
        print(f"wrote {target}")
    return 1 if any(status != "ok" for status in statuses) else 0


def rendered_claims(profile_dir: Path, names: Sequence[str], ledger: Ledger, profile: str) -> str:
    """Markdown: the claims tables of the notebooks `names` rendered from `ledger` into `profile_dir`, headed by the
    ledger's digest (a test checks it against the committed ledger) and each notebook's stamp."""
    stamps = [f"- {name}: {(read_stamp(profile_dir / name / 'stamp.json') or {}).get('stamp', 'unknown')}"
              for name in names]
    claims = collect_report(profile_dir).split("\n", 1)[1]  # the scale note stands in REPORT.md
    return (f"# Every claim of the {profile} notebooks, rendered from the ledger\n\n"
            f"Generated by `python scripts/reproduce.py --profile {profile} --from-ledger --write-expected` (each "
            "notebook executed with its runs read from the ledger, none computed; theory and Monte Carlo cells "
            f"run as always). {LEDGER_DIGEST_LABEL} `{ledger.digest()}`: rebuild this file whenever the ledger "
            "changes (a test compares the digest with the committed ledger's).\n\n" + "\n".join(stamps) + "\n"
            + claims)


def unloadable(names: set[str]) -> list[str]:
    """Those of `names` whose files are not on this machine (under the data-root rule), sorted."""
    missing = []
    for name in sorted(names):
        try:
            load_dataset(name, root=data_root(None))
        except FileNotFoundError:
            missing.append(name)
    return missing


@contextlib.contextmanager
def fabricated_if_missing(names: set[str]) -> Iterator[str | None]:
    """None (the data-root rule) when every dataset in `names` is on this machine, else a temporary root with
    fabricated files of every one (`fedlib.data.fabricate`): today's code version of a spec needs its run built,
    not its real data."""
    if not unloadable(names):
        yield None
        return
    with tempfile.TemporaryDirectory(prefix="fedlib-ledger-data-") as tmp:
        fabricate_for(names, Path(tmp))
        yield tmp


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu", choices=PROFILES)
    parser.add_argument("--only", nargs="+", action="extend",
                        help="notebook names: --only a b, or --only a --only b (default: all in notebooks/)")
    parser.add_argument("--results", type=Path, default=ROOT / "results",
                        help="results folder (a relative path is taken from the current folder)")
    parser.add_argument("--executor", default="local", choices=["local", "ray"], help="how runs execute")
    parser.add_argument("--workers", type=int, default=None,
                        help="worker processes of the local executor (default: from the cores and the device)")
    parser.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: a local Ray)")
    parser.add_argument("--no-seed-batches", action="store_true",
                        help="train every run alone, not a cell's seeds as one batch where the rule picks it "
                             "(docs/speed.md)")
    parser.add_argument("--select", default=None, help="compute only these runs, e.g. algorithm=fedavg,seed=0")
    parser.add_argument("--dry-run", action="store_true",
                        help="build every spec of the grids and run each distinct combination for one round on "
                             "fabricated files (no data needed); print runs, local SGD steps and estimated times")
    parser.add_argument("--claims-only", action="store_true",
                        help="judge every notebook's claims again from the evidence its last rendering saved "
                             "(results/<profile>/<notebook>/evidence/): no run computed, no notebook executed")
    parser.add_argument("--piece", action="store_true",
                        help="compute the next runs the ledger lacks, in priority order, within --budget; export "
                             "each finished run into the ledger")
    parser.add_argument("--budget", default=None, help="a piece's time budget: 600s, 10m or 1.5h")
    parser.add_argument("--rate", type=float, default=None,
                        help="client-steps/s to estimate runs of which no rate is measured yet (else such a run is "
                             "started and watched as it runs)")
    parser.add_argument("--ledger", type=Path, default=LEDGER, help="the ledger folder (default: evidence/gpu)")
    parser.add_argument("--recompute-stale", action="store_true",
                        help="with --piece: recompute first the ledger entries computed by code changed since")
    parser.add_argument("--from-ledger", action="store_true",
                        help="compute nothing: render the notebooks with their runs read from the ledger, and say "
                             "what it holds of each headline claim and which entries are stale, in REPORT.md")
    parser.add_argument("--write-expected", action="store_true",
                        help="with --from-ledger: also write notebooks/expected-results-<profile>.md (and, the "
                             "notebooks rendered, notebooks/expected-claims-<profile>.md)")
    parser.add_argument("--headlines-only", action="store_true",
                        help="with --from-ledger: judge the headline claims only, rendering no notebook (no "
                             "dataset needed)")
    parser.add_argument("--cpu-record", type=Path, default=CPU_RECORD,
                        help="with --from-ledger: the record of the cpu profile's verdicts shown beside the ledger's "
                             "(default: evidence/cpu/verdicts.csv)")
    parser.add_argument("--cpu-results", type=Path, default=None,
                        help="with --from-ledger: first (re)write --cpu-record from this --results folder of a "
                             "`reproduce --profile cpu` run (its cpu/<notebook>/claims.csv and stamp.json)")
    parser.add_argument("--allow-import", type=module_option, action="append", default=[], metavar="MOD",
                        help="allow run specs to import module MOD (repeatable; also FEDLIB_ALLOW_IMPORTS=MOD,...): a "
                             "spec's imports, and a ledger entry's, run only when allowed")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="override a parameter in every selected notebook (VALUE is read as strict YAML 1.2: "
                             "1e6 a number; 010, 1:5, anchors and aliases refused)")
    return parser.parse_args(budget_joined(sys.argv[1:] if argv is None else argv))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        allow_imports(*args.allow_import)  # kept in the environment: the notebooks' kernels and workers inherit it
        available = [p.name for p in papers()]  # fedlib's and those of the modules allowed
        names = list(dict.fromkeys(args.only)) if args.only else available
        unknown = sorted(set(names) - set(available))
        if unknown:
            raise UsageError(f"unknown notebook(s) {unknown}; available: {available}")
        if args.workers is not None and args.workers < 1:
            raise UsageError(f"--workers must be a positive integer, got {args.workers}")
        if args.select is not None and not parse_selection(args.select):
            raise UsageError(f"--select {args.select!r} selects nothing: give key=value pairs, e.g. seed=0,algorithm=FedAvg")
        selection = parse_selection(args.select)
        overrides = parse_overrides(args.parameter)
        if args.claims_only:
            if overrides or selection or args.dry_run:
                raise UsageError("--claims-only judges the saved evidence as it is: "
                                 "leave out -p, --select and --dry-run")
            # without --only: the notebooks that declare claims (the Flower notebook's result is its parity table)
            judged = names if args.only else [name for name in names if name in declared()]
            return claims_only(judged, absolute(args.results), args.profile)
        if args.piece != (args.budget is not None):
            raise UsageError("--piece needs --budget (e.g. --budget 10m), and --budget is for --piece")
        budget = duration(args.budget) if args.piece else None
        if args.recompute_stale and not args.piece:
            raise UsageError("--recompute-stale is for --piece")
        for given, option in ((args.write_expected, "--write-expected"), (args.cpu_results, "--cpu-results"),
                              (args.cpu_record != CPU_RECORD, "--cpu-record"), (args.headlines_only,
                                                                                "--headlines-only")):
            if given and not args.from_ledger:
                raise UsageError(f"{option} is for --from-ledger")
        if args.from_ledger:
            if selection or args.dry_run or args.piece or (overrides and args.write_expected):
                raise UsageError("--from-ledger reads the ledger against the profile's plan: leave out --select, "
                                 "--dry-run and --piece (and -p with --write-expected: the committed file is the "
                                 "profile's)")
            if args.only and args.write_expected:
                raise UsageError("--write-expected writes the committed files of every notebook: leave out --only")
            return from_ledger(names, args.profile, overrides, ledger_option(args.ledger).root, absolute(args.results),
                               args.write_expected, absolute(args.cpu_record),
                               absolute(args.cpu_results) if args.cpu_results else None,
                               [] if args.headlines_only else names if args.only else
                               [name for name in names if name in declared()])
        if args.dry_run:
            if overrides or selection or args.piece:
                raise UsageError("--dry-run runs the profiles as they are: leave out -p, --select and --piece")
            return dry_run(names, args.profile, rate=args.rate, ledger=ledger_option(args.ledger).root)
        ledger = ledger_option(args.ledger, creatable=True) if args.piece else None
        if os.environ.get(ENV_VAR):  # the kernels run in notebooks/: a relative FEDLIB_DATA would move with them
            os.environ[ENV_VAR] = str(absolute(os.environ[ENV_VAR]))
        results = absolute(args.results)
        store = RunStore(results / "runs", data_root=overrides.get("data_root"))  # keys read the same files as the runs
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
    except (UsageError, ParameterError, ValueError) as err:
        print(f"reproduce: error: {err}", file=sys.stderr)
        return 2
    print_plan(plan, args.profile)
    if args.piece:
        try:
            run_piece(prioritized({nb.name: nb.specs for nb in plan.notebooks}), ledger, store,
                      budget, roots={nb.name: nb.params.data_root for nb in plan.notebooks}, rate=args.rate,
                      recompute_stale=args.recompute_stale)
        except (LedgerError, ValueError) as err:
            print(f"reproduce: error: {err}", file=sys.stderr)
            return 2
        return 0

    by_root = plan.by_data_root()
    todo = {root: [s for s in specs if not store.reading(root).has(s)] for root, specs in by_root.items()}
    count = sum(map(len, todo.values()))
    gpus = gpu_count()
    workers = args.workers or default_workers("cuda" if gpus else "cpu", gpus)
    if workers > worker_cap(count):
        print(f"--workers {workers}: {worker_cap(count)} started ({count} runs, {os.cpu_count()} CPU cores)", flush=True)
        workers = worker_cap(count)
    print(f"== compute: {count} runs ({args.executor}" + (f", {workers} worker(s))" if args.executor == "local"
                                                           else ")"), flush=True)
    steps_of = {s: n for nb in plan.notebooks for s, n in nb.steps_of.items()}
    progress = RunProgress({s: steps_of[s] for specs in todo.values() for s in specs})  # one line per finished run
    for root, specs in by_root.items():  # each computed from the data root its key names
        if not todo[root]:
            continue
        try:  # all of the root's specs, so that run_specs' count of those in the store is the plan's
            run_specs(specs, store=store, executor=args.executor, ray_address=args.ray_address, workers=workers,
                      root=root, progress=False, on_done=progress.done,
                      seed_batches=not args.no_seed_batches)
        except ConnectionError as err:  # a Ray cluster that does not answer
            print(f"reproduce: error: {err}", file=sys.stderr)
            return 2
    header = stamp(args.profile, overrides, args.select)
    if selection:
        print("== render: skipped (--select computes runs only; run again without it to render from the store)")
        return 0

    print(f"== render: {len(names)} notebook(s)", flush=True)
    statuses = [render(name, given[name], results / args.profile / name, header)[0] for name in names]
    report = write_report(results, results / args.profile, header, names, imported_runs(plan, store))
    print(f"wrote {report}")
    from fedlib.report_html import write_report_html  # nbformat: not on a bare GPU machine, which only runs pieces

    print(f"wrote {write_report_html(report, results / args.profile)}")
    return 1 if any(s != "ok" for s in statuses) else 0


if __name__ == "__main__":
    sys.exit(main())
