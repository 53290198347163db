"""Running a spec through the Flower adapters: in this process (`InProcessGrid`) or in Flower's simulation
engine (`flwr.simulation.run_simulation`, Ray actors)."""
from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp
from flwr.simulation import run_simulation

from fedlib.flower.caveats import warn_thread_count
from fedlib.flower.client import client_app
from fedlib.flower.grid import InProcessGrid
from fedlib.flower.strategy import FedlibStrategy
from fedlib.ray_start import start_local_ray
from fedlib.runs import RunSpec
from fedlib.runs.entry import Records
from fedlib.trust import allow_imports, worker_allowance


@contextlib.contextmanager
def _flower_log(level: int) -> Iterator[None]:
    """Drop Flower's log records below `level` while the block runs (run_simulation resets its handlers'
    levels, so the filter sits on the logger)."""
    logger = logging.getLogger("flwr")

    def keep(record: logging.LogRecord) -> bool:
        return record.levelno >= level

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


@contextlib.contextmanager
def _ray_kept(keep: bool) -> Iterator[None]:
    """Where `keep`, the `ray.shutdown()` with which Flower's engine (1.42: its Ray backend's `terminate`, after it
    has told its actors to exit) ends is skipped while the block runs: a Ray that the caller started stays running."""
    if not keep:
        yield
        return
    import ray

    shutdown = ray.shutdown
    ray.shutdown = lambda *args, **kwargs: None
    try:
        yield
    finally:
        ray.shutdown = shutdown


def _ray_init_args(backend_config: dict[str, Any]) -> dict[str, Any]:
    """The `ray.init` arguments Flower's Ray backend (1.42) starts Ray with for `backend_config`: its init_args,
    no dashboard unless they ask for one, and this process's import path for the client apps' actors."""
    pythonpath = os.pathsep.join([*sys.path, *filter(None, [os.environ.get("PYTHONPATH")])])
    return {"include_dashboard": False, **backend_config.get("init_args", {}),
            "runtime_env": {"env_vars": {"PYTHONPATH": pythonpath}}}


def run_in_process(spec: RunSpec, root: str | Path | None = None, seed: int = 0, quiet: bool = True) -> Records:
    """The spec's record, every client app called directly in this process (`seed`: node ids, reply order)."""
    strategy = FedlibStrategy(spec, root)
    with _flower_log(logging.WARNING if quiet else logging.NOTSET):
        return strategy.run(InProcessGrid(client_app, strategy.plan.num_clients, seed=seed))


def run_in_simulation(specs: Sequence[RunSpec], root: str | Path | None = None, workers: int = 2,
                      backend_config: dict[str, Any] | None = None, quiet: bool = True) -> list[Records]:
    """The specs' records from one run of Flower's simulation engine (one Ray start): one virtual SuperNode per
    fedlib client (the specs must have as many clients), client apps on `workers` Ray actors of one CPU each
    (or `backend_config` as `run_simulation` takes it); the specs run one after the other on the same nodes.
    A Ray already running here (started by the caller) is used and left running; one started here is shut down at
    the end, as Flower's engine does.
    `quiet` keeps Flower's per-round INFO log out of the output (warnings and errors still show). Warns
    (`FlowerParityWarning`) for a spec whose record is known to differ (fedlib.flower.caveats). Where no Ray runs
    here yet, it is started as Flower would start it, but retried where a start times out on a busy machine
    (fedlib.ray_start; RayStartTimeout after the last attempt)."""
    import ray

    strategies = [FedlibStrategy(spec, root) for spec in specs]
    for strategy in strategies:
        warn_thread_count(strategy.plan, strategy.fed.threads, "Flower's simulation engine")
    sizes = {s.plan.num_clients for s in strategies}
    if len(sizes) != 1:
        raise ValueError(f"one simulation runs specs with one number of clients, got {sorted(sizes)}")
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        for strategy in strategies:
            strategy.run(grid)

    on_gpu = any(s.fed.server.device.type == "cuda" for s in strategies)  # client apps train where the server does
    config = backend_config or {"client_resources": {"num_cpus": 1, "num_gpus": 1.0 / workers if on_gpu else 0.0},
                                "init_args": {"num_cpus": workers, "include_dashboard": False, "log_to_driver": False}}
    allow_imports(*worker_allowance(m for s in specs for m in s.imports))  # Flower's Ray actors inherit it
    callers = ray.is_initialized()  # Flower's engine runs on a Ray already started, and shuts it down after
    if not callers:
        start_local_ray(**_ray_init_args(config))
    with _flower_log(logging.WARNING if quiet else logging.NOTSET), _ray_kept(callers):
        run_simulation(server_app, client_app, num_supernodes=sizes.pop(), backend_config=config)
    done = [s for s in strategies if len(s.fed.server.history) == s.spec.rounds]
    if len(done) != len(strategies):
        raise RuntimeError(f"the simulation finished {len(done)} of {len(strategies)} specs; see Flower's log above")
    return [s.records() for s in strategies]
