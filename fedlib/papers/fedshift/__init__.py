"""FedShift (Seo, Kim, Rong; arXiv 2402.01070): mixed-precision uploads and server-side weight shifting.

Pieces, each usable on its own with `fedlib.engine.federation.run_federation`:

* `parity_shards`: the paper's label split (even labels on even client ids = superior, odd labels on
  odd ids = inferior, two same-parity labels per client, every shard on two clients).
* `inferior_clients`: which clients quantize their uploads ("odd_ids" as in the reference code, or
  "random_half").
* `StratifiedSampler`: every round picks a fixed number of inferior and of superior clients (the
  code's "half-odd-even" selection); plain uniform sampling is run_federation's own `sampler=`.
* `mixed_uplink`: the uplink, a `fedlib.codecs.PerClient` policy (a quantizer for inferior clients, fp32
  for superior ones), carrying whole trained weights (`payload="weights"`); Fed-EF is the same link
  with `error_feedback=True` (the spec's "weights" variant: send Q(w + e), e <- w + e - DeQ(Q(w + e))).
* `FedShift`: the post-aggregation hook, Eq. 10 per layer,
      w_hat = w - c * mean(w) * 1,   c = sum of the aggregation weights of this round's inferior clients
  (= |I_t| / K with the paper's uniform weights). It also records the per-layer quantities that
  Theorem 2 is about (theory/fedshift.py checks them). With no quantizer in the uplink it is the
  full-precision "shift-only" ablation.
* `DivergenceMonitor`: Fig. 9's per-layer distances, for runs with and without the shift.
* `prediction_histogram`: Fig. 8's predicted-label distribution.
* `Theorem1Probe`: Theorem 1's constants (L, mu, sigma^2, G^2, Gamma, M) estimated on the run's own iterates
  of a strongly convex problem, with F(w) - F* every round.

The notebook's runs as data: `experiments(params)` turns the notebook's parameters into run specs (Table I,
Table II, the mechanism ablations, the reference-code K-means grid and the Theorem 1 runs); the plan
registered as "fedshift" adds the paper-specific parts (parity split, stratified sampler, mixed-precision
uplink, the shift and monitoring hooks, the Theorem 1 step sizes) and collects Fig. 8's prediction
histogram as a "predictions" table.
"""
from __future__ import annotations

import math
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.algorithms.base import Algorithm
from fedlib.codecs.base import Identity
from fedlib.codecs.kmeans import KMEANS_INITS, REFERENCE_CODE, KMeansQuantizer
from fedlib.codecs.policies import CodecChoice, PerClient
from fedlib.core import params as P
from fedlib.core.augment import AUGMENTATIONS
from fedlib.core.contracts import MODEL, SERVER, Diagnostics, FederatedData, RoundInfo, RunResult
from fedlib.core.params import Params
from fedlib.core.seeding import Seeds
from fedlib.data import Dataset
from fedlib.data.partition import from_indices
from fedlib.engine.channel import Link
from fedlib.engine.federation import evaluate
from fedlib.paper import Headline
from fedlib.paper_params import PaperParams, Threads, param
from fedlib.registry import CODEC_POLICIES, COLLECTORS, EXPERIMENTS, HOOKS, LR_SCHEDULES, SAMPLERS, SPLITS
from fedlib.runs import RunPlan, RunSpec

BUFFER_SUFFIXES = ("running_mean", "running_var", "num_batches_tracked")
ALGORITHMS = ("fedavg", "fedprox", "scaffold", "fedef")
KMEANS_SETTINGS = ("converged", "reference")  # the K-means-setting grid's: ours, the authors' code's


# ------------------------------------------------------------------------------------- data split

