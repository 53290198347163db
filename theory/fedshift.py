"""FedShift theory (arXiv 2402.01070, section IV and appendix), stated in sympy and checked against runs.

* Eqs. 9-11: shifting each inferior model by the aggregate's mean, then averaging (Eq. 9), equals shifting
  the aggregate by (I/K) * mean (Eq. 10); the new mean is (S/K) * mean (Eq. 11).
* Theorem 2 (divergence): D_FA^2 - D_FS^2 = (IP/K) ((K+S)/K m1^2 - 2 m0 m1) (appendix Eq. 30). The main
  text's Eq. 12 prints the last term as 2 m0 / m1^2, a typo; both forms are here and
  `check_theorem2` evaluates them on every round and layer of a run.
* Theorem 1 (convergence bound): the main-text form is an exact simplification of the proof's last
  step; the appendix Eq. 20 writes a different second denominator; with beta = 2/mu the bound's
  denominator changes sign at tau + gamma = eps + 2 and the bound tends to -eps L B2 M / 2 < 0.
* A strongly convex quadratic where FedShift provably stalls: the per-round shift drives the mean of
  the iterate to a fixed point, so the iterate converges to the mean-constrained minimiser (decaying
  steps) instead of w*. `simulate_quadratic` and `quadratic_fixed_point` check the prediction.
* Table III arithmetic: payload sizes P * bits / 8 and the 7.78 "efficiency threshold ratio".
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pandas as pd
import sympy as sp

# ------------------------------------------------------------------------------------ Eqs. 9-11

def eq9_eq10_identity(K: int, I: int, P: int) -> dict[str, sp.Expr]:
    """Symbolic K x P client weights W (rows 0..I-1 inferior): Eq. 9 - Eq. 10 and mean(Eq. 10) - (S/K) m,
    both simplified; each is the zero matrix / zero if the paper's identities hold."""
    if not 0 <= I <= K or K < 1 or P < 1:
        raise ValueError(f"need 0 <= I <= K and K, P >= 1; got K={K}, I={I}, P={P}")
    W = sp.Matrix(K, P, lambda k, p: sp.Symbol(f"w_{k}_{p}"))
    w = sp.ones(1, K) * W / K
    m = (w * sp.ones(P, 1))[0] / P
    shifted_rows = [W.row(k) - m * sp.ones(1, P) if k < I else W.row(k) for k in range(K)]
    eq9 = sum(shifted_rows, sp.zeros(1, P)) / K
    eq10 = w - sp.Rational(I, K) * m * sp.ones(1, P)
    eq11 = (eq10 * sp.ones(P, 1))[0] / P - sp.Rational(K - I, K) * m
    return {"eq9_minus_eq10": sp.simplify(eq9 - eq10), "mean_minus_S_over_K_m": sp.simplify(eq11)}


# ------------------------------------------------------------------------------------ Theorem 2

I_, K_, P_, c_ = sp.symbols("I K P c", positive=True)  # inferior / selected clients, layer size, shift coefficient
m0, m1 = sp.symbols("m_t m_{t+1}", real=True)  # layer mean of the starting model and of the aggregate
S_ = K_ - I_
THEOREM2_CORRECTED = I_ * P_ / K_ * ((K_ + S_) / K_ * m1**2 - 2 * m0 * m1)  # appendix Eq. 30
THEOREM2_PRINTED = I_ * P_ / K_ * ((K_ + S_) / K_ * m1**2 - 2 * m0 / m1**2)  # main-text Eq. 12 (typo)


def theorem2_derivation() -> dict[str, sp.Expr]:
    """Derive D_FA^2 - D_FS^2 from scratch. With u = (1/K) sum_k dw_k (so u.1 = P (m1 - m0)) and the
    shift c m1 1: ||u||^2 - ||u - c m1 1||^2 = 2 c m1 (u.1) - c^2 m1^2 P. Returns the derived form (with
    c = I/K), its difference from Eq. 30 (zero) and from the printed Eq. 12 (not zero)."""
    u_dot_1 = P_ * (m1 - m0)
    derived = (2 * c_ * m1 * u_dot_1 - c_**2 * m1**2 * P_).subs(c_, I_ / K_)
    return {"derived": sp.factor(derived),
            "derived_minus_corrected": sp.simplify(derived - THEOREM2_CORRECTED),
            "derived_minus_printed": sp.simplify(derived - THEOREM2_PRINTED)}


def theorem2_condition() -> sp.Expr:
    """Eq. 31: D_FS < D_FA iff (K+S)/(2K) > m0/m1 (Eq. 30 divided by 2 I P m1^2 / K > 0).
    Returned as the expression that is positive exactly when the shift shortens the step."""
    return sp.simplify(THEOREM2_CORRECTED / (2 * I_ * P_ * m1**2 / K_))


