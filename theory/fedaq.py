"""FedAQ theory: Theorem 1's bound, the optimal bit allocation, the quantizer's variance, checks against runs.

- `theorem1_bound()`: Eq. (9) in sympy; `theorem1_rhs(...)` evaluates it from per-round ranges and bits
  (s = 2^b - 1 bins), so the bound is a function of the uplink and downlink bit-lengths.
- `kkt_derivation()`: the Lagrangian of problem (10) solved in sympy for general link costs e1, e2:
  beta / alpha = sqrt(e2 / (2 n e1)), which is the paper's Eq. (22) beta = alpha / sqrt(2n) only when
  e1 = e2 (the paper's AM-GM route has no energy weights). `closed_form_alpha_check` solves the energy
  constraint in sympy for a small instance and compares it with Eq. (25) and with the general form.
- Numeric allocation over "entries" (one per (round, client, layer) on the uplink and (round, layer) on the
  downlink, each with its dimension): `kkt_allocation` (closed form), `paper_allocation` (Eqs. 22 + 25,
  feasible but not optimal for e1 != e2), `numerical_allocation` (scipy SLSQP on the same objective).
  Per-layer entries give the same rule as the whole-model formulas: the dimension cancels in the KKT
  conditions, so every layer gets the same resolution.
- `quantizer_check`: unbiasedness and E||Q(x) - x||^2 by Monte Carlo against the exact variance
  sum_j (h''_j - x_j)(x_j - h'_j) <= d step^2 / 4 <= q_s R^2 (Assumption 1, q_s = d / s^2, 4x looser).
- `convex_toy_run` + `bound_vs_curve`: Theorem 1 on softmax regression (L known in closed form, sigma^2
  tracked exactly along the run), with the average squared gradient norm at the virtual averages
  w-bar_{m,t} against the right-hand side of (9) for every prefix of rounds.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import sympy as sp
import torch
from scipy.optimize import minimize

from fedlib.algorithms import FedAvg
from fedlib.codecs.base import Codec
from fedlib.codecs.uniform import quantize
from fedlib.core.contracts import SERVER, RoundContext, link_rows
from fedlib.core.params import Params
from fedlib.engine.channel import Link
from fedlib.engine.executors import half_squared_error
from fedlib.engine.federation import LocalTraining, run_federation
from fedlib.papers.fedaq import message_sizes
from theory.quadratic import quadratic_federation

# ---------------------------------------------------------------------------------------- symbols
L, d, n, K, tau, eta, e1, e2, E, lam, sigma2, gap = sp.symbols("L d n K tau eta e1 e2 E lambda sigma2 gap", positive=True)
U, D = sp.symbols("U D", nonnegative=True)  # U = sum_m sum_i (R_m^i / s_m^i)^2, D = sum_m (R_m / s_m)^2

A_COEF = L * d / (n**2 * K * tau * eta)  # uplink weight in (9)/(10)
B_COEF = 2 * L * d / (K * tau * eta)  # downlink weight


def theorem1_bound() -> sp.Expr:
    """RHS of Eq. (9); gap = f(w_0) - f*."""
    return (A_COEF * U + B_COEF * D + 2 * gap / (K * tau * eta)
            + (L * eta * sigma2 + L**2 * eta**2 * (n + 1) * (tau - 1) * sigma2) / n)


def theorem2_bound() -> sp.Expr:
    """RHS of Eq. (27), uplink-only quantization (perfect downlink): Theorem 1 without its downlink term."""
    return (A_COEF * U + 2 * gap / (K * tau * eta)
            + (L * eta * sigma2 + L**2 * eta**2 * (n + 1) * (tau - 1) * sigma2) / n)


def theorem3_bound() -> sp.Expr:
    """RHS of Eq. (30), downlink-only quantization (perfect uplink): Theorem 1 without its uplink term."""
    return (B_COEF * D + 2 * gap / (K * tau * eta)
            + (L * eta * sigma2 + L**2 * eta**2 * (n + 1) * (tau - 1) * sigma2) / n)


def step_size_condition() -> sp.Expr:
    """Eq. (40), a hypothesis of Theorem 1 stated only in the appendix: this must be >= 0."""
    return 1 - L * eta - 2 * tau * (tau - 1) * L**2 * eta**2


_rhs_terms = sp.lambdify((L, d, n, K, tau, eta, U, D, gap, sigma2),
                         [A_COEF * U, B_COEF * D, 2 * gap / (K * tau * eta),
                          (L * eta * sigma2 + L**2 * eta**2 * (n + 1) * (tau - 1) * sigma2) / n], "numpy")


def bins(bits: np.ndarray | float) -> np.ndarray:
    """s = 2^b - 1 bins for b bits; s = inf (no quantization error) for unquantized links (b = 32) and for
    constant tensors sent as side information only (b = 0)."""
    b = np.asarray(bits, dtype=float)
    return np.where((b >= 32) | (b <= 0), np.inf, 2.0**b - 1)


def theorem1_rhs(R_up: np.ndarray, b_up: np.ndarray, R_dn: np.ndarray, b_dn: np.ndarray, *, L: float, d: int,
                 tau: int, eta: float, gap: float, sigma2: float) -> dict[str, float]:
    """The four terms of (9) and their sum; R_up, b_up are (K, n), R_dn, b_dn are (K,)."""
    R_up, R_dn = np.asarray(R_up, float), np.asarray(R_dn, float)
    K_, n_ = R_up.shape
    u = float(np.sum((R_up / bins(b_up)) ** 2))
    dn = float(np.sum((R_dn / bins(b_dn)) ** 2))
    up_t, dn_t, gap_t, noise_t = (float(v) for v in _rhs_terms(L, d, n_, K_, tau, eta, u, dn, gap, sigma2))
    return {"uplink": up_t, "downlink": dn_t, "initial_gap": gap_t, "sgd_noise": noise_t,
            "rhs": up_t + dn_t + gap_t + noise_t}


# ------------------------------------------------------------------------------ KKT in sympy
def kkt_derivation() -> dict[str, sp.Expr]:
    """Stationarity of the Lagrangian of (10) in x = log2 s (ceilings relaxed).

    One representative uplink variable (range Ru) and downlink variable (range Rd):
    Lagrangian = A Ru^2 4^-x + B Rd^2 4^-y + lambda (e1 d x + e2 n d y - E).
    Returns alpha^2 = (Ru/s)^2, beta^2 = (Rd/s)^2 at the stationary point, beta/alpha, its value at
    e1 = e2 (the paper's Eq. 22), the Hessian in (x, y) (positive definite: a convex problem), and the
    optimal quantization part of the bound per (round, client) as a function of alpha.
    """
    x, y, Ru, Rd = sp.symbols("x y R_u R_d", positive=True)
    lagr = A_COEF * Ru**2 * 4**(-x) + B_COEF * Rd**2 * 4**(-y) + lam * (e1 * d * x + e2 * n * d * y - E)
    x_star = sp.solve(sp.diff(lagr, x), x)[0]
    y_star = sp.solve(sp.diff(lagr, y), y)[0]
    alpha2 = sp.simplify((Ru / 2**x_star) ** 2)
    beta2 = sp.simplify((Rd / 2**y_star) ** 2)
    ratio = sp.simplify(sp.sqrt(beta2 / alpha2))
    objective = A_COEF * Ru**2 * 4**(-x) + B_COEF * Rd**2 * 4**(-y)
    hessian = sp.hessian(objective, (x, y))
    a = sp.symbols("alpha", positive=True)
    # quantization part of the bound with K n uplink and K downlink terms at resolutions alpha, ratio*alpha
    phi_star = sp.simplify(A_COEF * K * n * a**2 + B_COEF * K * (ratio * a) ** 2)
    return {"alpha2": alpha2, "beta2": beta2, "beta_over_alpha": ratio,
            "beta_over_alpha_equal_costs": sp.simplify(ratio.subs(e2, e1)), "hessian": hessian,
            "hessian_det": sp.simplify(hessian.det()), "phi_star": phi_star}


def closed_form_alpha_check(K_: int = 2, n_: int = 2) -> dict[str, sp.Expr]:
    """Solve the energy constraint of (10) for log2(alpha) with beta = rho * alpha, ceilings dropped.

    Returns the solution, its difference from the general closed form (rho = sqrt(e2 / (2 n e1))), and its
    difference from the paper's Eq. (25) (rho = 1/sqrt(2n)) at e1 = e2; both simplify to 0.
    """
    Ru = sp.IndexedBase("R_up", positive=True)
    Rd = sp.IndexedBase("R_dn", positive=True)
    la, rho = sp.symbols("log2alpha rho", real=True)
    log2 = lambda v: sp.log(v, 2)  # noqa: E731
    energy = (sum(e1 * d * (log2(Ru[m, i]) - la) for m in range(K_) for i in range(n_))
              + sum(e2 * n_ * d * (log2(Rd[m]) - la - log2(rho)) for m in range(K_)))
    sol = sp.solve(sp.Eq(energy, E), la)[0]
    general = (e1 * sum(log2(Ru[m, i]) for m in range(K_) for i in range(n_)) / (K_ * n_ * (e1 + e2))
               + e2 * sum(log2(Rd[m] * sp.sqrt(2 * n_ * e1 / e2)) for m in range(K_)) / (K_ * (e1 + e2))
               - E / (K_ * n_ * d * (e1 + e2)))
    eq25 = (e1 * sum(log2(Ru[m, i]) for m in range(K_) for i in range(n_)) / (K_ * n_ * (e1 + e2))
            + e2 * sum(log2(sp.sqrt(2 * n_) * Rd[m]) for m in range(K_)) / (K_ * (e1 + e2))
            - E / (K_ * n_ * d * (e1 + e2)))
    rho_kkt = sp.sqrt(e2 / (2 * n_ * e1))
    return {"log2_alpha": sol,
            "minus_general": sp.simplify(sp.expand_log(sol.subs(rho, rho_kkt) - general, force=True)),
            "minus_eq25_equal_costs": sp.simplify(sp.expand_log((sol.subs(rho, 1 / sp.sqrt(2 * n_)) - eq25)
                                                                .subs(e2, e1), force=True))}


# ------------------------------------------------------------------------ numeric allocation
@dataclass(frozen=True)
class Entries:
    """The quantized messages of K rounds: uplink ranges/dims and downlink ranges/dims (flat arrays).

    Objective (the quantization part of (10), up to the common factor L / (K tau eta)):
        sum_u dim_u (R_u / s_u)^2 / n^2 + 2 sum_v dim_v (R_v / s_v)^2
    Energy (ceilings relaxed): e1 sum_u dim_u log2 s_u + e2 n sum_v dim_v log2 s_v.
    """

    R_up: np.ndarray
    dim_up: np.ndarray
    R_dn: np.ndarray
    dim_dn: np.ndarray
    n: int

    @classmethod
    def whole_model(cls, R_up: np.ndarray, R_dn: np.ndarray, d: int) -> "Entries":
        """R_up (K, n) and R_dn (K,) of whole-model vectors of dimension d, as in the paper."""
        R_up, R_dn = np.asarray(R_up, float), np.asarray(R_dn, float)
        return cls(R_up.ravel(), np.full(R_up.size, float(d)), R_dn.ravel(), np.full(R_dn.size, float(d)),
                   R_up.shape[1])

    def objective(self, s_up: np.ndarray, s_dn: np.ndarray) -> float:
        return float(np.sum(self.dim_up * (self.R_up / s_up) ** 2) / self.n**2
                     + 2 * np.sum(self.dim_dn * (self.R_dn / s_dn) ** 2))

    def energy(self, s_up: np.ndarray, s_dn: np.ndarray, e1: float, e2: float) -> float:
        return float(e1 * np.sum(self.dim_up * np.log2(s_up)) + e2 * self.n * np.sum(self.dim_dn * np.log2(s_dn)))


def ratio_kkt(n_: int, e1_: float, e2_: float) -> float:
    """beta / alpha at the optimum: sqrt(e2 / (2 n e1))."""
    return math.sqrt(e2_ / (2 * n_ * e1_))


def ratio_paper(n_: int) -> float:
    """Eq. (22): beta / alpha = 1 / sqrt(2n), whatever the link costs."""
    return 1 / math.sqrt(2 * n_)


def allocation(entries: Entries, budget: float, e1_: float, e2_: float, rho: float) -> dict[str, object]:
    """The rule s_u = R_u / alpha, s_v = R_v / (rho alpha), with alpha spending exactly `budget`."""
    num = (e1_ * np.sum(entries.dim_up * np.log2(entries.R_up))
           + e2_ * entries.n * np.sum(entries.dim_dn * np.log2(entries.R_dn / rho)) - budget)
    log2_alpha = num / (e1_ * entries.dim_up.sum() + e2_ * entries.n * entries.dim_dn.sum())
    alpha = 2.0**log2_alpha
    s_up, s_dn = entries.R_up / alpha, entries.R_dn / (rho * alpha)
    return {"alpha": alpha, "beta": rho * alpha, "s_up": s_up, "s_dn": s_dn,
            "objective": entries.objective(s_up, s_dn), "energy": entries.energy(s_up, s_dn, e1_, e2_)}


def kkt_allocation(entries: Entries, budget: float, e1_: float, e2_: float) -> dict[str, object]:
    return allocation(entries, budget, e1_, e2_, ratio_kkt(entries.n, e1_, e2_))


def paper_allocation(entries: Entries, budget: float, e1_: float, e2_: float) -> dict[str, object]:
    """Eqs. (22) + (25): feasible for any e1, e2, optimal only when e1 = e2."""
    return allocation(entries, budget, e1_, e2_, ratio_paper(entries.n))


def numerical_allocation(entries: Entries, budget: float, e1_: float, e2_: float) -> dict[str, object]:
    """Minimize the same objective over x = log2 s with scipy SLSQP under the energy equality."""
    nu = entries.R_up.size
    w = np.concatenate([entries.dim_up / entries.n**2, 2 * entries.dim_dn])
    R2 = np.concatenate([entries.R_up, entries.R_dn]) ** 2
    c = np.concatenate([e1_ * entries.dim_up, e2_ * entries.n * entries.dim_dn])
    x0 = np.full(w.size, budget / c.sum())  # equal bits spend the budget exactly
    scale = float(np.sum(w * R2 * 4.0**-x0))

    def f(x: np.ndarray) -> float:
        return float(np.sum(w * R2 * 4.0**-x)) / scale

    def grad(x: np.ndarray) -> np.ndarray:
        return -2 * math.log(2) * w * R2 * 4.0**-x / scale

    res = minimize(f, x0, jac=grad, method="SLSQP", options={"ftol": 1e-15, "maxiter": 1000},
                   constraints=[{"type": "eq", "fun": lambda x: (c @ x - budget) / c.sum(), "jac": lambda x: c / c.sum()}])
    if not res.success:
        raise RuntimeError(f"SLSQP did not converge: {res.message}")
    s = 2.0 ** res.x
    s_up, s_dn = s[:nu], s[nu:]
    alpha = float(np.mean(entries.R_up / s_up))
    return {"alpha": alpha, "beta": float(np.mean(entries.R_dn / s_dn)), "s_up": s_up, "s_dn": s_dn,
            "objective": entries.objective(s_up, s_dn), "energy": entries.energy(s_up, s_dn, e1_, e2_)}


def compare_allocations(entries: Entries, budget: float, cost_pairs: Sequence[tuple[float, float]]) -> pd.DataFrame:
    """Closed-form KKT vs SLSQP vs the paper's rule, one row per (e1, e2)."""
    rows = []
    for a, b in cost_pairs:
        kkt, num, pap = (fn(entries, budget, a, b) for fn in (kkt_allocation, numerical_allocation, paper_allocation))
        rows.append({"e1": a, "e2": b, "beta/alpha kkt": kkt["beta"] / kkt["alpha"],
                     "beta/alpha SLSQP": num["beta"] / num["alpha"], "beta/alpha Eq.22": pap["beta"] / pap["alpha"],
                     "objective kkt": kkt["objective"], "objective SLSQP": num["objective"],
                     "objective Eq.22": pap["objective"], "Eq.22 excess": pap["objective"] / kkt["objective"] - 1})
    return pd.DataFrame(rows)


def _bits_at_price(price: np.ndarray) -> np.ndarray:
    """x > 0 with 2^x / (2^x - 1)^3 = price (the stationarity condition below), elementwise; in t = 2^x - 1
    it reads (1 + t) / t^3 = price, decreasing in t, solved by bisection on log t."""
    lo, hi = np.full(price.shape, -80.0), np.full(price.shape, 80.0)
    for _ in range(200):
        mid = (lo + hi) / 2
        t = np.exp(mid)
        too_small = (1 + t) / t**3 > price  # t below the root
        lo, hi = np.where(too_small, mid, lo), np.where(too_small, hi, mid)
    return np.log2(1 + np.exp((lo + hi) / 2))


def bit_allocation(entries: Entries, budget: float, e1_: float, e2_: float) -> dict[str, object]:
    """The optimum of (10) when s bins cost what the run pays for them: b = log2(s + 1) bits per value
    (a b-bit quantizer has s = 2^b - 1 bins), b continuous.

    Stationarity in b: 2 ln2 w R^2 2^b / (2^b - 1)^3 = lambda c per entry (w the entry's weight in the
    objective, c its energy per bit), solved for b at each lambda; lambda is bisected until the energy
    sum c b equals `budget`. The relaxed KKT optimum (`kkt_allocation`) instead charges log2 s bits, fewer
    than its s bins cost (log2 s < log2(s + 1)), so it is not comparable with a run's realized bits.
    """
    w = np.concatenate([entries.dim_up / entries.n**2, 2 * entries.dim_dn])
    c = np.concatenate([e1_ * entries.dim_up, e2_ * entries.n * entries.dim_dn])
    R2 = np.concatenate([entries.R_up, entries.R_dn]) ** 2
    if not budget > 0:
        raise ValueError(f"the energy budget must be > 0, got {budget}")
    lo, hi = -200.0, 200.0  # log lambda
    for _ in range(200):
        mid = (lo + hi) / 2
        spent = float(c @ _bits_at_price(np.exp(mid) * c / (2 * math.log(2) * w * R2)))
        lo, hi = (mid, hi) if spent > budget else (lo, mid)
    x = _bits_at_price(np.exp((lo + hi) / 2) * c / (2 * math.log(2) * w * R2))
    s = 2.0**x - 1
    nu = entries.R_up.size
    return {"bits_up": x[:nu], "bits_dn": x[nu:], "s_up": s[:nu], "s_dn": s[nu:],
            "objective": entries.objective(s[:nu], s[nu:]), "energy_bits": float(c @ x)}


def energy_in_bits(entries: Entries, s_up: np.ndarray, s_dn: np.ndarray, e1_: float, e2_: float) -> float:
    """Energy of an allocation counted as the run counts it: log2(s + 1) bits per value."""
    return entries.energy(s_up + 1, s_dn + 1, e1_, e2_)


def allocation_vs_fixed(entries: Entries, b_up: np.ndarray, b_dn: np.ndarray, e1_: float, e2_: float) -> pd.DataFrame:
    """Objective of the realized bits (s = 2^b - 1) against the continuous optimum and equal bits, every one
    charged log2(s + 1) bits per value (the run's count) and spending the run's energy. The relaxed KKT
    optimum of the paper's count (log2 s) is shown with its true bit count: it spends more than the run."""
    s_up, s_dn = bins(b_up), bins(b_dn)
    budget = energy_in_bits(entries, s_up, s_dn, e1_, e2_)
    best = bit_allocation(entries, budget, e1_, e2_)
    relaxed = kkt_allocation(entries, budget, e1_, e2_)
    b_eq = budget / (e1_ * entries.dim_up.sum() + e2_ * entries.n * entries.dim_dn.sum())
    eq_up, eq_dn = np.full(s_up.shape, 2.0**b_eq - 1), np.full(s_dn.shape, 2.0**b_eq - 1)
    rows = [("continuous optimum (bits = log2(s+1))", best["s_up"], best["s_dn"]),
            ("realized bits (run)", s_up, s_dn),
            (f"equal bits ({b_eq:.2f}) at the same energy", eq_up, eq_dn),
            ("relaxed KKT (charged log2 s, paper's count)", relaxed["s_up"], relaxed["s_dn"])]
    return pd.DataFrame([{"allocation": name, "objective": entries.objective(u, v),
                          "energy_bits": energy_in_bits(entries, u, v, e1_, e2_)} for name, u, v in rows]).assign(
        ratio_to_optimum=lambda df: df["objective"] / best["objective"], energy_over_run=lambda df: df["energy_bits"] / budget)


def entries_from_records(layers: pd.DataFrame, dims: dict[str, int],
                         n_clients: int) -> tuple[Entries, np.ndarray, np.ndarray]:
    """One run's quantized messages (per (round, client, layer) up, per (round, layer) down) with their
    realized bits, from its layer table (`RunResult.layers`); messages of a constant tensor (R = 0) dropped."""
    def messages(link: str) -> pd.DataFrame:
        ranges = link_rows(layers, link, "range").set_index(["round", "client", "layer"])["value"]
        bits = link_rows(layers, link, "bits_per_value").set_index(["round", "client", "layer"])["value"]
        both = pd.DataFrame({"R": ranges, "b": bits}).reset_index()
        return both.assign(dim=message_sizes(both["layer"], dims))[both["R"] > 0]

    up, dn = messages("up"), messages("down")
    entries = Entries(up["R"].to_numpy(float), up["dim"].to_numpy(float), dn["R"].to_numpy(float),
                      dn["dim"].to_numpy(float), n_clients)
    return entries, up["b"].to_numpy(float), dn["b"].to_numpy(float)


# ---------------------------------------------------------------------------- quantizer checks
def exact_error(x: torch.Tensor, bits: int) -> float:
    """E||Q(x) - x||^2 = sum_j (h''_j - x_j)(x_j - h'_j) for the stochastic quantizer (deterministic given x)."""
    x64 = x.detach().to(torch.float64).reshape(-1)
    lo, hi = float(x64.min()), float(x64.max())
    step = (hi - lo) / (2**bits - 1)
    if step == 0:
        return 0.0
    u = (x64 - lo) / step
    frac = u - torch.floor(u)
    return float(torch.sum(frac * (1 - frac)) * step**2)


def quantizer_check(x: torch.Tensor, bits: int, draws: int, gen: torch.Generator, z: float = 5.0) -> dict[str, float]:
    """Monte Carlo of the stochastic quantizer on x with `draws` independent draws.

    Unbiasedness: |sum_j (mean_j - x_j)| <= z * sqrt(sum_j var_j / draws) (aggregate bias) and
    max_j |mean_j - x_j| <= z * (step / 2) / sqrt(draws) (each coordinate; step/2 bounds its sd).
    Variance: |MC mean of ||Q(x) - x||^2 - exact| <= z standard errors; exact <= d step^2/4 <= q_s R^2.
    """
    x64 = x.detach().to(torch.float64).reshape(-1)
    dim = x64.numel()
    R = float(x64.max() - x64.min())
    s = 2**bits - 1
    step = R / s
    total = torch.zeros(dim, dtype=torch.float64)
    sq_err = np.empty(draws)
    for k in range(draws):
        q = quantize(x64, bits, "stochastic", gen)
        xq = q.x_min + q.indices.to(torch.float64) * q.step
        total += xq
        sq_err[k] = float(torch.sum((xq - x64) ** 2))
    mean = total / draws
    exact = exact_error(x64, bits)
    return {
        "d": dim, "bits": bits, "draws": draws, "step": step,
        "bias_sum": float(torch.sum(mean - x64)), "bias_sum_tol": z * math.sqrt(exact / draws),
        "bias_max": float(torch.max(torch.abs(mean - x64))), "bias_max_tol": z * step / 2 / math.sqrt(draws),
        "mse_mc": float(sq_err.mean()), "mse_mc_tol": z * float(sq_err.std(ddof=1)) / math.sqrt(draws),
        "mse_exact": exact, "bound_worst_case": dim * step**2 / 4, "bound_A1": dim * R**2 / s**2,
        "exact_over_A1": exact / (dim * R**2 / s**2) if R > 0 else 0.0,
    }


# ------------------------------------------------------------------ Theorem 1 on a convex toy
def _with_bias(x: torch.Tensor) -> torch.Tensor:
    x = x.reshape(len(x), -1).to(torch.float64)
    return torch.cat([x, torch.ones(len(x), 1, dtype=torch.float64)], dim=1)


def softmax_smoothness(x: torch.Tensor) -> float:
    """L for mean softmax cross-entropy in W: Hessian <= lambda_max(X'X/N) * lambda_max(diag p - pp') and the
    second factor is <= 1/2 by Gershgorin (row sum 2 p_i (1 - p_i))."""
    xb = _with_bias(x)
    return float(torch.linalg.eigvalsh(xb.T @ xb / len(xb)).max()) / 2


def _loss_grad(W: torch.Tensor, xb: torch.Tensor, y: torch.Tensor) -> tuple[float, torch.Tensor]:
    p = torch.softmax(xb @ W, dim=1)
    loss = float(-torch.log(p[torch.arange(len(y)), y]).mean())
    p[torch.arange(len(y)), y] -= 1
    return loss, xb.T @ p / len(y)


def convex_toy_run(x: torch.Tensor, y: torch.Tensor, num_classes: int, clients: Sequence[np.ndarray], rounds: int,
                   tau: int, eta: float, batch: int, uplink: Codec, downlink: Codec, seed: int = 0) -> pd.DataFrame:
    """Local SGD (plain, as analysed) on softmax regression with whole-model uplink/downlink codecs.

    Clients step in lockstep so the virtual average w-bar_{m,t} and the full gradient of f = mean_i f_i at it
    are recorded at every local step (equal shards: p_i = 1/n). Mini-batches are drawn with replacement, so the
    mini-batch gradient variance at w is exactly mean_j ||g_j - grad f_i||^2 / batch; its maximum over the
    visited (client, iterate) pairs is reported as sigma2. Lemma 3 is recorded per round: ||w_{m+1} - w-bar_{m,tau}||^2
    (one draw of the quantization noise) and its bound d (R_m/s_m)^2 + (1/n^2) sum_i d (R_i/s_i)^2. One row per round.
    """
    if len({len(ix) for ix in clients}) != 1:
        raise ValueError("convex_toy_run assumes equal shards (p_i = 1/n), as the theory does")
    gen = torch.Generator().manual_seed(seed)
    xb = _with_bias(x)
    xs = torch.stack([xb[torch.as_tensor(ix)] for ix in clients])  # (n, N_i, D)
    ys = torch.stack([y[torch.as_tensor(ix)] for ix in clients])  # (n, N_i)
    onehot = torch.nn.functional.one_hot(ys, num_classes).to(torch.float64)
    n_clients, n_i = ys.shape
    rows_ix = torch.arange(n_clients)[:, None]
    W = torch.zeros(xb.shape[1], num_classes, dtype=torch.float64)
    rows = []
    for m in range(rounds):
        msg = downlink.encode(W.reshape(-1), gen)
        received = downlink.decode(msg).reshape(W.shape).to(torch.float64)
        local = received.expand(n_clients, *W.shape).clone()
        grad_sq, sigma2_m = 0.0, 0.0
        for _ in range(tau):
            grad_sq += float(torch.sum(_loss_grad(local.mean(0), xb, y)[1] ** 2))
            resid = torch.softmax(xs @ local, dim=2) - onehot  # (n, N_i, C)
            g = xs.transpose(1, 2) @ resid / n_i  # full local gradients (n, D, C)
            per_sample_sq = (xs**2).sum(2) * (resid**2).sum(2)  # ||x_j (p_j - e_y)'||^2
            var = (per_sample_sq.mean(1) - (g**2).sum((1, 2))) / batch
            sigma2_m = max(sigma2_m, float(var.max()))
            pick = torch.randint(n_i, (n_clients, batch), generator=gen)
            xp, rp = xs[rows_ix, pick], torch.softmax(xs[rows_ix, pick] @ local, dim=2) - onehot[rows_ix, pick]
            local = local - eta * (xp.transpose(1, 2) @ rp) / batch
        r_up, b_up, decoded = [], [], []
        for w_i in local:
            up = uplink.encode((w_i - received).reshape(-1).to(torch.float32), gen)
            decoded.append(uplink.decode(up).reshape(W.shape).to(torch.float64))
            r_up.append(float(up.info.get("range", np.nan)))
            b_up.append(float(up.info.get("bits_per_value", 32.0)))
        w_bar_tau = local.mean(0)
        W = W + torch.stack(decoded).mean(0)
        s_dn = float(bins(msg.info.get("bits_per_value", 32.0)))
        lemma3_rhs = W.numel() * ((np.nan_to_num(msg.info.get("range", 0.0)) / s_dn) ** 2 + sum(
            (np.nan_to_num(r) / float(bins(b))) ** 2 for r, b in zip(r_up, b_up)) / n_clients**2)
        rows.append({"round": m, "grad_sq_sum": grad_sq, "sigma2": sigma2_m,
                     "lemma3_lhs": float(torch.sum((W - w_bar_tau) ** 2)), "lemma3_rhs": float(lemma3_rhs),
                     "train_loss": _loss_grad(W, xb, y)[0],
                     "R_dn": float(msg.info.get("range", np.nan)), "b_dn": float(msg.info.get("bits_per_value", 32.0)),
                     "R_up": r_up, "b_up": b_up})
    return pd.DataFrame(rows)


def softmax_toy_checks(dataset: object, clients: Sequence[np.ndarray], schemes: dict[str, tuple[Codec, Codec]],
                       rounds: int, tau: int, eta: float, *, batch: int, seed: int) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Theorem 1 (`bound_vs_curve`, every prefix) and Lemma 3 (round means) on softmax regression for each
    scheme (uplink codec, downlink codec); `dataset` has x_train, y_train, num_classes."""
    L_ = softmax_smoothness(dataset.x_train)
    d_ = (int(np.prod(dataset.x_train.shape[1:])) + 1) * dataset.num_classes
    curves, lemma3 = [], []
    for name, (up, down) in schemes.items():
        run = convex_toy_run(dataset.x_train, dataset.y_train, dataset.num_classes, clients, rounds, tau, eta, batch,
                             up, down, seed=seed)
        curves.append(bound_vs_curve(run, L=L_, d=d_, tau=tau, eta=eta, gap=math.log(dataset.num_classes)).assign(scheme=name))
        lemma3.append({"scheme": name, "mean ||w_{m+1} - w-bar_{m,tau}||^2": run["lemma3_lhs"].mean(),
                       "mean Lemma 3 bound": run["lemma3_rhs"].mean()})
    return pd.concat(curves, ignore_index=True), pd.DataFrame(lemma3)


def bound_vs_curve(run: pd.DataFrame, *, L: float, d: int, tau: int, eta: float, gap: float) -> pd.DataFrame:
    """For every prefix of k rounds: LHS of (9) (mean squared gradient norm at the virtual averages) and its RHS,
    with sigma2 the largest mini-batch variance seen so far (the assumption needs a sup over w; this is the
    sup over the visited iterates)."""
    rows = []
    for k in range(1, len(run) + 1):
        part = run.iloc[:k]
        R_up = np.array(part["R_up"].tolist())
        b_up = np.array(part["b_up"].tolist())
        terms = theorem1_rhs(np.nan_to_num(R_up), b_up, np.nan_to_num(part["R_dn"].to_numpy()),
                             part["b_dn"].to_numpy(), L=L, d=d, tau=tau, eta=eta, gap=gap,
                             sigma2=float(part["sigma2"].max()))
        lhs = float(part["grad_sq_sum"].sum()) / (k * tau)
        rows.append({"rounds": k, "lhs": lhs, **terms, "holds": lhs <= terms["rhs"]})
    return pd.DataFrame(rows)


# ----------------------------------------------- Theorems 1-3 on quadratic clients, through the real round loop
@dataclass(frozen=True)
class QuadraticToy:
    """n identical clients with f_i(w) = f(w) = 1/2 (w - b)' diag(h) (w - b), trained full-batch by
    `run_federation` (`theory.quadratic.quadratic_federation`: exact gradients, test loss = f).

    Every constant of Theorems 1-3 is exact here: L = max h (the Hessian is diag h), sigma^2 = 0 (a full-batch
    local gradient equals the global gradient, so Assumption 3 holds with no variance; identical clients make
    it unbiased for grad f as the theorem assumes), f* = 0 at w = b and f(w_0) = 1/2 sum h b^2 at w_0 = 0.
    All clients receive the same broadcast and run the same deterministic steps, so the virtual average
    w-bar_{m,t} is every client's iterate: w_t = b + (1 - eta h)^t (w_received - b).
    """

    h: tuple[float, ...]
    b: tuple[float, ...]
    n: int
    tau: int
    eta: float

    @property
    def L(self) -> float:
        return float(max(self.h))

    @property
    def d(self) -> int:
        return len(self.h)

    @property
    def gap(self) -> float:
        return float(0.5 * np.sum(np.asarray(self.h) * np.asarray(self.b) ** 2))

    @classmethod
    def spread(cls, d: int, n: int, *, tau: int, eta: float) -> QuadraticToy:
        """Curvatures evenly in [0.5, 2] and minimiser coordinates evenly in [-1, 1]."""
        return cls(tuple(np.linspace(0.5, 2.0, d)), tuple(np.linspace(-1.0, 1.0, d)), n, tau, eta)

    def step_condition(self) -> float:
        """Eq. (40) at this toy; the theorems assume it is >= 0."""
        return float(step_size_condition().subs({L: self.L, eta: self.eta, tau: self.tau}))


class ReceivedModels:
    """A ClientBehavior that records the model client 0 received each round and changes nothing."""

    def __init__(self) -> None:
        self.received: list[np.ndarray] = []

    def __call__(self, ctx: RoundContext, received: Params, trained: Params, gen: torch.Generator) -> Params:
        if ctx.client == 0:
            self.received.append(received["weight"].detach().cpu().double().reshape(-1).numpy())
        return trained


def quadratic_toy_run(toy: QuadraticToy, uplink: Codec, downlink: Codec, rounds: int, seed: int = 0) -> pd.DataFrame:
    """One run of `run_federation` on the toy (whole-model codecs, as in the theorems); per round: the sum over
    local steps of ||grad f(w-bar_{m,t})||^2, f averaged over the local steps (reconstructed, and as the round
    loop recorded it), and the logged ranges and bit-lengths (b = 32: unquantized)."""
    h, b = np.asarray(toy.h, float), np.asarray(toy.b, float)
    data, model_fn = quadratic_federation(np.tile(h, (toy.n, 1)), np.tile(b, (toy.n, 1)))
    recorder = ReceivedModels()
    res = run_federation(model_fn, data, FedAvg(), rounds,
                         local=LocalTraining(lr=toy.eta, batch_size=toy.d, steps=toy.tau),
                         uplink=Link(codec=uplink, granularity="model", payload="update"),
                         downlink=Link(codec=downlink, granularity="model", payload="weights"),
                         downlink_receivers="all", aggregation_weights="uniform", client_behavior=recorder,
                         loss_fn=half_squared_error, executor="sequential", threads=1, seed=seed, progress=False)
    decay = (1 - toy.eta * h)[None, :] ** np.arange(toy.tau)[:, None]  # (tau, d)
    clients, layers = res.clients, res.layers
    up = layers[layers["client"] != SERVER].pivot(index=["round", "client"], columns="key", values="value")
    down = layers[layers["client"] == SERVER].pivot(index="round", columns="key", values="value")
    rows = []
    for m, w_rec in enumerate(recorder.received):
        err = decay * (w_rec - b)[None, :]  # w_t - b for t = 0..tau-1
        mine = clients[clients["round"] == m + 1].sort_values("client")
        sent = up.loc[m + 1].reindex(mine["client"]) if not up.empty else pd.DataFrame()
        rows.append({"round": m + 1, "grad_sq_sum": float(np.sum((h * err) ** 2)),
                     "f_mean": float(np.mean(0.5 * np.sum(h * err**2, axis=1))),
                     "f_mean_recorded": float(mine["loss"].iloc[0]),
                     "R_up": sent["range"].tolist() if "range" in sent else [0.0] * toy.n,
                     "b_up": sent["bits_per_value"].tolist() if "bits_per_value" in sent else [32.0] * toy.n,
                     "R_dn": float(down.at[m + 1, "down/range"]) if "down/range" in down else 0.0,
                     "b_dn": float(down.at[m + 1, "down/bits_per_value"]) if "down/bits_per_value" in down else 32.0})
    return pd.DataFrame(rows)


def toy_bound(toy: QuadraticToy, run: pd.DataFrame) -> dict[str, float]:
    """LHS of (9)/(27)/(30) measured over the run and the RHS with the toy's exact constants and the run's
    logged ranges and bits; an unquantized link (b = 32) contributes nothing, which turns (9) into (27) or (30)."""
    terms = theorem1_rhs(np.array(run["R_up"].tolist()), np.array(run["b_up"].tolist()), run["R_dn"].to_numpy(),
                         run["b_dn"].to_numpy(), L=toy.L, d=toy.d, tau=toy.tau, eta=toy.eta, gap=toy.gap, sigma2=0.0)
    return {"lhs": float(run["grad_sq_sum"].sum()) / (len(run) * toy.tau), **terms}


def toy_theorem_checks(toy: QuadraticToy, schemes: dict[str, tuple[str, Codec, Codec]], rounds: int,
                       seeds: Sequence[int]) -> pd.DataFrame:
    """One row per (scheme, seed): the theorem its links fall under ("Theorem 1/2/3"), LHS and RHS terms."""
    rows = []
    for name, (theorem, up, down) in schemes.items():
        for sd in seeds:
            rows.append({"scheme": name, "theorem": theorem, "seed": sd,
                         **toy_bound(toy, quadratic_toy_run(toy, up, down, rounds, sd))})
    out = pd.DataFrame(rows)
    out["holds"] = out["lhs"] <= out["rhs"]
    out["lhs_over_gap_term"] = out["lhs"] / out["initial_gap"]
    return out
