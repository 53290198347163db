"""The Flower app of a run spec, for `flwr run` (Flower's deployment and simulation runtimes).

The repository's `flower-app/` folder is such an app (its README says how to run it). An app's pyproject.toml
names a ServerApp and this ClientApp, and the spec, in its run config:

    [tool.flwr.app.components]
    serverapp = "fedlib_flower_app:server_app"   # server_app_for(<the app's folder>), or fedlib.flower.app:server_app
    clientapp = "fedlib.flower.app:client_app"

    [tool.flwr.app.config]
    spec = "spec.json"          # a RunSpec as JSON (RunSpec.to_json), e.g. one of a notebook's specs
    out = ""                    # an absolute folder for the record tables as CSV ("" to write none)
    data-root = ""              # fedlib's data root ("" for the default, FEDLIB_DATA or data/)
    num-server-rounds = 3       # hyper-parameters (HYPERPARAMETERS), each replacing the spec's value where given
    lr = 0.05

A relative `spec` is read from the app's folder (`server_app_for(folder)`; `server_app` reads it from the
ServerApp's working folder); a spec file that is missing, not JSON or not a run spec is an error naming it. Each SuperNode's node config must say which fedlib client it is: `partition-id`
(0 .. clients - 1), as the simulation runtime sets it and `flower-supernode --node-config "partition-id=3
num-partitions=10"` does.
"""
from __future__ import annotations

import json
from logging import INFO, WARNING
from pathlib import Path

from flwr.app import Context
from flwr.common.logger import log
from flwr.serverapp import Grid, ServerApp

from fedlib.flower.caveats import warn_thread_count
from fedlib.flower.client import client_app
from fedlib.flower.strategy import FedlibStrategy
from fedlib.runs import Component, RunSpec, freeze
from fedlib.runs.entry import Records


def spec_from_config(run_config: dict, app_folder: Path | None = None) -> RunSpec:
    """The run config's `spec` file as a RunSpec (a relative path from `app_folder`, or the working folder)."""
    if "spec" not in run_config or not str(run_config["spec"]):
        raise ValueError("the app's run config has no 'spec': set [tool.flwr.app.config] spec = \"<spec>.json\" "
                         "(a RunSpec as JSON) or `flwr run . --run-config 'spec=\"<spec>.json\"'`")
    path = Path(str(run_config["spec"])).expanduser()
    path = app_folder / path if app_folder is not None and not path.is_absolute() else path
    try:
        data = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(f"run config 'spec': no file {path.resolve()}"
                         + ("" if app_folder is not None else " (a relative path is read from the ServerApp's "
                                                               "working folder: give an absolute one)")) from None
    except (OSError, ValueError) as err:  # a folder, an unreadable file, invalid JSON or UTF-8 (ValueErrors)
        raise ValueError(f"run config 'spec': {path.resolve()} is not a readable JSON file ({err}); write a run spec "
                         f"there with json.dumps(spec.to_json())") from None
    try:
        if not isinstance(data, dict):
            raise ValueError(f"a run spec is a JSON object, this file holds a {type(data).__name__}")
        return RunSpec.from_json(data)
    except (ValueError, KeyError, TypeError, AttributeError) as err:
        reason = f"{type(err).__name__}: {err}" if isinstance(err, (KeyError, TypeError, AttributeError)) else str(err)
        raise ValueError(f"run config 'spec': {path.resolve()} is not a run spec ({reason}); write one there with "
                         f"json.dumps(spec.to_json())") from None


# Hyper-parameters as run-config keys, named as Flower's baselines name them -> (the spec field each sets, its type).
# A key the run config holds replaces the spec file's value (`flwr run . --run-config 'num-server-rounds=10 lr=0.1'`);
# a key it does not hold leaves the spec's.
HYPERPARAMETERS: dict[str, tuple[str, type]] = {
    "num-server-rounds": ("rounds", int), "seed": ("seed", int), "lr": ("local.lr", float),
    "momentum": ("local.momentum", float), "batch-size": ("local.batch_size", int),
    "local-steps": ("local.steps", int), "clients-per-round": ("sampler.clients", int)}


