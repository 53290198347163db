"""STEM (Khanduri et al., NeurIPS 2021): STORM-style recursive momentum, averaged on both sides.

Local step k of round t (TACO's Algorithm 1, line 11; the original's recursion):
    v_k = g(w_k; xi_k) + (1 - a) (v_{k-1} - g(w_{k-1}; xi_k)),     w_{k+1} = w_k - eta_l v_k
two gradients of the same mini-batch per step. Round start (docs/taco.md, Baselines: our concrete choice):
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

from fedlib.algorithms.base import Algorithm
from fedlib.core import params as P
from fedlib.core.contracts import ClientResult, LocalRun, RoundContext
from fedlib.core.params import Params
from fedlib.registry import ALGORITHMS
from fedlib.validate import real


@ALGORITHMS.register("stem")
class Stem(Algorithm):
    """Per-client state (tensors, so the batched executor carries it): "v" and "w_prev" (the recursion's
    last direction and iterate, this round), "started" (a step of this round was taken), "last_iterate" and
    "has_last" (the client's last iterate of its previous round). Server state: "v_bar" and "has_v_bar"."""

    name = "stem"

    def __init__(self, alpha: float = 0.2, server_extra: str = "none") -> None:
        alpha = real("STEM alpha", alpha, low=0, high=1, high_inclusive=True)
        if server_extra not in ("none", "eta_l", "literal"):
            raise ValueError(f"server_extra must be 'none', 'eta_l' or 'literal', got {server_extra!r}")
        self.alpha = alpha
        self.server_extra = server_extra

    def init_server_state(self, params: Params, num_clients: int) -> dict[str, Any]:
        return {"v_bar": P.zeros_like(params), "has_v_bar": False}

    def client_view(self, server_state: dict[str, Any], ctx: RoundContext) -> dict[str, Any]:
        return {"v_bar": server_state["v_bar"], "has_v_bar": server_state["has_v_bar"]}

    def init_client_state(self, params: Params) -> dict[str, Any]:
        flag = torch.zeros((), dtype=torch.bool, device=next(iter(params.values())).device)
        return {"v": P.zeros_like(params), "w_prev": P.zeros_like(params), "last_iterate": P.zeros_like(params),
                "started": flag, "has_last": flag.clone()}

    def start_client(self, client_state: dict[str, Any], server_state: dict[str, Any], ctx: RoundContext) -> None:
        client_state["started"] = torch.zeros_like(client_state["started"])

    def local_direction(self, p: Params, grad: Params, anchor: Params, client_state: dict[str, Any],
                        server_state: dict[str, Any], grad_at: Callable[[Params], Params]) -> Params:
        started = client_state["started"]
        recursive = started | (client_state["has_last"] & server_state["has_v_bar"])
        v_prev = {k: torch.where(started, client_state["v"][k], server_state["v_bar"][k]) for k in grad}
        w_prev = {k: torch.where(started, client_state["w_prev"][k], client_state["last_iterate"][k]) for k in grad}
        g_old = grad_at(w_prev)
        v = {k: torch.where(recursive, grad[k] + (1.0 - self.alpha) * (v_prev[k] - g_old[k]), grad[k]) for k in grad}
        client_state.update(v=v, w_prev={k: t.clone() for k, t in p.items()}, started=torch.ones_like(started))
        return v

    def finish_client(self, anchor: Params, trained: Params, client_state: dict[str, Any],
                      server_state: dict[str, Any], run: LocalRun, ctx: RoundContext) -> dict[str, Any]:
        client_state.update(last_iterate=P.clone(trained), has_last=torch.ones_like(client_state["has_last"]))
        return {"v": client_state["v"], "lr": run.lr_sum / run.steps}

    def aggregate(self, params: Params, results: Sequence[ClientResult], weights: torch.Tensor,
                  server_state: dict[str, Any], ctx: RoundContext) -> Params:
        w = weights.tolist()
        v_bar = P.weighted_sum([r.extras["v"] for r in results], w)
        server_state.update(v_bar=v_bar, has_v_bar=True)
        new = P.add(params, P.weighted_sum([r.update for r in results], w))
        if self.server_extra == "none":
            return new
        scale = 1.0 if self.server_extra == "literal" else sum(wi * r.extras["lr"] for wi, r in zip(w, results))
        return P.add(new, v_bar, alpha=-scale)
