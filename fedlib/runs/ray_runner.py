"""Run specs as Ray tasks, one task per spec (`run_specs(..., executor="ray")`).

`address=None` starts a local Ray (all cores of this machine); an address such as "ray://head:10001" or
"auto" joins an existing cluster. On machines with GPUs each task asks for `gpus_per_run` of a GPU (default
1/4 when the cluster has GPUs and the spec trains on one), so several small runs share a device. Each task
returns its records as CSV text and the driver files them in its store, so workers need no shared disk;
a task interrupted on a worker resumes from that worker's checkpoint when rerun there.
"""
from __future__ import annotations

import io
import socket
from collections.abc import Sequence
from pathlib import Path

import pandas as pd

from fedlib.runs.execute import execute
from fedlib.runs.spec import RunSpec
from fedlib.runs.store import Records, RunStore

DEFAULT_GPU_FRACTION = 0.25


def _run_task(spec_json: dict, store_root: str, code: str | None, root: str | None,
              checkpoint_every: int) -> dict[str, str]:
    records = execute(RunSpec.from_json(spec_json), RunStore(store_root, code), root=root,
                      checkpoint_every=checkpoint_every)
    return {name: frame.to_csv(index=False) for name, frame in records.items()}


def _records(texts: dict[str, str]) -> Records:
    return {name: pd.read_csv(io.StringIO(text), float_precision="round_trip") for name, text in texts.items()}


def check_address(address: str | None, timeout: float = 10.0) -> None:
    """Raise ConnectionError within `timeout` seconds if a "host:port" (or "ray://host:port") Ray address does not
    accept connections: `ray.init` itself waits minutes on one, printing only its own warnings."""
    if address in (None, "", "auto", "local"):
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"Ray address {address!r} is not host:port, ray://host:port, 'auto' or 'local'")
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as err:
        raise ConnectionError(f"the Ray cluster at {address!r} does not answer ({err}): start one there with "
                              "`ray start --head`, or leave out --ray-address to run on a local Ray") from err


def run_on_ray(specs: Sequence[RunSpec], store: RunStore, *, root: str | Path | None = None, checkpoint_every: int = 10,
               address: str | None = None, gpus_per_run: float | None = None) -> None:
    try:
        import ray
    except ImportError as err:
        raise ImportError("executor='ray' needs Ray: pip install -e '.[ray]' (make test installs it)") from err
    if not ray.is_initialized():
        check_address(address)
        ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)
    has_gpus = ray.cluster_resources().get("GPU", 0) > 0
    refs = {}
    for spec in specs:
        gpus = gpus_per_run if gpus_per_run is not None else (
            DEFAULT_GPU_FRACTION if has_gpus and spec.device != "cpu" else 0.0)
        task = ray.remote(num_cpus=1, num_gpus=gpus)(_run_task)
        refs[task.remote(spec.to_json(), str(store.root.resolve()), store.code,
                         None if root is None else str(root), checkpoint_every)] = spec
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        spec = refs[done[0]]
        records = _records(ray.get(done[0]))
        if not store.has(spec):  # a worker on another machine wrote to its own disk
            store.save(spec, records)
