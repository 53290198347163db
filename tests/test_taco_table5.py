"""TACO's full grid holds every column of Table V: adult, SVHN, CIFAR-10, CIFAR-100 and Shakespeare beside FMNIST."""
from __future__ import annotations

from dataclasses import replace

import pytest

from fedlib.dryrun import notebook_parameters, one_round
from fedlib.engine.federation import run_federation
from fedlib.papers.taco import ALGORITHMS, experiments, table5_grid
from fedlib.runs.build import build_run

# Table V's columns at the paper's settings (docs/taco.md, setups): dataset, model, split, T, K, eta_l
EXPECTED = {
    "adult": ("adult", "taco_mlp", ("dirichlet", {"num_clients": 20, "alpha": 0.5, "min_size": 5}), 50, 100, 0.01),
    "SVHN": ("svhn", "taco_cnn", "groups", 100, 1000, 0.01),
    "CIFAR10": ("cifar10", "taco_cnn", "groups", 200, 1000, 0.01),
    "CIFAR100": ("cifar100", "resnet18_cifar", ("dirichlet", {"num_clients": 20, "alpha": 0.5, "min_size": 5}),
                 200, 200, 0.01),
    "Shakespeare": ("shakespeare", "char_lstm", ("natural", {"num_clients": 20}), 50, 200, 1.0),
}


@pytest.fixture(scope="module")
def full():
    return notebook_parameters("taco", "full")


def test_full_grid_has_every_table5_column(full):
    specs = [s for s in experiments(full) if "column" in s.get("labels")]
    assert {s.get("labels")["column"] for s in specs} == set(EXPECTED)
    for column, (dataset, model, split, rounds, steps, lr) in EXPECTED.items():
        runs = [s for s in specs if s.get("labels")["column"] == column]
        assert sorted((s.get("labels")["algorithm"], s.seed) for s in runs) == sorted(
            (a, seed) for a in ALGORITHMS for seed in (0, 1, 2))
        for s in runs:
            assert (s.dataset, s.model.name, s.rounds, s.get("local")["steps"], s.get("local")["lr"]) == (
                dataset, model, rounds, steps, lr)
            assert s.get("local")["batch_size"] == 64
            if isinstance(split, tuple):
                assert (s.split.name, s.split.args) == split
            else:
                assert s.split.name == split and s.split.args["num_clients"] == 20
    assert {s.model.args.get("norm") for s in specs if s.dataset == "cifar100"} == {"group"}


def test_default_parameters_have_no_extra_columns():
    assert table5_grid(notebook_parameters("taco", "quick")) == []


@pytest.mark.parametrize("column,problem", [
    ({"dataset": "adult", "model": "taco_mlp", "partition": "dir0.5", "rounds": 5, "local_steps": 2, "lrr": 1},
     r"unknown keys \['lrr'\]"),
    ({"dataset": "adult", "model": "taco_mlp", "partition": "dir0.5", "rounds": 5}, r"missing \['local_steps'\]"),
])
def test_a_mistyped_column_is_rejected(full, column, problem):
    with pytest.raises(ValueError, match=r"TacoParams.table5_columns\['adult'\]: .*" + problem):
        replace(full, table5_columns={"adult": column})


def test_shakespeare_column_runs_a_round_on_fabricated_roles(tmp_path, full):
    from fedlib.data.fabricate import write_shakespeare

    write_shakespeare(tmp_path, roles=30, per_role=6)
    spec = next(s for s in table5_grid(full) if s.dataset == "shakespeare" and s.get("labels")["algorithm"] == "TACO")
    plan = build_run(one_round(spec, 1).with_(sampler=spec.sampler), tmp_path)  # TACO: every client every round
    groups = plan.dataset.groups
    assert len(plan.data.client_indices) == 20 and all(len(set(groups[i])) == 1 for i in plan.data.client_indices)
    result = run_federation(plan.model_fn, plan.data, progress=False, **plan.kwargs)
    assert len(result.rounds) == 1 and 0.0 <= result.final_accuracy <= 1.0
