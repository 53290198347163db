"""Run specs in worker processes on this machine (`run_specs(..., workers=N)`).

Each worker is a fresh (spawned) Python process that executes one unit at a time (one spec, or one cell's seeds:
`execute_cell`) and files its records in the same store, so a run computed by a worker is the run `workers=1`
computes: same spec, same keyed random streams, same thread choice (`fedlib.engine.federation.choose_threads`, from the
model, not from the worker count). Several workers share the machine's cores and, on a GPU machine, its GPUs: small
federated runs are launch-bound, so a few at once keep a device busy; on a machine with several GPUs each worker
sees one of them (CUDA_VISIBLE_DEVICES, set as it starts: `worker_devices`), in turn, so the runs spread over all of
them. A worker's failure is raised in the caller, naming its specs, after the other workers' runs have been filed.
Workers are capped at `worker_cap` (a process per run beyond a few per core only costs start-up time and memory),
with a message when the request was larger. Each
worker reports the key context it computed its run with, and the caller checks it before using the records
(`RunStore.check_context`). Each worker may import what the caller may (`fedlib.trust.worker_allowance`).
"""
from __future__ import annotations

import multiprocessing
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any
from concurrent.futures import FIRST_EXCEPTION, Future, ProcessPoolExecutor, wait
from pathlib import Path

from fedlib.runs.execute import execute_cell
from fedlib.runs.build import Plans
from fedlib.runs.fingerprint import Keys
from fedlib.runs.spec import KeyedRun, RunSpec
from fedlib.runs.store import RunStore
from fedlib.trust import allow_imports, worker_allowance


RUNS_PER_GPU = 4  # small federated runs are launch-bound: a few at once keep one GPU busy


def default_workers(device: str = "cpu", gpus: int = 1, threads: int = 1) -> int:
    """Worker processes for `reproduce`: up to `RUNS_PER_GPU` runs sharing each of the `gpus` GPUs, at most one per
    core; on a CPU, as many runs of `threads` intra-op threads each as fill the cores (`fedlib.runs.fingerprint.
    run_threads`: one for a convolutional model, which already trains on every core; one per core for dense
    models, which train on one core each)."""
    if device != "cpu":
        return max(1, min(RUNS_PER_GPU * max(gpus, 1), os.cpu_count() or 1))
    return max(1, (os.cpu_count() or 1) // max(threads, 1))


def worker_devices(visible: str | None, gpus: int) -> list[str]:
    """The GPUs worker processes take in turn, as CUDA_VISIBLE_DEVICES values: the ids `visible` (this process's
    CUDA_VISIBLE_DEVICES, None when unset) names, else 0 .. gpus - 1; [] on a machine without GPUs (the workers
    then inherit the variable as it is). Worker i takes entry i mod len, so several GPUs share the runs evenly."""
    if gpus < 1:
        return []
    named = [d.strip() for d in visible.split(",") if d.strip()] if visible is not None else []
    return named[:gpus] if named else [str(i) for i in range(gpus)]


def _take_device(devices: Sequence[str], counter: Any) -> None:
    """A worker's initializer: the next of `devices` (round robin over the workers started) as its only visible GPU,
    before anything in it initializes CUDA."""
    with counter.get_lock():
        index = counter.value
        counter.value += 1
    os.environ["CUDA_VISIBLE_DEVICES"] = devices[index % len(devices)]


WORKERS_PER_CORE = 2  # dense runs train on one core each; two per core hide their data loading and start-up


def worker_cap(runs: int) -> int:
    """The most worker processes worth starting for `runs` runs on this machine: min(runs, cores x 2)."""
    return max(1, min(runs, (os.cpu_count() or 1) * WORKERS_PER_CORE))


def gpu_count() -> int:
    """CUDA GPUs this process sees (0 without CUDA)."""
    import torch

    return torch.cuda.device_count() if torch.cuda.is_available() else 0


def _execute(specs_json: list[dict], store_root: str, fixed: str | None, root: str | None, checkpoint_every: int,
             allowance: tuple[str, ...]) -> list[str]:
    """Run one unit in this worker, allowed to import what the caller may (`allowance`), each spec keyed here as it
    is built; return the key context each was filed under."""
    allow_imports(*allowance)
    plans = Plans(root)
    runs = [Keys(root, fixed=fixed, plans=plans)(RunSpec.from_json(s)) for s in specs_json]
    execute_cell(runs, RunStore(store_root), plans, checkpoint_every=checkpoint_every)
    return [run.context for run in runs]


def run_in_processes(units: Sequence[Sequence[KeyedRun]], store: RunStore, keys: Keys, *, workers: int,
                     checkpoint_every: int = 10,
                     on_done: Callable[[Sequence[KeyedRun]], None] = lambda unit: None) -> None:
    """Execute `units` (each one keyed run or one cell's seeds, `fedlib.runs.execute.execute_cell`) in `workers`
    spawned processes, which key them again as they build them (`keys`' data root and fixed context): a worker whose
    environment keys a run otherwise files nothing here. Calls `on_done(unit)` in this process as each finishes."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    cap = worker_cap(len(units))
    if workers > cap:
        print(f"workers: {workers} requested, {cap} started ({len(units)} units of runs, {os.cpu_count()} CPU cores "
              f"x {WORKERS_PER_CORE} at most)", file=sys.stderr, flush=True)
    context = multiprocessing.get_context("spawn")  # no fork of a process that already holds torch's threads
    root_text = None if keys.data_root is None else str(Path(keys.data_root).resolve())
    allowance = worker_allowance(m for unit in units for run in unit for m in run.spec.imports)
    # a spec naming a GPU by its index ("cuda:1") needs every GPU in sight: then the workers are left to see all
    devices = worker_devices(os.environ.get("CUDA_VISIBLE_DEVICES"), gpu_count()) \
        if all(run.spec.device in ("auto", "cuda") for unit in units for run in unit) else []
    spread = dict(initializer=_take_device, initargs=(devices, context.Value("i", 0))) if len(devices) > 1 else {}
    with ProcessPoolExecutor(max_workers=min(workers, cap), mp_context=context, **spread) as pool:
        futures: dict[Future, Sequence[KeyedRun]] = {
            pool.submit(_execute, [run.spec.to_json() for run in unit], str(store.root.resolve()), keys.fixed,
                        root_text, checkpoint_every, allowance): unit
            for unit in units}
        pending = set(futures)
        try:
            while pending:
                done, pending = wait(pending, return_when=FIRST_EXCEPTION)
                for future in done:
                    if future.exception() is None:
                        for run, context_used in zip(futures[future], future.result()):
                            store.check_context(run, context_used, "in a worker process")
                        on_done(futures[future])
                failed = [f for f in done if f.exception() is not None]
                if failed:
                    for future in pending:
                        future.cancel()
                    wait(pending)  # runs already started finish and are filed
                    spec, seeds = futures[failed[0]][0].spec, [run.spec.seed for run in futures[failed[0]]]
                    raise RuntimeError(f"run {spec.get('labels') or spec.algorithm.name} (seed "
                                       f"{', '.join(map(str, seeds))}, experiment {spec.experiment}) failed in a "
                                       "worker process: "
                                       f"{failed[0].exception()}") from failed[0].exception()
        except KeyboardInterrupt:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
