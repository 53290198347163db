"""Run specs as Ray tasks, one task per spec (`run_specs(..., executor="ray")`).

`address=None` starts a local Ray (all cores of this machine); an address such as "ray://head:10001" or
"auto" joins an existing cluster. On machines with GPUs each task asks for `gpus_per_run` of a GPU (default
1/4 when the cluster has GPUs and the spec trains on one), so several small runs share a device. Each task
returns its records as CSV text and the key context it computed them with; the driver checks that context
against its own (`RunStore.check_context`: a worker with other CPU kernels or threads is refused, never
filed under this machine's key) and files them in its store, so workers need no shared disk; a task
interrupted on a worker resumes from that worker's checkpoint when rerun there. A run whose key names a
thread count asks Ray for that many CPUs and runs with that many threads (Ray would give it one). Each task
may import what the driver may (`fedlib.trust.worker_allowance`).
`ray.init` is given `INIT_TIMEOUT_S` to connect (tried in a child process first: Ray itself waits minutes on
an address that accepts connections but is no Ray).
"""
from __future__ import annotations

import io
import json
import socket
import subprocess
import sys
from collections.abc import Callable, Sequence

import pandas as pd

from fedlib.runs.build import Plans
from fedlib.runs.execute import execute
from fedlib.runs.fingerprint import Keys
from fedlib.runs.spec import KeyedRun, RunSpec
from fedlib.runs.store import Records, RunStore
from fedlib.trust import allow_imports, worker_allowance

DEFAULT_GPU_FRACTION = 0.25
INIT_TIMEOUT_S = 60.0
NAMELESS = (None, "", "auto", "local")  # "address"es that name no cluster: whichever runs or starts here


def _run_task(spec_json: dict, store_root: str, fixed: str | None, root: str | None, checkpoint_every: int,
              allowance: tuple[str, ...]) -> tuple[str, dict[str, str]]:
    """Run one spec on a Ray worker, keyed there as it is built; return the key context and the records."""
    allow_imports(*allowance)
    plans = Plans(root)
    run = Keys(root, fixed=fixed, plans=plans)(RunSpec.from_json(spec_json))
    records = execute(run, RunStore(store_root), root=root, checkpoint_every=checkpoint_every,
                      plan=plans.take(run.spec))
    return run.context, {name: frame.to_csv(index=False) for name, frame in records.items()}


def _threads_keyed(run: KeyedRun) -> int:
    """The thread count `run`'s key names (1 when the key names none: the run pins its threads)."""
    try:
        return int(json.loads(run.context).get("threads", 1))
    except (ValueError, TypeError, AttributeError):  # a fixed context (tests)
        return 1


def task_gpus(spec: RunSpec, cluster_has_gpus: bool, gpus_per_run: float | None = None) -> float:
    """The share of a GPU a spec's task asks Ray for: `gpus_per_run` where given, else `DEFAULT_GPU_FRACTION` for a
    spec not pinned to the CPU on a cluster with GPUs (Ray then places four runs on each GPU, and each task sees its
    GPU alone: Ray sets its CUDA_VISIBLE_DEVICES), else none."""
    if gpus_per_run is not None:
        return gpus_per_run
    return DEFAULT_GPU_FRACTION if cluster_has_gpus and spec.device != "cpu" else 0.0


def init_ray(address: str | None, timeout: float = INIT_TIMEOUT_S) -> None:
    """`ray.init(address)`, after a child process showed within `timeout` seconds that it connects."""
    import ray

    check_address(address)
    if address not in (None, "", "local"):
        probe = f"import ray; ray.init(address={address!r}, include_dashboard=False, log_to_driver=False); ray.shutdown()"
        try:
            subprocess.run([sys.executable, "-c", probe], capture_output=True, timeout=timeout, check=True)
        except subprocess.TimeoutExpired as err:
            raise ConnectionError(f"Ray at {address!r} did not answer within {timeout:.0f} s (something listens "
                                  "there, but no Ray cluster that accepts this driver): check the address, or leave "
                                  "out --ray-address to run on a local Ray") from err
        except subprocess.CalledProcessError as err:
            last = (err.stderr.decode(errors="replace").strip().splitlines() or ["no message"])[-1]
            raise ConnectionError(f"cannot join the Ray cluster at {address!r}: {last}") from err
    ray.init(address=address, include_dashboard=False, log_to_driver=False, configure_logging=False)


def _records(texts: dict[str, str]) -> Records:
    return {name: pd.read_csv(io.StringIO(text), float_precision="round_trip") for name, text in texts.items()}


def check_address(address: str | None, timeout: float = 10.0) -> None:
    """Raise ConnectionError within `timeout` seconds if a "host:port" (or "ray://host:port") Ray address does not
    accept connections: `ray.init` itself waits minutes on one, printing only its own warnings."""
    if address in NAMELESS:
        return
    host, sep, port = address.removeprefix("ray://").rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"Ray address {address!r} is not host:port, ray://host:port, 'auto' or 'local'")
    try:
        socket.create_connection((host.strip("[]") or "127.0.0.1", int(port)), timeout=timeout).close()
    except OSError as err:
        raise ConnectionError(f"the Ray cluster at {address!r} does not answer ({err}): start one there with "
                              "`ray start --head`, or leave out --ray-address to run on a local Ray") from err


def check_running_ray(address: str | None) -> None:
    """Raise ConnectionError where a Ray already running in this process is not the cluster at `address` (one of
    `NAMELESS`: whichever runs): a given address is never passed over for another cluster."""
    import ray

    if address in NAMELESS:
        return
    check_address(address)
    running = ray.get_runtime_context().gcs_address
    if not address.startswith("ray://") and address.rpartition(":")[2] != running.rpartition(":")[2]:
        raise ConnectionError(f"Ray already runs in this process, on the cluster at {running!r}, not at {address!r}: "
                              "run with that --ray-address (ray_address) in a fresh process")


def run_on_ray(runs: Sequence[KeyedRun], store: RunStore, keys: Keys, *, checkpoint_every: int = 10,
               address: str | None = None, gpus_per_run: float | None = None,
               on_done: Callable[[RunSpec], None] | None = None) -> None:
    """One Ray task per keyed run (see the module docstring), keyed again on its worker (`keys`' data root and fixed
    context); `on_done(spec)` is called here as each run is stored."""
    try:
        import ray
    except ImportError as err:
        raise ImportError("executor='ray' needs Ray: pip install -e '.[ray]' (make test installs it)") from err
    if ray.is_initialized():
        check_running_ray(address)
    else:
        init_ray(address)
    has_gpus = ray.cluster_resources().get("GPU", 0) > 0
    cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
    refs = {}
    allowance = worker_allowance(m for run in runs for m in run.spec.imports)
    for run in runs:
        gpus = task_gpus(run.spec, has_gpus, gpus_per_run)
        threads = _threads_keyed(run)
        task = ray.remote(num_cpus=min(threads, cpus), num_gpus=gpus,
                          runtime_env={"env_vars": {"OMP_NUM_THREADS": str(threads)}})(_run_task)
        refs[task.remote(run.spec.to_json(), str(store.root.resolve()), keys.fixed, keys.data_root,
                         checkpoint_every, allowance)] = run
    pending = list(refs)
    while pending:
        done, pending = ray.wait(pending, num_returns=1)
        run = refs[done[0]]
        context, texts = ray.get(done[0])
        store.check_context(run, context, "on a Ray worker")
        records = _records(texts)
        if not store.has(run):  # a worker on another machine wrote to its own disk
            store.save(run, records)
        if on_done is not None:
            on_done(run.spec)
