"""Running a spec through the Flower adapters: in this process (`InProcessGrid`) or in Flower's simulation
engine (`flwr.simulation.run_simulation`, Ray actors)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp
from flwr.simulation import run_simulation

from fedlib.flower.client import client_app
from fedlib.flower.grid import InProcessGrid
from fedlib.flower.strategy import FedlibStrategy
from fedlib.runs import RunSpec
from fedlib.runs.entry import Records


def run_in_process(spec: RunSpec, root: str | Path | None = None, seed: int = 0) -> Records:
    """The spec's record, every client app called directly in this process (`seed`: node ids, reply order)."""
    strategy = FedlibStrategy(spec, root)
    return strategy.run(InProcessGrid(client_app, strategy.plan.num_clients, seed=seed))


def run_in_simulation(spec: RunSpec, root: str | Path | None = None, workers: int = 2,
                      backend_config: dict[str, Any] | None = None) -> Records:
    """The spec's record from Flower's simulation engine: one virtual SuperNode per fedlib client, client
    apps on `workers` Ray actors of one CPU each (or `backend_config` as `run_simulation` takes it)."""
    strategy = FedlibStrategy(spec, root)
    server_app = ServerApp()

    @server_app.main()
    def main(grid: Grid, context: Context) -> None:
        strategy.run(grid)

    config = backend_config or {"client_resources": {"num_cpus": 1, "num_gpus": 0.0},
                                "init_args": {"num_cpus": workers, "include_dashboard": False}}
    run_simulation(server_app, client_app, num_supernodes=strategy.plan.num_clients, backend_config=config)
    return strategy.records()
