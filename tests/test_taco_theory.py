"""theory/taco.py: sympy statements, the over-correction boundaries against runs of the real code, Lemma 2."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import sympy as sp

from fedlib import report as R
from theory import taco as T

SETTINGS = [T.QuadraticSetting("K10_eta0.05", num_clients=4, dim=4, K=10, eta=0.05, seed=0),
            T.QuadraticSetting("K5_eta0.1", num_clients=4, dim=4, K=5, eta=0.1, seed=1)]


def test_taco_characteristic_polynomial_and_jury():
    poly = T.taco_characteristic_polynomial()
    assert sp.expand(poly - (T.lam**2 - (1 - T.s * T.Pbar + T.m) * T.lam + T.m)) == 0
    conds = T.jury_conditions(poly)
    assert [sp.simplify(c - e) for c, e in zip(conds, [1 - T.m, T.s * T.Pbar, 2 + 2 * T.m - T.s * T.Pbar])] == [0, 0, 0]


def test_spectral_radius_matches_closed_form_in_homogeneous_case():
    h = np.full((3, 2), 0.5)
    p = np.full(3, 1 / 3)
    P_, r = T.local_contraction(h, 10, 0.05)
    for gamma in (0.5, 1.5):
        m = gamma * r[0, 0]
        tr = 1 - P_[0, 0] + m
        roots = np.roots([1, -tr, m])
        assert T.taco_spectral_radius(h, p, np.full(3, gamma), 10, 0.05) == pytest.approx(np.abs(roots).max())
    assert T.taco_critical_gamma(h, p, 0.0, 10, 0.05) == pytest.approx(1 / r[0, 0])


def test_scaffold_homogeneous_threshold():
    out = T.scaffold_homogeneous()
    assert sp.simplify(out["drift_coefficient"] - out["expected"]) == 0
    assert out["small_step_threshold"] == 2
    # the symbolic (N+1)-dim Jacobian agrees: with equal curvature rho crosses 1 at a = 2/r
    h = np.full((3, 2), 0.8)
    _, r = T.local_contraction(h, 10, 0.05)
    a_star = 2 / r[0, 0]
    below = T.scaffold_spectral_radius(h, 0.95 * a_star, 10, 0.05)
    above = T.scaffold_spectral_radius(h, 1.05 * a_star, 10, 0.05)
    assert below < 1 < above


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: s.name)
@pytest.mark.parametrize("method", ["taco_uniform", "scaffold"])
def test_boundary_matches_simulation_on_both_sides(setting, method):
    rows = T.boundary_rows(setting, method, factors=(0.8, 1.25), rounds=60)
    assert rows["predicted"].tolist() == ["converges", "diverges"]
    assert rows["agree"].all(), rows.to_string()
    # the measured growth rate is the predicted spectral radius (5% here; the dominant mode is reached)
    np.testing.assert_allclose(rows["measured_rate"], rows["predicted_rho"], rtol=0.06)


def test_lemma2_printed_is_false_unless_beta_zero():
    out = T.lemma2_printed_vs_corrected()
    beta, eg, dt = sp.symbols("beta eta_g Dtilde_t", real=True)
    assert sp.simplify(out["printed_gap"].subs(beta, 0)) == 0
    assert sp.simplify(out["printed_gap"]) != 0
    assert sp.simplify(out["corrected_z"] + eg * dt / (1 - beta)) == 0


def test_lemma_checks_on_the_real_code():
    rows = T.lemma_checks(SETTINGS[0], beta=0.5, rounds=10)
    assert rows["lemma1_residual"].max() < 1e-4  # Lemma 1 holds (uniform weights, constant factor)
    assert rows["lemma2_corrected_residual"].max() < 1e-3
    assert rows["lemma2_printed_residual"].min() > 0.1  # the printed z misses by a visible fraction
    exact = T.lemma_checks(SETTINGS[0], beta=0.0, rounds=4)  # no correction: the printed lemma is right
    assert exact["lemma2_printed_residual"].max() < 1e-4


def test_y_term_and_corollary2():
    assert T.y_term(4)["all_equal"]
    lag = T.corollary2_lagrange(3)
    assert lag["proportional"]
    scope = T.theorem_scope()
    assert {"implies", "does not imply"} <= set(scope["relation"])


def test_empirical_rate_rejects_too_short_series():
    assert T.empirical_rate(0.5 ** np.arange(20)) == pytest.approx(0.5)
    with pytest.raises(ValueError):
        T.empirical_rate([1.0, np.inf, np.inf])


def test_fixed_point_prediction_and_tailored_bias():
    rows = T.fixed_point_rows(SETTINGS[0], rounds=120).set_index("method")
    fedavg, corrected = rows.loc["FedAvg"], rows.loc["constant correction 0.5, uniform weights"]
    assert fedavg["settled"] and corrected["settled"]
    assert fedavg["prediction_error"] < 1e-5 and corrected["prediction_error"] < 1e-5
    # the correction changes speed and stability, never the fixed point
    assert corrected["bias_from_optimum"] == pytest.approx(fedavg["bias_from_optimum"], rel=1e-4)
    # alpha-weighted aggregation ends farther from the optimum than FedAvg here (docs/taco.md, pilot observations)
    assert rows.loc["TACO (gamma=1/K)", "excess_loss"] > fedavg["excess_loss"]


def test_theorem1_statement_by_hand():
    t1 = T.theorem1()
    values = {T.L_: 1, T.G_: 2, T.K_: 2, T.N_: 1, T.ETA_L: 1, T.S_ALPHA: 2, T.S_Q: 3}
    assert t1["Y"].subs(values) == sp.Rational(1 * 4, 4) * 36  # L^2 G^2 / (K^2 N^4 eta_l^2) (S_alpha S_q)^2 = 36
    slack = t1["slack"].subs({**values, T.F_z: 1, T.F_z1: sp.Rational(1, 2), T.GRAD2: 4, T.DT2: 2, T.EPS: 3, T.EG: 1})
    assert slack == 1 - sp.Rational(1, 2) * 4 + sp.Rational(1, 2) * 2 + 3 + 36 - sp.Rational(1, 2)


def test_theorem1_on_the_real_code():
    """The replay of the clients' local GD reproduces the real run (uniform weights); where A2 holds the bound
    holds; its Y-free part holds on every round in the proof's setting and fails somewhere for TACO as run."""
    setting = T.QuadraticSetting("b0.1", 4, 4, 10, 0.05, b_scale=0.1, seed=0)
    proof, consts = T.theorem1_rows(setting, 30, gamma=1.0, aggregation="uniform")
    assert consts["replay_error"] < 1e-5
    assert 0 < consts["a2_rounds"] < 30 and consts["c_min"] > 0 > consts["c_min_all_rounds"]
    defined = proof["slack"].notna()
    assert defined.sum() == min(consts["a2_rounds"], len(proof)) and (proof.loc[defined, "slack"] >= 0).all()
    assert (proof["slack_without_Y"] >= 0).all()
    as_run, _ = T.theorem1_rows(setting, 30, gamma="1/K", aggregation="tailored")
    assert (as_run["slack_without_Y"] < 0).any()


