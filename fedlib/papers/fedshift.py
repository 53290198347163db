"""FedShift (Seo, Kim, Rong; arXiv 2402.01070): mixed-precision uploads and server-side weight shifting.

Pieces, each usable on its own with `fedlib.federation.run_federation`:

* `parity_shards`: the paper's label split (even labels on even client ids = superior, odd labels on
  odd ids = inferior, two same-parity labels per client, every shard on two clients).
* `inferior_clients`: which clients quantize their uploads ("odd_ids" as in the reference code, or
  "random_half").
* `StratifiedSampler`: every round picks a fixed number of inferior and of superior clients (the
  code's "half-odd-even" selection); plain uniform sampling is run_federation's own `sampler=`.
* `MixedPrecision` / `mixed_uplink`: the uplink codec policy (a quantizer for inferior clients, fp32
  for superior ones), carrying whole trained weights (`payload="weights"`); Fed-EF is the same link
  with `error_feedback=True` (the spec's "weights" variant: send Q(w + e), e <- w + e - DeQ(Q(w + e))).
* `FedShift`: the post-aggregation hook, Eq. 10 per layer,
      w_hat = w - c * mean(w) * 1,   c = sum of the aggregation weights of this round's inferior clients
  (= |I_t| / K with the paper's uniform weights). It also records the per-layer quantities that
  Theorem 2 is about (theory/fedshift.py checks them). With no quantizer in the uplink it is the
  full-precision "shift-only" ablation.
* `DivergenceMonitor`: Fig. 9's per-layer distances, for runs with and without the shift.
* `prediction_histogram`: Fig. 8's predicted-label distribution.
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import torch
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.algorithms.base import Algorithm
from fedlib.channel import Link, LinkContext
from fedlib.codecs.base import Codec, Identity
from fedlib.data.partition import from_indices
from fedlib import params as P
from fedlib.contracts import RoundInfo
from fedlib.params import Params

BUFFER_SUFFIXES = ("running_mean", "running_var", "num_batches_tracked")
ALGORITHMS = ("fedavg", "fedprox", "scaffold", "fedef")


# ------------------------------------------------------------------------------------- data split

def parity_shards(labels: np.ndarray, num_clients: int, rng: np.random.Generator | int) -> list[np.ndarray]:
    """FedShift's label-parity shard split (spec §2.1, generalised to any N that is a multiple of the
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

class MixedPrecision:
    """Codec policy: `codec` for inferior clients, fp32 for everyone else (and on the downlink)."""

    def __init__(self, codec: Codec, inferior: Iterable[int]):
        self.codec = codec
        self.inferior = frozenset(int(i) for i in inferior)
        self.full = Identity()

    def __call__(self, ctx: LinkContext) -> Codec:
        return self.codec if ctx.client in self.inferior else self.full

    def __repr__(self) -> str:
        return f"MixedPrecision({self.codec!r}, {len(self.inferior)} inferior)"


def mixed_uplink(codec: Codec | None, inferior: Iterable[int], error_feedback: bool = False) -> Link:
    """Uplink of trained weights, layer by layer: `codec` for inferior clients, fp32 for superior ones.
    codec=None is the all-fp32 ("32+32") uplink."""
    policy = Identity() if codec is None else MixedPrecision(codec, inferior)
    return Link(policy, granularity="layer", payload="weights", error_feedback=error_feedback)


def algorithm_and_uplink(name: str, codec: Codec | None, inferior: Iterable[int],
                         **algorithm_kwargs: Any) -> tuple[Algorithm, Link]:
    """The paper's four baselines as (algorithm, uplink). "fedavg" is Table I's FedPAQ row (FedAvg with
    deterministic weight quantization); "fedef" is FedAvg (server lr 1) with an error-feedback uplink
    on the weights (spec §1.8, "weights" variant); FedProx/SCAFFOLD take their own kwargs (mu, coef)."""
    if name not in ALGORITHMS:
        raise ValueError(f"unknown FedShift baseline {name!r}; choose from {ALGORITHMS}")
    if name == "fedef":
        if algorithm_kwargs:
            raise ValueError(f"fedef takes no algorithm options, got {sorted(algorithm_kwargs)}")
        return make_algorithm("fedavg"), mixed_uplink(codec, inferior, error_feedback=True)
    return make_algorithm(name, **algorithm_kwargs), mixed_uplink(codec, inferior)


# ------------------------------------------------------------------------------------------- hooks

def _groups(params: Params, scope: str) -> dict[str, list[str]]:
    keys = [k for k, v in params.items() if v.is_floating_point() and not k.endswith(BUFFER_SUFFIXES)]
    if scope == "layer":
        return {k: [k] for k in keys}
    return {"model": keys}


def _flat(params: Params, keys: Sequence[str]) -> torch.Tensor:
    return P.flatten({k: params[k] for k in keys}).double()


class FedShift:
    """Post-aggregation hook: w_hat = w - c * mean(w) per layer (Eq. 10), c = sum of the round's
    aggregation weights over inferior clients (Eq. 9 with weights p_k; |I_t|/K when uniform).

    scope: "layer" (the paper: every weight tensor separately; BN buffers are never shifted) or
    "model" (one scalar mean over all tensors; an ablation). The hook shifts whenever the round has
    inferior clients, quantized or not, so with an all-fp32 uplink it is the shift-only ablation.

    Diagnostics per round: shift/coef, shift/I, shift/K and, per group g, shift/numel/g, shift/m_prev/g
    (mean of the model the clients started from, m^t), shift/m_agg/g (m^{t+1}, before the shift),
    shift/m_new/g (after), shift/dfa2/g = ||w_agg - w^t||^2 and shift/dfs2/g = ||w_hat - w^t||^2
    (float64 sums over the float32 tensors), the inputs of Theorem 2.
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

    def __call__(self, params: Params, info: RoundInfo) -> tuple[Params, dict[str, float]]:
        clients = [r.client for r in info.results]
        coef = self.coefficient(clients, info.weights)
        shifted = self.shift(params, coef) if coef else params
        diag = {"shift/coef": coef, "shift/I": float(sum(c in self.inferior for c in clients)),
                "shift/K": float(len(clients))}
        for g, keys in _groups(params, self.scope).items():
            prev, agg, new = _flat(info.before, keys), _flat(params, keys), _flat(shifted, keys)
            diag |= {f"shift/numel/{g}": float(agg.numel()), f"shift/m_prev/{g}": float(prev.mean()),
                     f"shift/m_agg/{g}": float(agg.mean()), f"shift/m_new/{g}": float(new.mean()),
                     f"shift/dfa2/{g}": float(((agg - prev) ** 2).sum()),
                     f"shift/dfs2/{g}": float(((new - prev) ** 2).sum())}
        return shifted, diag

    def __repr__(self) -> str:
        return f"FedShift({len(self.inferior)} inferior, scope={self.scope!r})"


class DivergenceMonitor:
    """Fig. 9 diagnostics, per layer: div/global/<layer> = ||w^t - w^{t-1}|| (the model after every
    earlier hook, against the round's starting model) and div/drift/<layer> = mean over the selected
    clients of ||w_k^t - w^{t-1}|| (the decoded uploads). Returns the parameters unchanged."""

    def __call__(self, params: Params, info: RoundInfo) -> tuple[Params, dict[str, float]]:
        diag = {}
        for k in _groups(params, "layer"):
            diag[f"div/global/{k}"] = float((params[k].double() - info.before[k].double()).norm())
            diag[f"div/drift/{k}"] = float(np.mean([float(r.update[k].double().norm()) for r in info.results]))
        return params, diag


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