_T2_ARGS = (I_, K_, P_, m0, m1)
theorem2_corrected = sp.lambdify(_T2_ARGS, THEOREM2_CORRECTED, "numpy")
theorem2_printed = sp.lambdify(_T2_ARGS, THEOREM2_PRINTED, "numpy")


def theorem2_records(rounds: pd.DataFrame, layers: pd.DataFrame) -> pd.DataFrame:
    """Long table (round, layer, P, I, K, coef, m_prev, m_agg, dfa2, dfs2) from one run's records with
    `fedlib.papers.fedshift.FedShift` diagnostics: shift/I, shift/K, shift/coef columns of `rounds`, and the
    per-layer shift/<quantity> rows of its layer table `layers` (`RunResult.layers`)."""
    shift = layers[layers["key"].str.startswith("shift/")]
    if not (shift["key"] == "shift/dfa2").any():
        raise ValueError("no shift/dfa2 rows in the layer table: run with hooks=[FedShift(...)]")
    order = {layer: i for i, layer in enumerate(dict.fromkeys(shift["layer"]))}
    wide = (shift.assign(key=shift["key"].str.removeprefix("shift/")).pivot(index=["layer", "round"], columns="key",
                                                                           values="value")
            .reset_index().sort_values(["layer", "round"], key=lambda c: c.map(order) if c.name == "layer" else c))
    scalars = rounds[["round", "shift/I", "shift/K", "shift/coef"]].set_axis(["round", "I", "K", "coef"], axis=1)
    return (wide.rename(columns={"numel": "P"}).merge(scalars, on="round", how="left")
            [["round", "layer", "P", "I", "K", "coef", "m_prev", "m_agg", "dfa2", "dfs2"]].reset_index(drop=True))


def check_theorem2(rounds: pd.DataFrame, layers: pd.DataFrame, rtol: float = 1e-4) -> pd.DataFrame:
    """Every round and layer of one run (`theorem2_records`): measured D_FA^2 - D_FS^2 against Eq. 30 (corrected) and Eq. 12 (printed).

    Errors are relative to the scale of the measured terms, D_FA^2 + D_FS^2 (the identity is exact in
    real arithmetic; the run's shifted model is rounded to float32). `holds_*` = error <= rtol. Also:
    whether Eq. 31 predicts D_FS < D_FA, whether that was observed, and whether the difference is large
    enough (above rtol * scale) for its sign to be meaningful. Rounds with no inferior client
    (I = 0) are dropped: there the theorem is vacuous; so are rounds whose recorded quantities are not finite
    (a diverged run): the identity says nothing about them.
    """
    df = theorem2_records(rounds, layers)
    finite = np.isfinite(df[["P", "I", "K", "m_prev", "m_agg", "dfa2", "dfs2"]].to_numpy(dtype=float)).all(axis=1)
    df = df[finite & (df["I"] > 0)].copy()
    df["measured"] = df["dfa2"] - df["dfs2"]
    args = (df["I"], df["K"], df["P"], df["m_prev"], df["m_agg"])
    df["corrected"] = theorem2_corrected(*args)
    with np.errstate(divide="ignore", invalid="ignore"):
        df["printed"] = theorem2_printed(*args)
    scale = df["dfa2"] + df["dfs2"]
    df["rel_err_corrected"] = (df["measured"] - df["corrected"]).abs() / scale
    df["rel_err_printed"] = (df["measured"] - df["printed"]).abs() / scale
    df["holds_corrected"] = df["rel_err_corrected"] <= rtol
    df["holds_printed"] = df["rel_err_printed"] <= rtol
    S = df["K"] - df["I"]
    df["eq31_predicts_shorter"] = (df["K"] + S) / (2 * df["K"]) > df["m_prev"] / df["m_agg"]
    df["observed_shorter"] = df["dfs2"] < df["dfa2"]
    df["eq31_decidable"] = df["corrected"].abs() > rtol * scale  # else the sign of D_FA^2 - D_FS^2 is float noise
    return df.reset_index(drop=True)


# ------------------------------------------------------------------------------------ Theorem 1

tau, gamma, eps, beta, mu, L, B1, B2, M, Delta1 = sp.symbols("tau gamma epsilon beta mu L B_1 B_2 M Delta_1", positive=True)
D_TAU = (1 + 1 / eps) * beta * mu - (tau + gamma) / eps - 1  # the induction's denominator
BOUND_PROOF = L / 2 / (tau + gamma) * ((B1 * beta**2 + B2 * M * (tau + gamma) ** 2) / D_TAU + (gamma + 1) * Delta1)
BOUND_MAIN = (L / 2 / (tau + gamma) * (B1 * beta**2 / D_TAU + (gamma + 1) * Delta1)
              + L / 2 * B2 * M / ((1 + 1 / eps) * beta * mu / (tau + gamma) - 1 / eps - 1 / (tau + gamma)))
