"""MUCSC theory (Cui et al. 2021, Sec. V and Appendices A-B): statements in sympy, checks against runs.

* Eq. (6)-(8): unbiasedness and the error J of stochastic rounding, symbolically and by Monte Carlo.
* Algorithm 1's levels against the exact optimum (the dynamic programme in fedlib.codecs.mucsc).
* Eqs. (16)-(17): compression rates as exact rationals from the paper's d (Table II).
* Theorems 1-2 on a strongly convex toy federation: bound vs measured error and rate.
* Theorems 3-4 (partial participation) in sympy, checked on quadratic clients run through the real round
  loop (fedlib.engine.federation.run_federation with MUCSC links and K of N clients per round).
* Errata (docs/mucsc.md): the downlink bound (34) with Z_D for Z_U and sum p_i^2 for 1, the gamma condition,
  and bound (32)'s need for uniform levels - each with the printed and the corrected form.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd
import sympy as sp
import torch

from fedlib.algorithms import FedAvg
from fedlib.codecs import Identity
from fedlib.codecs.base import Message
from fedlib.codecs.mucsc import (
    BMUCSC,
    MUCSC,
    compression_error,
    descent_levels,
    element_error,
    optimal_levels,
    paper_levels,
    stochastic_round,
    uniform_levels,
)
from fedlib.core.contracts import LocalTraining, RoundInfo, link_rows
from fedlib.core.params import Params
from fedlib.engine.channel import Link
from fedlib.engine.executors import half_squared_error
from fedlib.engine.federation import run_federation
from fedlib.papers.mucsc import PaperLR
from theory.quadratic import quadratic_federation

# ------------------------------------------------------------------------------ symbols and statements
u, r1, r2 = sp.symbols("u r_z r_{z+1}", real=True)
p_low = (r2 - u) / (r2 - r1)  # Eq. (6)
p_high = (u - r1) / (r2 - r1)
rounding_mean = r1 * p_low + r2 * p_high
rounding_variance = (r1 - u) ** 2 * p_low + (r2 - u) ** 2 * p_high
J_element = (r2 - u) * (u - r1)  # Eq. (7)


def unbiasedness_residual() -> sp.Expr:
    """E[U~] - U for Eq. (6); simplifies to 0."""
    return sp.simplify(rounding_mean - u)


def variance_residual() -> sp.Expr:
    """E(U~ - U)^2 - J_m, Eq. (7); simplifies to 0."""
    return sp.simplify(rounding_variance - J_element)


def quarter_bound_gap() -> sp.Expr:
    """(r_{z+1} - r_z)^2 / 4 - J_m = (u - midpoint)^2 >= 0: the first step of bound (32)."""
    return sp.factor((r2 - r1) ** 2 / 4 - J_element)


def uniform_density_optimum() -> tuple[sp.Expr, sp.Expr]:
    """For a uniform density on [a, b] with one inner level r: argmin J = (a + b) / 2, J per unit mass = Delta^2 / 6."""
    a, b, r, x = sp.symbols("a b r x", real=True)
    J = sp.integrate((r - x) * (x - a), (x, a, r)) + sp.integrate((b - x) * (x - r), (x, r, b))
    r_star = sp.solve(sp.diff(J, r), r)[0]
    per_unit = sp.simplify(J.subs(r, r_star) / (b - a))
    return sp.simplify(r_star), sp.factor(per_unit.subs(b, a + 2 * sp.Symbol("Delta", positive=True)))


def gradient_matches_eq9(values: Sequence[float], levels: Sequence[float]) -> sp.Expr:
    """d/dr_z of sum_m J_m for a fixed partition minus Eq. (9)'s expression, for every inner level (all 0)."""
    rs = sp.symbols(f"r1:{len(levels) + 1}", real=True)
    idx = np.clip(np.searchsorted(levels, values, side="right") - 1, 0, len(levels) - 2)
    J = sum((rs[z + 1] - v) * (v - rs[z]) for v, z in zip(map(sp.nsimplify, values), idx))
    out = []
    for z in range(1, len(levels) - 1):
        eq9 = (sum(sp.nsimplify(v) - rs[z - 1] for v, k in zip(values, idx) if k == z - 1)
               - sum(rs[z + 1] - sp.nsimplify(v) for v, k in zip(values, idx) if k == z))
        out.append(sp.simplify(sp.diff(J, rs[z]) - eq9))
    return sp.Matrix(out)