def hyperparameter(run_config: dict, key: str) -> int | float:
    """The run config's value of hyper-parameter `key`, checked against its type; a ValueError naming the key."""
    value, (_, kind) = run_config[key], HYPERPARAMETERS[key]
    if isinstance(value, bool) or not isinstance(value, (int, float)) or (kind is int and not isinstance(value, int)):
        raise ValueError(f"run config '{key}' = {value!r}: give {'an integer' if kind is int else 'a number'}, e.g. "
                         f"--run-config '{key}={3 if kind is int else 0.05}'")
    return kind(value)


def with_run_config(spec: RunSpec, run_config: dict) -> RunSpec:
    """`spec` with each hyper-parameter the run config holds (`HYPERPARAMETERS`) in place of the spec's value; each
    value it changes is logged, so a spec file run with another app's defaults says so."""
    local, sampler = spec.get("local"), spec.sampler.args if spec.sampler is not None else {}
    changes: dict[str, object] = {}
    for key in [k for k in HYPERPARAMETERS if k in run_config]:
        value, target = hyperparameter(run_config, key), HYPERPARAMETERS[key][0]
        part, _, name = target.partition(".")
        before = (local if part == "local" else sampler).get(name) if name else getattr(spec, part)
        if before != value:
            log(WARNING, "run config %s=%s replaces the spec's %s %s", key, value, target, before)
        if part == "local":
            local[name] = value
            if name == "steps":
                local.pop("epochs", None)  # steps and epochs both say how long a client trains
        elif part == "sampler":
            if spec.sampler is not None and spec.sampler.name != "uniform":
                raise ValueError(f"run config '{key}' sets a uniform sampler's clients; the spec samples with "
                                 f"{spec.sampler.name!r}: leave '{key}' out of the run config")
            changes["sampler"] = Component.of("uniform", {**sampler, "clients": value})
        else:
            changes[part] = value
    return spec.with_(local=freeze(local, "local"), **changes)


def out_folder(run_config: dict) -> Path | None:
    """The run config's `out` folder (None for ""); relative paths are refused: the ServerApp's working folder
    is Flower's, not the user's."""
    out = str(run_config.get("out", ""))
    if not out:
        return None
    folder = Path(out).expanduser()
    if not folder.is_absolute():
        raise ValueError(f"run config 'out' = {out!r}: give an absolute folder (the ServerApp runs in Flower's "
                         f"working folder, not yours), e.g. --run-config 'out=\"{Path(out).resolve()}\"'")
    return folder


def run_app(grid: Grid, run_config: dict, app_folder: Path | None = None) -> Records:
    """Run the run config's spec on `grid`, write its record to `out` (if set), log its last round, return it."""
    spec = with_run_config(spec_from_config(run_config, app_folder), run_config)
    out = out_folder(run_config)
    strategy = FedlibStrategy(spec, str(run_config.get("data-root", "")) or None)
    warn_thread_count(strategy.plan, strategy.fed.threads, "this app's SuperNodes")
    records = strategy.run(grid)
    last = records["rounds"].iloc[-1]
    log(INFO, "fedlib: %s, %d rounds: test_acc %.4f, bits_up %d, bits_down %d%s", spec.experiment, spec.rounds,
        last["test_acc"], records["rounds"]["bits_up"].sum(), records["rounds"]["bits_down"].sum(),
        f"; record tables in {out}" if out is not None else "")
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        for name, frame in records.items():
            frame.to_csv(out / f"{name}.csv", index=False)
    return records


def server_app_for(app_folder: Path | None) -> ServerApp:
    """A ServerApp running the run config's spec, its relative `spec` path read from `app_folder`."""
    app = ServerApp()

    @app.main()
    def main(grid: Grid, context: Context) -> None:
        run_app(grid, context.run_config, app_folder)

    return app


server_app = server_app_for(None)

__all__ = ["client_app", "run_app", "server_app", "server_app_for"]
