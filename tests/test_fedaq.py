"""fedlib.papers.fedaq and fedlib.energy: the paper's setup as Links, energy accounting against the per-message record."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedlib.codecs.base import Identity
from fedlib.codecs.uniform import RANGE_BITS, AdaQuantFL, FedAQQuantizer, UniformQuantizer
from fedlib.data import load_dataset
from fedlib.energy import add_energy, payload_bits, saving
from fedlib.papers.fedaq import (
    downlink_resolution,
    equal_shards,
    layer_ranges,
    make_links,
    paper_local_training,
    run_scheme,
    target_table,
)
from fedlib.federation import FederatedData
from fedlib.models import build_model

E_UP, E_DOWN = 2.0, 3.0  # distinct per-bit energies so a swapped link cannot pass


@pytest.fixture(scope="module")
def data() -> FederatedData:
    ds = load_dataset("digits")
    return FederatedData(ds, equal_shards(len(ds.y_train), 4, np.random.default_rng(0)))


def _model(data):
    return lambda: build_model("mlp", data.dataset.input_shape, 10, hidden=(16,))


def _run(data, mode, scheme, rounds=3, **kw):
    return run_scheme(_model(data), data, mode, scheme, rounds, local=paper_local_training(lr=0.05, epochs=1),
                      seed=0, e_up=E_UP, e_down=E_DOWN, **kw)


def test_equal_shards():
    parts = equal_shards(1437, 10, np.random.default_rng(0))
    assert [len(p) for p in parts] == [143] * 10
    assert len(np.unique(np.concatenate(parts))) == 1430
    with pytest.raises(ValueError):
        equal_shards(5, 6, np.random.default_rng(0))


def test_links_per_mode_and_scheme():
    up, down = make_links("joint", "fedaq", 10, alpha=0.004)
    assert (up.payload, down.payload) == ("update", "weights")
    assert up.codec.resolution == 0.004 and down.codec.resolution == pytest.approx(0.004 / np.sqrt(20))
    up, down = make_links("up", "fixed8", 10)
    assert isinstance(up.codec, UniformQuantizer) and up.codec.bits == 8 and isinstance(down.codec, Identity)
    up, down = make_links("down", "fedaq", 10, beta=0.01)
    assert isinstance(up.codec, Identity) and isinstance(down.codec, FedAQQuantizer) and down.codec.resolution == 0.01
    up, _ = make_links("up", "adaquantfl", 10, s0=7)
    assert isinstance(up.codec, AdaQuantFL) and up.codec.s0 == 7
    assert downlink_resolution(0.005, 10, "kkt", 1.0, 1.0) == pytest.approx(downlink_resolution(0.005, 10))
    assert downlink_resolution(0.005, 10, "kkt", 1.0, 3.0) == pytest.approx(0.005 * np.sqrt(3 / 20))


@pytest.mark.parametrize("args", [("both", "fedaq"), ("joint", "fixed"), ("joint", "fixed40"),
                                  ("joint", "adaquantfl"), ("joint", "topk"), ("joint", "fedaq", "x")])
def test_bad_setup_raises(args):
    kwargs = {"beta_rule": args[2]} if len(args) == 3 else {}
    with pytest.raises(ValueError):
        make_links(args[0], args[1], 10, **kwargs)


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


@pytest.mark.parametrize("mode,scheme", [("joint", "fedaq"), ("joint", "fixed4"), ("up", "adaquantfl"),
                                         ("down", "fedaq")])
def test_energy_totals_equal_per_message_bits_times_energy(data, mode, scheme):
    res = _run(data, mode, scheme)
    per_round_up = res.clients.groupby("round")["bits_up"].sum()
    expected_up = per_round_up.to_numpy() * E_UP / 1e9 if mode != "down" else 0.0
    expected_down = res.rounds["bits_down"].to_numpy() * data.num_clients * E_DOWN / 1e9 if mode != "up" else 0.0
    np.testing.assert_allclose(res.rounds["energy_up_mJ"], expected_up, rtol=1e-12)
    np.testing.assert_allclose(res.rounds["energy_down_mJ"], expected_down, rtol=1e-12)
    total = (E_UP * res.clients["bits_up"].sum() * (mode != "down")
             + E_DOWN * data.num_clients * res.rounds["bits_down"].sum() * (mode != "up")) / 1e9
    assert res.rounds["cum_energy_mJ"].iloc[-1] == pytest.approx(total, rel=1e-12)


def test_fixed8_energy_is_n_d_8_per_link_plus_side_information(data):
    """T10: per round, uplink e1 n (8 d + 64 per layer), downlink e2 n (8 d + 64 per layer); payload-only = 8 n d."""
    res = _run(data, "joint", "fixed8", rounds=2)
    d = sum(v.numel() for v in res.params.values())
    layers, n = len(res.params), data.num_clients
    per_message = 8 * d + RANGE_BITS * layers
    np.testing.assert_allclose(res.rounds["energy_mJ"], (E_UP + E_DOWN) * n * per_message / 1e9)
    paper = add_energy(payload_bits(res.rounds), E_UP, E_DOWN)
    np.testing.assert_allclose(paper["energy_mJ"], (E_UP + E_DOWN) * n * 8 * d / 1e9)


def test_fedaq_trend_columns_match_the_record(data):
    res = _run(data, "joint", "fedaq", alpha=0.002)
    d = sum(v.numel() for v in res.params.values())
    n = data.num_clients
    np.testing.assert_allclose(res.rounds["up_bits"], res.rounds["payload_bits_up"] / (n * d))
    np.testing.assert_allclose(res.rounds["down_bits"], res.rounds["payload_bits_down"] / d)
    ranges = layer_ranges(res)
    assert set(ranges["link"]) == {"uplink update", "downlink weights"}
    assert set(ranges["layer"]) == set(res.params)


def test_target_table(data):
    runs = {"a": pd.DataFrame({"round": [1, 2], "test_acc": [0.5, 0.9], "cum_energy_mJ": [1.0, 4.0]}),
            "b": pd.DataFrame({"round": [1, 2], "test_acc": [0.6, 0.9], "cum_energy_mJ": [0.5, 1.0]})}
    t = target_table(runs, "a", "b", [0.55, 0.9, 0.99])
    assert t["saving_%"].iloc[0] == pytest.approx(100 * (4.0 - 0.5) / 4.0)
    assert t["saving_%"].iloc[1] == pytest.approx(75.0)
    assert np.isnan(t["saving_%"].iloc[2])


@pytest.mark.parametrize("profile", ["cpu", "full"])
def test_notebook_profiles_parse_and_name_known_things(profile):
    """Every profile key is a notebook parameter; datasets, models and paper rows exist."""
    import ast
    from pathlib import Path

    import yaml

    from fedlib.data import available_datasets
    from fedlib.models import available_models

    root = Path(__file__).resolve().parents[1] / "notebooks"
    source = (root / "fedaq.py").read_text()
    cell = source.split('# %% tags=["parameters"]')[1].split("# %%")[0]
    params = {t.id for node in ast.parse(cell).body if isinstance(node, ast.Assign) for t in node.targets}
    values = yaml.safe_load((root / "profiles" / "fedaq" / f"{profile}.yaml").read_text())
    assert set(values) <= params, set(values) - params
    assert values["dataset"] in available_datasets() and values["model"] in available_models()
    assert values["paper_row"] in source
    if values.get("paper_targets"):
        assert set(values["paper_targets"]) == {"joint", "up", "down"}