# ---- Eqs. (16)-(17), exact
h, d, d0, KN, ZU, ZD = sp.symbols("h d d_0 K/N Z_U Z_D", positive=True)
bU, bD, bd = sp.symbols("b_U b_D b_d", positive=True)  # ceil(log2 Z_U), ceil(log2 Z_D), ceil(log2 d)
rate_mucsc = 2 * h * d / ((bU / 8 * d + h * ZU) * KN + h * ZD + bD / 8 * d)  # Eq. (16)
omega_U = ((bU + bd) / 8 * d0 + h * ZU + h) * KN
omega_D = (bD + bd) / 8 * d0 + h * (ZD + 1)
rate_bmucsc = 2 * h * d / (omega_U + omega_D)  # Eq. (17) as printed (with the super-cluster float h)


def rate_limit_mucsc() -> sp.Expr:
    """lim_{d -> oo} Eq. (16) = 16 h / (b_U K/N + b_D)."""
    return sp.simplify(sp.limit(rate_mucsc, d, sp.oo))


def table2_exact(d_value: int, k_over_n: sp.Rational = sp.Rational(1, 10), super_cluster_float: bool = True) -> dict[str, sp.Rational]:
    """Eqs. (16)-(17) at the paper's settings as exact rationals (h = 4, Z_U = Z_D = 16; B-MUCSC Z = 256, d0 = d/100).

    super_cluster_float=False drops Eq. (17)'s "+ h" terms: that is what the printed Table II matches.
    """
    bits_d = math.ceil(math.log2(d_value))
    common = {h: 4, d: d_value, KN: k_over_n}
    mucsc = rate_mucsc.subs({**common, ZU: 16, ZD: 16, bU: 4, bD: 4})
    bm = rate_bmucsc if super_cluster_float else rate_bmucsc.subs(h * ZU + h, h * ZU).subs(h * (ZD + 1), h * ZD)
    bm = bm.subs({**common, d0: sp.Rational(d_value, 100), ZU: 256, ZD: 256, bU: 8, bD: 8, bd: bits_d})
    return {"mucsc": sp.nsimplify(mucsc), "bmucsc": sp.nsimplify(bm)}


# ------------------------------------------------------------------------------ Monte Carlo checks
def element_variance(codec: MUCSC | BMUCSC, msg: object, x: torch.Tensor) -> torch.Tensor:
    """Var(U~_m) = J_m (Eq. 7) for the levels in `msg`; 0 for B-MUCSC's super cluster (sent deterministically)."""
    x = x.double()
    if isinstance(codec, MUCSC):
        return element_error(msg.payload[0].double(), x)
    if isinstance(codec, BMUCSC):
        index, levels = msg.payload[0].long(), msg.payload[1].double()
        var = torch.zeros_like(x)
        var[index] = element_error(levels, x[index])
        return var
    raise ValueError(f"the per-element variance is known for MUCSC and B-MUCSC only, not {codec!r}")


def encodings(codec: MUCSC | BMUCSC, x: torch.Tensor, gen: torch.Generator) -> Iterator[Message]:
    """`codec.encode(x, gen)` again and again, without fitting the levels again: the first message is encode's, the
    next ones keep its levels (and B-MUCSC's kept set and mean) and draw only the stochastic rounding (Eq. 6), from
    `gen` as encode draws it, so each equals what encode would give. That holds where the levels do not depend on
    the noise (every level method but Algorithm 1 from a random start); it is checked on the first message, and a
    codec whose levels draw from `gen` is refused."""
    check = torch.Generator().set_state(gen.get_state())
    first = codec.encode(x, gen)
    again = rounded(codec, first, x, check)
    if not (all(torch.equal(a, b) for a, b in zip(again.payload, first.payload))
            and torch.equal(check.get_state(), gen.get_state())):
        raise ValueError(f"{codec!r}: its levels depend on the noise, so its draws cannot keep them")
    yield first
    while True:
        yield rounded(codec, first, x, gen)


def rounded(codec: MUCSC | BMUCSC, msg: Message, x: torch.Tensor, gen: torch.Generator) -> Message:
    """`msg` with its stochastic rounding of `x` drawn again from `gen` (its levels kept), as `codec.encode` rounds."""
    flat = x.detach().reshape(-1)
    if isinstance(codec, BMUCSC):
        index, levels, ids, mean_rest = msg.payload
        fresh = stochastic_round(levels, flat[index.long()], gen).to(ids.dtype)
        return replace(msg, payload=(index, levels, fresh, mean_rest))
    levels, ids = msg.payload
    return replace(msg, payload=(levels, stochastic_round(levels, flat, gen).to(ids.dtype)))


