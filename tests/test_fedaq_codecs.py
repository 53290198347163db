"""fedlib.codecs.uniform: exact bits, unbiasedness and variance by Monte Carlo, Eq. (26); AdaQuantFL's schedule
(fedlib.codecs.policies).

Monte Carlo tolerances are 5 standard errors (fixed seeds). Many independent draws come from ONE encode of
x repeated M times: repetition leaves min and max, hence the levels, unchanged.
"""
from __future__ import annotations

import math

import pytest
import torch

from fedlib.codecs.policies import AdaQuantFL
from fedlib.codecs.uniform import (
    BITLENGTH_BITS,
    RANGE_BITS,
    FedAQQuantizer,
    UniformQuantizer,
    fedaq_bits,
    quantize,
)
from fedlib.engine.channel import LinkContext, transmit

Z = 5.0


def _x(d: int = 500, seed: int = 0) -> torch.Tensor:
    return torch.randn(d, generator=torch.Generator().manual_seed(seed))


def _draws(codec, x: torch.Tensor, m: int, seed: int = 1) -> torch.Tensor:
    """(m, d) independent quantizations of x, decoded, in float64."""
    msg = codec.encode(x.repeat(m), torch.Generator().manual_seed(seed))
    return codec.decode(msg).to(torch.float64).view(m, -1)


def _bin_moments(x: torch.Tensor, bits: int) -> tuple[torch.Tensor, float]:
    """Exact per-coordinate variance (h'' - x)(x - h') and the bin width, computed by hand in float64."""
    x64 = x.to(torch.float64)
    lo, hi = float(x.min()), float(x.max())
    step = (hi - lo) / (2**bits - 1)
    h_low = lo + torch.floor((x64 - lo) / step) * step
    return (h_low + step - x64) * (x64 - h_low), step


@pytest.mark.parametrize("bits", [1, 2, 3, 8])
def test_fixed_bits_are_exact(bits):
    x = _x(777)
    msg = UniformQuantizer(bits, rounding="stochastic").encode(x, torch.Generator().manual_seed(0))
    assert msg.bits == 777 * bits + RANGE_BITS
    assert msg.payload_bits == 777 * bits
    assert msg.info["range"] == pytest.approx(float(x.max() - x.min()))


def test_decoded_values_lie_on_the_levels_and_keep_the_extremes():
    x, bits = _x(1000), 3
    codec = UniformQuantizer(bits, rounding="stochastic")
    y = codec.decode(codec.encode(x, torch.Generator().manual_seed(0))).to(torch.float64)
    lo, hi = float(x.min()), float(x.max())
    k = (y - lo) / ((hi - lo) / 7)
    assert torch.allclose(k, torch.round(k), atol=1e-4)
    assert set(torch.round(k).long().tolist()) <= set(range(8))
    assert float(y.min()) == pytest.approx(lo, abs=1e-6) and float(y.max()) == pytest.approx(hi, abs=1e-6)


@pytest.mark.parametrize("bits", [1, 2, 4])
def test_unbiased_by_monte_carlo(bits):
    x, m = _x(400), 4000
    draws = _draws(UniformQuantizer(bits, rounding="stochastic"), x, m)
    var, step = _bin_moments(x, bits)
    err = draws.mean(0) - x.to(torch.float64)
    slack = 1e-6 * float(x.max() - x.min())  # fp32 decoding
    # every coordinate within 5 of its own standard errors
    assert bool(torch.all(err.abs() <= Z * torch.sqrt(var / m) + slack))
    # and the total bias within 5 standard errors of the sum
    assert abs(float(err.sum())) <= Z * math.sqrt(float(var.sum()) / m) + x.numel() * slack


@pytest.mark.parametrize("bits", [1, 3, 6])
def test_variance_matches_exact_formula_and_bounds(bits):
    x, m = _x(400, seed=3), 3000
    draws = _draws(UniformQuantizer(bits, rounding="stochastic"), x, m, seed=4)
    sq = ((draws - x.to(torch.float64)) ** 2).sum(1)  # ||Q(x) - x||^2, one per draw
    var, step = _bin_moments(x, bits)
    exact = float(var.sum())
    assert abs(float(sq.mean()) - exact) <= Z * float(sq.std()) / math.sqrt(m)
    d, s, R = x.numel(), 2**bits - 1, float(x.max() - x.min())
    assert exact <= d * step**2 / 4  # worst case per coordinate: step^2 / 4
    assert d * step**2 / 4 <= d * R**2 / s**2  # Assumption 1 (q_s = d/s^2) holds, 4x looser


def test_biased_rounding_fails_the_unbiasedness_check():
    """The Monte Carlo check can fail: round-to-nearest is deterministic and biased, error <= step/2."""
    x, bits, m = _x(400), 2, 200
    draws = _draws(UniformQuantizer(bits, rounding="nearest"), x, m)
    var, step = _bin_moments(x, bits)
    err = draws.mean(0) - x.to(torch.float64)
    assert torch.equal(draws[0], draws[-1])
    assert float(err.abs().max()) <= step / 2 + 1e-6
    assert not bool(torch.all(err.abs() <= Z * torch.sqrt(var / m) + 1e-6))


def test_constant_tensor_costs_side_information_only():
    x = torch.full((50,), 0.3)
    for codec, side in ((UniformQuantizer(4, rounding="stochastic"), RANGE_BITS), (FedAQQuantizer(0.01), RANGE_BITS + BITLENGTH_BITS)):
        msg = codec.encode(x)
        assert msg.bits == side and msg.info["bits_per_value"] == 0
        assert torch.equal(codec.decode(msg), x)


