"""TACO's runs as data: the grid from the notebook's parameters, and a tiny spec through the store."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest

from fedlib.notebook_runs import notebook_records
from fedlib.papers import taco as tp
from fedlib.runs import Keys, RunSpec, RunStore, execute, run_specs


@pytest.fixture(scope="module")
def quick() -> tp.TacoParams:
    return tp.TacoParams()


def _tiny(quick: tp.TacoParams, **changes) -> tp.TacoParams:
    """A parameter set whose every grid runs in seconds: 6 clients, 2 rounds, 2 local steps."""
    return replace(quick, **{"num_clients": 6, "group_sizes": [2, 2, 2], "rounds": 2, "local_steps": 2,
                             "scal_clients": 6, "scal_rounds": 2, "scal_steps": 2, "n_freeloaders": 2,
                             "gamma_steps": [2], "timing_dataset": "digits", "timing_model": "mlp",
                             "timing_clients": 2, "timing_rounds": 2, "timing_repeats": 1, "oscillation_steps": 2,
                             "oscillation_rounds": 3, **changes})


def test_grid_counts_labels_and_json(quick):
    specs = tp.experiments(quick)
    sizes = {name: len(g(quick)) for name, g in tp.GRIDS.items()}
    n_alg, n_seed = len(quick.algorithms), len(quick.seeds)
    assert sizes["main"] == n_alg * n_seed
    assert sizes["timing"] == n_alg * quick.timing_repeats
    assert sizes["ablation"] == 4 * len(quick.ablation_partitions) * len(quick.ablation_seeds)
    assert sizes["gamma"] == len(quick.gamma_steps) * (len(quick.gamma_grid) + 1) * len(quick.extra_seeds)
    assert sizes["oscillation"] == len(quick.oscillation_algorithms) * len(quick.oscillation_seeds)
    assert sizes["freeloaders"] == 2 * n_seed  # without and with live expulsion, on every seed
    assert [(s.seed, s.get("labels")["expulsion"]) for s in tp.freeloader_grid(replace(quick, seeds=[0, 1]))] == \
        [(0, "off"), (0, "live"), (1, "off"), (1, "live")]
    # shared runs appear once: Fig. 6's originals are main runs, and so are the oscillation study's TACO,
    # FoolsGold and FedAvg when its setting is the main one; 1/K = 0.1 is also on the gamma grid at K = 10
    shared = 2 * len(quick.extra_seeds) + 3 + (1 if 0.1 in quick.gamma_grid and 10 in quick.gamma_steps else 0)
    assert len(specs) == sum(sizes.values()) - shared
    assert len({s.key() for s in specs}) == len(specs)
    for spec in specs:
        assert RunSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
        assert spec.experiment == "taco"
    main = tp.main_grid(quick)
    assert {s.get("labels")["algorithm"] for s in main} == set(quick.algorithms)
    assert all(s.split.name == "groups" and s.split.args["group_sizes"] == [7, 7, 6] for s in main)
    assert {s.get("labels")["partition"] for s in tp.ablation_grid(quick)} == set(quick.ablation_partitions)


def test_subset_of_algorithms_and_bad_names(quick):
    subset = tp.experiments(replace(quick, algorithms=["FedAvg", "TACO"]))
    assert {s.get("labels").get("algorithm") for s in tp.main_grid(replace(quick, algorithms=["FedAvg", "TACO"]))} == \
        {"FedAvg", "TACO"}
    assert len(subset) < len(tp.experiments(quick))
    with pytest.raises(ValueError, match="TacoParams.algorithms must be one of 'FedAvg', .*, got 'FedAvgg'"):
        tp.experiments(replace(quick, algorithms=["FedAvgg"]))
    # checked when the parameters are built, before any grid
    with pytest.raises(ValueError, match="TacoParams.ablation_partitions: a partition is 'groups', 'natural' or "
                                         "'dir<phi>' .*, got 'dirichlet'"):
        replace(quick, ablation_partitions=["dirichlet"])
    with pytest.raises(ValueError, match="TacoParams.table5_columns.*a partition is .*, got 'dir'"):
        replace(quick, table5_columns={"x": {"dataset": "digits", "model": "mlp", "partition": "dir", "rounds": 2,
                                             "local_steps": 2}})
    with pytest.raises(ValueError, match="TacoParams.oscillation_algorithms must be one of 'TACO', .*, "
                                         "got 'TACO \\(Eq. 9\\)'"):
        replace(quick, oscillation_algorithms=["TACO (Eq. 9)"])
    assert all(s.get("loop")["executor"] == "sequential" for s in tp.timing_grid(replace(quick, executor="vmap")))
    batched = {s.get("labels")["algorithm"]: s.get("loop")["executor"]
               for s in tp.main_grid(replace(quick, executor="vmap"))}
    assert batched["STEM"] == batched["TACO"] == "vmap"  # every algorithm is batchable


def test_tiny_specs_run_through_the_store(quick, tmp_path):
    params = _tiny(quick)
    store = RunStore(tmp_path)
    spec = next(s for s in tp.freeloader_grid(params) if s.get("labels")["expulsion"] == "live")
    run = Keys()(spec)
    records = execute(run, store)
    assert {"rounds", "clients", "alpha", "expelled", "output"} <= set(records)
    assert len(records["rounds"]) == 2 and {"test_acc", "train_s", "alpha_mean", "zero_weight_clients"} <= set(records["rounds"])
    alpha = records["alpha"]
    assert len(alpha) == 2 * 6 and (alpha["group"] == "Freeloaders").sum() == 2 * 2
    assert records["expelled"]["freeloader"].sum() == 2
    assert set(records["output"]["output"]) == {"w", "z"}
    assert store.has(run)


def test_run_specs_gives_the_columns_the_notebook_reads(quick, tmp_path):
    params = _tiny(quick, algorithms=["FedAvg", "TACO"], seeds=[0], extra_seeds=[0])
    specs = tp.main_grid(params) + tp.timing_grid(params)
    store = RunStore(tmp_path)
    records = notebook_records(specs, replace(params, runs_root=str(tmp_path)), progress=False)
    main = records.select(tp.main_grid(params))
    assert set(main["rounds"]["algorithm"]) == {"FedAvg", "TACO"} and main["rounds"]["run"].nunique() == 2
    timed = records.select(tp.timing_grid(params))
    for run, rounds in timed["rounds"].groupby("run"):
        clients = timed["clients"][timed["clients"]["run"] == run]
        assert tp.time_per_100_updates(rounds, clients) > 0
    assert run_specs(specs, store=store, progress=False)["rounds"].equals(records["rounds"])  # read back, not rerun


def test_oscillation_measures():
    cycle = tp.oscillation([0.5, 0.7, 0.5, 0.7, 0.5, 0.7])
    assert cycle == {"swing": pytest.approx(0.2), "alternation": 1.0}
    trend = tp.oscillation([0.1, 0.2, 0.3, 0.4])
    assert trend == {"swing": pytest.approx(0.1), "alternation": 0.0}
    with pytest.raises(ValueError, match="at least 3"):
        tp.oscillation([0.1, 0.2])
    import pandas as pd

    a, b = np.array([0.1, 0.5, 0.2]), np.array([0.4, 0.1, 0.3])
    frame = pd.DataFrame([{"round": r + 1, "client": c, "alpha": (a if r % 2 == 0 else b)[c]}
                          for r in range(4) for c in range(3)])
    lags = tp.alpha_lag_correlation(frame)
    assert lags["lag2"].tolist() == pytest.approx([1.0, 1.0]) and (lags["lag1"] < 0).all()


def test_final_rows_and_oscillation_rows_by_hand():
    import pandas as pd

    rounds = pd.DataFrame({"algorithm": ["A"] * 6 + ["B"] * 6, "seed": 0, "round": list(range(1, 7)) * 2,
                           "test_acc": [0.1, 0.2, 0.5, 0.7, 0.5, 0.7] + [0.1, 0.2, 0.3, 0.4, 0.5, 0.6],
                           "test_loss": [1.0] * 6 + [1.0, 1, 1, 1, 1, float("nan")]})
    final = tp.final_rows(rounds, ["algorithm"]).set_index("algorithm")
    assert final["final_acc"].tolist() == pytest.approx([70.0, 60.0]) and final["diverged"].tolist() == [False, True]
    alpha = pd.DataFrame([{"algorithm": "A", "seed": 0, "round": r, "client": c, "alpha": [[0.1, 0.5, 0.2], [0.4, 0.1, 0.3]][r % 2][c]}
                          for r in range(1, 7) for c in range(3)])
    rows = tp.oscillation_rows({"rounds": rounds, "alpha": alpha}, rounds=6).set_index("algorithm")
    assert rows.loc["A", "first_round"] == 4 and rows.loc["A", "late_peak_acc"] == pytest.approx(70.0)
    assert rows.loc["A", "swing"] == pytest.approx(20.0) and rows.loc["A", "alternation"] == 1.0
    assert rows.loc["A", "alpha_lag2"] == pytest.approx(1.0) and rows.loc["A", "alpha_lag1"] < 0
    assert rows.loc["B", "alternation"] == 0.0 and np.isnan(rows.loc["B", "alpha_lag1"])
    assert tp.missing(["TACO", "FedAvg"], ["TACO"]).startswith("needs FedAvg") and tp.missing(["TACO"], ["TACO"]) == ""


def test_split_groups_and_freeloaders_come_from_their_own_keyed_streams():
    """The collectors' group names are those of the split that ran, and the planted freeloaders are drawn
    from the "freeloaders" stream, not from the seed that drew the split."""
    from fedlib.data import load_dataset
    from fedlib.runs import build_run
    from fedlib.core.seeding import Seeds

    spec = RunSpec.make("taco", "digits", ("groups", {"num_clients": 6, "group_sizes": [2, 2, 2],
                                                       "label_fractions": [0.1, 0.2, 0.5]}),
                        ("mlp", {}), ("taco", {}), 1, 3, client_behavior=("freeloaders", {"count": 2}))
    run = build_run(spec)
    parts, names = tp.client_groups(load_dataset("digits").y_train.numpy(), [2, 2, 2], [0.1, 0.2, 0.5],
                                    rng=Seeds(3).numpy("partition"))
    assert all((a == b).all() for a, b in zip(run.data.client_indices, parts))
    assert list(tp._split_groups(run)) == list(names)
    assert sorted(run.client_behavior.clients) == list(tp.plant_freeloaders(6, 2, rng=Seeds(3).numpy("freeloaders")))