def monte_carlo_rounding(codec: MUCSC | BMUCSC, x: torch.Tensor, draws: int, seed: int = 0) -> dict[str, float]:
    """Encode x `draws` times with independent noise and test unbiasedness against the analytic variance J_m.

    The levels must not depend on the noise (uniform init, the default). With R draws and per-element
    variance J_m, an unbiased codec has E[R (mean_m - U_m)^2 / J_m] = 1 exactly, for every element, however
    skewed its two-point distribution; a bias b_m adds R b_m^2 / J_m. Returned: that statistic averaged over
    the noisy elements (`mean_sq_z`, ~1) with its standard error; the error of the summed vector in standard
    deviations (`sum_bias_z`, ~N(0,1)); the largest |mean - U| where J_m = 0 (must be 0 up to float error);
    and the empirical E||U~ - U||^2 against the analytic J = sum_m J_m (Eq. 8).
    (A per-element max of studentized z is not used: for rarely-rounded-up elements it is heavy-tailed.)
    The draws are `encodings`: the levels fitted once, each draw's rounding drawn from the one generator.
    """
    xd = x.double()
    total = torch.zeros_like(xd)
    sq_errs = []
    for msg in itertools.islice(encodings(codec, x, torch.Generator().manual_seed(seed)), draws):
        y = codec.decode(msg).double()
        total += y
        sq_errs.append(float(((y - xd) ** 2).sum()))
    var = element_variance(codec, msg, x)
    bias = total / draws - xd
    noisy = var > 0
    terms = draws * bias[noisy] ** 2 / var[noisy]
    return {"draws": draws, "elements": x.numel(), "noisy_elements": int(noisy.sum()),
            "mean_sq_z": float(terms.mean()), "mean_sq_z_se": float(terms.std() / math.sqrt(terms.numel())),
            "sum_bias_z": float(bias.sum() / math.sqrt(float(var.sum()) / draws)),
            "max_bias_on_deterministic": float(bias[~noisy].abs().max()) if (~noisy).any() else 0.0,
            "max_abs_bias": float(bias.abs().max()),
            "J_empirical": float(np.mean(sq_errs)), "J_stderr": float(np.std(sq_errs) / math.sqrt(draws)),
            "J_analytic": float(var.sum())}


def is_unbiased(mc: dict[str, float], sigmas: float = 5.0, float_tol: float = 1e-6) -> bool:
    """The Monte Carlo verdict: mean_sq_z within `sigmas` SE of 1, |sum_bias_z| < sigmas, deterministic elements exact."""
    return (abs(mc["mean_sq_z"] - 1) < sigmas * mc["mean_sq_z_se"] and abs(mc["sum_bias_z"]) < sigmas
            and mc["max_bias_on_deterministic"] <= float_tol * max(mc["max_abs_bias"], 1e-30) + 1e-12)


def bmucsc_bias(x: torch.Tensor, draws: int = 2000, num_levels: int = 256, frac: float = 0.01, seed: int = 0) -> pd.DataFrame:
    """B-MUCSC's bias per coordinate: kept elements (MUCSC, unbiased) vs the super cluster (its mean)."""
    codec = BMUCSC(num_levels, frac)
    gen = torch.Generator().manual_seed(seed)
    total = torch.zeros_like(x, dtype=torch.float64)
    for msg in itertools.islice(encodings(codec, x, gen), draws):
        total += codec.decode(msg).double()
    mean = total / draws
    kept = torch.zeros_like(x, dtype=torch.bool)
    kept[msg.payload[0].long()] = True  # the top-|U| set does not depend on the noise
    bias = mean - x.double()
    rows = []
    for name, mask in (("kept (top by |U|)", kept), ("super cluster", ~kept)):
        rows.append({"part": name, "elements": int(mask.sum()), "mean_abs_bias": float(bias[mask].abs().mean()),
                     "bias_sq_norm": float((bias[mask] ** 2).sum()), "signal_sq_norm": float((x.double()[mask] ** 2).sum())})
    rows.append({"part": "sum of all elements", "elements": x.numel(), "mean_abs_bias": abs(float(mean.sum() - x.double().sum())),
                 "bias_sq_norm": float("nan"), "signal_sq_norm": float(x.double().sum() ** 2)})
    return pd.DataFrame(rows)


def levels_table(vectors: dict[str, torch.Tensor], zs: Sequence[int] = (4, 8, 16), seed: int = 0) -> pd.DataFrame:
    """J / J_uniform of Algorithm 1 (uniform init, best kept; random init, last iterate) and the exact optimum."""
    rows = []
    for name, x in vectors.items():
        x = x.double()
        for z in zs:
            j_uniform = float(compression_error(uniform_levels(x, z), x))
            _, paper = paper_levels(x, z)
            _, paper_random = paper_levels(x, z, init="random", keep_best=False, gen=torch.Generator().manual_seed(seed))
            _, descent = descent_levels(x, z)
            _, j_opt = optimal_levels(x, z)
            rows.append({"data": name, "Z": z, "n": x.numel(), "J_uniform": j_uniform,
                         "paper_uniform_init": paper["J"] / j_uniform, "paper_random_init": paper_random["J"] / j_uniform,
                         "descent": descent["J"] / j_uniform, "optimal": j_opt / j_uniform})
    return pd.DataFrame(rows)


