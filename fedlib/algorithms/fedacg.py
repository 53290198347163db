"""FedACG (Kim, Kim and Han, CVPR 2024): look-ahead broadcast, proximal local objective, server momentum.

As in the official code (geehokim/FedACG; docs/taco.md, Baselines), not TACO's rendition:
    broadcast   theta_hat_t = theta_t + lam * m_t
    client      starts from theta_hat_t and minimises L_i(theta) + beta ||theta - theta_hat_t||^2
                (prox_half=True uses beta/2 ||.||^2, TACO's Algorithm 1 line 5)
    server      m_{t+1} = lam * m_t + sum_i p_i (theta_{i,K} - theta_hat_t),   theta_{t+1} = theta_t + m_{t+1}
so theta_{t+1} is the weighted mean of the local models. lam = 0.85 is FedACG's default (TACO reports none).
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


@ALGORITHMS.register("fedacg")
class FedACG(Algorithm):
    name = "fedacg"

    def __init__(self, beta: float = 0.001, lam: float = 0.85, prox_half: bool = False) -> None:
        self.beta = real("FedACG beta", beta, low=0)
        self.lam = real("FedACG momentum lam", lam, low=0, high=1)
        self.prox_half = prox_half

    def init_server_state(self, params: Params, num_clients: int) -> dict[str, Any]:
        return {"m": P.zeros_like(params)}

    def broadcast(self, params: Params, server_state: dict[str, Any]) -> Params:
        return P.add(params, server_state["m"], alpha=self.lam)

    def correction(self, p: Params, anchor: Params, client_state: dict[str, Any],
                   server_state: dict[str, Any]) -> Params:
        coef = self.beta if self.prox_half else 2.0 * self.beta  # gradient of beta ||p - anchor||^2
        return {k: coef * (p[k] - anchor[k]) for k in p}

    def aggregate(self, params: Params, results: Sequence[ClientResult], weights: torch.Tensor,
                  server_state: dict[str, Any], ctx: RoundContext) -> Params:
        mean_update = P.weighted_sum([r.update for r in results], weights.tolist())
        server_state["m"] = P.add(P.scale(server_state["m"], self.lam), mean_update)
        return P.add(params, server_state["m"])

    def diagnostics(self, server_state: dict[str, Any]) -> dict[str, float]:
        return {"momentum_norm": P.sq_norm(server_state["m"]) ** 0.5}
