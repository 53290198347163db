"""theory/fedshift.py: Eqs. 9-11, Theorem 2 printed vs corrected (on synthetic rounds and a real run),
Theorem 1's sign change, the quadratic stall, Table III arithmetic."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import sympy as sp

from fedlib.core.contracts import SERVER, layer_table
from theory import fedshift as th


def test_eq9_eq10_eq11_identities() -> None:
    for K, I, P in [(4, 2, 3), (3, 0, 2), (3, 3, 2), (5, 2, 1)]:
        out = th.eq9_eq10_identity(K, I, P)
        assert out["eq9_minus_eq10"] == sp.zeros(1, P)
        assert out["mean_minus_S_over_K_m"] == 0
    with pytest.raises(ValueError):
        th.eq9_eq10_identity(3, 4, 2)


def test_theorem2_derivation_matches_appendix_not_main_text() -> None:
    d = th.theorem2_derivation()
    assert d["derived_minus_corrected"] == 0
    assert d["derived_minus_printed"] != 0
    # Eq. 31's threshold (K+S)/(2K): 3/4 at I = S = K/2, the paper's example
    cond = th.theorem2_condition()
    assert sp.simplify(cond.subs({th.I_: 5, th.K_: 10, th.m0: 0}) - sp.Rational(3, 4)) == 0


def synthetic_rounds(seed: int, n_rounds: int = 5, P: int = 40, K: int = 10,
                     I: int = 5) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(rounds, layer table) built exactly as the FedShift hook records them, from random float32 tensors of
    one layer "w"."""
    rng = np.random.default_rng(seed)
    rounds, layers = [], []
    for r in range(n_rounds):
        prev = rng.normal(0.05, 1, P).astype(np.float32)
        agg = (prev + rng.normal(0.02, 0.1, P)).astype(np.float32)
        new = (agg.astype(np.float64) - I / K * agg.astype(np.float64).mean()).astype(np.float32)
        p64, a64, n64 = prev.astype(np.float64), agg.astype(np.float64), new.astype(np.float64)
        rounds.append({"round": r + 1, "shift/I": I, "shift/K": K, "shift/coef": I / K})
        per_layer = {"numel": P, "m_prev": p64.mean(), "m_agg": a64.mean(), "m_new": n64.mean(),
                     "dfa2": ((a64 - p64) ** 2).sum(), "dfs2": ((n64 - p64) ** 2).sum()}
        layers += [{"round": r + 1, "client": SERVER, "layer": "w", "key": f"shift/{k}", "value": v}
                   for k, v in per_layer.items()]
    return pd.DataFrame(rounds), layer_table(layers)


def test_check_theorem2_corrected_holds_printed_fails() -> None:
    chk = th.check_theorem2(*synthetic_rounds(0))
    assert chk["holds_corrected"].all()
    assert not chk["holds_printed"].any()
    assert chk["eq31_decidable"].all()
    assert (chk["eq31_predicts_shorter"] == chk["observed_shorter"]).all()


def test_check_theorem2_can_fail() -> None:
    """A record whose D_FS was not produced by the shift must fail the corrected identity too."""
    rounds, layers = synthetic_rounds(1)
    layers.loc[layers["key"] == "shift/dfs2", "value"] *= 1.01
    assert not th.check_theorem2(rounds, layers)["holds_corrected"].any()
    with pytest.raises(ValueError, match="shift/dfa2"):
        th.check_theorem2(rounds, layers[layers["key"] != "shift/dfa2"])


def test_check_theorem2_skips_the_rounds_of_a_diverged_run() -> None:
    """Non-finite recorded quantities (a run that diverged in round 3) are no evidence either way, and no crash."""
    rounds, layers = synthetic_rounds(2)
    diverged = (layers["round"] >= 3) & layers["key"].isin(["shift/m_agg", "shift/dfa2", "shift/dfs2"])
    layers.loc[diverged, "value"] = np.nan
    layers.loc[(layers["round"] == 4) & (layers["key"] == "shift/dfa2"), "value"] = np.inf
    chk = th.check_theorem2(rounds, layers)
    assert chk["round"].tolist() == [1, 2] and chk["holds_corrected"].all()
    layers.loc[layers["key"] == "shift/dfa2", "value"] = np.nan
    assert th.check_theorem2(rounds, layers).empty