BOUND_APPENDIX_EQ20 = (L / 2 / (tau + gamma) * (B1 * beta**2 / D_TAU + (gamma + 1) * Delta1)
                       + L / 2 * B2 * M / ((1 + 1 / eps) * beta * mu - 1 / eps - 1 / (tau + gamma)))


def theorem1_facts() -> dict[str, sp.Expr]:
    """sympy facts about Theorem 1 with the theorem's beta = 2/mu:
    main text == proof's last step (difference 0); appendix Eq. 20 differs; D(tau) and where it
    vanishes; the tau -> oo limits of the 'vanishes when M -> 0' term in both forms."""
    b = 2 / mu
    second_main = (BOUND_MAIN - L / 2 / (tau + gamma) * (B1 * beta**2 / D_TAU + (gamma + 1) * Delta1)).subs(beta, b)
    second_eq20 = (BOUND_APPENDIX_EQ20 - L / 2 / (tau + gamma) * (B1 * beta**2 / D_TAU + (gamma + 1) * Delta1)).subs(beta, b)
    return {
        "main_minus_proof": sp.simplify(BOUND_MAIN - BOUND_PROOF),
        "eq20_minus_main": sp.simplify(BOUND_APPENDIX_EQ20 - BOUND_MAIN),
        "D_tau": sp.simplify(D_TAU.subs(beta, b)),
        "D_tau_zero_at_tau": sp.solve(sp.Eq(D_TAU.subs(beta, b), 0), tau)[0],
        "limit_second_term_main": sp.limit(sp.simplify(second_main), tau, sp.oo),
        "limit_second_term_eq20": sp.limit(sp.simplify(second_eq20), tau, sp.oo),
    }


theorem1_bound = sp.lambdify((tau, gamma, eps, beta, mu, L, B1, B2, M, Delta1), BOUND_MAIN, "numpy")
E_, G2_, sigma2_, Gamma_, alpha_ = sp.symbols("E G^2 sigma^2 Gamma alpha", positive=True)
B1_OF = (1 + 1 / eps) * 6 * L * Gamma_ + (1 + 1 / eps) * 8 * (E_ - 1) ** 2 * G2_ + sigma2_  # Theorem 1's B_1 (the paper's appendix)
B2_OF = (1 + eps) * P_ * alpha_**2
b1_of = sp.lambdify((eps, L, Gamma_, E_, G2_, sigma2_), B1_OF, "numpy")
b2_of = sp.lambdify((eps, P_, alpha_), B2_OF, "numpy")


def theorem1_constants(rounds: pd.DataFrame, *, local_steps: int, mu_: float, num_params: int) -> dict[str, float]:
    """Theorem 1's constants from a run with `fedlib.papers.fedshift.Theorem1Probe` (columns t1/...): L, G^2 and
    sigma^2 are the largest values measured over the run, M the largest squared mean of an aggregate, Gamma and
    Delta_1 = ||w^0 - w*||^2 as measured, alpha the shift coefficient (0 without the shift), mu the strong-convexity
    constant the step sizes were built with (the L2 weight) and gamma the step sizes' own (t1/gamma)."""
    alpha = float(rounds["shift/coef"].max()) if "shift/coef" in rounds else 0.0
    return {"L": float(rounds["t1/L"].max()), "mu": float(mu_), "mu_secant_min": float(rounds["t1/mu"].min()),
            "sigma2": float(rounds["t1/sigma2"].max()), "G2": float(rounds["t1/G2"].max()),
            "Gamma": float(rounds["t1/Gamma"].iloc[0]), "M": float(rounds["t1/m2"].max()) if alpha else 0.0,
            "Delta1": float(rounds["t1/dist2_0"].dropna().iloc[0]), "alpha": alpha, "E": float(local_steps),
            "P": float(num_params), "mean_w_star": float(rounds["t1/mean_star"].iloc[0]),
            "gamma": float(rounds["t1/gamma"].iloc[0]), "L_bound": float(rounds["t1/L_bound"].iloc[0])}


