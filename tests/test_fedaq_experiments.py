"""fedlib.papers.fedaq as data: the notebook's grid as run specs, and a tiny spec through the real runner."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from fedlib.codecs.base import Identity
from fedlib.codecs.policies import AdaQuantFL
from fedlib.codecs.uniform import FedAQQuantizer, UniformQuantizer
from fedlib.core.contracts import SERVER, layer_table
from fedlib.grids import notebook_parameters
from fedlib.notebook_params import NOTEBOOKS
from fedlib.papers.fedaq import (FedAQParams, best_by_energy, cell_specs, energy_to_targets, experiments, grid,
                                 link_components)
from fedlib.runs import Keys, RunSpec, RunStore, build_run, execute

TINY = FedAQParams(seeds=[0, 1], dataset="digits", model="mlp", num_clients=3, rounds=2, local_epochs=0.2,
                   batch_size=64, lr=0.05, momentum=0.5, alpha=0.005, alpha_sweep=[0.005, 0.02], fixed_bits=[2, 8],
                   beta_down_mult=[1.0, 4.0], adaquant_s0=3, adaquant_s0_sweep=[1, 3], granularity="layer", b_min=1,
                   e_up_pj=2.0, e_down_pj=3.0, threads=1, device="cpu")


def test_grid_counts_labels_and_distinct_keys():
    specs = experiments(TINY)
    per_seed = 1 + 2 + 1 + 3 + 2 + 1 + 1 + 1  # joint fp32/fixed2/fixed8/fedaq, up x3, down x2 + fixed8, alpha 0.02, s0 1
    assert len(grid(TINY)) == per_seed and len(specs) == 2 * per_seed
    labels = [(s.get("labels")["mode"], s.get("labels")["scheme"], s.seed) for s in specs]
    assert len(set(labels)) == len(specs)
    assert len({s.key() for s in specs}) == len(specs)
    assert ("joint", "fedaq α=0.02", 0) in labels and ("up", "adaquantfl s0=1", 1) in labels
    assert ("joint", "fedaq α=0.005", 0) not in labels  # the sweep reuses the main run
    for spec in specs:
        assert RunSpec.from_json(spec.to_json()) == spec


def test_cell_specs_pick_a_tables_runs_by_scheme_label_or_every_setting_of_a_sweep():
    specs = experiments(TINY)
    named = lambda picked: sorted((s.get("labels")["scheme"], s.seed) for s in picked)  # noqa: E731
    assert named(cell_specs(specs, "down", "fedaq β×4", "fixed8")) == [("fedaq β×4", 0), ("fedaq β×4", 1),
                                                                       ("fixed8", 0), ("fixed8", 1)]
    assert named(cell_specs(specs, "joint", "fedaq")) == [("fedaq", 0), ("fedaq", 1)]  # not the alpha sweep's
    assert named(cell_specs(specs, "joint", "fedaq", sweeps=True)) == [("fedaq", 0), ("fedaq", 1), ("fedaq α=0.02", 0),
                                                                       ("fedaq α=0.02", 1)]
    assert named(cell_specs(specs, "up", "adaquantfl", sweeps=True)) == [
        ("adaquantfl", 0), ("adaquantfl", 1), ("adaquantfl s0=1", 0), ("adaquantfl s0=1", 1)]
    assert cell_specs(specs, "up", "fedaq β×4") == []


def test_notebook_defaults_and_profiles_build_grids():
    assert len(experiments(FedAQParams())) > 0
    for profile in ("cpu", "gpu", "full"):
        params = notebook_parameters("fedaq", profile)
        assert {s.seed for s in experiments(params)} == set(params.seeds)


def test_gpu_profile_is_the_papers_fashion_mnist_row():
    import yaml

    values = yaml.safe_load((NOTEBOOKS / "profiles" / "fedaq" / "gpu.yaml").read_text())
    assert values["dataset"] == "fashion_mnist" and values["model"] == "fedaq_cnn" and values["device"] == "auto"
    assert len(values["seeds"]) >= 3 and values["fixed_bits"] == [2, 4, 8, 16]
    assert values["paper_targets"] == {"joint": 0.913, "up": 0.910, "down": 0.910}
    assert (values["lr"], values["momentum"], values["batch_size"], values["local_epochs"], values["alpha"]) == \
        (0.01, 0.5, 64, 5.0, 0.005)


def test_links_per_mode_and_scheme_build_the_papers_codecs():
    specs = {(s.get("labels")["mode"], s.get("labels")["scheme"]): s for s in experiments(replace(TINY, seeds=[0]))}
    links = {k: build_run(s).kwargs for k, s in specs.items()}
    up, down = links[("joint", "fedaq")]["uplink"], links[("joint", "fedaq")]["downlink"]
    assert (up.payload, down.payload) == ("update", "weights")
    assert isinstance(up.codec, FedAQQuantizer) and up.codec.resolution == 0.005
    assert down.codec.resolution == pytest.approx(0.005 / np.sqrt(6))
    up, down = links[("up", "fixed8")]["uplink"], links[("up", "fixed8")]["downlink"]
    assert isinstance(up.codec, UniformQuantizer) and up.codec.bits == 8 and isinstance(down.codec, Identity)
    assert links[("down", "fedaq β×4")]["downlink"].codec.resolution == pytest.approx(4 * 0.005 / np.sqrt(6))
    assert isinstance(links[("down", "fedaq")]["uplink"].codec, Identity)
    policy = links[("up", "adaquantfl s0=1")]["uplink"].codec
    assert isinstance(policy, AdaQuantFL) and policy.s0 == 1
    plan = build_run(specs[("joint", "fp32")])
    assert [len(ix) for ix in plan.data.client_indices] == [len(plan.dataset.y_train) // 3] * 3
    assert plan.kwargs["downlink_receivers"] == "all" and plan.kwargs["sampler"] == 1.0


@pytest.mark.parametrize("args", [("both", "fedaq"), ("joint", "fixed"), ("joint", "fixed40"),
                                  ("joint", "adaquantfl"), ("joint", "topk")])
def test_bad_setup_raises(args):
    with pytest.raises(ValueError):
        link_components(*args, alpha=0.01, beta=0.01)


def test_a_tiny_spec_runs_through_the_store_with_the_columns_the_notebook_reads(tmp_path):
    specs = [s for s in experiments(replace(TINY, seeds=[0])) if s.get("labels")["scheme"] in ("fedaq", "adaquantfl")]
    store, keys = RunStore(tmp_path), Keys()
    for spec in specs:
        records = execute(keys(spec), store)
        rounds, clients, layers = records["rounds"], records["clients"], records["layer_sizes"]
        assert {"cum_energy_mJ", "energy_up_mJ", "energy_down_mJ", "up_bits", "down_bits", "test_acc",
                "payload_bits_up", "payload_bits_down"} <= set(rounds.columns)
        assert len(rounds) == 2 and store.has(keys(spec))
        d = int(layers["dim"].sum())
        mode = spec.get("options")["mode"]
        if mode != "down":
            np.testing.assert_allclose(rounds["up_bits"], rounds["payload_bits_up"] / (3 * d))
            assert set(records["layers"].query("key == 'range'")["layer"]) == set(layers["layer"])
        # energy: only the mode's links count, uplink summed over clients, downlink once per receiver
        up = clients.groupby("round")["bits_up"].sum().to_numpy() * 2.0 / 1e9 if mode != "down" else 0.0
        down = rounds["bits_down"].to_numpy() * 3 * 3.0 / 1e9 if mode != "up" else 0.0
        np.testing.assert_allclose(rounds["energy_mJ"], up + down, rtol=1e-12)


def test_energy_to_targets_counts_never_and_best_by_energy_prefers_reaching():
    import pandas as pd

    def run(acc, energy):
        return pd.DataFrame({"round": [1, 2], "test_acc": acc, "cum_energy_mJ": energy, "up_bits": 2.0,
                             "down_bits": 4.0, "run": "x"})

    runs = {("joint", "a", 0): run([0.5, 0.9], [1.0, 2.0]), ("joint", "a", 1): run([0.5, 0.6], [1.0, 2.0]),
            ("joint", "b", 0): run([0.9, 0.9], [5.0, 6.0]), ("joint", "b", 1): run([0.9, 0.9], [5.0, 6.0])}
    t = energy_to_targets(runs, "joint", ["a", "b"], [0, 1], [0.8])
    assert t.set_index(["scheme", "seed"])["energy_mJ"].to_dict() == {("a", 0): 2.0, ("a", 1): np.inf,
                                                                      ("b", 0): 5.0, ("b", 1): 5.0}
    assert best_by_energy(t, ["a", "b"]) == "b"  # a is cheaper where it arrives, but misses on one seed
    assert best_by_energy(t[t["seed"] == 0], ["a", "b"]) == "a"
    assert best_by_energy(t, []) is None


def test_trends_read_either_link_granularity():
    """Hand-made layer tables: per-layer rows are size-weighted (layer a: 1 value, b: 3); a model-granularity link's
    one layer, "model", is the whole model's; a link without rows is fp32 (32 bits); unknown layers are refused."""
    from fedlib.core.contracts import link_rows
    from fedlib.papers.fedaq import trends

    def table(client, entries):  # entries: (round, client offset, layer, key, value)
        return layer_table([{"round": r, "client": client + c, "layer": layer, "key": key, "value": v}
                            for r, c, layer, key, v in entries])

    dims = {"a": 1, "b": 3}
    rounds = pd.DataFrame({"round": [1, 2]})
    bits = [(1, 0, "a", 8.0), (1, 0, "b", 4.0), (1, 1, "a", 4.0), (1, 1, "b", 4.0), (2, 0, "a", 2.0), (2, 0, "b", 6.0)]
    layer = table(0, [(r, c, name, "bits_per_value", v) for r, c, name, v in bits]
                  + [(r, c, name, "range", 1.0 if name == "a" else 3.0) for r, c, name, _ in bits])
    out = trends(rounds, layer, dims)
    # round 1: clients (8 + 12) / 4 = 5 and (4 + 12) / 4 = 4 -> 4.5; round 2: (2 + 18) / 4 = 5
    assert out["up_bits"].tolist() == [4.5, 5.0] and out["up_range"].tolist() == [2.0, 2.0]
    assert out["down_bits"].tolist() == [32.0, 32.0] and "down_range" not in out
    model = pd.concat([table(0, [(1, 0, "model", "bits_per_value", 3.0), (1, 1, "model", "bits_per_value", 5.0),
                                 (2, 0, "model", "bits_per_value", 2.0), (1, 0, "model", "range", 1.0),
                                 (1, 1, "model", "range", 2.0), (2, 0, "model", "range", 4.0)]),
                       table(SERVER, [(1, 0, "model", "down/bits_per_value", 7.0), (2, 0, "model", "down/bits_per_value", 6.0),
                                      (1, 0, "model", "down/range", 0.5), (2, 0, "model", "down/range", 0.25)])])
    out = trends(rounds, model, dims)
    assert out["up_bits"].tolist() == [4.0, 2.0] and out["up_range"].tolist() == [1.5, 4.0]
    assert out["down_bits"].tolist() == [7.0, 6.0] and out["down_range"].tolist() == [0.5, 0.25]
    with pytest.raises(ValueError, match=r"layers \['c'\] that are not in the model's \['a', 'b'\]"):
        trends(rounds, table(0, [(1, 0, "c", "bits_per_value", 1.0)]), dims)
    with pytest.raises(ValueError, match="link must be 'up' or 'down'"):
        link_rows(layer, "sideways", "range")