def test_check_theorem2_on_a_real_run() -> None:
    from fedlib import FederatedData, LocalTraining, build_model, load_dataset, run_federation
    from fedlib.codecs.kmeans import KMeansQuantizer
    from fedlib.papers.fedshift import FedShift, StratifiedSampler, algorithm_and_uplink, inferior_clients, parity_shards

    ds = load_dataset("digits")
    inf = inferior_clients(10)
    algo, uplink = algorithm_and_uplink("fedavg", KMeansQuantizer(3), inf, 10)
    res = run_federation(lambda: build_model("mlp", (1, 8, 8), 10, hidden=(32,), bias=False),
                         FederatedData(ds, parity_shards(ds.y_train.numpy(), 10, 0)), algo, 5,
                         local=LocalTraining(lr=0.05, batch_size=32, epochs=1), sampler=StratifiedSampler(inf, 10, 2, 2),
                         uplink=uplink, aggregation_weights="uniform", hooks=[FedShift(inf)], progress=False)
    chk = th.check_theorem2(res.rounds, res.layers)
    assert len(chk) == 10  # 5 rounds x 2 layers
    assert chk[["layer", "round"]].values.tolist() == [[k, r] for k in ("layers.0.weight", "layers.1.weight")
                                                        for r in range(1, 6)]
    assert chk["holds_corrected"].all() and not chk["holds_printed"].any()


def test_theorem1_facts() -> None:
    f = th.theorem1_facts()
    assert f["main_minus_proof"] == 0
    assert f["eq20_minus_main"] != 0
    assert sp.simplify(f["D_tau_zero_at_tau"] - (th.eps + 2 - th.gamma)) == 0
    assert sp.simplify(f["limit_second_term_main"] + th.eps * th.L * th.B2 * th.M / 2) == 0
    assert sp.simplify(f["limit_second_term_eq20"] - th.L * th.B2 * th.M / (2 * (2 + 1 / th.eps))) == 0
    # numerically: positive before tau + gamma = eps + 2, negative after (mu = L = 1, beta = 2/mu)
    args = dict(gamma=7.0, eps=10.0, beta=2.0, mu=1.0, L=1.0, B1=1.0, B2=1.0, M=1.0, Delta1=1.0)
    assert th.theorem1_bound(4.0, *args.values()) > 0
    assert th.theorem1_bound(1e6, *args.values()) < 0


def test_quadratic_stall_matches_fixed_point() -> None:
    P, m_star = 50, 0.264
    centers = th.quadratic_problem(P, 10, m_star, 0)
    assert centers.mean() == pytest.approx(m_star)
    for lr in (0.1, 0.02):
        sim = th.simulate_quadratic(centers, 3000, 5, lr, 0.5, shift=True)
        pred = th.quadratic_fixed_point(m_star, P, 5, lr, 0.5)
        assert sim["gap"].iloc[-1] == pytest.approx(pred["gap"], rel=1e-6)
        assert sim["mean_w"].iloc[-1] == pytest.approx(pred["mean_fixed_point"], rel=1e-6)
        assert pred["gap"] < pred["constrained_gap"]
    fedavg = th.simulate_quadratic(centers, 300, 5, 0.1, 0.5, shift=False)
    assert fedavg["gap"].iloc[-1] < 1e-12
    decaying = th.simulate_quadratic(centers, 4000, 5, lambda t: 2 / (5 * t + 10), 0.5, shift=True)
    assert decaying["gap"].iloc[-1] == pytest.approx(P * m_star**2 / 2, rel=0.05)  # -> constrained minimiser


def test_table3_arithmetic() -> None:
    assert int(th.weight_kib(2_155_872, 4)) == 1052
    assert int(th.weight_kib(2_155_872, 8)) == 2105
    assert int(th.weight_kib(2_155_872, 32)) == 8421
    assert th.threshold_ratio() == pytest.approx(7.78, abs=0.005)