def theorem1_against_run(rounds: pd.DataFrame, constants: dict[str, float], eps_grid: np.ndarray | None = None) -> pd.DataFrame:
    """Per round t: tau = t * E + 1 (the global step after t rounds), the measured F(w^tau) - F*, and Theorem 1's
    bound (main-text form) with the given constants (`theorem1_constants`), beta = 2 / mu, minimised over the eps
    in `eps_grid` for which the bound's denominator D(tau) is positive (the theorem holds for every eps > 0;
    beyond D(tau) = 0 the printed bound is negative and says nothing)."""
    c = constants
    eps_grid = np.geomspace(1e-3, 1e9, 241) if eps_grid is None else np.asarray(eps_grid, dtype=float)
    taus = rounds["round"].to_numpy(dtype=float) * c["E"] + 1
    beta_, gamma_ = 2 / c["mu"], c["gamma"]
    bounds = np.full(len(taus), np.inf)
    for e in eps_grid:
        d = (1 + 1 / e) * beta_ * c["mu"] - (taus + gamma_) / e - 1
        value = theorem1_bound(taus, gamma_, e, beta_, c["mu"], c["L"], b1_of(e, c["L"], c["Gamma"], c["E"], c["G2"], c["sigma2"]),
                               b2_of(e, c["P"], c["alpha"]), c["M"], c["Delta1"])
        bounds = np.where(d > 0, np.minimum(bounds, value), bounds)
    out = pd.DataFrame({"round": rounds["round"].to_numpy(), "tau": taus, "measured_gap": rounds["t1/gap"].to_numpy(),
                        "bound": bounds})
    out["holds"] = out["measured_gap"] <= out["bound"]
    out["bound_over_measured"] = out["bound"] / out["measured_gap"]
    return out


# ------------------------------------------------------------------ quadratic: stall / fixed point

def quadratic_problem(P: int, N: int, mean_star: float, seed: int) -> np.ndarray:
    """Client optima c_k (N x P) of F_k(w) = 1/2 ||w - c_k||^2, shifted so that mean(w*) = mean_star,
    w* = mean_k c_k."""
    c = np.random.default_rng(seed).normal(size=(N, P))
    return c - c.mean() + mean_star


def simulate_quadratic(centers: np.ndarray, rounds: int, local_steps: int, lr: float | Callable[[int], float],
                       inferior_fraction: float, shift: bool) -> pd.DataFrame:
    """Full participation, uniform weights, E local GD steps on F_k = 1/2 ||w - c_k||^2 from w^0 = 0,
    then (if shift) w <- w - alpha * mean(w) with alpha = I/K. lr is a constant or lr(round).
    Returns round, gap = F(w) - F*, mean_w."""
    if not 0 <= inferior_fraction <= 1:
        raise ValueError(f"inferior_fraction must be in [0, 1], got {inferior_fraction}")
    w_star = centers.mean(0)
    w = np.zeros(centers.shape[1])
    rows = []
    for t in range(1, rounds + 1):
        local = np.repeat(w[None], len(centers), 0)
        step = lr(t) if callable(lr) else lr
        for _ in range(local_steps):
            local -= step * (local - centers)
        w = local.mean(0)
        if shift:
            w = w - inferior_fraction * w.mean()
        rows.append({"round": t, "gap": 0.5 * float(((w - w_star) ** 2).sum()), "mean_w": float(w.mean())})
    return pd.DataFrame(rows)


def quadratic_fixed_point(mean_star: float, P: int, local_steps: int, lr: float, inferior_fraction: float) -> dict[str, float]:
    """Exact limit of `simulate_quadratic(shift=True)`. With rho = (1 - lr)^E the aggregate is
    w* + rho (w - w*); the part orthogonal to 1 converges to that of w*, the mean follows
    m <- (1 - alpha)(m* + rho (m - m*)), whose fixed point is m_fp = (1-alpha)(1-rho) m* / (1 - (1-alpha) rho).
    The gap is F - F* = P (m_fp - m*)^2 / 2. As lr -> 0, m_fp -> 0 and the gap -> P m*^2 / 2, the
    gap of the mean-constrained minimiser (docs/fedshift.md, Errata: Theorem 1)."""
    rho = (1 - lr) ** local_steps
    a = inferior_fraction
    m_fp = (1 - a) * (1 - rho) * mean_star / (1 - (1 - a) * rho)
    return {"mean_fixed_point": m_fp, "gap": P * (m_fp - mean_star) ** 2 / 2,
            "constrained_gap": P * mean_star**2 / 2}


# ------------------------------------------------------------------------------------ Table III

PAPER_TABLE3 = pd.DataFrame({
    "bits": [4, 4, 8, 8, 32],
    "quantization": ["uniform", "kmeans", "uniform", "kmeans", "none"],
    "paper_weight_KB": [1052, 1052, 2105, 2105, 8421],
    "paper_aux_KB": [0.25, 6.19, 0.25, 88.82, np.nan],
    "paper_overhead_ms": [10, 179, 10, 2172, np.nan],
})