def large_d_levels(d: int, zs: Sequence[int] = (4, 8, 16), distinct: int = 2000, seed: int = 0) -> pd.DataFrame:
    """J / J_uniform at size d for Algorithm 1 as printed, coordinate descent and the exact optimum, on d draws from
    `distinct` Laplace values (few distinct values keep the dynamic programme exact at any d)."""
    rng = np.random.default_rng(seed)
    x = torch.from_numpy(rng.choice(rng.laplace(0, 1e-3, distinct), size=d))
    rows = []
    for z in zs:
        j_uniform = float(compression_error(uniform_levels(x, z), x))
        _, paper = paper_levels(x, z)
        _, descent = descent_levels(x, z)
        _, j_opt = optimal_levels(x, z)
        rows.append({"d": d, "Z": z, "paper": paper["J"] / j_uniform, "descent": descent["J"] / j_uniform,
                     "optimal": j_opt / j_uniform, "descent_sweeps": descent["sweeps"]})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ strongly convex toy federation
@dataclass(frozen=True)
class Toy:
    """N quadratic clients F_i(w) = 1/2 (w - c_i)^T A_i (w - c_i), eigenvalues of A_i in [mu, L]."""

    A: torch.Tensor  # N x d x d
    c: torch.Tensor  # N x d
    p: torch.Tensor  # N
    mu: float
    L: float
    noise: float  # std of the gradient noise per coordinate: sigma_i^2 = d noise^2

    @property
    def w_star(self) -> torch.Tensor:
        Abar = (self.p[:, None, None] * self.A).sum(0)
        return torch.linalg.solve(Abar, (self.p[:, None] * (self.A @ self.c[..., None])[..., 0]).sum(0))

    def loss(self, w: torch.Tensor) -> torch.Tensor:
        """F(w) = sum_i p_i F_i(w) for w of shape (..., d)."""
        diff = w[..., None, :] - self.c
        return 0.5 * (self.p * (diff[..., None, :] @ self.A @ diff[..., None])[..., 0, 0]).sum(-1)


def make_toy(num_clients: int = 10, dim: int = 10, mu: float = 1.0, L: float = 4.0, shift: float = 1.0,
             noise: float = 0.5, seed: int = 0) -> Toy:
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(num_clients, dim, dim, generator=g, dtype=torch.float64))
    eig = mu + (L - mu) * torch.rand(num_clients, dim, generator=g, dtype=torch.float64)
    eig[:, 0], eig[:, 1] = mu, L  # make mu and L exact
    A = q @ torch.diag_embed(eig) @ q.transpose(1, 2)
    c = shift * torch.randn(num_clients, dim, generator=g, dtype=torch.float64)
    return Toy(A, c, torch.full((num_clients,), 1 / num_clients, dtype=torch.float64), mu, L, noise)


