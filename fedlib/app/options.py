"""The application's command-line options, each declared once in a group; `reproduce` takes every group and its
mode flags, `piece` and `from-ledger` the groups of their mode (`parse_args`); the values' checks."""
from __future__ import annotations

import argparse
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fedlib.app import notebooks
from fedlib.grids import read_yaml
from fedlib.ledger.entries import Ledger, NotALedgerError
from fedlib.ledger.piece import LONG_RUNS
from fedlib.trust import module_option

LEDGER = notebooks.ROOT / "evidence" / "gpu"
CPU_RECORD = notebooks.ROOT / "evidence" / "cpu" / "verdicts.csv"  # the cpu profile's verdicts beside the ledger's
PROFILES = ["quick", *sorted({p.stem for p in notebooks.NOTEBOOKS.glob("profiles/*/*.yaml")} - {"quick"})]
# Parameters that reproduce sets for every notebook: a -p of one of these would be silently replaced.
RUNNER_OWNED = {"profile": "--profile", "results_root": "--results", "runs_root": "--results",
                "runner": "--executor", "ray_address": "--ray-address", "ledger": "--from-ledger --ledger"}


class UsageError(ValueError):
    """A command-line value that cannot be used; the message says which and what to do."""


def absolute(path: str | Path) -> Path:
    """`path` against the folder reproduce was started from (the notebooks' kernels run in notebooks/)."""
    return Path(path).expanduser().resolve()


# Option groups: name -> [(flags, add_argument keywords)].
GROUPS: dict[str, list[tuple[tuple[str, ...], dict[str, Any]]]] = {
    "notebooks": [
        (("--profile",), dict(default="cpu", choices=PROFILES)),
        (("--only",), dict(nargs="+", action="extend", help="notebook names: --only a b, or --only a --only b "
                                                            "(default: all in notebooks/)")),
        (("--results",), dict(type=Path, default=notebooks.ROOT / "results", help="results folder (a relative path "
                                                                                  "is taken from the current folder)")),
        (("--allow-import",), dict(type=module_option, action="append", default=[], metavar="MOD", help=(
            "allow run specs to import module MOD (repeatable; also FEDLIB_ALLOW_IMPORTS=MOD,...): a spec's imports, "
            "and a ledger entry's, run only when allowed"))),
        (("-p", "--parameter"), dict(nargs=2, action="append", default=[], metavar=("NAME", "VALUE"), help=(
            "override a parameter in every selected notebook (VALUE is read as strict YAML 1.2: 1e6 a number; 010, "
            "1:5, anchors and aliases refused)")))],
    "compute": [
        (("--executor",), dict(default="local", choices=["local", "ray"], help="how runs execute")),
        (("--workers",), dict(type=int, default=None, help="worker processes of the local executor (default: from "
                                                           "the cores and the device)")),
        (("--ray-address",), dict(default=None, help="an existing Ray cluster (default: a local Ray)")),
        (("--select",), dict(default=None, help="compute only these runs, e.g. algorithm=fedavg,seed=0"))],
    "modes": [
        (("--dry-run",), dict(action="store_true", help=(
            "build every spec of the grids and run each distinct combination for one round on fabricated files (no "
            "data needed); print runs, local SGD steps and estimated times"))),
        (("--claims-only",), dict(action="store_true", help=(
            "judge every notebook's claims again from the evidence its last rendering saved "
            "(results/<profile>/<notebook>/evidence/): no run computed, no notebook executed"))),
        (("--piece",), dict(action="store_true", help="compute the next runs the ledger lacks, in priority order, "
                                                      "within --budget; export each finished run into the ledger")),
        (("--from-ledger",), dict(action="store_true", help=(
            "compute nothing: render the notebooks with their runs read from the ledger, and say what it holds of "
            "each headline claim and which entries are stale, in REPORT.md")))],
    "batching": [
        (("--no-seed-batches",), dict(action="store_true", help="train every run alone, not a cell's seeds as one "
                                                                "batch where the rule picks it (docs/speed.md)"))],
    "ledger": [(("--ledger",), dict(type=Path, default=LEDGER, help="the ledger folder (default: evidence/gpu)"))],
    "piece": [
        (("--budget",), dict(default=None, help="a piece's time budget: 600s, 10m or 1.5h")),
        (("--rate",), dict(type=float, default=None, help="client-steps/s to estimate runs of which no rate is "
                                                          "measured yet (else such a run is started and watched as it "
                                                          "runs)")),
        (("--recompute-stale",), dict(action="store_true", help="with --piece: recompute first the ledger entries "
                                                                "computed by code changed since")),
        (("--long-runs",), dict(choices=LONG_RUNS, default="skip", help=(
            "with --piece: a run that cannot finish within the budget is skipped for shorter ones (skip), or trained "
            "until the budget is spent and resumed by the next piece with the same --results (continue: where the "
            "results folder persists, e.g. a CPU in the background)")))],
    "from_ledger": [
        (("--write-expected",), dict(action="store_true", help=(
            "with --from-ledger: also write notebooks/expected-results-<profile>.md (and, the notebooks rendered, "
            "notebooks/expected-claims-<profile>.md)"))),
        (("--headlines-only",), dict(action="store_true", help="with --from-ledger: judge the headline claims only, "
                                                               "rendering no notebook (no dataset needed)")),
        (("--cpu-record",), dict(type=Path, default=CPU_RECORD, help=(
            "with --from-ledger: the record of the cpu profile's verdicts shown beside the ledger's (default: "
            "evidence/cpu/verdicts.csv)"))),
        (("--cpu-results",), dict(type=Path, default=None, help=(
            "with --from-ledger: first (re)write --cpu-record from this --results folder of a `reproduce --profile "
            "cpu` run (its cpu/<notebook>/claims.csv and stamp.json)")))]}


# The groups of each mode: reproduce takes all of them; a mode's subcommand only its own.
MODE_GROUPS = {None: ("notebooks", "compute", "batching", "modes", "ledger", "piece", "from_ledger"),
               "piece": ("notebooks", "batching", "ledger", "piece"),
               "from_ledger": ("notebooks", "ledger", "from_ledger")}


def parser(mode: str | None = None, prog: str | None = None, description: str = "") -> argparse.ArgumentParser:
    made = argparse.ArgumentParser(prog=prog, description=description)
    for group, options in GROUPS.items():
        for flags, keywords in options if group in MODE_GROUPS[mode] else ():
            made.add_argument(*flags, **keywords)
    return made


def parse_args(argv: Sequence[str], mode: str | None = None, prog: str | None = None,
               description: str = "") -> argparse.Namespace:
    """reproduce's options from `argv`; with `mode` ("piece", "from_ledger"), that mode's options, the others at
    their defaults and the mode's flag set."""
    args = parser(mode, prog, description).parse_args(budget_joined(argv))
    for name, value in vars(parser().parse_args([])).items():
        setattr(args, name, getattr(args, name, value))
    if mode is not None:
        setattr(args, mode, True)
    return args


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