@pytest.mark.filterwarnings("ignore:An input array is constant")  # a link's bits may stay put for 3 rounds
@pytest.mark.parametrize("granularity", ["layer", "model"])
def test_fedaq_diagnostics_match_the_codecs_own_bit_count(tmp_path, granularity):
    """The FedAQ diagnostics test (issue 21): what `trends` reports for a joint FedAQ run on either link
    granularity, against independent routes. Bits per value: the codecs' own payload count over the model's d
    values (FedAQ's payload is b * d per message, side information apart). Ranges: Eq. (26) turns a model-wide
    message's recorded range back into its bit-length. Neither series may be the fp32 constant 32."""
    from fedlib.codecs.uniform import fedaq_bits
    from fedlib.papers.fedaq import downlink_resolution, layer_ranges, trend_table

    p = replace(TINY, granularity=granularity, seeds=[0], rounds=3)
    spec = next(s for s in experiments(p) if (s.get("labels")["mode"], s.get("labels")["scheme"]) == ("joint", "fedaq"))
    records = execute(Keys()(spec), RunStore(tmp_path))
    rounds, d, n = records["rounds"], int(records["layer_sizes"]["dim"].sum()), p.num_clients
    np.testing.assert_allclose(rounds["up_bits"], rounds["payload_bits_up"] / (n * d), rtol=1e-12)
    np.testing.assert_allclose(rounds["down_bits"], rounds["payload_bits_down"] / d, rtol=1e-12)
    assert (rounds["up_bits"] < 32).all() and (rounds["down_bits"] < 32).all()
    assert (rounds["up_range"] > 0).all() and (rounds["down_range"] > 0).all()
    assert rounds["up_range"].nunique() == len(rounds) and rounds["down_range"].nunique() == len(rounds)
    if granularity == "model":
        beta = downlink_resolution(p.alpha, n)
        assert [fedaq_bits(r, beta, p.b_min)[0] for r in rounds["down_range"]] == rounds["down_bits"].tolist()
    rho = trend_table(rounds).set_index("quantity")["spearman rho vs round"]
    assert np.isfinite(rho[["up_range", "down_range"]]).all()  # not a constant series
    ranges = layer_ranges(records["layers"])  # Fig. 2's reader (on main it found no range on a model link)
    assert set(ranges["link"]) == {"uplink update", "downlink weights"}
    assert set(ranges["layer"]) == ({"model"} if granularity == "model" else set(records["layer_sizes"]["layer"]))
