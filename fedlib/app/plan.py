"""reproduce's plan phase: each selected notebook's runs under its parameters, de-duplicated across notebooks,
with store hits, local SGD steps and the datasets this machine lacks."""
from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fedlib.app.options import UsageError
from fedlib.data import load_dataset
from fedlib.data.datasets import MissingDatasetError
from fedlib.data.roots import data_root
from fedlib.data.fabricate import fabricate_for
from fedlib.grids import client_steps, datasets_named, notebook_specs, profile_values
from fedlib.paper import params_class
from fedlib.paper_params import PaperParams, check_names
from fedlib.runs import Keys, RunSpec, RunStore
from fedlib.runs.build import Plans
from fedlib.runs.archive import origin
from fedlib.runs.selection import check_selection


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
        plans = Plans(nb.params.data_root)
        keys = Keys.building(plans)  # a run keyed here is built once, for its key and its steps
        try:
            for spec in nb.specs:
                if store.has(keys(spec)):
                    nb.stored += 1
                elif first.setdefault(spec, nb.name) != nb.name:
                    nb.shared[first[spec]] = nb.shared.get(first[spec], 0) + 1
                nb.steps_of[spec] = client_steps(spec, plans.take(spec))
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
        keys = Keys(nb.params.data_root)
        archives = [found["archive"] for s in nb.specs if (found := origin(store.folder(keys(s)))) is not None]
        if archives:
            lines.append(f"Runs imported from another machine: [{nb.name}] {len(archives)} of {len(nb.specs)} "
                         f"(from {', '.join(sorted(set(map(str, archives))))}); its claims rest on them.")
    return lines


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