def test_theorem1_rows_read_vacuous_when_the_bound_exceeds_the_change_of_f_by_more_than_the_factor():
    """f falls by 0.01 a round; a slack of 2 is 201x that change (vacuous), a slack of 0.5 51x (not)."""
    def rows(slack: float, without_y: float) -> pd.DataFrame:
        return pd.DataFrame({"round": [0, 1], "f_z": [1.0, 0.99], "f_z_next": [0.99, 0.98], "slack": [slack, slack],
                             "slack_without_Y": [without_y, without_y], "eta_g^3 Y_t": [slack, slack]})

    (_, _, measured, vacuous), (_, _, _, y_free) = T.theorem1_claims(rows(2.0, 0.005), rows(2.0, 0.005), "toy")
    assert vacuous.verdict == R.VACUOUS and "smallest bound / measured 201" in vacuous.evidence
    assert "200x the change of f" in measured
    assert y_free.verdict == R.REPRODUCED  # (0.01 + 0.005) / 0.01 = 1.5: tight
    (_, _, _, tight), _ = T.theorem1_claims(rows(0.5, 0.005), rows(0.5, -0.001), "toy")
    assert tight.verdict == R.REPRODUCED and "smallest bound / measured 51" in tight.evidence
    (_, _, _, failed), (_, _, _, broken) = T.theorem1_claims(rows(-0.1, -0.1), rows(-0.1, -0.1), "toy")
    assert failed.verdict == R.NOT_REPRODUCED and broken.verdict == R.NOT_REPRODUCED
