"""MUCSC / B-MUCSC and the baseline codecs: bits on hand-computed cases, unbiasedness by Monte Carlo, levels."""
from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
import torch

from fedlib.codecs import BMUCSC, MUCSC, QSGD, STC, SignSGD, TopK
from fedlib.codecs.mucsc import (
    compression_error,
    descent_levels,
    error_gradient,
    id_bits,
    optimal_levels,
    pack_ids,
    paper_levels,
    stochastic_round,
    uniform_levels,
    unpack_ids,
)
from theory.mucsc import encodings, is_unbiased, monte_carlo_rounding




def laplace(n: int, seed: int = 0, scale: float = 1e-2) -> torch.Tensor:
    """Heavy-tailed float32 test vector, like a model update."""
    return torch.from_numpy(np.random.default_rng(seed).laplace(0, scale, n)).float()


# ------------------------------------------------------------------------------ bits, by hand
@pytest.mark.parametrize("codec, d, bits", [
    (MUCSC(4), 10, 4 * 32 + 2 * 10),
    (MUCSC(16), 1000, 16 * 32 + 4 * 1000),
    (MUCSC(5), 7, 5 * 32 + 3 * 7),  # ceil(log2 5) = 3
    (BMUCSC(256, 0.01), 1000, 10 * (8 + 10) + 32 * 257),  # d0 = 10, ceil(log2 1000) = 10, Z levels + the mean
    (BMUCSC(16, 0.05), 101, 6 * (4 + 7) + 32 * 17),  # d0 = ceil(5.05) = 6
    (TopK(0.01), 1000, 10 * (32 + 10)),
    (STC(0.03), 1000, 30 * (1 + 10) + 32),
    (QSGD(7, 512), 1000, 1000 * 4 + 2 * 32),  # sign + 3-bit level, two bucket norms
    (QSGD(1, None), 64, 64 * 2 + 32),
    (SignSGD(), 1000, 1000 + 32),
])
def test_bits_hand_computed(codec, d, bits):
    msg = codec.encode(laplace(d), torch.Generator().manual_seed(0))
    assert msg.bits == bits


def test_id_bits():
    assert [id_bits(z) for z in (1, 2, 3, 4, 5, 8, 16, 17, 256, 1_369_738)] == [1, 1, 2, 2, 3, 3, 4, 5, 8, 21]
    with pytest.raises(ValueError):
        id_bits(0)


@pytest.mark.parametrize("bits", [1, 2, 3, 4, 8])
def test_packed_ids_have_the_counted_size(bits):
    ids = torch.from_numpy(np.random.default_rng(bits).integers(0, 2**bits, 1001))
    packed = pack_ids(ids, bits)
    assert packed.nbytes == math.ceil(bits * 1001 / 8)
    assert torch.equal(unpack_ids(packed, bits, 1001), ids)


def test_mucsc_message_matches_its_bits_when_packed():
    x = laplace(999)
    codec = MUCSC(8)
    msg = codec.encode(x, torch.Generator().manual_seed(1))
    levels, ids = msg.payload
    sent_bits = 32 * levels.numel() + 8 * pack_ids(ids, 3).nbytes
    assert sent_bits == msg.bits + (-3 * 999) % 8  # equal up to the last byte's padding


# ------------------------------------------------------------------------------ MUCSC behaviour
def test_levels_span_min_max_and_decoded_values_are_levels():
    x = laplace(500, seed=3)
    codec = MUCSC(16)
    msg = codec.encode(x, torch.Generator().manual_seed(0))
    levels, _ = msg.payload
    assert levels[0] == x.min() and levels[-1] == x.max()
    assert torch.all(levels[1:] >= levels[:-1])
    y = codec.decode(msg)
    assert torch.isin(y, levels).all()
    # every element lands on one of the two levels around it
    z = torch.searchsorted(levels, x, right=True).clamp(1, 15) - 1
    assert torch.all((y == levels[z]) | (y == levels[z + 1]))


def test_constant_vector_and_values_on_levels_are_exact():
    codec = MUCSC(4)
    x = torch.full((50,), 0.3)
    assert torch.equal(codec.decode(codec.encode(x)), x)
    levels = torch.tensor([0.0, 1.0, 2.0, 3.0], dtype=torch.float64)
    on = torch.tensor([0.0, 1.0, 2.0, 3.0, 1.0], dtype=torch.float64)
    ids = stochastic_round(levels, on, torch.Generator().manual_seed(0))
    assert torch.equal(levels[ids], on)


