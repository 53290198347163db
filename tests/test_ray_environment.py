"""Ray tasks run a spec in the environment its key names: a CNN with threads "auto" is keyed by the driver's
thread count, so its task gets that many threads (Ray would give it one) and its records are filed only when the
worker's key context is the driver's."""
from __future__ import annotations

import json

import pandas as pd

from fedlib.runs import Keys, RunSpec, RunStore, run_specs


def cnn_spec() -> RunSpec:
    return RunSpec.make("quickstart", "mnist5k", ("dirichlet", {"num_clients": 3, "alpha": 0.5, "min_size": 10}),
                        ("taco_cnn", {}), ("fedavg", {}), 1, 0, local={"lr": 0.05, "batch_size": 64, "steps": 2},
                        loop={"executor": "sequential"})


def test_a_ray_task_runs_with_the_threads_its_key_names(ray_started, tmp_path):
    spec = cnn_spec()
    local_store = RunStore(tmp_path / "local")
    assert "threads" in json.loads(Keys()(spec).context)  # torch picks the threads of this run
    local = run_specs([spec], store=local_store, progress=False)
    remote = run_specs([spec], store=RunStore(tmp_path / "ray"), executor="ray", progress=False)
    drop = ["train_s", "wall_s", "run"]
    pd.testing.assert_frame_equal(local["rounds"].drop(columns=drop, errors="ignore"),
                                  remote["rounds"].drop(columns=drop, errors="ignore"), check_exact=True)
    assert local["rounds"]["run"].tolist() == remote["rounds"]["run"].tolist()  # one key, one environment
