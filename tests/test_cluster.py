"""The cluster recipe (docs/cluster.md), on this machine: a Ray head (the tests' shared Ray, tests/local_ray.py),
joined on loopback by `scripts/reproduce.py --executor ray --ray-address 127.0.0.1:<port>` as a user's driver joins
a cluster's head, files the records a local run files, under the same store keys; how runs get GPUs, with a fake
GPU count."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from test_runs import same_records

from fedlib.grids import notebook_parameters, notebook_specs
from fedlib.runs import Keys, RunStore, run_specs

ROOT = Path(__file__).resolve().parents[1]
GRID = ["--profile", "quick", "--only", "quickstart", "-p", "rounds", "2", "-p", "num_clients", "4",
        "-p", "clients_per_round", "2", "--select", "experiment=quickstart"]  # 3 runs; --select: no rendering


def reproduce(results: Path, *more: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    return subprocess.run([sys.executable, str(ROOT / "scripts" / "reproduce.py"), *GRID, "--results", str(results),
                           *more], capture_output=True, text=True, timeout=900, env=env, cwd=ROOT)


def test_a_grid_run_through_a_ray_address_files_the_local_records(ray_started, local_ray, tmp_path):
    # Ray names its head by this machine's address (it maps 127.0.0.1 there: services.resolve_ip_for_localhost);
    # the driver joins it on loopback
    address = f"127.0.0.1:{local_ray.address().rpartition(':')[2]}"
    on_ray = reproduce(tmp_path / "ray", "--executor", "ray", "--ray-address", address)
    print(on_ray.stdout, on_ray.stderr)
    assert on_ray.returncode == 0, on_ray.stderr
    assert "== compute: 3 runs (ray)" in on_ray.stdout and "[3/3]" in on_ray.stderr
    specs = notebook_specs("quickstart", notebook_parameters("quickstart", "quick", {
        "rounds": 2, "num_clients": 4, "clients_per_round": 2}))
    stores = RunStore(tmp_path / "ray" / "runs"), RunStore(tmp_path / "local" / "runs")
    run_specs(specs, store=stores[1], progress=False)  # the local executor, in this process
    runs = [Keys()(spec) for spec in specs]  # keyed by this process, as the local run_specs keyed them
    assert len(specs) == 3 and all(store.has(run) for run in runs for store in stores)
    assert [p.name for p in stores[0].entries()] == [p.name for p in stores[1].entries()] == sorted(r.key for r in runs)
    for run in runs:
        same_records(stores[0].load(run), stores[1].load(run))


def test_workers_per_gpu_and_at_most_one_per_core(monkeypatch):
    from fedlib.runs import pool

    monkeypatch.setattr(pool.os, "cpu_count", lambda: 16)
    assert [pool.default_workers("cuda", g) for g in (0, 1, 2, 8)] == [4, 4, 8, 16]
    # on a CPU: runs of one thread (dense models) one per core, runs on every core one at a time
    assert [pool.default_workers("cpu", threads=t) for t in (1, 2, 3, 16, 32)] == [16, 8, 5, 1, 1]
    monkeypatch.setattr(pool.os, "cpu_count", lambda: 2)
    assert pool.default_workers("cuda", 2) == 2 and pool.default_workers() == 2


def test_each_worker_sees_one_gpu_in_turn(monkeypatch):
    """Worker i sees GPU i mod n: the GPUs CUDA_VISIBLE_DEVICES names when it is set, else 0 .. n - 1."""
    import multiprocessing

    from fedlib.runs.pool import _take_device, worker_devices

    assert worker_devices(None, 3) == ["0", "1", "2"] and worker_devices("5, 7", 2) == ["5", "7"]
    assert worker_devices(None, 0) == [] and worker_devices("", 2) == ["0", "1"]
    counter, seen = multiprocessing.Value("i", 0), []
    for _ in range(5):  # five workers starting, one after another
        _take_device(["5", "7"], counter)
        seen.append(os.environ["CUDA_VISIBLE_DEVICES"])
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert seen == ["5", "7", "5", "7", "5"]


def test_the_worker_pool_spreads_over_several_gpus_only_where_every_run_may_take_any(monkeypatch, tmp_path):
    """A fake count of 2 GPUs: the pool's workers start with `_take_device`; with a spec pinned to "cuda:1" (an index
    into every GPU) they start without it, and with one GPU there is nothing to spread."""
    from fedlib.runs import pool

    from test_runs import tiny_spec

    started: list[dict] = []

    class Recorded(Exception):
        pass

    def executor(**kwargs):
        started.append(kwargs)
        raise Recorded

    monkeypatch.setattr(pool, "ProcessPoolExecutor", executor)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    for gpus, device in ((2, "auto"), (2, "cuda:1"), (1, "auto")):
        monkeypatch.setattr(pool, "gpu_count", lambda: gpus)
        try:
            keys = Keys(fixed="test")
            pool.run_in_processes([[keys(tiny_spec(seed).with_(device=device))] for seed in (0, 1)],
                                  RunStore(tmp_path), keys, workers=2)
        except Recorded:
            pass
    assert started[0]["initializer"] is pool._take_device and started[0]["initargs"][0] == ["0", "1"]
    assert "initializer" not in started[1] and "initializer" not in started[2]


def test_a_ray_task_asks_for_a_quarter_gpu_where_the_cluster_has_gpus_and_the_run_may_use_one():
    from fedlib.runs.ray_runner import task_gpus

    from test_runs import tiny_spec

    auto, cpu = tiny_spec().with_(device="auto"), tiny_spec()
    assert [task_gpus(auto, True), task_gpus(cpu, True), task_gpus(auto, False), task_gpus(cpu, True, 0.5)] == [
        0.25, 0.0, 0.0, 0.5]
