"""The Flower app of a run spec, for `flwr run` (Flower's deployment and simulation runtimes).

An app's pyproject.toml names these two objects and the spec:

    [tool.flwr.app.components]
    serverapp = "fedlib.flower.app:server_app"
    clientapp = "fedlib.flower.app:client_app"

    [tool.flwr.app.config]
    spec = "spec.json"          # a RunSpec as JSON (RunSpec.to_json), e.g. one of a notebook's specs
    out = "records"             # where the record tables are written as CSV ("" to write none)
    data-root = ""              # fedlib's data root ("" for the default, FEDLIB_DATA or data/)

Each SuperNode's node config must say which fedlib client it is: `partition-id` (0 .. clients - 1), as the
simulation runtime sets it and `flower-supernode --node-config "partition-id=3 num-partitions=10"` does.
"""
from __future__ import annotations

import json
from pathlib import Path

from flwr.app import Context
from flwr.serverapp import Grid, ServerApp

from fedlib.flower.client import client_app
from fedlib.flower.strategy import FedlibStrategy
from fedlib.runs import RunSpec

server_app = ServerApp()


def spec_from_config(run_config: dict) -> RunSpec:
    if "spec" not in run_config or not str(run_config["spec"]):
        raise ValueError("the app's run config has no 'spec': set [tool.flwr.app.config] spec = \"<spec>.json\" "
                         "(a RunSpec as JSON) or `flwr run . --run-config 'spec=\"<spec>.json\"'`")
    path = Path(str(run_config["spec"])).expanduser()
    try:
        return RunSpec.from_json(json.loads(path.read_text()))
    except FileNotFoundError:
        raise ValueError(f"run config 'spec': no file {path.resolve()} (paths are read from the ServerApp's "
                         "working folder: give an absolute one)") from None


@server_app.main()
def main(grid: Grid, context: Context) -> None:
    cfg = context.run_config
    strategy = FedlibStrategy(spec_from_config(cfg), str(cfg.get("data-root", "")) or None)
    records = strategy.run(grid)
    out = str(cfg.get("out", ""))
    if out:
        folder = Path(out).expanduser()
        folder.mkdir(parents=True, exist_ok=True)
        for name, frame in records.items():
            frame.to_csv(folder / f"{name}.csv", index=False)


__all__ = ["client_app", "server_app"]
