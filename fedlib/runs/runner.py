"""Execute many run specs: each not yet in the store is built and run, and every spec's tidy records come back.

    records = run_specs(specs, store=RunStore("results/runs"))          # local, in this process
    records = run_specs(specs, store=..., workers=4)                    # in 4 worker processes
    records = run_specs(specs, store=..., executor="ray")               # one Ray task per spec
    records = run_specs(specs, store=..., seed_batches=False)           # every run alone
    records["rounds"]   # every run's round rows, with the spec's labels, seed and key as columns
    records["layers"]   # every run's per-layer diagnostics, long (see `fedlib.core.contracts.RunResult`)

A spec already in the store is not recomputed; a run interrupted mid-way resumes from its checkpoint. How one
spec becomes a run is `fedlib.runs.build`; running one into the store is `fedlib.runs.execute`. Locally, the specs
to compute that differ only by seed are one unit, trained as one batch where `fedlib.engine.seed_batch.batches_seeds`
says so (`seed_batches=False`: every run alone); each is filed under its own key.
"""
from __future__ import annotations

import reprlib
import sys
import time
import warnings
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path

import pandas as pd

with warnings.catch_warnings():
    # In a Jupyter kernel without ipywidgets, tqdm.auto warns on import ("IProgress not found") and draws text
    # bars: the bars the notebooks here want (papermill keeps text in rendered outputs, not widget state).
    warnings.filterwarnings("ignore", message="IProgress not found")
    from tqdm.auto import tqdm

from fedlib.runs.archive import origin
from fedlib.runs.execute import execute_cell, seed_cells
from fedlib.runs.pool import run_in_processes
from fedlib.runs.ray_runner import run_on_ray
from fedlib.runs.build import Plans
from fedlib.runs.fingerprint import Keys
from fedlib.runs.spec import KeyedRun, RunSpec
from fedlib.runs.store import Records, RunStore
from fedlib.validate import instance

EXECUTORS = ("local", "ray")


def run_specs(specs: Sequence[RunSpec], *, store: RunStore, keys: Keys | None = None, executor: str = "local",
              ray_address: str | None = None, root: str | Path | None = None, checkpoint_every: int = 10,
              progress: bool = True, gpus_per_run: float | None = None, workers: int = 1, seed_batches: bool = True,
              on_done: Callable[[RunSpec], None] | None = None) -> Records:
    """Execute the specs not yet in the store and return every spec's records as tidy tables.

    Each spec is keyed here (`keys`, reading the datasets under `root`; None: `Keys()`, the code, data and
    environment of this process) and filed and found in the store under that key.

    `workers` > 1 runs the local executor's units (a cell's seeds, `seed_batches`) in that many worker processes
    (`fedlib.runs.pool`). `progress` draws bars (over runs, and with one local worker over the current run's rounds);
    `on_done(spec)` is called in this process as each computed run is stored (e.g.
    `fedlib.runs.progress.RunProgress.done`, one log line each)."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    instance("run_specs store", store, RunStore, "e.g. RunStore.at() (results/runs) or RunStore('a/folder')")
    instance("run_specs keys", keys, (Keys, type(None)), "e.g. Keys() (this process's code, data and environment)")
    keys = (Keys() if keys is None else keys).reading(root)  # keys cover the data files under the root runs read
    runs = [keys(spec) for spec in dict.fromkeys(_run_specs(specs))]  # duplicates run once
    todo = [run for run in runs if not store.has(run)]
    print(f"{len(runs)} runs: {len(runs) - len(todo)} from the store ({store.root}{_imported(runs, todo, store)}), "
          f"{len(todo)} to compute" + (f" ({executor})" if todo else ""), file=sys.stderr, flush=True)
    start = time.perf_counter()
    if todo and executor == "local":
        units = seed_cells(todo) if seed_batches else [[run] for run in todo]
        with tqdm(total=len(todo), desc="runs", unit="run", disable=not progress) as bar:
            def finished_unit(unit: Sequence[KeyedRun]) -> None:
                for run in unit:
                    bar.update()
                    if on_done is not None:
                        on_done(run.spec)

            if workers > 1:
                run_in_processes(units, store, keys, workers=workers, checkpoint_every=checkpoint_every,
                                 on_done=finished_unit)
            else:
                for unit in units:
                    execute_cell(unit, store, Plans(keys.data_root), checkpoint_every=checkpoint_every,
                                 progress=progress)
                    finished_unit(unit)
    elif todo:
        run_on_ray(todo, store, keys, checkpoint_every=checkpoint_every, address=ray_address,
                   gpus_per_run=gpus_per_run, on_done=on_done)
    if todo:
        print(f"computed {len(todo)} runs in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return tidy(runs, store)


def _imported(runs: Sequence[KeyedRun], todo: Sequence[KeyedRun], store: RunStore) -> str:
    """"; N of them imported from <archives>" for the stored runs whose entries came from an archive, else ""."""
    computing = {run.key for run in todo}
    archives = [found.get("archive") for run in runs if run.key not in computing
                and (found := origin(store.folder(run))) is not None]
    return f"; {len(archives)} of them imported from {', '.join(sorted(set(map(str, archives))))}" if archives else ""


def _run_specs(specs: object) -> list[RunSpec]:
    """`specs` as a list, each a RunSpec; else a ValueError naming the argument (or the element) and what it takes."""
    if isinstance(specs, (RunSpec, str, bytes, Mapping)) or not isinstance(specs, Iterable):
        got = "one RunSpec: pass [spec]" if isinstance(specs, RunSpec) else \
            f"{reprlib.repr(specs)} ({type(specs).__name__})"
        raise ValueError(f"run_specs specs must be a list of RunSpec, got {got}")
    specs = list(specs)
    for i, spec in enumerate(specs):
        instance(f"run_specs specs[{i}]", spec, RunSpec, "build specs with RunSpec.make(...) or a paper's "
                 "experiments(params); a spec's JSON with RunSpec.from_json(data)")
    return specs


def tidy(runs: Sequence[KeyedRun], store: RunStore) -> Records:
    """Concatenate each table over the stored `runs`, with the spec's labels, seed and store key as leading
    columns."""
    return tidy_runs((run.spec, run.key, store.load(run)) for run in runs)


def tidy_runs(runs: Iterable[tuple[RunSpec, str, Records]]) -> Records:
    """Each table concatenated over the (spec, key, records) of `runs`, with the spec's labels, seed and the key (as
    `run`) as leading columns."""
    tables: dict[str, list[pd.DataFrame]] = {}
    for spec, key, records in runs:
        ids = {**spec.get("labels"), "seed": spec.seed, "run": key}
        for name, frame in records.items():
            tables.setdefault(name, []).append(frame.assign(**ids)[[*ids, *frame.columns]])
    return {name: pd.concat(frames, ignore_index=True) for name, frames in tables.items()}