def _uniform_round(x: torch.Tensor, z: int, gen: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """MUCSC with uniform levels (bound (32)'s setting), batched over leading dims: (decoded, J per vector)."""
    lo, hi = x.min(-1, keepdim=True).values, x.max(-1, keepdim=True).values
    levels = lo + (hi - lo) * torch.linspace(0, 1, z, dtype=x.dtype)
    return levels.gather(-1, stochastic_round(levels, x, gen)), compression_error(levels, x)


def run_toy(toy: Toy, steps: int, *, E: int = 5, zu: int | None = None, zd: int | None = None, seeds: int = 20,
            seed: int = 0, w0_scale: float = 3.0) -> pd.DataFrame:
    """Full-participation local SGD (Eqs. 12-13) with eta_t = 2 / (mu (gamma + t)), gamma = max(8 kappa, E).

    zu / zd None: no compression on that link. Returns per sync step t: the seed-mean of F(w_t) - F*,
    of ||w_t - w*||^2, of psi_t = J^D + sum p_i^2 J^i (analytic J of the levels used) and the max seed-mean
    ||g||^2 seen so far (the G^2 of Assumption 3 on the visited region).
    """
    gen = torch.Generator().manual_seed(seed)
    n, dim = toy.c.shape
    kappa = toy.L / toy.mu
    gamma = max(8 * kappa, E)
    w_star, f_star = toy.w_star, float(toy.loss(toy.w_star))
    w_sync = w_star + w0_scale * torch.randn(seeds, dim, generator=gen, dtype=torch.float64) / math.sqrt(dim)
    w = w_sync[:, None, :].expand(seeds, n, dim).clone()
    rows, g2_max = [], 0.0
    for t in range(steps):
        eta = 2 / (toy.mu * (gamma + t))
        grad = (toy.A @ (w - toy.c)[..., None])[..., 0] + toy.noise * torch.randn(w.shape, generator=gen, dtype=w.dtype)
        g2_max = max(g2_max, float((grad**2).sum(-1).mean(0).max()))
        w = w - eta * grad
        if (t + 1) % E:
            continue
        update = w_sync[:, None, :] - w  # U^i = w_sync - w^i (Eq. 5)
        psi = torch.zeros(seeds, dtype=w.dtype)
        if zu is not None:
            update, j_up = _uniform_round(update, zu, gen)
            psi += (toy.p**2 * j_up).sum(-1)
        agg = (toy.p[:, None] * update).sum(1)
        if zd is not None:
            agg, j_down = _uniform_round(agg, zd, gen)
            psi += j_down
        w_sync = w_sync - agg
        w = w_sync[:, None, :].expand(seeds, n, dim).clone()
        rows.append({"t": t + 1, "gap": float((toy.loss(w_sync) - f_star).mean()),
                     "dist2": float(((w_sync - w_star) ** 2).sum(-1).mean()), "psi": float(psi.mean()), "G2": g2_max})
    out = pd.DataFrame(rows)
    out.attrs.update({"gamma": gamma, "E": E, "zu": zu, "zd": zd, "dist0": float(w0_scale**2)})
    return out


def loglog_slope(df: pd.DataFrame, start_frac: float = 0.2) -> float:
    """Least-squares slope of log(gap) against log(t) over the last (1 - start_frac) of the run."""
    tail = df[df["t"] >= start_frac * df["t"].max()]
    return float(np.polyfit(np.log(tail["t"]), np.log(tail["gap"]), 1)[0])


def theorem2_bound(toy: Toy, T: int, G2: float, dist0: float, *, E: int = 5, zu: int | None = None,
                   zd: int | None = None, form: str = "printed") -> float:
    """Theorem 2: E F(w_T) - F* <= 2 kappa / (gamma + T) (tau / mu + 2 L ||w0 - w*||^2).

    form="printed": tau's compression term (d^2 + 2d(Z_D-1)^2)/(Z_D-1)^4 + 2d/(Z_U-1)^2, times sum p_i^2;
    form="corrected": downlink term d(d + 2(Z_U-1)^2)/((Z_D-1)^2 (Z_U-1)^2) (times 1, Jensen) + uplink
    2d/(Z_U-1)^2 sum p_i^2. Compression absent on a link drops its term. sigma_i^2 = d noise^2, B = 1,
    Gamma = F* (every F_i* = 0).
    """
    if form not in ("printed", "corrected"):
        raise ValueError(f"form must be 'printed' or 'corrected', got {form!r}")
    dim = toy.c.shape[1]
    kappa = toy.L / toy.mu
    gamma = max(8 * kappa, E)
    p2 = float((toy.p**2).sum())
    Gamma = float(toy.loss(toy.w_star))
    tau = p2 * dim * toy.noise**2 + 6 * toy.L * Gamma + 8 * (E - 1) ** 2 * G2
    comp = 0.0
    if zu is not None:
        comp += 2 * dim / (zu - 1) ** 2 * p2
    if zd is not None:
        if form == "printed":
            comp += (dim**2 + 2 * dim * (zd - 1) ** 2) / (zd - 1) ** 4 * p2
        else:
            zu_eff = zu if zu is not None else math.inf
            up_factor = 1 + (dim / (2 * (zu_eff - 1) ** 2) if zu is not None else 0.0)
            comp += 2 * dim / (zd - 1) ** 2 * up_factor
    tau += comp * E**2 * G2
    return 2 * kappa / (gamma + T) * (tau / toy.mu + 2 * toy.L * dist0)


def theorem1_bound(toy: Toy, run: pd.DataFrame, *, E: int = 5) -> pd.Series:
    """Theorem 1 with the measured psi_t: L/2 v_T / (T + gamma), beta = 2/mu (psi only at sync steps)."""
    dim = toy.c.shape[1]
    gamma, beta = run.attrs["gamma"], 2 / toy.mu
    p2 = float((toy.p**2).sum())
    tau = p2 * dim * toy.noise**2 + 6 * toy.L * float(toy.loss(toy.w_star)) + 8 * (E - 1) ** 2 * run["G2"]
    acc = ((run["t"] + gamma) * run["psi"]).cumsum()
    v = np.maximum(beta**2 * tau / (beta * toy.mu - 1) + acc, gamma * run.attrs["dist0"])
    return toy.L / 2 * v / (run["t"] + gamma)


def convergence_check(toy: Toy, runs: dict[str, pd.DataFrame]) -> pd.DataFrame:
    """Bound vs measured for each run: final gap, Thm 2 (printed and corrected), Thm 1 with measured psi, slope."""
    rows = []
    for name, run in runs.items():
        last = run.iloc[-1]
        kw = {"E": run.attrs["E"], "zu": run.attrs["zu"], "zd": run.attrs["zd"]}
        printed = theorem2_bound(toy, int(last["t"]), float(last["G2"]), run.attrs["dist0"], form="printed", **kw)
        corrected = theorem2_bound(toy, int(last["t"]), float(last["G2"]), run.attrs["dist0"], form="corrected", **kw)
        rows.append({"run": name, "T": int(last["t"]), "measured_gap": float(last["gap"]),
                     "thm2_printed": printed, "thm2_corrected": corrected,
                     "thm1_measured_psi": float(theorem1_bound(toy, run, E=run.attrs["E"]).iloc[-1]),
                     "holds": bool(last["gap"] <= min(printed, corrected)), "loglog_slope": loglog_slope(run)})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------ Theorems 3-4 (partial participation)
T_, gam, beta, mu_, L_, G2, sig2B, Gam, E_, K_, dd = sp.symbols("T gamma beta mu L G^2 sigma^2/B Gamma E K d", positive=True)
Zu_, Zd_, Dist0, PsiSum = sp.symbols("Z_U Z_D Delta_0 Psi_T", positive=True)  # Psi_T = sum_{t<=T} (t + gamma) psi_t
Cmp = sp.Symbol("c", nonnegative=True)  # 1 with MUCSC on both links, 0 without compression
tau3 = sig2B + 6 * L_ * Gam + 8 * (E_ - 1) ** 2 * G2 + 4 * E_**2 * G2 / K_  # Theorem 3 (sum p_i^2 sigma_i^2 / B -> sig2B)
v3 = sp.Max(beta**2 * tau3 / (beta * mu_ - 1) + PsiSum, gam * Dist0)
theorem3 = L_ / 2 * v3 / (T_ + gam)  # psi_{t+1} = J^D_{t+1} + (1/K) sum_i p_i J^i_{t+1}
tau4 = (sig2B + 6 * L_ * Gam + 8 * (E_ - 1) ** 2 * G2 + 4 * E_**2 * G2 / K_
        + Cmp * ((dd**2 + 2 * dd * (Zd_ - 1) ** 2) / (Zd_ - 1) ** 4 + 2 * dd / (K_ * (Zu_ - 1) ** 2)) * E_**2 * G2)
theorem4 = 2 * (L_ / mu_) / (gam + T_) * (tau4 / mu_ + 2 * L_ * Dist0)  # gamma = max{8 kappa, E}, eta_t = 2 / (mu (gamma + t))
_theorem3 = sp.lambdify((T_, gam, beta, mu_, L_, G2, sig2B, Gam, E_, K_, Dist0, PsiSum), theorem3, "math")
_theorem4 = sp.lambdify((T_, gam, mu_, L_, G2, sig2B, Gam, E_, K_, dd, Zu_, Zd_, Dist0, Cmp), theorem4, "math")


def theorem4_from_theorem3() -> sp.Expr:
    """Theorem 4 is Theorem 3 with beta = 2/mu, gamma = 8 kappa and psi folded into tau: without compression
    (c = 0, psi = 0) Theorem 3's bound with both branches of the max added equals Theorem 4's. Returns
    Thm 4 - Thm 3 in that case: 0."""
    t3 = (L_ / 2 * (beta**2 * tau3 / (beta * mu_ - 1) + gam * Dist0) / (T_ + gam)).subs(beta, 2 / mu_)
    return sp.simplify((theorem4.subs(Cmp, 0) - t3).subs(gam, 8 * L_ / mu_))


@dataclass(frozen=True)
class QuadraticToy:
    """N clients f_i(w) = 1/2 (w - b_i)^T diag(h_i) (w - b_i), h in [mu, L], run by fedlib's round loop
    (theory.quadratic.quadratic_federation: full-batch steps, so sigma = 0; p_i = 1/N)."""

    h: np.ndarray  # N x d
    b: np.ndarray  # N x d

    @property
    def num_clients(self) -> int:
        return self.h.shape[0]

    @property
    def mu(self) -> float:
        return float(self.h.min())

    @property
    def L(self) -> float:
        return float(self.h.max())

    @property
    def w_star(self) -> np.ndarray:
        return (self.h * self.b).sum(0) / self.h.sum(0)

    def loss(self, w: np.ndarray) -> float:
        return float(0.5 * (self.h * (w - self.b) ** 2).sum(1).mean())

    def grad_sq_max(self, w: np.ndarray) -> float:
        """max_i ||grad f_i(w)||^2 (A3's G^2 at w)."""
        return float(((self.h * (w - self.b)) ** 2).sum(1).max())


def make_quadratic_toy(num_clients: int = 10, dim: int = 10, mu: float = 1.0, L: float = 4.0, shift: float = 1.0,
                       seed: int = 0) -> QuadraticToy:
    rng = np.random.default_rng(seed)
    h = rng.uniform(mu, L, (num_clients, dim))
    h[:, 0], h[:, 1] = mu, L  # make mu and L exact
    return QuadraticToy(h, shift * rng.standard_normal((num_clients, dim)))


def run_partial(toy: QuadraticToy, rounds: int, *, clients: int, z: int | None, E: int = 5, seed: int = 0) -> pd.DataFrame:
    """FedAvg through `run_federation`: K = `clients` of N per round (uniform, without replacement, weights 1/K),
    E full-batch local steps with eta_t = 2 / (mu (gamma + t)), gamma = max{8 kappa, E}, t = round E + step;
    MUCSC with uniform levels (bound (32)'s setting) on both links (z None: fp32). Returns per sync step t = E
    (round + 1): the gap F(w_t) - F*, psi_t = J^D + (1/K) mean_selected J^i (the sampled estimate of
    (1/K) sum_i p_i J^i) and G^2 = max over clients of ||grad f_i||^2 at the round's start (local steps with
    eta h <= 1 only shrink it)."""
    data, model_fn = quadratic_federation(toy.h, toy.b)
    dim = toy.h.shape[1]
    kappa = toy.L / toy.mu
    gamma = max(8 * kappa, E)
    codec = Identity() if z is None else MUCSC(z, levels="uniform")

    def g2_hook(params: Params, info: RoundInfo) -> tuple[Params, dict[str, float]]:
        return params, {"G2": toy.grad_sq_max(info.before["weight"].double().numpy()[0])}

    res = run_federation(model_fn, data, FedAvg(), rounds, sampler=clients, seed=seed, progress=False,
                         local=LocalTraining(lr=PaperLR(2 / (toy.mu * gamma), gamma, 0.0, E), batch_size=dim, steps=E),
                         uplink=Link(codec, granularity="model"), downlink=Link(codec, payload="update", granularity="model"),
                         downlink_receivers="all", loss_fn=half_squared_error, hooks=[g2_hook], executor="sequential")
    r, layers = res.rounds, res.layers

    def per_round(rows: pd.DataFrame) -> np.ndarray:  # mean over the round's messages; 0 where none (fp32)
        return rows.groupby("round")["value"].mean().reindex(r["round"]).fillna(0.0).to_numpy()

    j_down, j_up = per_round(link_rows(layers, "down", "J")), per_round(link_rows(layers, "up", "J"))
    return pd.DataFrame({"t": E * r["round"], "gap": r["test_loss"] - toy.loss(toy.w_star), "psi": j_down + j_up / clients,
                         "G2": r["G2"]})


def partial_check(toy: QuadraticToy, runs: dict[str, list[pd.DataFrame]], *, clients: int, zs: dict[str, int | None],
                  E: int = 5) -> pd.DataFrame:
    """Theorems 3 and 4 against the seed-mean gap at every sync step of each run: sigma = 0, Gamma = F*
    (every f_i* = 0), mu, L exact, G^2 the max measured over all seeds and rounds, Theorem 3 with the measured
    psi_t (seed mean), Theorem 4 with Z_U = Z_D = Z (the printed and corrected downlink factors then agree)."""
    kappa, dim = toy.L / toy.mu, toy.h.shape[1]
    gamma, beta = max(8 * kappa, E), 2 / toy.mu
    gamma_f, dist0 = toy.loss(toy.w_star), float((toy.w_star**2).sum())
    rows = []
    for name, seeds in runs.items():
        mean = pd.concat(seeds).groupby("t", as_index=False)[["gap", "psi"]].mean()
        g2 = max(float(s["G2"].max()) for s in seeds)
        psi_sum = ((mean["t"] + gamma) * mean["psi"]).cumsum()
        z = zs[name]
        b3 = [_theorem3(t, gamma, beta, toy.mu, toy.L, g2, 0.0, gamma_f, E, clients, dist0, ps)
              for t, ps in zip(mean["t"], psi_sum)]
        zz, on = (2, 0.0) if z is None else (z, 1.0)  # without compression the Z terms are switched off (c = 0)
        b4 = [_theorem4(t, gamma, toy.mu, toy.L, g2, 0.0, gamma_f, E, clients, dim, zz, zz, dist0, on) for t in mean["t"]]
        last = mean.iloc[-1]
        rows.append({"run": name, "T": int(last["t"]), "seeds": len(seeds), "G2": g2, "measured_gap": float(last["gap"]),
                     "thm3_measured_psi": b3[-1], "thm4": b4[-1],
                     "holds": bool((mean["gap"] <= np.minimum(b3, b4)).all()),
                     "loglog_slope": loglog_slope(mean)})
    return pd.DataFrame(rows)


def lemma4_check(updates: torch.Tensor, p: torch.Tensor, zu: int, zd: int, draws: int = 4000, seed: int = 0) -> dict[str, float]:
    """Lemma 4 (full participation): E||D~ - sum p_i U^i||^2 = E[J^D] + sum p_i^2 J^i (equality under independence)."""
    gen = torch.Generator().manual_seed(seed)
    target = (p[:, None] * updates).sum(0)
    reps = updates.expand(draws, *updates.shape)
    up, j_up = _uniform_round(reps, zu, gen)
    down, j_down = _uniform_round((p[:, None] * up).sum(1), zd, gen)
    err = ((down - target) ** 2).sum(-1)
    return {"measured": float(err.mean()), "stderr": float(err.std() / math.sqrt(draws)),
            "predicted": float(j_down.mean() + (p**2 * j_up[0]).sum())}


# ------------------------------------------------------------------------------ errata
def downlink_bound_factor(dim: int, zu: int, zd: int, p: Sequence[float], form: str) -> float:
    """The factor multiplying E^2 eta_t^2 G^2 in the bound on J^D: (34) as printed or corrected (docs/mucsc.md, Errata)."""
    if form == "printed":
        return (dim**2 + 2 * dim * (zd - 1) ** 2) / (zd - 1) ** 4 * float(np.sum(np.square(p)))
    if form == "corrected":
        return dim * (dim + 2 * (zu - 1) ** 2) / ((zd - 1) ** 2 * (zu - 1) ** 2)
    raise ValueError(f"form must be 'printed' or 'corrected', got {form!r}")


def jensen_step_check(update: torch.Tensor, num_clients: int, zu: int = 16, draws: int = 2000, seed: int = 0) -> dict[str, float]:
    """Step (34) claims E||sum p_i U~^i||^2 <= sum p_i^2 E||U~^i||^2. With identical clients (p_i = 1/N) it fails:
    the left side is ~||U||^2, the right ~||U||^2 / N. Jensen's sum p_i E||U~^i||^2 holds."""
    gen = torch.Generator().manual_seed(seed)
    p = torch.full((num_clients,), 1 / num_clients, dtype=torch.float64)
    reps = update.double().expand(draws, num_clients, update.numel())
    up, _ = _uniform_round(reps, zu, gen)
    lhs = float(((p[:, None] * up).sum(1) ** 2).sum(-1).mean())
    per_client = float((up**2).sum(-1).mean())
    return {"lhs": lhs, "paper_rhs_sum_p2": float((p**2).sum()) * per_client, "jensen_rhs_sum_p": per_client,
            "paper_step_holds": lhs <= float((p**2).sum()) * per_client, "jensen_holds": lhs <= per_client}


def gamma_condition(kappa: float, E: int) -> dict[str, float | bool]:
    """Theorem 2 states gamma = max{8 kappa, E}; its last step needs gamma <= 8 kappa, false when E > 8 kappa."""
    gamma_printed, gamma_proof = max(8 * kappa, E), max(8 * kappa - 1, E)
    return {"gamma_printed": gamma_printed, "gamma_proof": gamma_proof, "final_step_valid": gamma_printed <= 8 * kappa}


def induction_step_identity() -> sp.Expr:
    """(t+g-1)/(t+g)^2 - 1/(t+g+1) = -1/((t+g)^2 (t+g+1)) <= 0 (the key step of (30))."""
    t, g = sp.symbols("t gamma", positive=True)
    return sp.factor(sp.simplify((t + g - 1) / (t + g) ** 2 - 1 / (t + g + 1)))


def bound32_violations(trials: int = 200, n: int = 300, z: int = 8, seed: int = 0) -> dict[str, float]:
    """How often Algorithm 1 as printed (random init, last iterate) ends with J above the uniform levels'
    J - where bound (32) would not apply - vs the uniform-init, best-kept variant (never, by construction)."""
    g = torch.Generator().manual_seed(seed)
    worse_random, worse_uniform = 0, 0
    for _ in range(trials):
        # Laplace(0, 1) as the difference of two Exp(1) draws, from the seeded generator
        x = (torch.rand(n, generator=g, dtype=torch.float64).log() - torch.rand(n, generator=g, dtype=torch.float64).log()) * 1e-2
        j_uniform = float(compression_error(uniform_levels(x, z), x))
        _, rand = paper_levels(x, z, init="random", keep_best=False, gen=g)
        _, unif = paper_levels(x, z)
        worse_random += rand["J"] > j_uniform * (1 + 1e-12)
        worse_uniform += unif["J"] > j_uniform * (1 + 1e-12)
    return {"trials": trials, "random_init_above_uniform": worse_random / trials,
            "uniform_init_best_above_uniform": worse_uniform / trials}