def parity_shards(labels: np.ndarray, num_clients: int, rng: np.random.Generator | int) -> list[np.ndarray]:
    """FedShift's label-parity shard split (docs/fedshift.md, setups; generalised to any N that is a multiple of the
    number of classes C, C even and >= 4).

    Each class is cut into s = N / C shards (in dataset order, sizes differ by <= 1). Candidate j gets
    shard (j mod s) of label L = j // s and shard (j mod s) of label (L + 2) mod C, so every shard is on
    two clients. Candidates with even L are shuffled and go to even client ids, odd L to odd ids. For
    N = 100 on CIFAR-10 this is the reference code's split.
    """
    labels = np.asarray(labels)
    classes = np.unique(labels)
    c = len(classes)
    if c < 4 or c % 2 or not np.array_equal(classes, np.arange(c)):
        raise ValueError(f"parity_shards needs labels 0..C-1 with C even and >= 4, got classes {classes.tolist()}")
    if num_clients < c or num_clients % c:
        raise ValueError(f"num_clients must be a positive multiple of the {c} classes, got {num_clients}")
    s = num_clients // c
    pieces = [np.array_split(np.flatnonzero(labels == k), s) for k in range(c)]
    candidates = [np.concatenate([pieces[j // s][j % s], pieces[(j // s + 2) % c][j % s]]) for j in range(num_clients)]
    rng = np.random.default_rng(rng)
    even = [candidates[j] for j in rng.permutation([j for j in range(num_clients) if (j // s) % 2 == 0])]
    odd = [candidates[j] for j in rng.permutation([j for j in range(num_clients) if (j // s) % 2 == 1])]
    parts = [part for pair in zip(even, odd) for part in pair]
    return from_indices(parts, len(labels), allow_overlap=True)


def inferior_clients(num_clients: int, rule: str = "odd_ids", rng: np.random.Generator | int | None = None) -> frozenset[int]:
    """The pre-identified inferior (quantizing) clients: "odd_ids" (reference code; with `parity_shards`
    these hold the odd labels) or "random_half" (a random half, needs `rng`)."""
    if num_clients < 2:
        raise ValueError(f"need at least 2 clients, got {num_clients}")
    if rule == "odd_ids":
        return frozenset(range(1, num_clients, 2))
    if rule == "random_half":
        if rng is None:
            raise ValueError("rule='random_half' needs rng")
        chosen = np.random.default_rng(rng).choice(num_clients, size=num_clients // 2, replace=False)
        return frozenset(int(i) for i in chosen)
    raise ValueError(f"unknown inferior rule {rule!r}; choose 'odd_ids' or 'random_half'")


# ---------------------------------------------------------------------------------------- sampler

class StratifiedSampler:
    """Select `per_round_inferior` inferior and `per_round_superior` superior clients every round,
    uniformly without replacement within each group (the reference code's 5 odd + 5 even)."""

    def __init__(self, inferior: Iterable[int], num_clients: int, per_round_inferior: int, per_round_superior: int):
        self.inferior = np.array(sorted(set(int(i) for i in inferior)), dtype=np.int64)
        self.superior = np.setdiff1d(np.arange(num_clients), self.inferior)
        if len(self.inferior) and (self.inferior.min() < 0 or self.inferior.max() >= num_clients):
            raise ValueError(f"inferior client ids must lie in [0, {num_clients})")
        if not 0 <= per_round_inferior <= len(self.inferior) or not 0 <= per_round_superior <= len(self.superior):
            raise ValueError(f"cannot pick {per_round_inferior} of {len(self.inferior)} inferior and "
                             f"{per_round_superior} of {len(self.superior)} superior clients per round")
        if per_round_inferior + per_round_superior == 0:
            raise ValueError("select at least one client per round")
        self.num_clients = num_clients
        self.k_inferior, self.k_superior = int(per_round_inferior), int(per_round_superior)

    def __call__(self, round: int, num_clients: int, rng: np.random.Generator) -> np.ndarray:
        if num_clients != self.num_clients:
            raise ValueError(f"sampler was built for {self.num_clients} clients, the run has {num_clients}")
        picked = [rng.choice(self.inferior, self.k_inferior, replace=False),
                  rng.choice(self.superior, self.k_superior, replace=False)]
        return np.sort(np.concatenate(picked))


# ------------------------------------------------------------------------------- mixed precision

def mixed_uplink(codec: CodecChoice | None, inferior: Iterable[int], num_clients: int,
                 error_feedback: bool = False) -> Link:
    """Uplink of trained weights, layer by layer: `codec` for the inferior clients, fp32 for the superior ones.
    codec=None is the all-fp32 ("32+32") uplink."""
    policy = Identity() if codec is None else PerClient(num_clients, [(codec, inferior)], default="fp32")
    return Link(policy, granularity="layer", payload="weights", error_feedback=error_feedback)


def algorithm_and_uplink(name: str, codec: CodecChoice | None, inferior: Iterable[int], num_clients: int,
                         **algorithm_kwargs: Any) -> tuple[Algorithm, Link]:
    """The paper's four baselines as (algorithm, uplink). "fedavg" is Table I's FedPAQ row (FedAvg with
    deterministic weight quantization); "fedef" is FedAvg (server lr 1) with an error-feedback uplink
    on the weights (docs/fedshift.md, Fed-EF); FedProx/SCAFFOLD take their own kwargs (mu, coef)."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown FedShift baseline {name!r}; choose from {ALGORITHMS}")
    if name == "fedef":
        if algorithm_kwargs:
            raise ValueError(f"fedef takes no algorithm options, got {sorted(algorithm_kwargs)}")
        return make_algorithm("fedavg"), mixed_uplink(codec, inferior, num_clients, error_feedback=True)
    return make_algorithm(name, **algorithm_kwargs), mixed_uplink(codec, inferior, num_clients)


# ------------------------------------------------------------------------------------------- hooks

def _groups(params: Params, scope: str) -> dict[str, list[str]]:
    keys = [k for k, v in params.items() if v.is_floating_point() and not k.endswith(BUFFER_SUFFIXES)]
    if scope == "layer":
        return {k: [k] for k in keys}
    return {MODEL: keys}


def _flat(params: Params, keys: Sequence[str]) -> torch.Tensor:
    return P.flatten({k: params[k] for k in keys}).double()


class FedShift:
    """Post-aggregation hook: w_hat = w - c * mean(w) per layer (Eq. 10), c = sum of the round's
    aggregation weights over inferior clients (Eq. 9 with weights p_k; |I_t|/K when uniform).

    scope: "layer" (the paper: every weight tensor separately; BN buffers are never shifted) or
    "model" (one scalar mean over all tensors; an ablation). The hook shifts whenever the round has
    inferior clients, quantized or not, so with an all-fp32 uplink it is the shift-only ablation.

    Diagnostics per round: shift/coef, shift/I, shift/K and, per group g (a layer, or "model"; rows of the
    layer table), shift/numel, shift/m_prev (mean of the model the clients started from, m^t), shift/m_agg
    (m^{t+1}, before the shift), shift/m_new (after), shift/dfa2 = ||w_agg - w^t||^2 and shift/dfs2 =
    ||w_hat - w^t||^2 (float64 sums over the float32 tensors), the inputs of Theorem 2.
    """

    def __init__(self, inferior: Iterable[int], scope: str = "layer"):
        if scope not in ("layer", "model"):
            raise ValueError(f"scope must be 'layer' or 'model', got {scope!r}")
        self.inferior = frozenset(int(i) for i in inferior)
        self.scope = scope

    def coefficient(self, clients: Sequence[int], weights: torch.Tensor) -> float:
        return float(sum(float(w) for c, w in zip(clients, weights.tolist()) if c in self.inferior))

    def shift(self, params: Params, coef: float) -> Params:
        out = dict(params)
        for keys in _groups(params, self.scope).values():
            mean = _flat(params, keys).mean()
            for k in keys:
                out[k] = (params[k].double() - coef * mean).to(params[k].dtype)
        return out

    def __call__(self, params: Params, info: RoundInfo) -> tuple[Params, Diagnostics]:
        clients = [r.client for r in info.results]
        coef = self.coefficient(clients, info.weights)
        shifted = self.shift(params, coef) if coef else params
        per_group: dict[str, dict[str, float]] = {}
        for g, keys in _groups(params, self.scope).items():
            prev, agg, new = _flat(info.before, keys), _flat(params, keys), _flat(shifted, keys)
            for name, value in (("numel", agg.numel()), ("m_prev", prev.mean()), ("m_agg", agg.mean()),
                                ("m_new", new.mean()), ("dfa2", ((agg - prev) ** 2).sum()),
                                ("dfs2", ((new - prev) ** 2).sum())):
                per_group.setdefault(f"shift/{name}", {})[g] = float(value)
        return shifted, {"shift/coef": coef, "shift/I": float(sum(c in self.inferior for c in clients)),
                         "shift/K": float(len(clients)), **per_group}

    def __repr__(self) -> str:
        return f"FedShift({len(self.inferior)} inferior, scope={self.scope!r})"


class DivergenceMonitor:
    """Fig. 9 diagnostics, per layer (rows of the layer table): div/global = ||w^t - w^{t-1}|| (the model after
    every earlier hook, against the round's starting model) and div/drift = mean over the selected clients of
    ||w_k^t - w^{t-1}|| (the decoded uploads). Returns the parameters unchanged."""

    def __call__(self, params: Params, info: RoundInfo) -> tuple[Params, Diagnostics]:
        layers = _groups(params, "layer")
        return params, {
            "div/global": {k: float((params[k].double() - info.before[k].double()).norm()) for k in layers},
            "div/drift": {k: float(np.mean([float(r.update[k].double().norm()) for r in info.results])) for k in layers}}


class PreShiftAccuracy:
    """Evaluates the aggregated model before any hook (info.aggregated) with `evaluate(params) -> acc`;
    put it in the hooks list to log Fig. 7's pre-shift curve as `pre_shift_acc`."""

    def __init__(self, evaluate: Callable[[Params], float]):
        self.evaluate = evaluate

    def __call__(self, params: Params, info: RoundInfo) -> tuple[Params, dict[str, float]]:
        return params, {"pre_shift_acc": float(self.evaluate(info.aggregated))}


# ------------------------------------------------------------------------------------ evaluation

@torch.no_grad()
def predictions(model: nn.Module, params: Params, x: torch.Tensor, batch_size: int = 2048) -> torch.Tensor:
    """Arg-max labels of `model` with weights `params` on inputs `x`."""
    out = [torch.func.functional_call(model, params, (x[i:i + batch_size],)).argmax(1) for i in range(0, len(x), batch_size)]
    return torch.cat(out)


def prediction_histogram(model: nn.Module, params: Params, x: torch.Tensor, num_classes: int) -> np.ndarray:
    """Fraction of test inputs predicted as each class (Fig. 8)."""
    counts = torch.bincount(predictions(model, params, x), minlength=num_classes).double()
    return (counts / counts.sum()).cpu().numpy()


# ------------------------------------------------------------------------------------- Theorem 1

def _flat_params(params: Params) -> torch.Tensor:
    return P.flatten({k: v for k, v in params.items() if v.is_floating_point()})


class RegularizedObjective:
    """F(w) = sum_k p_k F_k(w), F_k(w) = mean cross-entropy over client k's data + lam/2 ||w||^2, p_k = n_k / n
    (the aggregation weights "samples"), for a model given as one flat float64 parameter vector."""

    def __init__(self, model: nn.Module, params: Params, data: FederatedData, lam: float, device: torch.device):
        self.model = model.double().to(device)
        self.shapes = {k: v.shape for k, v in params.items() if v.is_floating_point()}
        self.lam = float(lam)
        ds = data.dataset
        self.clients = [(ds.x_train[idx].double().to(device), ds.y_train[idx].to(device)) for idx in data.client_indices]
        self.p = torch.tensor([len(y) for _, y in self.clients], dtype=torch.float64, device=device)
        self.p = self.p / self.p.sum()

    def unflatten(self, w: torch.Tensor) -> Params:
        out, i = {}, 0
        for k, shape in self.shapes.items():
            n = math.prod(shape)
            out[k] = w[i:i + n].view(shape)
            i += n
        return out

    def client_loss(self, w: torch.Tensor, k: int) -> torch.Tensor:
        x, y = self.clients[k]
        out = torch.func.functional_call(self.model, self.unflatten(w), (x,))
        return nn.functional.cross_entropy(out, y) + self.lam / 2 * (w * w).sum()

    def loss(self, w: torch.Tensor) -> torch.Tensor:
        return sum(self.p[k] * self.client_loss(w, k) for k in range(len(self.clients)))

    def grad(self, w: torch.Tensor, k: int | None = None) -> torch.Tensor:
        w = w.detach().double().requires_grad_(True)
        value = self.loss(w) if k is None else self.client_loss(w, k)
        return torch.autograd.grad(value, w)[0]

    def minimize(self, w0: torch.Tensor, k: int | None = None) -> tuple[torch.Tensor, float]:
        """The unique minimiser (strong convexity, lam > 0) by L-BFGS to gradient norm 1e-10, and its value."""
        w = w0.detach().double().clone().requires_grad_(True)
        opt = torch.optim.LBFGS([w], lr=1, max_iter=2000, tolerance_grad=1e-10, tolerance_change=0,
                                history_size=50, line_search_fn="strong_wolfe")

        def closure() -> torch.Tensor:
            opt.zero_grad()
            value = self.loss(w) if k is None else self.client_loss(w, k)
            value.backward()
            return value

        opt.step(closure)
        w = w.detach()
        return w, float(self.loss(w) if k is None else self.client_loss(w, k))

    def minibatch_moments(self, w: torch.Tensor, k: int, batch_size: int) -> tuple[float, float]:
        """(sigma_k^2, E||g_B||^2) of client k's mini-batch gradient (batch of B samples drawn without
        replacement) at w, exact over the client's data from its per-sample gradients."""
        x, y = self.clients[k]
        params = self.unflatten(w.detach().double())

        def sample_loss(p: Params, xi: torch.Tensor, yi: torch.Tensor) -> torch.Tensor:
            out = torch.func.functional_call(self.model, p, (xi[None],))
            return nn.functional.cross_entropy(out, yi[None])

        per_sample = torch.func.vmap(torch.func.grad(sample_loss), in_dims=(None, 0, 0))(params, x, y)
        g = torch.cat([per_sample[name].reshape(len(y), -1) for name in self.shapes], dim=1)
        n, b = len(y), min(batch_size, len(y))
        spread = float(((g - g.mean(0)) ** 2).sum(1).sum()) / max(n - 1, 1)  # per-sample variance (trace)
        sigma2 = spread / b * (n - b) / n
        mean_grad = g.mean(0) + self.lam * w.detach().double()
        return sigma2, float((mean_grad ** 2).sum()) + sigma2


class Theorem1Probe:
    """Post-aggregation hook (put it last) measuring Theorem 1's quantities on a strongly convex run
    (`RegularizedObjective`): every round, with w^t the round's starting model and w^{t+1} the new one,

        t1/gap = F(w^{t+1}) - F*,  t1/dist2 = ||w^{t+1} - w*||^2,  t1/m2 = mean(aggregate before any hook)^2
        t1/L   = ||grad F(w^{t+1}) - grad F(w^t)|| / ||w^{t+1} - w^t||      (secant: a lower estimate of L)
        t1/mu  = <grad F(w^{t+1}) - grad F(w^t), w^{t+1} - w^t> / ||w^{t+1} - w^t||^2   (an upper estimate of mu)
        t1/sigma2 = sum_k p_k sigma_k^2 and t1/G2 = max_k E||g_B||^2 at w^{t+1} (mini-batch size B)

    and once: t1/F_star, t1/Gamma = F* - sum_k p_k F_k* (Li et al.'s heterogeneity gap), t1/dist2_0 =
    ||w^0 - w*||^2 and t1/mean_star = mean(w*), plus `recorded` (e.g. the step sizes' L and gamma) as they are.
    Assumptions 3-4 bound sigma and G along the local iterates; these are measured at the global iterates only."""

    def __init__(self, objective: RegularizedObjective, batch_size: int, recorded: Mapping[str, float] | None = None):
        self.objective, self.batch_size = objective, int(batch_size)
        self.recorded = {f"t1/{k}": float(v) for k, v in (recorded or {}).items()}
        self._optimum: dict[str, Any] | None = None

    def optimum(self, w0: torch.Tensor) -> dict[str, Any]:
        if self._optimum is None:  # deterministic, so a resumed run recomputes the same values
            f = self.objective
            w_star, f_star = f.minimize(w0)
            f_k = [f.minimize(w_star, k)[1] for k in range(len(f.clients))]
            self._optimum = {"w": w_star, "F": f_star, "Gamma": f_star - float(torch.dot(f.p, torch.tensor(f_k, dtype=torch.float64, device=f.p.device)))}
        return self._optimum

    def __call__(self, params: Params, info: RoundInfo) -> tuple[Params, dict[str, float]]:
        f = self.objective
        w_prev, w_new = _flat_params(info.before).double(), _flat_params(params).double()
        opt = self.optimum(w_prev)
        g_prev, g_new = f.grad(w_prev), f.grad(w_new)
        dw, dg = w_new - w_prev, g_new - g_prev
        step2 = float((dw * dw).sum())
        moments = [f.minibatch_moments(w_new, k, self.batch_size) for k in range(len(f.clients))]
        diag = {"t1/gap": float(f.loss(w_new)) - opt["F"], "t1/dist2": float(((w_new - opt["w"]) ** 2).sum()),
                "t1/m2": float(_flat_params(info.aggregated).double().mean()) ** 2,
                "t1/L": math.sqrt(float((dg * dg).sum()) / step2) if step2 > 0 else float("nan"),
                "t1/mu": float((dg * dw).sum()) / step2 if step2 > 0 else float("nan"),
                "t1/sigma2": float(sum(float(p) * s for p, (s, _) in zip(f.p, moments))),
                "t1/G2": max(g2 for _, g2 in moments), "t1/F_star": opt["F"], "t1/Gamma": opt["Gamma"],
                "t1/mean_star": float(opt["w"].mean()), **self.recorded}
        if info.ctx.round == 0:
            diag["t1/dist2_0"] = float(((w_prev - opt["w"]) ** 2).sum())
        return params, diag


def smoothness_bound(data: FederatedData, lam: float) -> float:
    """An upper bound on L for every client's softmax regression objective: lam + lambda_max(X_k^T X_k / n_k) / 2
    (the softmax cross-entropy's Hessian in the logits is at most I / 2, Boehning 1992), the max over clients."""
    x = data.dataset.x_train.double().flatten(1)
    return lam + max(float(torch.linalg.eigvalsh(x[idx].T @ x[idx] / len(idx))[-1]) / 2 for idx in data.client_indices)


def theorem1_step_sizes(L: float, mu: float, local_steps: int) -> tuple[Callable[[int, int], float], float, float]:
    """Theorem 1's eta_tau = beta / (tau + gamma), beta = 2 / mu, gamma = max(8 L / mu, E) - 1, with the global
    step tau = round * E + local step + 1; returns (lr(round, step), beta, gamma). eta_1 = 1 / (4 L)."""
    beta, gamma = 2 / mu, max(8 * L / mu, local_steps) - 1

    def lr(round_: int, step: int) -> float:
        return beta / (round_ * local_steps + step + 1 + gamma)

    return lr, beta, gamma


# ------------------------------------------------------------------------------- experiments as data

@dataclass(frozen=True)
class FedShiftParams(PaperParams):
    """notebooks/fedshift.py's parameters (defaults: its quick profile)."""

    seeds: tuple[int, ...] = param([0], "seeds of every grid (Theorem 1: the first only)")
    dataset: str = param("digits", "dataset name (fedlib.data)")
    model: str = param("mlp", "model name (fedlib.models)")
    model_kwargs: Mapping[str, Any] = param({"hidden": [64], "bias": False}, "the model's keyword arguments")
    num_clients: int = param(20, "clients of the parity (and Dirichlet) split")
    per_round_inferior: int = param(2, "inferior (quantizing) clients sampled each round")
    per_round_superior: int = param(2, "superior (fp32) clients sampled each round")
    rounds: int = param(10, "communication rounds")
    local_epochs: float = param(1.0, "local epochs per round")
    batch_size: int = param(16, "local minibatch size (Dirichlet splits: min_size is half of it)")
    lr: float = param(0.05, "local SGD learning rate")
    momentum: float = param(0.9, "local SGD momentum")
    augment: str | None = param(None, "local augmentation (fedlib.core.augment; crop_flip for CIFAR, as the authors' code)")
    fedprox_mu: float = param(0.01, "FedProx's proximal weight")
    scaffold_coef: typing.Literal["steps", "samples"] = param("samples", "SCAFFOLD's control-variate divisor")
    algorithms: tuple[str, ...] = param(list(ALGORITHMS), "Table I methods")
    quantizers: tuple[str, ...] = param(["kmeans"], "Table I weight quantizers (the first: the ablations')")
    bits_list: tuple[int, ...] = param([2, 4, 8], "Table I bit widths (the lowest: the ablations')")
    kmeans_init: str = param("quantile", "K-means initialisation (fedlib.codecs.kmeans)")
    kmeans_iters: int = param(50, "Lloyd iterations of the converged K-means")
    table2_alphas: tuple[float, ...] = param([0.1, 0.5, 100.0], "Table II Dirichlet concentrations")
    table2_bits: tuple[int, ...] = param([2, 4], "Table II bit widths")
    table2_quantizers: tuple[str, ...] = param(["uniform", "kmeans"], "Table II weight quantizers")
    ablations: bool = param(True, "run the mechanism ablations")
    kmeans_reference_bits: int | None = param(4, "bits of the converged-vs-reference K-means grid (None: off)")
    theorem1_rounds: int = param(20, "rounds of Theorem 1's strongly convex runs (0: off)")
    theorem1_local_steps: int = param(10, "local SGD steps per round of Theorem 1's runs")
    theorem1_lam: float = param(0.5, "L2 weight of Theorem 1's softmax regression")
    sma_window: int = param(5, "rounds of the accuracy curves' moving average")
    threads: Threads = param(1, "torch threads per run")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_range(1, math.inf, "num_clients", "rounds", "batch_size", "kmeans_iters", "theorem1_local_steps",
                           "sma_window")
        self.require_range(0, math.inf, "per_round_inferior", "per_round_superior", "theorem1_rounds", "fedprox_mu")
        self.require_positive("local_epochs", "lr", "theorem1_lam", "table2_alphas")
        self.require_range(0, 1, "momentum")
        self.require_range(1, 16, "bits_list", "table2_bits", "kmeans_reference_bits")
        self.require_nonempty("seeds", "algorithms", "quantizers", "bits_list")
        self.require_choice(ALGORITHMS, "algorithms")
        self.require_choice(("uniform", "kmeans"), "quantizers", "table2_quantizers")
        self.require_choice(KMEANS_INITS, "kmeans_init")
        self.require_choice(AUGMENTATIONS, "augment")


def _method_component(p: FedShiftParams, method: str) -> tuple[str, dict[str, Any]]:
    if method not in ALGORITHMS:
        raise ValueError(f"unknown FedShift baseline {method!r}; choose from {ALGORITHMS}")
    return {"fedprox": ("fedprox", {"mu": p.fedprox_mu}), "scaffold": ("scaffold", {"coef": p.scaffold_coef}),
            "fedef": ("fedavg", {})}.get(method, (method, {}))


def _codec_args(p: FedShiftParams, quantizer: str, bits: int, kmeans: str) -> dict[str, Any]:
    if quantizer == "uniform":
        return {"bits": bits, "rounding": "nearest"}
    if quantizer != "kmeans":
        raise ValueError(f"unknown weight quantizer {quantizer!r}; choose 'uniform' or 'kmeans'")
    if kmeans == "converged":
        return {"bits": bits, "init": p.kmeans_init, "max_iter": p.kmeans_iters}
    if kmeans == "reference":
        return {"bits": bits, **REFERENCE_CODE}
    raise ValueError(f"unknown K-means setting {kmeans!r}; choose 'converged' or 'reference'")


def run_spec(p: FedShiftParams, *, method: str, quantizer: str, bits: int, shift: bool, seed: int,
             split: str = "parity", alpha: float | None = None, kmeans: str = "converged", scope: str = "layer",
             selection: str = "stratified") -> RunSpec:
    """One Table I/II-style run: `method`'s clients upload trained weights, the inferior ones quantized by
    `quantizer` at `bits` ("none" = fp32, bits 32), with or without the shift hook."""
    codec = ("fp32", {}) if quantizer == "none" else (quantizer, _codec_args(p, quantizer, bits, kmeans))
    if selection not in ("stratified", "random"):
        raise ValueError(f"fedshift run_spec: selection must be 'stratified' or 'random', got {selection!r}")
    per_round = {"per_round_inferior": p.per_round_inferior, "per_round_superior": p.per_round_superior}
    split_part = (("parity", {"num_clients": p.num_clients}) if split == "parity" else
                  ("dirichlet", {"num_clients": p.num_clients, "alpha": alpha, "min_size": p.batch_size // 2}))
    return RunSpec.make(
        "fedshift", p.dataset, split_part, (p.model, {**p.model_kwargs, "init": "kaiming_normal_fan_in"}),
        _method_component(p, method), p.rounds, seed,
        local={"lr": p.lr, "batch_size": p.batch_size, "epochs": p.local_epochs, "momentum": p.momentum,
               "augment": p.augment},
        uplink=("mixed_precision", {"codec": None if quantizer == "none" else codec[0],
                                    "codec_args": codec[1], "error_feedback": method == "fedef"}),
        loop={"aggregation_weights": "uniform", "threads": p.threads},
        sampler=(("stratified", per_round) if selection == "stratified"
                 else ("uniform", {"clients": sum(per_round.values())})),
        hooks=[*([("pre_shift_accuracy", {}), ("fedshift", {"scope": scope})] if shift else []), ("divergence", {})],
        collectors=[("fedshift_predictions", {})],
        labels={"method": method, "quantizer": quantizer, "bits": bits if quantizer != "none" else 32, "shift": shift,
                "split": split, "alpha": alpha, "kmeans": kmeans if quantizer == "kmeans" else "-", "scope": scope,
                "selection": selection},
        device=p.device)


def table1_specs(p: FedShiftParams) -> list[RunSpec]:
    """Table I: every method x quantizer x bit width, with and without the shift, plus FedAvg at 32+32."""
    specs = [run_spec(p, method=m, quantizer=q, bits=b, shift=s, seed=seed)
             for m in p.algorithms for q in p.quantizers for b in p.bits_list for s in (False, True)
             for seed in p.seeds]
    return specs + [run_spec(p, method="fedavg", quantizer="none", bits=32, shift=s, seed=seed)
                    for s in (False, True) for seed in p.seeds]


def table2_specs(p: FedShiftParams) -> list[RunSpec]:
    """Table II: FedAvg on Dirichlet(alpha) splits x quantizer x bit width, with and without the shift."""
    return [run_spec(p, method="fedavg", quantizer=q, bits=b, shift=s, seed=seed, split="dirichlet", alpha=float(a))
            for a in p.table2_alphas for q in p.table2_quantizers for b in p.table2_bits for s in (False, True)
            for seed in p.seeds]


def ablation_specs(p: FedShiftParams) -> list[RunSpec]:
    """FedAvg at the lowest bit width (first Table I quantizer): the baseline and the per-layer shift, one
    whole-model mean instead, and random (non-stratified) selection with and without the shift; FedAvg at
    32+32 with and without the shift comes with Table I. Empty when `ablations` is off."""
    if not p.ablations:
        return []
    q, b = p.quantizers[0], min(p.bits_list)
    return [run_spec(p, method="fedavg", quantizer=q, bits=b, shift=s, seed=seed, scope=scope, selection=selection)
            for seed in p.seeds for s, scope, selection in ((False, "layer", "stratified"), (True, "layer", "stratified"),
                                                               (True, "model", "stratified"), (False, "layer", "random"),
                                                               (True, "layer", "random"))]


def kmeans_setting_specs(p: FedShiftParams) -> list[RunSpec]:
    """Issue 13 g: every Table I method with K-means at `kmeans_reference_bits`, converged vs the authors'
    code's early-stopped K-means, with and without the shift (None switches the grid off)."""
    bits = p.kmeans_reference_bits
    if bits is None:
        return []
    return [run_spec(p, method=m, quantizer="kmeans", bits=bits, shift=s, seed=seed, kmeans=k)
            for m in p.algorithms for k in KMEANS_SETTINGS for s in (False, True) for seed in p.seeds]


def theorem1_specs(p: FedShiftParams) -> list[RunSpec]:
    """Theorem 1's own setting: a strongly convex problem (bias-free softmax regression with L2 weight
    `theorem1_lam` on digits), 10 clients on the parity split, full participation, `theorem1_local_steps`
    plain SGD steps with the theorem's step sizes; fp32 uploads with and without the shift (one whole-model
    mean, as in the proof). The first seed only: each run is checked on its own. Empty when `theorem1_rounds` is 0."""
    if not p.theorem1_rounds:
        return []
    return [RunSpec.make(
        "fedshift", "digits", ("parity", {"num_clients": 10}), ("logistic", {"bias": False}), ("fedavg", {}),
        p.theorem1_rounds, seed,
        local={"batch_size": p.batch_size, "steps": p.theorem1_local_steps, "weight_decay": p.theorem1_lam},
        uplink=("mixed_precision", {"codec": None}), sampler=("uniform", {"clients": 1.0}),
        loop={"aggregation_weights": "samples"},
        lr_schedule=("theorem1", {}),  # the theorem's step size
        hooks=[*([("fedshift", {"scope": "model"})] if shift else []), ("theorem1_probe", {})],
        labels={"method": "theorem1", "shift": shift}, device="cpu")
        for shift in (False, True) for seed in p.seeds[:1]]



# The runs that back the headline claims (fedlib/papers/fedshift/claims.py), most valued first: a piece of the gpu
# profile computes them in this order (fedlib.ledger.priority), each on every seed of the profile. Table I's quantized
# cells back C1-C3; C2 reads the baselines at 32+4 and C1 at 32+4 and 32+8 (first quantizer, no shift), so those come
# first. The Ablation reads Table I and FedAvg 32+32 with and without the shift.
TABLE1_CELLS = {"split": ("parity",), "selection": ("stratified",), "scope": ("layer",), "kmeans": ("converged", "-")}
HEADLINE_RUNS = (
    Headline("C3, C2, C1", {**TABLE1_CELLS, "quantizer": ("kmeans", "uniform")},
             first=(Headline("C2", {"quantizer": ("kmeans",), "bits": ("4",), "shift": ("False",)}),
                    Headline("C1", {"quantizer": ("kmeans",), "bits": ("4", "8"), "shift": ("False",)}))),
    Headline("G1, G2", {"kmeans": ("reference",)}),
    Headline("Ablation", {**TABLE1_CELLS, "quantizer": ("none",)}),
)

def experiments(p: FedShiftParams) -> list[RunSpec]:
    """Every run the notebook reads, from its parameters (duplicates across grids run once)."""
    specs = table1_specs(p) + table2_specs(p) + ablation_specs(p) + kmeans_setting_specs(p) + theorem1_specs(p)
    return list(dict.fromkeys(specs))


@SPLITS.register("parity")
def parity_split(dataset: Dataset, num_clients: int, seeds: Seeds) -> list[np.ndarray]:
    """FedShift's label-parity shards on the partition stream."""
    return parity_shards(dataset.y_train.numpy(), num_clients, seeds.numpy("partition"))


@CODEC_POLICIES.register("mixed_precision", examples=({"codec": "uniform", "codec_args": {"bits": 2}},
                                                     {"codec": "kmeans", "codec_args": {"bits": 3}, "error_feedback": True},
                                                     {"codec": None}))
def mixed_precision_uplink(run: RunPlan, codec: str | None = None, codec_args: Mapping[str, Any] | None = None,
                           error_feedback: bool = False) -> Link:
    """Trained weights layer by layer: `codec` (a registered codec name) for the inferior clients, fp32 for
    the superior ones; codec None is the all-fp32 ("32+32") uplink."""
    inner = None if codec is None else (codec, dict(codec_args or {}))
    return mixed_uplink(inner, inferior_clients(run.num_clients), run.num_clients, error_feedback)


@SAMPLERS.register("stratified")
def stratified_sampler(run: RunPlan, per_round_inferior: int, per_round_superior: int) -> StratifiedSampler:
    """Every round, `per_round_inferior` inferior and `per_round_superior` superior clients."""
    return StratifiedSampler(inferior_clients(run.num_clients), run.num_clients, per_round_inferior,
                             per_round_superior)


@HOOKS.register("pre_shift_accuracy")
def pre_shift_accuracy(run: RunPlan) -> PreShiftAccuracy:
    """Test accuracy of the aggregate before the shift hook moves it (on the run's device)."""
    eval_model = run.model_fn().to(run.device)
    x, y = run.dataset.x_test.to(run.device), run.dataset.y_test.to(run.device)
    return PreShiftAccuracy(lambda w: evaluate(eval_model, w, {}, x, y)[0])


@HOOKS.register("fedshift")
def fedshift_hook(run: RunPlan, scope: str = "layer") -> FedShift:
    """The paper's statistical shift of the inferior clients' uploads."""
    return FedShift(inferior_clients(run.num_clients), scope=scope)


@HOOKS.register("divergence")
def divergence_monitor(run: RunPlan) -> DivergenceMonitor:
    return DivergenceMonitor()


def _theorem1_constants(run: RunPlan) -> tuple[float, float, float]:
    """(L bound, step size, gamma) of Theorem 1 for the run's data and local training."""
    local = run.local
    L = smoothness_bound(run.data, local.weight_decay)
    lr, _, gamma = theorem1_step_sizes(L, local.weight_decay, local.steps)
    return L, lr, gamma


@LR_SCHEDULES.register("theorem1")
def theorem1_lr(run: RunPlan) -> float:
    """Theorem 1's local step size for the run's smoothness bound."""
    return _theorem1_constants(run)[1]


@HOOKS.register("theorem1_probe")
def theorem1_probe(run: RunPlan) -> Theorem1Probe:
    """The theorem's quantities on the regularized objective, every round."""
    L, _, gamma = _theorem1_constants(run)
    local = run.local
    model = run.model_fn()
    objective = RegularizedObjective(model, dict(model.named_parameters()), run.data, local.weight_decay,
                                     torch.device("cpu"))
    return Theorem1Probe(objective, local.batch_size, {"L_bound": L, "gamma": gamma})


@COLLECTORS.register("fedshift_predictions")
def prediction_table(run: RunPlan) -> Callable[[RunResult], dict[str, pd.DataFrame]]:
    """The "predictions" table: the final model's histogram of predicted classes on the test set."""
    model_fn, x_test, num_classes = run.model_fn, run.dataset.x_test, run.dataset.num_classes

    def collect(result: RunResult) -> dict[str, pd.DataFrame]:
        params = {k: v.detach().cpu() for k, v in result.params.items()}
        h = prediction_histogram(model_fn(), params, x_test, num_classes)
        return {"predictions": pd.DataFrame({"label": np.arange(num_classes), "fraction": h})}

    return collect


@EXPERIMENTS.register("fedshift")
def plan(spec: RunSpec, run: RunPlan) -> RunPlan:
    """Everything is named in the spec (split, mixed-precision uplink, sampler, hooks, step size, collector)."""
    return run


LABELS = ["method", "quantizer", "bits", "shift", "split", "alpha", "kmeans", "scope", "selection"]
RECORD_COLUMNS = {"rounds": ["round", "test_acc"], "layers": ["round", "client", "layer", "key", "value"],
                  "predictions": ["label", "fraction"]}  # the columns of its record tables that the notebook reads


def record_table(records: Mapping[str, pd.DataFrame], name: str) -> pd.DataFrame:
    """`records[name]` ("rounds", "layers" or "predictions"), or no rows, with the runs' labels, seed, key and the
    table's `RECORD_COLUMNS`, where the records hold no run that writes it (a ledger that lacks them)."""
    if name in records:
        return records[name]
    return pd.DataFrame(columns=[*LABELS, "seed", "run", *RECORD_COLUMNS[name]])


def run_table(records: Mapping[str, pd.DataFrame], last: int = 3) -> pd.DataFrame:
    """One row per Table I/II-style run: its labels, seed, run key, `acc` (test accuracy in %, mean of the last
    `last` rounds, which damps round-to-round noise) and `upload_mean_bias` / `upload_mse` / `lloyd_iters` (means
    over its quantized uploads and layers, |mean_bias| for the bias; NaN for fp32 runs). No rows where `records`
    hold no such run (e.g. Theorem 1's runs only, or none)."""
    rounds = record_table(records, "rounds")
    rounds = rounds[rounds["method"] != "theorem1"]
    keys = [*LABELS, "seed", "run"]
    acc = (rounds.sort_values("round").groupby("run")["test_acc"].apply(lambda s: 100 * s.dropna().tail(last).mean())
           .rename("acc"))
    layers = record_table(records, "layers")
    uploads = layers[layers["client"] != SERVER]
    per_upload = uploads.assign(value=uploads["value"].abs()).groupby(["run", "round", "client", "key"])["value"].mean()
    stats = (per_upload.groupby(level=["run", "key"]).mean().unstack("key")
             .reindex(columns=["mean_bias", "mse", "lloyd_iters"])
             .set_axis(["upload_mean_bias", "upload_mse", "lloyd_iters"], axis=1))
    table = rounds.drop_duplicates("run").reindex(columns=keys).set_index("run").join(acc).join(stats)
    table = table.astype({"alpha": float, "bits": int, "shift": bool})  # other tables' rows made these columns float
    return table.reset_index()


def table1_runs(runs: pd.DataFrame, bits_list: Sequence[int], quantizers: Sequence[str]) -> pd.DataFrame:
    """The rows of `run_table` that make Table I: parity split, stratified selection, per-layer shift, converged
    K-means, the given quantizers and bit widths, and FedAvg at 32+32."""
    keep = ((runs["split"] == "parity") & (runs["selection"] == "stratified") & (runs["scope"] == "layer")
            & runs["kmeans"].isin(["converged", "-"]) & runs["bits"].isin([*bits_list, 32])
            & (runs["quantizer"].isin(quantizers) | (runs["quantizer"] == "none")))
    return runs[keep]


def table2_runs(runs: pd.DataFrame) -> pd.DataFrame:
    """The rows of `run_table` that make Table II: the Dirichlet splits."""
    return runs[runs["split"] == "dirichlet"]


def kmeans_setting_runs(runs: pd.DataFrame, bits: int | None) -> pd.DataFrame:
    """The rows of `run_table` that make the K-means-setting grid: converged and reference-code K-means at `bits`
    (none when None: the grid is off), parity split, stratified selection, per-layer shift."""
    return runs[runs["kmeans"].isin(KMEANS_SETTINGS) & (runs["bits"] == bits)
                & (runs["split"] == "parity") & (runs["selection"] == "stratified") & (runs["scope"] == "layer")]


MODEL_NAMES = {False: "baseline", True: "FedShift"}  # a run's `shift` label as the figures and claims name it


def figure_predictions(records: Mapping[str, pd.DataFrame], keys: pd.Series) -> pd.DataFrame:
    """Fig. 8: the "predictions" rows of the runs `keys` (run keys), with `model` (`MODEL_NAMES`)."""
    predictions = record_table(records, "predictions")
    hist = predictions[predictions["run"].isin(keys)]
    return hist.assign(model=hist["shift"].map(MODEL_NAMES))


def label_bias_means(per_seed: pd.DataFrame) -> pd.DataFrame:
    """`label_bias`'s rows averaged over seeds, one row per model (`MODEL_NAMES`)."""
    return per_seed.groupby("shift")[["share_inferior_classes", "kl_to_uniform"]].mean().rename(index=MODEL_NAMES)


def divergence_rows(records: Mapping[str, pd.DataFrame], keys: pd.Series) -> pd.DataFrame:
    """Fig. 9: the divergence rows ("div/" keys) of the layer table of the runs `keys` (run keys), with `what`
    (global / drift) and `model` (`MODEL_NAMES`)."""
    layers = record_table(records, "layers")
    div = layers[layers["run"].isin(keys) & layers["key"].str.startswith("div/")]
    return div.assign(what=div["key"].str.removeprefix("div/"), model=div["shift"].map(MODEL_NAMES))


def divergence_summary(div: pd.DataFrame) -> pd.DataFrame:
    """Fig. 9's mean over rounds, layers and seeds of `divergence_rows`: one row per kind (global / drift), one
    column per model."""
    return div.groupby(["what", "model"])["value"].mean().unstack("model")


def summarize(runs: pd.DataFrame, by: list[str]) -> pd.DataFrame:
    """Mean, standard deviation and number of seeds of `acc` per group."""
    return runs.groupby(by)["acc"].agg(mean="mean", std="std", n="count").reset_index()


def beside_paper(summary: pd.DataFrame, index: list[str]) -> pd.DataFrame:
    """`summarize`'s rows (with bits, shift and the paper's `paper_acc`) as Table I is printed: one column per
    32+bits base/shift setting, ours ("mean±std" over seeds) beside the paper's where it has the cell."""
    t = summary.assign(ours=[f"{m:.1f}" + (f"±{s:.1f}" if n > 1 else "") for m, s, n in
                             zip(summary["mean"], summary["std"], summary["n"])],
                       setting=summary["bits"].map(lambda b: f"32+{b}") + summary["shift"].map({False: " base", True: " shift"}))
    order = list(dict.fromkeys(t.sort_values(["bits", "shift"])["setting"]))
    ours = t.pivot(index=index, columns="setting", values="ours")[order]
    paper = t.pivot(index=index, columns="setting", values="paper_acc")[order].dropna(axis=1, how="all")
    return pd.concat({"ours": ours, "paper": paper}, axis=1).fillna("")


def label_bias(predictions: pd.DataFrame, num_classes: int) -> pd.DataFrame:
    """Per (shift, seed) run of a "predictions" table: the share of test predictions in the odd (inferior
    clients') classes and the KL divergence of the prediction histogram from uniform (no rows for no runs)."""
    if predictions.empty:
        return pd.DataFrame(columns=["shift", "seed", "share_inferior_classes", "kl_to_uniform"])

    def one(h: pd.DataFrame) -> pd.Series:
        p = h["fraction"].to_numpy()
        return pd.Series({"share_inferior_classes": p[h["label"].to_numpy() % 2 == 1].sum(),
                          "kl_to_uniform": float(np.sum(p[p > 0] * np.log(p[p > 0] * num_classes)))})

    return predictions.groupby(["shift", "seed"]).apply(one).reset_index()


def kmeans_setting_study(layers: Mapping[str, torch.Tensor], bits: int, starts: int) -> pd.DataFrame:
    """Per layer and random start: the reference code's K-means against a converged one (quantile start, up to
    300 Lloyd iterations): iterations, MSE ratio and the share of weights not at their nearest centroid."""
    rows = []
    for name, x in layers.items():
        converged = kmeans_fit_report(x, KMeansQuantizer(bits, max_iter=300))
        for start in range(starts):
            ref = kmeans_fit_report(x, KMeansQuantizer(bits, **REFERENCE_CODE), torch.Generator().manual_seed(start))
            rows.append({"layer": name, "weights": x.numel(), "weight sd": float(x.std()),
                         "converged iters": converged["lloyd_iters"], "reference iters": ref["lloyd_iters"],
                         "MSE ratio": ref["mse"] / converged["mse"], "not at nearest centroid": ref["not_nearest"]})
    return pd.DataFrame(rows)


def kmeans_fit_report(x: torch.Tensor, codec: Any, gen: torch.Generator | None = None) -> dict[str, float]:
    """Lloyd iterations, MSE and the share of values not at their nearest centroid for one K-means fit of `x`."""
    centroids, indices, iters = codec.fit(x, gen)
    xd = x.detach().reshape(-1).double()
    ordered, order = torch.sort(centroids)
    nearest = order[torch.bucketize(xd, (ordered[1:] + ordered[:-1]) / 2).clamp(max=len(ordered) - 1)]
    return {"lloyd_iters": float(iters), "mse": float(((centroids[indices] - xd) ** 2).mean()),
            "not_nearest": float((centroids[nearest] != centroids[indices]).double().mean())}
