"""STEM (Khanduri et al., NeurIPS 2021): STORM-style recursive momentum, averaged on both sides.

Local step k of round t (TACO's Algorithm 1, line 11; the original's recursion):
    v_k = g(w_k; xi_k) + (1 - a) (v_{k-1} - g(w_{k-1}; xi_k)),     w_{k+1} = w_k - eta_l v_k
two gradients of the same mini-batch per step. Round start (specs/taco.md 3.6, our concrete choice):
v_{-1} = the server-averaged direction v_bar_t and w_{-1} = the client's own last iterate of its previous
round (the point the averaging moved it from); in round 0, v_0 = g_0. Each client uploads Delta_i and
v_{i,K-1}; the server averages both: w_{t+1} = w_t + sum_i p_i (w_{i,K} - w_t), v_bar_{t+1} = sum_i p_i v_{i,K-1}.
`server_extra` is TACO's line 21 extra term: "none" (default), "eta_l" (also subtract eta_l v_bar) or
"literal" (subtract v_bar, mixing a gradient into a model delta as printed).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from fedlib import params as P
from fedlib.algorithms.base import Algorithm
from fedlib.contracts import ClientResult, LocalRun, RoundContext
from fedlib.params import Params


class Stem(Algorithm):
    name = "stem"
    vmap_compatible = False

    def __init__(self, alpha: float = 0.2, server_extra: str = "none") -> None:
        if not 0.0 <= alpha <= 1.0:
            raise ValueError(f"STEM alpha must lie in [0, 1], got {alpha}")
        if server_extra not in ("none", "eta_l", "literal"):
            raise ValueError(f"server_extra must be 'none', 'eta_l' or 'literal', got {server_extra!r}")
        self.alpha = alpha
        self.server_extra = server_extra

    def init_server_state(self, params: Params, num_clients: int) -> dict[str, Any]:
        return {"v_bar": None}

    def local_direction(self, p: Params, grad: Params, anchor: Params, client_state: dict[str, Any],
                        server_state: dict[str, Any], scratch: dict[str, Any],
                        grad_at: Callable[[Params], Params]) -> Params:
        if "w_prev" in scratch:
            v_prev, w_prev = scratch["v"], scratch["w_prev"]
        elif server_state["v_bar"] is not None and "last_iterate" in client_state:
            v_prev, w_prev = server_state["v_bar"], client_state["last_iterate"]
        else:
            v_prev = w_prev = None
        if v_prev is None:
            v = grad
        else:
            g_old = grad_at(w_prev)
            v = {k: grad[k] + (1.0 - self.alpha) * (v_prev[k] - g_old[k]) for k in grad}
        scratch["v"], scratch["w_prev"] = v, P.clone(p)
        client_state["v_last"] = v
        return v

    def finish_client(self, anchor: Params, trained: Params, client_state: dict[str, Any],
                      server_state: dict[str, Any], run: LocalRun, ctx: RoundContext) -> dict[str, Any]:
        client_state["last_iterate"] = P.clone(trained)
        return {"v": client_state["v_last"], "lr": run.lr_sum / run.steps}

    def aggregate(self, params: Params, results: Sequence[ClientResult], weights: torch.Tensor,
                  server_state: dict[str, Any], ctx: RoundContext) -> Params:
        w = weights.tolist()
        v_bar = P.weighted_sum([r.extras["v"] for r in results], w)
        server_state["v_bar"] = v_bar
        new = P.add(params, P.weighted_sum([r.update for r in results], w))
        if self.server_extra == "none":
            return new
        scale = 1.0 if self.server_extra == "literal" else sum(wi * r.extras["lr"] for wi, r in zip(w, results))
        return P.add(new, v_bar, alpha=-scale)
