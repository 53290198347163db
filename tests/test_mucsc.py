"""MUCSC paper glue: the paper's bit accounting and tables, lr schedule, Z_U split, links, time model, a run."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import sympy as sp
import torch

from fedlib.algorithms import FedAvg
from fedlib.codecs import BMUCSC, MUCSC, QSGD, STC, Identity, SignSGD, TopK
from fedlib.data import iid, load_dataset
from fedlib.engine.channel import LinkContext
from fedlib.engine.federation import FederatedData, LocalTraining, run_federation
from fedlib.models import build_model, count_parameters
from fedlib.papers.mucsc import (
    D_CIFAR,
    METHODS,
    PAPER_TABLE2,
    PaperLR,
    communication_time,
    compression_rate,
    level_split,
    links,
    mean_id_bits,
    message_bits,
    round_traffic_bits,
    table2,
    target_summary,
    traffic_tables,
    zu_split,
)
from theory.mucsc import table2_exact

D = 1000  # ceil(log2 1000) = 10


@pytest.mark.parametrize("method, up, down", [
    ("nc", 32 * D, 32 * D),
    ("mucsc", 16 * 32 + 4 * D, 16 * 32 + 4 * D),
    ("qsgd", 4 * D, 32 * D),
    ("ssgd", D, D),
    ("bmucsc", 10 * (8 + 10) + 32 * 256, 10 * (8 + 10) + 32 * 256),  # d0 = 0.01 d, no super-cluster float
    ("dgc", 10 * (32 + 10), 32 * D),
    ("stc", 30 * (1 + 10), 30 * (1 + 10)),
])
def test_paper_bits_by_hand(method, up, down):
    assert message_bits(method, "up", D) == pytest.approx(up)
    assert message_bits(method, "down", D) == pytest.approx(down)
    assert round_traffic_bits(method, D) == pytest.approx(up + down)


@pytest.mark.parametrize("method", METHODS)
def test_codec_accounting_equals_the_links_message_bits(method):
    x = torch.from_numpy(np.random.default_rng(0).laplace(0, 1e-2, D)).float()
    up, down = links(method)
    ctx = LinkContext(round=0, client=0, history=[])
    for link, direction in ((up, "up"), (down, "down")):
        codec = link.codec_for(ctx)
        assert codec.encode(x, torch.Generator().manual_seed(0)).bits == message_bits(method, direction, D,
                                                                                        accounting="codec")


def test_paper_and_codec_accounting_differ_only_by_side_information():
    assert message_bits("ssgd", "up", D, accounting="codec") - message_bits("ssgd", "up", D) == 32
    assert message_bits("stc", "up", D, accounting="codec") - message_bits("stc", "up", D) == 32
    assert message_bits("qsgd", "up", D, accounting="codec") - message_bits("qsgd", "up", D) == 2 * 32
    assert message_bits("bmucsc", "up", D, accounting="codec") - message_bits("bmucsc", "up", D) == 32


def test_table2_convention_a_matches_the_printed_rates():
    t = table2()
    assert (t["rate_conventionA"] - t["paper_rate"]).abs().max() < 0.0075  # DGC 1.9967 is printed 1.99
    ok = t[t.method != "dgc"]
    assert np.allclose(ok["rate_conventionA"].round(2), ok["paper_rate"])  # all others to the printed digit
    mucsc = t[(t.method == "mucsc") & (t.dataset == "cifar10")].iloc[0]
    assert mucsc.rate_per_round_B == pytest.approx(7.9993, abs=1e-4)  # the K/N-consistent ratio is ~8, not 14.54


def test_table2_exact_rationals():
    d = D_CIFAR
    r = table2_exact(d)
    # Eq. (16): 2*4*d / ((d/2 + 64)/10 + 64 + d/2) with Z_U = Z_D = 16
    assert r["mucsc"] == sp.Rational(8 * d) / ((sp.Rational(d, 2) + 64) * sp.Rational(11, 10))
    assert float(r["mucsc"]) == pytest.approx(compression_rate("mucsc", d))
    assert round(float(table2_exact(d, super_cluster_float=False)["bmucsc"]), 2) == PAPER_TABLE2.loc["cifar10", "bmucsc"]
    assert round(float(r["bmucsc"]), 2) != PAPER_TABLE2.loc["cifar10", "bmucsc"]  # Eq. (17) with "+h" is not printed


def test_traffic_tables_reproduce_tables_3_to_5():
    t = traffic_tables()
    misprints = (t.setting == "femnist") & (t.method == "qsgd")
    assert (t.loc[~misprints, "MB"] - t.loc[~misprints, "paper_MB"]).abs().max() < 0.05
    assert t.loc[misprints, "MB"].item() == pytest.approx(174.60, abs=0.01)  # paper prints 149.65 at 84.38%
    stc = t[(t.setting == "femnist") & (t.method == "stc")].iloc[0]
    assert stc.pct == pytest.approx(5.67, abs=0.01) and stc.paper_pct == 5.16  # the other misprint


def test_paper_lr_by_hand():
    lr = PaperLR()
    assert lr(0, 0) == 0.5
    assert lr(80, 0) == pytest.approx(0.25)  # t = 400
    assert lr(79, 5) == pytest.approx(0.25)
    assert lr(10_000, 0) == 0.01  # the floor
    assert PaperLR(steps_per_round=1)(400, 0) == pytest.approx(0.25)
    with pytest.raises(ValueError):
        PaperLR(lr0=0.0)


def test_level_split_thirds():
    zu = zu_split(100, (4, 8, 16), seed=1)
    counts = pd.Series(zu).value_counts().to_dict()
    assert counts == {4: 34, 8: 33, 16: 33}
    assert np.array_equal(zu, zu_split(100, (4, 8, 16), seed=1)) and not np.array_equal(zu, zu_split(100, (4, 8, 16), 2))
    split = level_split(zu, levels="uniform")
    for client in range(100):
        codec = split(LinkContext(round=3, client=client, history=[]))
        assert isinstance(codec, MUCSC) and codec.num_levels == zu[client] and codec.levels == "uniform"
    assert len({id(split.codec_of(c)) for c in range(100)}) == 3  # one codec per Z_U, shared by its clients
    assert mean_id_bits(zu) == pytest.approx((34 * 2 + 33 * 3 + 33 * 4) / 100)
    with pytest.raises(ValueError, match="uplink"):
        split(LinkContext(round=0, client=None, history=[]))
    with pytest.raises(ValueError, match="cannot split 2 clients into 3 sets"):
        zu_split(2, (4, 8, 16), seed=0)
    with pytest.raises(ValueError, match="cannot split 5 clients into 0 sets"):
        zu_split(5, (), seed=0)


def test_links_follow_the_paper():
    expect = {"nc": (Identity, Identity, False, False), "mucsc": (MUCSC, MUCSC, False, False),
              "qsgd": (QSGD, Identity, False, False), "ssgd": (SignSGD, SignSGD, False, False),
              "bmucsc": (BMUCSC, BMUCSC, False, False), "dgc": (TopK, Identity, True, False),
              "stc": (STC, STC, True, True)}
    for method, (up_t, down_t, up_ef, down_ef) in expect.items():
        up, down = links(method)
        assert isinstance(up.codec, up_t) and isinstance(down.codec, down_t)
        assert (up.error_feedback, down.error_feedback) == (up_ef, down_ef)
        assert down.payload == "update" and up.granularity == "model"
    with pytest.raises(ValueError, match="unknown method"):
        links("terngrad")
    with pytest.raises(ValueError, match="accounting"):
        message_bits("nc", "up", 10, accounting="bytes")


def test_communication_time_by_hand():
    rounds = pd.DataFrame({"round": [1, 2], "bits_down": [2.8e6, 1.4e6]})
    clients = pd.DataFrame({"round": [1, 1, 2], "client": [0, 1, 2], "bits_up": [1.4e6, 2.8e6, 0.7e6]})
    t = communication_time(rounds, clients, num_clients=3, std_frac=0.0)  # every link exactly 1.4 Mb/s
    assert t["up_s"].tolist() == pytest.approx([2.0, 0.5])
    assert t["down_s"].tolist() == pytest.approx([2.0, 1.0])
    noisy = communication_time(rounds, clients, num_clients=100, seed=1)
    assert (noisy["down_s"] > t["down_s"]).all()  # the slowest of 100 links is slower than the mean
    with pytest.raises(ValueError):
        communication_time(rounds, clients, 3, download_max_over="some")


def test_rounds_and_traffic_to_target():
    rounds = pd.DataFrame({"round": [1, 2, 3], "test_acc": [0.3, 0.6, 0.8], "bits_down": [8.0, 8.0, 8.0],
                           "wall_s": [1.0, 1.0, 1.0]})
    clients = pd.DataFrame({"round": [1, 1, 2, 2, 3], "client": [0, 1, 0, 1, 0], "bits_up": [2.0, 4.0, 2.0, 2.0, 1.0]})
    comm = pd.DataFrame({"round": [1, 2, 3], "comm_s": [5.0, 5.0, 5.0]})
    s = target_summary(rounds, clients, 0.5, comm)
    assert s["rounds"] == 2 and s["traffic_MB"] * 8 * 2**20 == pytest.approx(3 + 8 + 2 + 8)
    assert s["comm_s"] == 10.0 and s["comp_s"] == 2.0
    assert all(v == math.inf for v in target_summary(rounds, clients, 0.95, comm).values())  # never: counted as inf


@pytest.fixture(scope="module")
def digits() -> FederatedData:
    ds = load_dataset("digits")
    return FederatedData(ds, iid(ds.y_train.numpy(), 10, np.random.default_rng(0)))


@pytest.mark.parametrize("method", ["mucsc", "stc"])
def test_a_run_counts_the_papers_bits(digits, method):
    model_fn = lambda: build_model("mlp", digits.dataset.input_shape, 10, hidden=(16,))  # noqa: E731
    d = count_parameters(model_fn())
    up, down = links(method)
    with torch.random.fork_rng():
        run = run_federation(model_fn, digits, FedAvg(), 3, local=LocalTraining(lr=PaperLR(0.1), batch_size=8, epochs=None, steps=5),
                             sampler=3, uplink=up, downlink=down, downlink_receivers="all", progress=False)
    assert (run.clients["bits_up"] == message_bits(method, "up", d, accounting="codec")).all()
    assert (run.rounds["bits_down"] == message_bits(method, "down", d, accounting="codec")).all()
    assert run.rounds["test_acc"].notna().all()


@pytest.mark.parametrize("profile", ["cpu", "gpu", "full"])
def test_notebook_profiles_name_known_parameters_datasets_and_models(profile):
    from pathlib import Path

    import yaml

    from fedlib.paper import params_class

    from fedlib.data import available_datasets
    from fedlib.models import available_models

    root = Path(__file__).resolve().parents[1]
    known = set(params_class("mucsc").names())
    values = yaml.safe_load((root / "notebooks" / "profiles" / "mucsc" / f"{profile}.yaml").read_text())
    assert set(values) <= known, set(values) - known
    assert values["profile"] == profile
    assert values["dataset"] in available_datasets() and values["model"] in available_models()