def test_same_generator_seed_same_message():
    x, codec = _x(300), UniformQuantizer(3, rounding="stochastic")
    a = codec.decode(codec.encode(x, torch.Generator().manual_seed(5)))
    b = codec.decode(codec.encode(x, torch.Generator().manual_seed(5)))
    assert torch.equal(a, b)


@pytest.mark.parametrize("r,res,expected", [
    (1.0, 0.005, (8, False)),  # log2(200) = 7.64
    (0.64, 0.005, (7, False)),  # log2(128) = 7 exactly
    (0.004, 0.005, (1, True)),  # ceil(log2(0.8)) = 0 -> b_min
    (1e6, 1e-6, (32, True)),  # log2(1e12) = 39.9 -> b_max
])
def test_fedaq_bit_rule_eq26(r, res, expected):
    assert fedaq_bits(r, res) == expected


def test_fedaq_codec_uses_the_current_range():
    codec = FedAQQuantizer(0.005)
    x = torch.linspace(0, 1, 101)  # R = 1 -> 8 bits
    msg = codec.encode(x, torch.Generator().manual_seed(0))
    assert msg.info["bits_per_value"] == 8 and msg.bits == 101 * 8 + RANGE_BITS + BITLENGTH_BITS
    msg = codec.encode(0.1 * x, torch.Generator().manual_seed(0))  # R = 0.1 -> ceil(log2 20) = 5
    assert msg.info["bits_per_value"] == 5 and msg.info["clamped"] == 0
    step = msg.info["range"] / (2**5 - 1)
    assert step <= 0.005 * 0.1 / (0.1 - 0.005) + 1e-12  # within the ceiling factor of alpha


def test_layer_granularity_sums_bits_over_layers():
    params = {"a": _x(30).view(5, 6), "b": _x(7, seed=1)}
    tx = transmit(FedAQQuantizer(0.01), params, "layer", torch.Generator().manual_seed(0))
    per = [FedAQQuantizer(0.01).encode(t.reshape(-1)).bits for t in params.values()]
    assert tx.bits == sum(per)
    assert tx.payload_bits == sum(FedAQQuantizer(0.01).encode(t.reshape(-1)).payload_bits for t in params.values())
    deterministic = ("bits_per_value", "range", "clamped")  # the other keys depend on the rounding draws
    assert {k: tx.info[k] for k in deterministic} == {
        k: {name: FedAQQuantizer(0.01).encode(t.reshape(-1)).info[k] for name, t in params.items()} for k in deterministic}


def test_model_granularity_info_is_one_layer_named_model():
    params = {"a": _x(30).view(5, 6), "b": _x(7, seed=1)}
    tx = transmit(FedAQQuantizer(0.01), params, "model", torch.Generator().manual_seed(0))
    msg = FedAQQuantizer(0.01).encode(torch.cat([_x(30), _x(7, seed=1)]), torch.Generator().manual_seed(0))
    assert tx.info == {k: {"model": v} for k, v in msg.info.items()} and tx.bits == msg.bits


def test_adaquantfl_schedule():
    policy = AdaQuantFL(s0=3)
    ctx = lambda hist: LinkContext(round=len(hist), client=0, history=hist)  # noqa: E731
    assert policy.levels([]) == 3 and policy(ctx([])).bits == 2  # s0 = 3 bins -> 2 bits
    hist = [{"train_loss": 2.0}, {"train_loss": 0.5}]
    assert policy.levels(hist) == 6  # ceil(sqrt(2.0 / 0.5) * 3)
    assert policy(ctx(hist)).bits == 3  # ceil(log2(7))
    hist = [{"train_loss": 2.0}, {"train_loss": 2.0 / 1000}]
    assert policy.levels(hist) == math.ceil(math.sqrt(1000) * 3) and policy.bits(hist) == 7
    assert AdaQuantFL(s0=3, b_max=4).bits(hist) == 4


@pytest.mark.parametrize("make", [
    lambda: UniformQuantizer(0, rounding="stochastic"), lambda: UniformQuantizer(33, rounding="stochastic"), lambda: UniformQuantizer(2.5, rounding="stochastic"),
    lambda: UniformQuantizer(4, rounding="floor"), lambda: FedAQQuantizer(0.0),
    lambda: FedAQQuantizer(0.01, b_min=5, b_max=4), lambda: AdaQuantFL(s0=0),
])
def test_bad_parameters_raise(make):
    with pytest.raises(ValueError):
        make()


def test_adaquantfl_needs_the_loss_column():
    with pytest.raises(ValueError, match="train_loss"):
        AdaQuantFL().levels([{"test_acc": 0.5}])


def test_quantize_rejects_empty():
    with pytest.raises(ValueError):
        quantize(torch.empty(0), 2)


@pytest.mark.parametrize("r", [float("nan"), float("inf")])
def test_fedaq_bits_of_a_diverged_range_is_the_widest_code_flagged_clamped(r):
    assert fedaq_bits(r, 1e-2, b_max=8) == (8, True)


@pytest.mark.parametrize("loss", [float("nan"), float("inf")])
def test_adaquantfl_on_a_diverged_loss_takes_the_widest_code_instead_of_raising(loss):
    """A diverged run's NaN/inf training loss must not stop the run (the notebook records the divergence)."""
    policy = AdaQuantFL(s0=3, b_max=8)
    for hist in ([{"train_loss": 2.0}, {"train_loss": loss}], [{"train_loss": loss}, {"train_loss": 1.0}]):
        assert policy.levels(hist) == 2**8 - 1 and policy.bits(hist) == 8
    with pytest.raises(ValueError, match="positive losses"):
        policy.levels([{"train_loss": 2.0}, {"train_loss": -1.0}])
