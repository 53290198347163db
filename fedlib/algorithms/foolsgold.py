"""FoolsGold (Fung, Yoon and Beschastnikh, RAID 2020): similarity-based aggregation weights.

Two variants (docs/taco.md, Baselines):
  variant="taco_paper": TACO's rendition (its Algorithm 1, line 20) with the circularity broken:
      rho_i = max(0, cos(Delta_i, mean_j Delta_j)),  w_{t+1} = w_t - sum_i rho_i Delta_i / sum_i rho_i.
      Similar-to-the-mean clients get MORE weight (TACO's aggregation without the magnitude factor).
  variant="original": Fung et al.'s Algorithm 1 (as in their reference code): per-client update histories
      H_i; cs_ij = cos(H_i, H_j) (i != j); v_i = max_j cs_ij; pardoning cs_ij *= v_i / v_j when v_j > v_i;
      a_i = clip(1 - max_j cs_ij, 0, 1); a /= max a; a = 0.99 where a = 1;
      a_i = clip(kappa (ln(a_i / (1 - a_i)) + 0.5), 0, 1).
      Mutually similar clients (sybils) get LESS weight. The weighted average normalises by sum_i a_i.
Local training is plain SGD in both (FoolsGold has no client overhead).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from fedlib.algorithms.base import Algorithm
from fedlib.core import params as P
from fedlib.core.contracts import ClientResult, RoundContext
from fedlib.core.params import Params
from fedlib.registry import ALGORITHMS
from fedlib.validate import real


def _cosine_matrix(x: torch.Tensor) -> torch.Tensor:
    norms = x.norm(dim=1, keepdim=True)
    unit = torch.where(norms > 0, x / torch.where(norms > 0, norms, torch.ones_like(norms)), torch.zeros_like(x))
    return unit @ unit.T


def taco_paper_weights(deltas: torch.Tensor) -> torch.Tensor:
    """rho_i = max(0, cos(Delta_i, mean_j Delta_j)) for the N x d matrix of deltas (cos := 0 for zero vectors)."""
    deltas = deltas.double()
    mean = deltas.mean(dim=0, keepdim=True)
    return _cosine_matrix(torch.cat([mean, deltas]))[0, 1:].clamp_min(0.0)


def foolsgold_weights(histories: torch.Tensor, kappa: float = 1.0) -> torch.Tensor:
    """Fung et al.'s weights a_i in [0, 1] from the N x d matrix of per-client update histories."""
    n = histories.shape[0]
    if n < 2:
        raise ValueError("FoolsGold needs at least 2 clients")
    cs = _cosine_matrix(histories.double()) - torch.eye(n, dtype=torch.float64, device=histories.device)
    v = cs.max(dim=1).values
    pardon = v[:, None] / torch.where(v[None, :] != 0, v[None, :], torch.ones_like(v[None, :]))
    cs = torch.where(v[None, :] > v[:, None], cs * pardon, cs)
    a = (1.0 - cs.max(dim=1).values).clamp(0.0, 1.0)
    if float(a.max()) == 0.0:
        return a
    a = a / a.max()
    a = torch.where(a == 1.0, torch.full_like(a, 0.99), a)
    logit = kappa * (torch.log(a / (1.0 - a)) + 0.5)  # a = 0 gives -inf, clipped to 0 below
    return logit.clamp(0.0, 1.0)


@ALGORITHMS.register("foolsgold")
class FoolsGold(Algorithm):
    name = "foolsgold"

    def __init__(self, variant: str = "taco_paper", kappa: float = 1.0) -> None:
        if variant not in ("taco_paper", "original"):
            raise ValueError(f"FoolsGold variant must be 'taco_paper' or 'original', got {variant!r}")
        self.variant = variant
        self.kappa = real("FoolsGold kappa", kappa, low=0, low_inclusive=False)

    def init_server_state(self, params: Params, num_clients: int) -> dict[str, Any]:
        d = sum(v.numel() for v in params.values())
        device = next(iter(params.values())).device
        return {"history": torch.zeros(num_clients, d, dtype=torch.float64, device=device),
                "last_weights": None}

    def aggregate(self, params: Params, results: Sequence[ClientResult], weights: torch.Tensor,
                  server_state: dict[str, Any], ctx: RoundContext) -> Params:
        deltas = torch.stack([-P.flatten(r.update).double() for r in results])
        if self.variant == "taco_paper":
            rho = taco_paper_weights(deltas)
        else:
            ids = torch.tensor([r.client for r in results])
            server_state["history"][ids] += deltas
            rho = foolsgold_weights(server_state["history"][ids], self.kappa)
        rho = rho.cpu()
        if float(rho.sum()) > 0:
            p = rho / rho.sum()
        else:  # every client scored 0: nothing to prefer, fall back to the round loop's weights
            p = weights.double()
        server_state["last_weights"] = p
        return P.add(params, P.weighted_sum([r.update for r in results], p.tolist()))

    def diagnostics(self, server_state: dict[str, Any]) -> dict[str, float]:
        p = server_state["last_weights"]
        return {} if p is None else {"fg_weight_max": float(p.max()), "fg_weight_min": float(p.min())}
