"""FedShift pieces: weight quantizers (Eqs. 5-6, Algorithm 1), Table III sizes, the shift hook (Eqs. 9-11),
the stratified sampler, the parity split, mixed precision and Fed-EF, and a short real run."""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from fedlib.codecs.base import Identity
from fedlib.codecs.kmeans import REFERENCE_CODE, KMeansQuantizer, UniformQuantizer, weight_quantizer
from fedlib.core.contracts import SERVER
from fedlib.engine.channel import LinkContext
from fedlib.models import build_model
from fedlib.papers.fedshift import (
    DivergenceMonitor,
    FedShift,
    StratifiedSampler,
    algorithm_and_uplink,
    inferior_clients,
    mixed_uplink,
    parity_shards,
)


def heavy_tailed(n: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    return (torch.randn(n, generator=gen) / torch.rand(n, generator=gen).sqrt()) * 0.02  # Student-t-like tails


# --------------------------------------------------------------------------------- uniform (Eqs. 5-6)

def test_uniform_hand_case() -> None:
    x = torch.tensor([0.0, 0.1, 0.5, 1.0])
    codec = UniformQuantizer(2)  # levels 0, 1/3, 2/3, 1; 0.5 * 3 = 1.5 rounds half-to-even to 2
    msg = codec.encode(x)
    q = msg.payload
    assert q.indices.tolist() == [0, 0, 2, 3] and (q.x_min, q.step) == (0.0, 1 / 3)
    torch.testing.assert_close(codec.decode(msg), torch.tensor([0.0, 0.0, 2 / 3, 1.0]))
    assert msg.bits == 4 * 2 + 2 * 32


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
@pytest.mark.parametrize("seed", [0, 1])
def test_uniform_error_at_most_half_a_step(bits: int, seed: int) -> None:
    x = heavy_tailed(5000, seed)
    codec = UniformQuantizer(bits)
    msg = codec.encode(x)
    q = msg.payload.indices
    y = codec.decode(msg)
    step = (float(x.max()) - float(x.min())) / (2**bits - 1)
    assert int(q.min()) >= 0 and int(q.max()) <= 2**bits - 1
    assert float((y.double() - x.double()).abs().max()) <= step / 2 * (1 + 1e-6) + 1e-7
    assert float(y.min()) == float(x.min()) and float(y.max()) == float(x.max())
    assert len(torch.unique(y)) <= 2**bits


def test_uniform_constant_tensor_and_bad_bits() -> None:
    codec = UniformQuantizer(4)
    x = torch.full((7,), 0.3)
    assert torch.equal(codec.decode(codec.encode(x)), x)
    for bad in (0, 33, 2.5):
        with pytest.raises(ValueError, match="bits"):
            UniformQuantizer(bad)
    with pytest.raises(ValueError, match="unknown weight quantizer"):
        weight_quantizer("log", 4)


def test_uniform_mean_is_biased_on_heavy_tails() -> None:
    """Why the mean matters: uniform rounding does not keep a layer's mean (K-means does, below)."""
    x = heavy_tailed(20000, 3)
    msg = UniformQuantizer(2).encode(x)
    assert abs(msg.info["mean_bias"]) > 1e-4


# -------------------------------------------------------------------------------- K-means (Algorithm 1)

def test_kmeans_hand_case() -> None:
    # quantile init picks 0 and 1; Lloyd: {0,0 | 1,1,10} -> (0, 4) -> {0,0,1,1 | 10} -> (0.5, 10), fixed point
    x = torch.tensor([1.0, 0.0, 10.0, 0.0, 1.0])
    codec = KMeansQuantizer(1)
    msg = codec.encode(x)
    torch.testing.assert_close(codec.decode(msg), torch.tensor([0.5, 0.5, 10.0, 0.5, 0.5]))
    assert msg.payload[0].tolist() == [0, 0, 1, 0, 0]
    assert msg.bits == 5 * 1 + 2 * 32
    assert msg.info["lloyd_iters"] == 3


@pytest.mark.parametrize("bits", [1, 3, 4, 8])
@pytest.mark.parametrize("init", ["quantile", "random", "kmeans++"])
def test_kmeans_preserves_layer_mean(bits: int, init: str) -> None:
    x = heavy_tailed(4000, bits)
    codec = KMeansQuantizer(bits, init=init)
    y = codec.decode(codec.encode(x, torch.Generator().manual_seed(0)))
    assert len(torch.unique(y)) <= 2**bits
    # exact in real arithmetic; the codebook is rounded to fp32 (relative 6e-8 of the weight scale)
    assert abs(float(y.double().mean() - x.double().mean())) < 1e-7 * float(x.abs().max())


def test_kmeans_fixed_point_is_a_lloyd_fixed_point() -> None:
    """Independent route: at convergence every value sits at its nearest centroid and every used centroid
    is its cluster's mean."""
    x = torch.randn(3000, generator=torch.Generator().manual_seed(1))
    centroids, idx, iters = KMeansQuantizer(3, max_iter=1000).fit(x)
    assert iters < 1000
    nearest = (x.double()[:, None] - centroids[None]).abs().argmin(1)
    assert torch.equal(nearest, idx)
    for j in idx.unique():
        torch.testing.assert_close(centroids[j], x.double()[idx == j].mean())


def test_kmeans_beats_uniform_mse_and_is_deterministic() -> None:
    x = heavy_tailed(20000, 5)
    km, un = KMeansQuantizer(4), UniformQuantizer(4)
    m1, m2 = km.encode(x), km.encode(x)
    assert torch.equal(km.decode(m1), km.decode(m2))
    assert m1.info["mse"] < un.encode(x).info["mse"]


def test_kmeans_few_distinct_values_and_bad_args() -> None:
    x = torch.tensor([2.0] * 5 + [3.0] * 5)
    codec = KMeansQuantizer(4)
    assert torch.equal(codec.decode(codec.encode(x)), x)
    with pytest.raises(ValueError, match="init"):
        KMeansQuantizer(4, init="zeros")
    with pytest.raises(ValueError, match="max_iter"):
        KMeansQuantizer(4, max_iter=0)


def weight_like(n: int, sd: float, seed: int) -> torch.Tensor:
    return torch.randn(n, generator=torch.Generator().manual_seed(seed)) * sd


def test_reference_code_kmeans_stops_early_on_weight_scale_data() -> None:
    """Issue 13 g: the authors' fast_pytorch_kmeans (tol 1e-4 on the summed squared centroid move, start at
    points drawn with replacement) stops after a few Lloyd iterations on weights of scale ~0.05: a clearly
    worse codebook than a converged K-means, and some weights left away from their nearest centroid."""
    from fedlib.papers.fedshift import kmeans_fit_report

    x = weight_like(51200, 0.05, 0)  # CNN2 conv2's size and Kaiming scale
    converged = kmeans_fit_report(x, KMeansQuantizer(4, max_iter=300))
    assert converged["not_nearest"] == 0.0 and converged["lloyd_iters"] > 50
    fits = [kmeans_fit_report(x, KMeansQuantizer(4, **REFERENCE_CODE), torch.Generator().manual_seed(s)) for s in range(8)]
    iters = [f["lloyd_iters"] for f in fits]
    ratios = [f["mse"] / converged["mse"] for f in fits]
    assert max(iters) <= 24 and min(iters) >= 1
    assert np.median(ratios) > 1.5 and min(ratios) > 1.0
    assert max(f["not_nearest"] for f in fits) > 0.02
    tight = kmeans_fit_report(x, KMeansQuantizer(4, init="replacement", tol=0.0, max_iter=2000), torch.Generator().manual_seed(0))
    assert tight["lloyd_iters"] > max(iters)  # the same start, run on: the early stop is the tolerance's doing


def test_reference_code_kmeans_hand_cases() -> None:
    # tol large: one assignment + one update, then stop; the indices are from that assignment
    x = torch.tensor([0.0, 0.0, 1.0, 1.0, 10.0])
    codec = KMeansQuantizer(1, init="quantile", tol=100.0)
    centroids, idx, iters = codec.fit(x)  # start (0, 1): {0,0 | 1,1,10} -> (0, 4)
    assert iters == 1 and centroids.tolist() == [0.0, 4.0] and idx.tolist() == [0, 0, 1, 1, 1]
    # an empty cluster's centroid goes to 0 (fast_pytorch_kmeans: NaN mean -> 0); the layer mean is still kept
    x = torch.tensor([1.0, 1.1, 1.2, 5.0])
    centroids, idx, _ = KMeansQuantizer(2, init="quantile", tol=100.0).fit(torch.tensor([1.0, 1.0, 1.0, 5.0]))
    assert 0.0 in centroids.tolist()
    codec = KMeansQuantizer(3, **REFERENCE_CODE)
    y = codec.decode(codec.encode(x, torch.Generator().manual_seed(1)))
    assert abs(float(y.double().mean() - x.double().mean())) < 1e-6
    with pytest.raises(ValueError, match="tol"):
        KMeansQuantizer(4, tol=-1.0)


# ------------------------------------------------------------------------------------------ Table III

@pytest.mark.parametrize("bits,kib", [(4, 1052), (8, 2105)])
def test_table3_weight_sizes_from_the_codecs(bits: int, kib: int) -> None:
    """CNN2 on CIFAR-10 shapes: payload bits summed over the 4 layers, printed as integer KiB like Table III."""
    model = build_model("fedshift_cnn2", (3, 32, 32), 10, init="kaiming_normal_fan_in", seed=0)
    for codec, side in ((UniformQuantizer(bits), 2 * 32), (KMeansQuantizer(bits, max_iter=5), 2**bits * 32)):
        msgs = [codec.encode(p.detach().reshape(-1)) for p in model.parameters()]
        payload = sum(m.payload_bits for m in msgs)
        assert math.floor(payload / 8 / 1024) == kib
        assert sum(m.bits for m in msgs) == payload + 4 * side
    full = sum(Identity().encode(p.detach().reshape(-1)).bits for p in model.parameters())
    assert math.floor(full / 8 / 1024) == 8421


# ----------------------------------------------------------------------------------------- the hook

def fake_round(client_weights: list[dict[str, torch.Tensor]], clients: list[int], before: dict[str, torch.Tensor],
               weights: list[float] | None = None) -> tuple[dict[str, torch.Tensor], SimpleNamespace]:
    wts = torch.tensor(weights or [1 / len(clients)] * len(clients), dtype=torch.float64)
    agg = {k: sum(float(w) * cw[k] for w, cw in zip(wts, client_weights)) for k in before}
    results = [SimpleNamespace(client=c, update={k: cw[k] - before[k] for k in before})
               for c, cw in zip(clients, client_weights)]
    return agg, SimpleNamespace(round=1, before=before, results=results, weights=wts, aggregated=agg)


def random_models(n: int, seed: int) -> list[dict[str, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [{"conv.weight": torch.randn(4, 3, generator=gen) + 0.3, "fc.weight": torch.randn(5, generator=gen) - 0.7,
             "bn.running_mean": torch.randn(3, generator=gen)} for _ in range(n)]


@pytest.mark.parametrize("n_inferior", [0, 1, 2, 4])
def test_shift_scales_each_layer_mean_by_s_over_k(n_inferior: int) -> None:
    models = random_models(5, 0)
    before = random_models(1, 9)[0]
    clients = [1, 3, 5, 7][:n_inferior] + [0, 2, 4, 6, 8][: 4 - n_inferior]
    agg, info = fake_round(models[:4], clients, before)
    shifted, diag = FedShift(inferior_clients(10))(agg, info)
    assert diag["shift/coef"] == pytest.approx(n_inferior / 4) and diag["shift/I"] == n_inferior
    for k in ("conv.weight", "fc.weight"):
        assert float(shifted[k].mean()) == pytest.approx((4 - n_inferior) / 4 * float(agg[k].mean()), abs=1e-6)
        assert diag["shift/m_new"][k] == pytest.approx(float(shifted[k].double().mean()), abs=1e-12)
    assert set(diag["shift/numel"]) == {"conv.weight", "fc.weight"}  # one row per weight tensor, none for buffers
    assert torch.equal(shifted["bn.running_mean"], agg["bn.running_mean"])  # buffers are never shifted
    if n_inferior == 0:
        assert all(torch.equal(shifted[k], agg[k]) for k in agg)


def test_eq9_path_equals_eq10_path() -> None:
    """Shift every inferior client's model by the aggregate mean, then average (Eq. 9) == the hook (Eq. 10)."""
    models = random_models(6, 1)
    clients = [0, 1, 2, 3, 4, 5]
    before = random_models(1, 2)[0]
    agg, info = fake_round(models, clients, before)
    shifted, _ = FedShift(inferior_clients(6))(agg, info)
    for k in ("conv.weight", "fc.weight"):
        m = agg[k].mean()
        eq9 = sum(mk[k] - m if c % 2 else mk[k] for c, mk in zip(clients, models)) / len(models)
        torch.testing.assert_close(shifted[k], eq9)


def test_coefficient_is_the_inferior_aggregation_weight() -> None:
    models = random_models(3, 4)
    agg, info = fake_round(models, [0, 1, 3], random_models(1, 5)[0], weights=[0.5, 0.3, 0.2])
    shifted, diag = FedShift({1, 3})(agg, info)
    assert diag["shift/coef"] == pytest.approx(0.5)
    torch.testing.assert_close(shifted["fc.weight"], agg["fc.weight"] - 0.5 * agg["fc.weight"].mean())


def test_model_scope_uses_one_scalar_mean() -> None:
    models = random_models(2, 6)
    agg, info = fake_round(models, [0, 1], random_models(1, 7)[0])
    shifted, diag = FedShift({1}, scope="model")(agg, info)
    m = torch.cat([agg["conv.weight"].reshape(-1), agg["fc.weight"]]).double().mean()
    torch.testing.assert_close(shifted["fc.weight"].double(), agg["fc.weight"].double() - 0.5 * m, atol=1e-6, rtol=0)
    assert list(diag["shift/dfa2"]) == ["model"] and diag["shift/numel"] == {"model": 17.0}
    with pytest.raises(ValueError, match="scope"):
        FedShift({1}, scope="channel")


def test_divergence_monitor() -> None:
    models = random_models(2, 8)
    before = random_models(1, 9)[0]
    agg, info = fake_round(models, [0, 1], before)
    _, diag = DivergenceMonitor()(agg, info)
    assert diag["div/global"]["fc.weight"] == pytest.approx(float((agg["fc.weight"] - before["fc.weight"]).norm()), rel=1e-6)
    drift = np.mean([float((m["fc.weight"] - before["fc.weight"]).norm()) for m in models])
    assert diag["div/drift"]["fc.weight"] == pytest.approx(drift, rel=1e-6)


# --------------------------------------------------------------------------- sampler, split, policies

def test_stratified_sampler() -> None:
    inf = inferior_clients(20)
    sampler = StratifiedSampler(inf, 20, 3, 2)
    rng = np.random.default_rng(0)
    seen = set()
    for r in range(50):
        ids = sampler(r, 20, rng)
        assert len(set(ids)) == 5 and sum(int(i) in inf for i in ids) == 3
        seen |= set(ids.tolist())
    assert seen == set(range(20))
    with pytest.raises(ValueError, match="cannot pick"):
        StratifiedSampler(inf, 20, 11, 2)
    with pytest.raises(ValueError, match="built for"):
        sampler(0, 10, rng)


def test_parity_shards() -> None:
    labels = np.repeat(np.arange(10), 37)
    parts = parity_shards(labels, 20, 0)
    assert len(parts) == 20
    for client, idx in enumerate(parts):
        held = set(labels[idx].tolist())
        assert len(held) == 2 and all(lab % 2 == client % 2 for lab in held)
    counts = np.bincount(np.concatenate(parts), minlength=len(labels))
    assert (counts == 2).all()  # every shard on exactly two clients
    assert [p.tolist() for p in parity_shards(labels, 20, 0)] == [p.tolist() for p in parts]
    with pytest.raises(ValueError, match="multiple"):
        parity_shards(labels, 15, 0)
    with pytest.raises(ValueError, match="C even"):
        parity_shards(np.repeat(np.arange(3), 5), 6, 0)


def test_inferior_rules() -> None:
    assert inferior_clients(6) == {1, 3, 5}
    half = inferior_clients(10, "random_half", rng=0)
    assert len(half) == 5 and half == inferior_clients(10, "random_half", rng=0)
    with pytest.raises(ValueError, match="unknown inferior rule"):
        inferior_clients(10, "slowest")


def test_mixed_precision_and_fedef_uplink() -> None:
    q = KMeansQuantizer(4)
    policy = mixed_uplink(q, {1, 3}, 4).codec
    assert policy(LinkContext(0, 1, [])) is q and policy(LinkContext(0, 3, [])) is q
    assert isinstance(policy(LinkContext(0, 2, [])), Identity) and isinstance(policy(LinkContext(0, 0, [])), Identity)
    with pytest.raises(ValueError, match="uplink policy"):
        policy(LinkContext(0, None, []))
    with pytest.raises(ValueError, match="outside 0..3"):
        mixed_uplink(q, {1, 5}, 4)
    assert isinstance(mixed_uplink(None, {1}, 4).codec, Identity)  # the all-fp32 uplink
    algo, link = algorithm_and_uplink("fedef", q, {1}, 2)
    assert algo.name == "fedavg" and link.error_feedback and link.payload == "weights"
    algo, link = algorithm_and_uplink("scaffold", q, {1}, 2, coef="samples")
    assert algo.coef == "samples" and not link.error_feedback
    with pytest.raises(ValueError, match="unknown FedShift baseline"):
        algorithm_and_uplink("feddyn", q, {1}, 2)


# ------------------------------------------------------------------------------------------ real runs

@pytest.fixture(scope="module")
def digits_setup():
    from fedlib import FederatedData, load_dataset

    ds = load_dataset("digits")
    inf = inferior_clients(10)
    return FederatedData(ds, parity_shards(ds.y_train.numpy(), 10, 0)), inf


def short_run(digits_setup, name: str, hooks, codec=KMeansQuantizer(2), rounds: int = 4):
    from fedlib import LocalTraining, run_federation

    data, inf = digits_setup
    algo, uplink = algorithm_and_uplink(name, codec, inf, data.num_clients)
    return run_federation(lambda: build_model("mlp", (1, 8, 8), 10, hidden=(32,), bias=False), data, algo, rounds,
                          local=LocalTraining(lr=0.05, batch_size=32, epochs=1), sampler=StratifiedSampler(inf, 10, 2, 2),
                          uplink=uplink, aggregation_weights="uniform", hooks=hooks, progress=False)


def test_real_run_shift_record(digits_setup) -> None:
    res = short_run(digits_setup, "fedavg", [FedShift(inferior_clients(10))])
    assert (res.rounds["shift/coef"] == 0.5).all()
    shift = res.layers[res.layers["key"].str.startswith("shift/")]
    assert (shift["client"] == SERVER).all()
    for layer in ("layers.0.weight", "layers.1.weight"):
        r = shift[shift["layer"] == layer].pivot(index="round", columns="key", values="value")
        assert r.index.tolist() == [1, 2, 3, 4]
        np.testing.assert_allclose(r["shift/m_new"], 0.5 * r["shift/m_agg"], rtol=1e-5, atol=1e-9)
        # the next round starts from this round's shifted model
        np.testing.assert_allclose(r["shift/m_prev"].iloc[1:], r["shift/m_new"].iloc[:-1], rtol=1e-6)
    mean_bias = res.layers[(res.layers["key"] == "mean_bias") & (res.layers["client"] != SERVER)]
    assert len(mean_bias) and mean_bias["value"].abs().max() < 1e-6  # K-means uploads keep every layer's mean


def test_fedef_residual_makes_uploads_unbiased_over_time(digits_setup) -> None:
    """Fed-EF's recursion (send Q(x + e), e <- x + e - DeQ) telescopes: sum_t DeQ_t = sum_t x_t - e_T, so the
    time-averaged upload of a fixed vector converges to it even at 1 bit; then a short Fed-EF run."""
    from fedlib.engine.channel import transmit

    codec = KMeansQuantizer(1)
    x = {"w": torch.randn(200, generator=torch.Generator().manual_seed(0))}
    e = {"w": torch.zeros(200)}
    total = torch.zeros(200)
    for _ in range(50):
        sent = {"w": x["w"] + e["w"]}
        dec = transmit(codec, sent, "layer", None).decoded
        e = {"w": sent["w"] - dec["w"]}
        total += dec["w"]
    assert float((total / 50 - x["w"]).abs().max()) <= float(e["w"].abs().max()) / 50 + 1e-6
    res = short_run(digits_setup, "fedef", [], rounds=2)
    assert len(res.rounds) == 2 and res.rounds["bits_up"].gt(0).all()


# ------------------------------------------------------------------------------------------ profiles

@pytest.mark.parametrize("profile", ["cpu", "gpu", "full"])
def test_notebook_profiles_name_known_parameters_and_datasets(profile: str) -> None:
    from pathlib import Path

    import yaml

    from fedlib.paper import params_class

    from fedlib.data import available_datasets

    root = Path(__file__).resolve().parents[1]
    parameters = set(params_class("fedshift").names())
    values = yaml.safe_load((root / "notebooks" / "profiles" / "fedshift" / f"{profile}.yaml").read_text())
    assert set(values) <= parameters, set(values) - parameters
    assert values["profile"] == profile and values["dataset"] in available_datasets()
    assert set(values.get("algorithms", [])) <= {"fedavg", "fedprox", "scaffold", "fedef"}
    assert set(values.get("quantizers", [])) <= {"kmeans", "uniform"}
    assert values["num_clients"] % 10 == 0  # parity_shards needs a multiple of the 10 classes