def test_same_generator_same_message():
    x = laplace(300)
    a = MUCSC(8).encode(x, torch.Generator().manual_seed(5)).payload
    b = MUCSC(8).encode(x, torch.Generator().manual_seed(5)).payload
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_mucsc_unbiased_and_error_equals_J_by_monte_carlo():
    x = laplace(2000, seed=7).double()
    mc = monte_carlo_rounding(MUCSC(8), x, draws=1000, seed=11)
    # E[R (mean - U)^2 / J_m] = 1 per element when unbiased; tested at 5 standard errors
    assert abs(mc["mean_sq_z"] - 1) < 5 * mc["mean_sq_z_se"]
    assert abs(mc["sum_bias_z"]) < 5 and mc["max_bias_on_deterministic"] < 1e-12
    assert is_unbiased(mc)
    assert mc["J_empirical"] == pytest.approx(mc["J_analytic"], abs=5 * mc["J_stderr"])


def test_monte_carlo_detects_bias():
    class Shifted(MUCSC):
        def decode(self, msg):
            return super().decode(msg) + 1e-4  # 1% of the data's scale: caught by the sum

    class Inflated(MUCSC):
        def decode(self, msg):
            return 1.1 * super().decode(msg)  # sign-symmetric, the sum barely moves: caught per element

    x = laplace(2000, seed=7).double()
    shifted = monte_carlo_rounding(Shifted(8), x, draws=300)
    assert not is_unbiased(shifted) and shifted["sum_bias_z"] > 5
    inflated = monte_carlo_rounding(Inflated(8), x, draws=300)
    assert not is_unbiased(inflated) and inflated["mean_sq_z"] > 1 + 5 * inflated["mean_sq_z_se"]


def test_error_formula_expanded_and_direct_agree():
    x = laplace(400, seed=2).double()
    levels = torch.tensor([float(x.min()), -0.01, 0.0, 0.004, float(x.max())], dtype=torch.float64)
    direct = float(sum((levels[z + 1] - v) * (v - levels[z]) for v, z in
                       zip(x, torch.searchsorted(levels, x, right=True).clamp(1, 4) - 1)))
    assert float(compression_error(levels, x)) == pytest.approx(direct, rel=1e-12)


def test_gradient_eq9_matches_finite_difference():
    x = laplace(300, seed=4).double()
    levels = uniform_levels(x, 6)
    grad = error_gradient(levels, x)
    gap = float((x[:, None] - levels[None, 1:-1]).abs().min())  # stay within one linear piece of J
    eps = gap / 4
    for z in range(1, 5):
        up, down = levels.clone(), levels.clone()
        up[z] += eps
        down[z] -= eps
        fd = (float(compression_error(up, x)) - float(compression_error(down, x))) / (2 * eps)
        assert fd == pytest.approx(float(grad[z - 1]), rel=1e-6)


def test_optimal_levels_match_brute_force():
    x = torch.from_numpy(np.random.default_rng(0).normal(size=11))
    levels, j = optimal_levels(x, 4)
    values = np.sort(x.numpy())
    brute = min(float(compression_error(torch.tensor([values[0], a, b, values[-1]]), x))
                for a, b in itertools.combinations(values[1:-1], 2))
    assert j == pytest.approx(brute, rel=1e-9)
    assert float(compression_error(levels, x)) == pytest.approx(j, rel=1e-9)


def test_optimal_below_paper_below_uniform():
    x = laplace(400, seed=9).double()
    for z in (4, 8, 16):
        j_uniform = float(compression_error(uniform_levels(x, z), x))
        _, paper = paper_levels(x, z)
        _, j_opt = optimal_levels(x, z)
        assert j_opt <= paper["J"] * (1 + 1e-9) and paper["J"] <= j_uniform * (1 + 1e-12)
        assert paper["J_init"] == pytest.approx(j_uniform)
    assert j_opt < 0.6 * j_uniform  # heavy tails: adaptive levels matter


def test_few_distinct_values_are_exact_under_the_optimum():
    x = torch.tensor([0.0, 1.0, 1.0, 2.0], dtype=torch.float64)
    levels, j = optimal_levels(x, 4)
    assert j == 0.0 and levels.numel() == 4


