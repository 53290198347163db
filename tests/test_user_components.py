"""A user's own components: an algorithm and a hook registered in the user's module, named in the spec's
`imports`, run the same through every execution path (this process, worker processes, Ray, Flower's apps in this
process and in Flower's simulation engine on Ray actors)."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pandas as pd
import pytest

from fedlib.runs import RunSpec, RunStore, run_specs
from fedlib.trust import ALLOW_VAR

USER_MODULE = textwrap.dedent('''
    from fedlib.algorithms import FedAvg
    from fedlib.registry import ALGORITHMS, HOOKS


    @ALGORITHMS.register("user_damped_avg")
    class DampedAvg(FedAvg):
        """FedAvg taking half of the averaged update."""

        name = "user_damped_avg"

        def aggregate(self, w, results, weights, server_state, ctx):
            averaged = super().aggregate(w, results, weights, server_state, ctx)
            return {k: w[k] + 0.5 * (averaged[k] - w[k]) for k in w}


    @HOOKS.register("user_norm")
    def user_norm(run):
        def hook(params, info):
            return params, {"user_norm": float(sum(v.double().pow(2).sum() for v in params.values()) ** 0.5)}

        return hook
''')


@pytest.fixture(scope="module")
def user_folder(tmp_path_factory):
    """`user_components.py` in a folder of its own, importable here and in every process started from here (one
    folder for the module's tests, so that its Ray tests share one Ray start: tests/local_ray.py)."""
    folder = tmp_path_factory.mktemp("user")
    (folder / "user_components.py").write_text(USER_MODULE)
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.syspath_prepend(str(folder))
        monkeypatch.setenv("PYTHONPATH", str(folder), prepend=os.pathsep)  # Ray's workers, Flower's actors inherit it
        yield folder


@pytest.fixture
def user_module(user_folder, monkeypatch):
    """The user's module, allowed (`fedlib.trust`) in this test and every process started from it."""
    monkeypatch.setenv(ALLOW_VAR, "user_components")
    return "user_components"


def user_spec(module: str, seed: int = 0) -> RunSpec:
    return RunSpec.make("quickstart", "digits", ("dirichlet", {"num_clients": 4, "alpha": 0.5, "min_size": 10}),
                        ("mlp", {"hidden": [8]}), ("user_damped_avg", {}), 2, seed,
                        local={"lr": 0.05, "batch_size": 32, "steps": 2}, hooks=[("user_norm", {})],
                        loop={"executor": "sequential", "threads": 1}, imports=[module])


def rounds(records: dict[str, pd.DataFrame]) -> pd.DataFrame:
    return records["rounds"][["round", "test_acc", "train_loss", "user_norm"]].reset_index(drop=True)


BUILD = """
import json, sys
from fedlib.runs import RunSpec, build_run
for spec in map(RunSpec.from_json, json.loads(sys.argv[1])):
    try:
        print(type(build_run(spec).algorithm).__name__)
    except ValueError as err:
        print(err)
"""


def test_a_fresh_process_finds_the_users_components_through_the_specs_imports_only(user_module):
    """One fresh process builds the spec without its imports (nothing has imported the user's module yet), then
    with them."""
    spec = user_spec(user_module)
    specs = [spec.with_(imports=()).to_json(), spec.to_json()]
    built = subprocess.run([sys.executable, "-c", BUILD, json.dumps(specs)], capture_output=True, text=True,
                           timeout=300)
    assert built.returncode == 0, built.stderr
    without, with_imports = built.stdout.strip().splitlines()
    assert "unknown algorithm 'user_damped_avg'" in without
    assert with_imports == "DampedAvg"


def test_user_algorithm_and_hook_run_locally_and_in_worker_processes(user_module, tmp_path):
    specs = [user_spec(user_module, seed) for seed in (0, 1)]
    local = run_specs(specs, store=RunStore(tmp_path / "local"), progress=False)
    pooled = run_specs(specs, store=RunStore(tmp_path / "pool"), progress=False, workers=2)
    assert local["rounds"]["user_norm"].notna().all() and len(local["rounds"]) == 4
    pd.testing.assert_frame_equal(rounds(local), rounds(pooled), check_exact=True)
    plain = run_specs([specs[0].with_(algorithm=specs[0].algorithm.__class__("fedavg"))],
                      store=RunStore(tmp_path / "plain"), progress=False)
    assert not rounds(plain)["user_norm"].equals(rounds(local)[:2]["user_norm"])  # the user's aggregate ran


def test_user_algorithm_and_hook_run_on_ray(user_module, ray_started, tmp_path):
    spec = user_spec(user_module)
    local = run_specs([spec], store=RunStore(tmp_path / "local"), progress=False)
    remote = run_specs([spec], store=RunStore(tmp_path / "ray"), executor="ray", progress=False)
    pd.testing.assert_frame_equal(rounds(local), rounds(remote), check_exact=True)


def test_user_algorithm_and_hook_run_in_flowers_apps_in_this_process(user_module, tmp_path):
    pytest.importorskip("flwr")
    from fedlib.flower import run_in_process

    spec = user_spec(user_module)
    local = run_specs([spec], store=RunStore(tmp_path / "local"), progress=False)
    flower = run_in_process(spec)
    pd.testing.assert_frame_equal(rounds(local), flower["rounds"][["round", "test_acc", "train_loss", "user_norm"]]
                                  .reset_index(drop=True), check_exact=True)


def test_user_algorithm_and_hook_run_in_flowers_simulation(user_module, ray_if_it_starts, tmp_path):
    pytest.importorskip("flwr")
    from fedlib.flower import run_in_simulation

    spec = user_spec(user_module)
    local = run_specs([spec], store=RunStore(tmp_path / "local"), progress=False)
    (flower,) = run_in_simulation([spec], workers=1)
    pd.testing.assert_frame_equal(rounds(local), flower["rounds"][["round", "test_acc", "train_loss", "user_norm"]]
                                  .reset_index(drop=True), check_exact=True)
