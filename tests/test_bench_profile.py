"""benchmarks/bench_profile.py's choice of the runs it times (its timings are printed, never asserted)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

from fedlib.runs.spec import RunSpec

ROOT = Path(__file__).resolve().parent.parent


def _bench():
    spec = importlib.util.spec_from_file_location("bench_profile", ROOT / "benchmarks" / "bench_profile.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _spec(seed: int, algorithm: str = "fedavg", rounds: int = 3, **options) -> RunSpec:
    return RunSpec.make("fedaq", "digits", ("iid", {"num_clients": 4}), ("mlp", {}), (algorithm, {}), rounds, seed,
                        **options)


def test_one_timed_run_per_cost_group_in_grid_order():
    specs = [_spec(0), _spec(0, "fedprox"), _spec(1), _spec(1, rounds=9),  # seed and rounds: the same cost per step
             _spec(2, loop={"threads": 1}), _spec(3, uplink=("uniform", {"bits": 4})), _spec(4, "fedprox")]
    assert list(_bench().groups(specs).values()) == [[0, 2, 3], [1, 6], [4], [5]]