def test_paper_step_rule_divides_alpha_when_a_level_leaves_the_range():
    # skewed data: dJ/dr_z sums over thousands of elements, so alpha = 1e-3 overshoots the range twice
    x = torch.from_numpy(np.random.default_rng(1).exponential(1.0, 100_000))
    _, info = paper_levels(x, 8, iters=1)
    assert info["alpha"] == pytest.approx(1e-5)
    assert info["J"] < info["J_init"]


def test_gauss_seidel_and_random_init_variants_run():
    x = laplace(300, seed=5).double()
    gen = torch.Generator().manual_seed(0)
    for kw in ({"sweep": "gauss_seidel"}, {"init": "random", "keep_best": False}):
        levels, info = paper_levels(x, 8, gen=gen, **kw)
        assert levels[0] == x.min() and levels[-1] == x.max() and torch.all(levels[1:] >= levels[:-1])
        assert info["J"] == pytest.approx(float(compression_error(levels, x)))


def test_level_methods_through_the_codec():
    x = laplace(300, seed=6)
    js = {m: MUCSC(8, levels=m).encode(x).info["J"] for m in ("uniform", "paper", "optimal")}
    assert js["optimal"] <= js["paper"] <= js["uniform"]


# ------------------------------------------------------------------------------ B-MUCSC
def test_bmucsc_super_cluster_is_the_mean_and_kept_are_top():
    x = laplace(1000, seed=8)
    codec = BMUCSC(16, 0.05)
    msg = codec.encode(x, torch.Generator().manual_seed(0))
    y = codec.decode(msg)
    top = torch.topk(x.abs(), 50).indices
    rest = torch.ones(1000, dtype=torch.bool)
    rest[top] = False
    assert torch.allclose(y[rest], x[rest].double().mean().float().expand(950))
    assert set(msg.payload[0].tolist()) == set(top.tolist())


def test_bmucsc_bias_measured():
    x = laplace(2000, seed=3).double()
    mc = monte_carlo_rounding(BMUCSC(16, 0.02), x, draws=1500, seed=2)
    rest = x[x.abs().argsort()[:-40]]  # the 1960 smallest |U|: sent as their mean, no noise
    assert mc["max_bias_on_deterministic"] == pytest.approx(float((rest - rest.mean()).abs().max()), rel=1e-5)
    assert mc["max_bias_on_deterministic"] > 1e-2  # biased per coordinate: the bias is the distance to the mean
    assert not is_unbiased(mc)
    assert abs(mc["mean_sq_z"] - 1) < 5 * mc["mean_sq_z_se"]  # the 40 kept elements: MUCSC, unbiased
    assert abs(mc["sum_bias_z"]) < 5.0  # and the sum is unbiased


# ------------------------------------------------------------------------------ baselines
def test_topk_and_stc_hand_case():
    x = torch.tensor([0.1, -3.0, 0.5, 2.0, -0.2])
    assert torch.equal(TopK(0.4).decode(TopK(0.4).encode(x)), torch.tensor([0.0, -3.0, 0.0, 2.0, 0.0]))
    assert torch.allclose(STC(0.4).decode(STC(0.4).encode(x)), torch.tensor([0.0, -2.5, 0.0, 2.5, 0.0]))


def test_sign_hand_case():
    x = torch.tensor([1.0, -3.0, 0.0, 2.0])
    assert torch.equal(SignSGD().decode(SignSGD().encode(x)), torch.tensor([1.5, -1.5, 1.5, 1.5]))


def test_qsgd_unbiased_by_monte_carlo():
    x = laplace(300, seed=12).double()
    codec, gen, draws = QSGD(7, 64), torch.Generator().manual_seed(3), 3000
    ys = torch.stack([codec.decode(codec.encode(x, gen)) for _ in range(draws)])
    z = (ys.mean(0) - x).abs() / (ys.std(0) / math.sqrt(draws)).clamp_min(1e-30)
    assert float(z.max()) < 5.0


@pytest.mark.parametrize("make", [lambda: MUCSC(1), lambda: MUCSC(8, levels="kmeans"), lambda: MUCSC(8, iters=-1),
                                  lambda: BMUCSC(frac=0.0), lambda: TopK(1.5), lambda: STC(0.0), lambda: QSGD(0),
                                  lambda: QSGD(7, bucket=0)])
def test_bad_parameters_raise(make):
    with pytest.raises(ValueError):
        make()


