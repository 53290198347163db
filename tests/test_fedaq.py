"""fedlib.papers.fedaq and fedlib.energy: the paper's setup as Links, energy accounting against the per-message record."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedlib.codecs.uniform import RANGE_BITS
from fedlib.energy import add_energy, payload_bits, saving
from fedlib.papers.fedaq import PAPER_MODELS, FedAQParams, PAPER_TABLES, Cell, equal_shards, layer_ranges, run_spec, target_table
from fedlib.runs import Keys, RunStore, execute

E_UP, E_DOWN = 2.0, 3.0  # distinct per-bit energies so a swapped link cannot pass
PARAMS = FedAQParams(dataset="digits", model="mlp", num_clients=4, rounds=2, local_epochs=1.0, batch_size=64, lr=0.05,
                     momentum=0.5, alpha=0.002, granularity="layer", b_min=1, e_up_pj=E_UP, e_down_pj=E_DOWN, threads=1,
                     device="cpu")


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> RunStore:
    return RunStore(tmp_path_factory.mktemp("runs"))


def _run(store, mode, scheme):
    return execute(Keys()(run_spec(PARAMS, Cell(mode, scheme), 0)), store)


def test_equal_shards():
    parts = equal_shards(1437, 10, np.random.default_rng(0))
    assert [len(p) for p in parts] == [143] * 10
    assert len(np.unique(np.concatenate(parts))) == 1430
    with pytest.raises(ValueError):
        equal_shards(5, 6, np.random.default_rng(0))


def test_add_energy_hand_case():
    rounds = pd.DataFrame({"round": [1, 2], "bits_up": [100, 50], "bits_down": [10, 20], "receivers": [4, 4],
                           "bits_up_extra": [0, 0], "bits_down_extra": [0, 1]})
    out = add_energy(rounds, e_up_pj=2.0, e_down_pj=3.0)
    np.testing.assert_allclose(out["energy_up_mJ"], np.array([200, 100]) / 1e9)
    np.testing.assert_allclose(out["energy_down_mJ"], np.array([120, 252]) / 1e9)
    assert out["cum_energy_mJ"].iloc[-1] == pytest.approx((200 + 100 + 120 + 252) / 1e9)
    only_up = add_energy(rounds, links=("up",))
    assert (only_up["energy_down_mJ"] == 0).all()
    with pytest.raises(ValueError):
        add_energy(rounds, links=("sideways",))
    with pytest.raises(ValueError):
        add_energy(rounds.drop(columns="receivers"))


def test_energy_saving():
    assert saving(9.3, 3.1) == pytest.approx(0.6667, abs=1e-4)  # Table II's 66.7%
    assert np.isnan(saving(float("nan"), 1.0)) and np.isnan(saving(float("inf"), 1.0))  # never reached


def test_fixed8_energy_is_n_d_8_per_link_plus_side_information(store):
    """T10: per round, uplink e1 n (8 d + 64 per layer), downlink e2 n (8 d + 64 per layer); payload-only = 8 n d."""
    res = _run(store, "joint", "fixed8")
    d, layers, n = int(res["layer_sizes"]["dim"].sum()), len(res["layer_sizes"]), PARAMS.num_clients
    per_message = 8 * d + RANGE_BITS * layers
    np.testing.assert_allclose(res["rounds"]["energy_mJ"], (E_UP + E_DOWN) * n * per_message / 1e9)
    paper = add_energy(payload_bits(res["rounds"]), E_UP, E_DOWN)
    np.testing.assert_allclose(paper["energy_mJ"], (E_UP + E_DOWN) * n * 8 * d / 1e9)


def test_fedaq_trend_columns_match_the_record(store):
    res = _run(store, "joint", "fedaq")
    rounds, d, n = res["rounds"], int(res["layer_sizes"]["dim"].sum()), PARAMS.num_clients
    np.testing.assert_allclose(rounds["up_bits"], rounds["payload_bits_up"] / (n * d))
    np.testing.assert_allclose(rounds["down_bits"], rounds["payload_bits_down"] / d)
    ranges = layer_ranges(res["layers"])
    assert set(ranges["link"]) == {"uplink update", "downlink weights"}
    assert set(ranges["layer"]) == set(res["layer_sizes"]["layer"])


def test_target_table():
    runs = {"a": pd.DataFrame({"round": [1, 2], "test_acc": [0.5, 0.9], "cum_energy_mJ": [1.0, 4.0]}),
            "b": pd.DataFrame({"round": [1, 2], "test_acc": [0.6, 0.9], "cum_energy_mJ": [0.5, 1.0]})}
    t = target_table(runs, "a", "b", [0.55, 0.9, 0.99])
    assert t["saving_%"].iloc[0] == pytest.approx(100 * (4.0 - 0.5) / 4.0)
    assert t["saving_%"].iloc[1] == pytest.approx(75.0)
    assert np.isnan(t["saving_%"].iloc[2]) and np.isinf(t["b_mJ"].iloc[2])  # never: counted as inf


@pytest.mark.parametrize("profile", ["cpu", "gpu", "full"])
def test_notebook_profiles_parse_and_name_known_things(profile):
    """Every profile key is a notebook parameter; datasets, models and paper rows exist."""
    from pathlib import Path

    import yaml

    from fedlib.paper import params_class

    from fedlib.data import available_datasets
    from fedlib.models import available_models

    root = Path(__file__).resolve().parents[1] / "notebooks"
    params = set(params_class("fedaq").names())
    values = yaml.safe_load((root / "profiles" / "fedaq" / f"{profile}.yaml").read_text())
    assert set(values) <= params, set(values) - params
    assert values["dataset"] in available_datasets() and values["model"] in available_models()
    assert values["paper_row"] in PAPER_TABLES["joint"] and PAPER_MODELS[values["paper_row"]][0] == values["model"]
    if values.get("paper_targets"):
        assert set(values["paper_targets"]) == {"joint", "up", "down"}


def test_energy_to_targets_reads_each_run_once_for_all_its_targets():
    from fedlib.papers.fedaq import energy_to_targets

    run = pd.DataFrame({"round": [1, 2, 3], "test_acc": [0.2, 0.6, 0.5], "cum_energy_mJ": [1.0, 3.0, 6.0],
                        "up_bits": [4.0, 6.0, 8.0], "down_bits": [8.0, 8.0, 8.0]})
    out = energy_to_targets({("joint", "fedaq", 0): run}, "joint", ["fedaq"], [0], [0.5, 0.9])
    assert list(out["energy_mJ"]) == [3.0, np.inf] and list(out["round"]) == [2.0, np.inf]
    assert list(out["final_acc"]) == [0.5, 0.5] and list(out["mean_up_bits"]) == [6.0, 6.0]
    # no target: no rows, and a run without the energy columns is not read; a missing run is still named
    assert energy_to_targets({("joint", "fedaq", 0): run[["round"]]}, "joint", ["fedaq"], [0], []).empty
    with pytest.raises(KeyError):
        energy_to_targets({}, "joint", ["fedaq"], [0], [])