# Table I (K-means, parity split, CIFAR-10, 800 rounds): accuracy % per algorithm at 32+4 ... 32+8, without/with the shift
PAPER_TABLE1 = pd.DataFrame(
    [(a, b, s, v) for a, vals in {
        "fedavg": [59.7, 62.5, 62.7, 66.9, 64.3, 69.3, 65.4, 70.2, 66.0, 70.4],
        "fedef": [64.8, 65.5, 65.3, 67.0, 64.9, 68.8, 64.9, 70.3, 65.5, 70.1],
        "fedprox": [60.1, 62.6, 63.5, 66.6, 65.2, 69.0, 66.4, 70.5, 66.6, 70.5],
        "scaffold": [62.9, 65.9, 66.5, 67.9, 66.9, 68.8, 66.7, 69.7, 66.8, 69.6]}.items()
     for (b, s), v in zip([(b, s) for b in (4, 5, 6, 7, 8) for s in (False, True)], vals)],
    columns=["algorithm", "bits", "shift", "paper_acc"])
PAPER_FP32_FEDAVG = 66.20

# Table II (FedAvg, Dirichlet(alpha) splits): the paper prints no uniform 4-bit cells
PAPER_TABLE2 = pd.DataFrame(
    [(q, a, b, s, v) for (q, a), vals in {
        ("uniform", 0.1): [None, None, 45.6, 58.3, 59.0, 61.5, 62.5, 64.3, 62.5, 64.7],
        ("uniform", 0.5): [None, None, 43.2, 59.4, 67.3, 70.1, 68.9, 71.5, 68.8, 72.1],
        ("uniform", 100.0): [None, None, 64.3, 67.4, 71.1, 74.1, 72.2, 75.5, 72.1, 75.5],
        ("kmeans", 0.1): [53.3, 53.3, 57.3, 57.8, 60.1, 61.5, 61.5, 63.7, 62.1, 64.1],
        ("kmeans", 0.5): [63.3, 65.2, 65.7, 66.6, 66.9, 70.0, 68.1, 71.4, 66.1, 71.7],
        ("kmeans", 100.0): [68.5, 70.6, 70.2, 72.3, 71.1, 74.2, 71.7, 75.2, 71.9, 75.5]}.items()
     for (b, s), v in zip([(b, s) for b in (4, 5, 6, 7, 8) for s in (False, True)], vals)],
    columns=["quantizer", "alpha", "bits", "shift", "paper_acc"])


def weight_kib(num_params: int, bits: int) -> float:
    """Table III's weight size: P * bits / 8 bytes, in KiB (the paper prints the integer part)."""
    return num_params * bits / 8 / 1024


def threshold_ratio(full_kb: float = 8421.0, quant_kb: float = 1059.0, quant_ms: float = 179.0, kb_per_s: float = 1000.0) -> float:
    """Section V-D: a 4-bit non-uniform upload (weights + auxiliary data, plus its quantization time) stays
    cheaper than a 32-bit one while the inferior link is less than r times slower:
    r * quant_kb / kb_per_s + quant_ms / 1000 = full_kb / kb_per_s."""
    return (full_kb / kb_per_s - quant_ms / 1000) / (quant_kb / kb_per_s)



def theorem1_report(rounds: pd.DataFrame, *, local_steps: int, mu_: float, num_params: int
                    ) -> tuple[pd.DataFrame, dict[tuple[bool, int], pd.DataFrame]]:
    """`theorem1_constants` and `theorem1_against_run` for every (shift, seed) run in a tidy rounds table: one
    summary row per run (constants, final gap and bound, whether the bound held every round, the smallest
    bound / gap ratio) and each run's per-round check."""
    rows, checks = [], {}
    for (shift, seed), run in rounds.groupby(["shift", "seed"]):
        run = run.dropna(axis=1, how="all")
        c = theorem1_constants(run, local_steps=local_steps, mu_=mu_, num_params=num_params)
        checks[(bool(shift), int(seed))] = check = theorem1_against_run(run, c)
        rows.append({"shift": bool(shift), "seed": int(seed),
                     **{k: c[k] for k in ("L", "L_bound", "mu_secant_min", "sigma2", "G2", "Gamma", "M", "alpha", "mean_w_star")},
                     "final gap": check["measured_gap"].iloc[-1], "final bound": check["bound"].iloc[-1],
                     "holds every round": bool(check["holds"].all()), "min bound / gap": check["bound_over_measured"].min()})
    return pd.DataFrame(rows), checks