def test_bad_level_options_raise():
    x = laplace(10)
    with pytest.raises(ValueError, match="init"):
        paper_levels(x, 4, init="kmeans++")
    with pytest.raises(ValueError, match="sweep"):
        paper_levels(x, 4, sweep="newton")
    with pytest.raises(ValueError, match="max_distinct"):
        optimal_levels(laplace(100), 4, max_distinct=50)


# ------------------------------------------------------------------------------ level search (issue 13 finding c)
def test_descent_moves_a_level_to_its_exact_coordinate_minimiser_by_hand():
    # levels 0, r, 1 with elements 0.1, 0.2, 0.9 inside: S = sum (v - 0) = 1.2, b - a = 1, floor(1.2) = 1 element above
    # r, so r = 0.2; J(0.2) = 0.1*0.1 + 0 + 0.1*0.7 = 0.08 is below J at the other data values (0.1: 0.09, 0.9: 0.23)
    x = torch.tensor([0.0, 0.1, 0.2, 0.9, 1.0], dtype=torch.float64)
    levels, info = descent_levels(x, 3)
    assert levels.tolist() == [0.0, 0.2, 1.0]
    assert info["J"] == pytest.approx(0.08) and info["J"] <= info["J_init"]
    grid = torch.linspace(0.0, 1.0, 2001, dtype=torch.float64)
    brute = min(float(compression_error(torch.tensor([0.0, float(r), 1.0], dtype=torch.float64), x)) for r in grid)
    assert info["J"] == pytest.approx(brute, abs=1e-12)


def test_descent_is_coordinatewise_optimal_and_matches_the_optimum_on_small_vectors():
    x = laplace(1500, seed=4).double()
    for z in (4, 8):
        levels, info = descent_levels(x, z)
        assert info["J"] == pytest.approx(float(compression_error(levels, x)), rel=1e-9)
        for k in range(1, z - 1):  # no single level can move to a data value with a lower J
            inside = x[(x > levels[k - 1]) & (x < levels[k + 1])]
            trial = [float(compression_error(torch.cat([levels[:k], v.view(1), levels[k + 1:]]), x)) for v in inside]
            assert info["J"] <= min(trial) + 1e-15
        _, j_opt = optimal_levels(x, z)
        assert j_opt <= info["J"] * (1 + 1e-9) and info["J"] < 1.02 * j_opt


def test_at_the_papers_d_algorithm_1_keeps_the_uniform_levels_and_descent_reaches_the_optimum():
    rng = np.random.default_rng(0)
    x = torch.from_numpy(rng.choice(rng.laplace(0, 1e-3, 2000), size=1_369_738))  # 2,000 distinct values: DP exact
    _, j_opt = optimal_levels(x, 16)
    _, paper = paper_levels(x, 16)
    _, descent = descent_levels(x, 16)
    assert paper["J"] == pytest.approx(paper["J_init"], rel=1e-9)  # Eq. (9) steps all leave the range: J/J_unif = 1
    assert descent["J"] / descent["J_init"] < 0.4 and descent["J"] <= 1.01 * j_opt


def test_descent_levels_are_data_values_so_elements_on_them_are_sent_exactly():
    x = laplace(800, seed=9)
    msg = MUCSC(8).encode(x, torch.Generator().manual_seed(0))
    levels, _ = msg.payload
    assert torch.isin(levels, x).all()
    mc = monte_carlo_rounding(MUCSC(8), x.double(), draws=400, seed=3)
    assert is_unbiased(mc)


@pytest.mark.parametrize("codec", [MUCSC(8), MUCSC(4, levels="paper"), BMUCSC(16, 0.05)], ids=repr)
def test_monte_carlo_draws_equal_encoding_again_each_time(codec):
    """`encodings` fits the levels once: each of its messages equals encode's own from the same generator."""
    x, gen = laplace(500, seed=4).double(), torch.Generator().manual_seed(9)
    plain = [codec.encode(x, gen) for _ in range(5)]
    for a, b in zip(plain, itertools.islice(encodings(codec, x, torch.Generator().manual_seed(9)), 5)):
        assert all(torch.equal(u, v) for u, v in zip(a.payload, b.payload))


def test_monte_carlo_refuses_levels_drawn_from_the_noise():
    random_start = MUCSC(4, levels="paper", init="random", keep_best=False)
    with pytest.raises(ValueError, match="its levels depend on the noise"):
        next(encodings(random_start, laplace(500, seed=4).double(), torch.Generator().manual_seed(9)))
