"""SCAFFOLD (Karimireddy et al., 2020), option II control variates.

Local step: g + (c - c_i). After K local steps with learning rates eta_1..eta_K:
    c_i+ = c_i - c + (x - y_i) / sum_k eta_k        (= (x - y_i)/(K eta) for a constant rate)
Server:  x <- x + eta_g * sum_i w_i (y_i - x);   c <- c + (|S|/N) * mean_i (c_i+ - c_i).
`coef="samples"` reproduces the FedShift reference code, which divides by n_i * E * eta instead of
K * eta (control variates 50x smaller in its setting); see docs/fedshift.md, "Composition with the base methods".
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from fedlib.algorithms.base import Algorithm
from fedlib.core import params as P
from fedlib.core.contracts import ClientResult, LocalRun, RoundContext
from fedlib.core.params import Params
from fedlib.registry import ALGORITHMS
from fedlib.validate import real


@ALGORITHMS.register("scaffold")
class Scaffold(Algorithm):
    name = "scaffold"

    def __init__(self, server_lr: float = 1.0, coef: str = "steps") -> None:
        if coef not in ("steps", "samples"):
            raise ValueError(f"SCAFFOLD coef must be 'steps' or 'samples', got {coef!r}")
        self.server_lr = real("SCAFFOLD server_lr", server_lr, low=0, low_inclusive=False)
        self.coef = coef

    def init_server_state(self, params: Params, num_clients: int) -> dict[str, Any]:
        return {"c": P.zeros_like(params)}

    def init_client_state(self, params: Params) -> dict[str, Any]:
        return {"c_i": P.zeros_like(params)}

    def client_view(self, server_state: dict[str, Any], ctx: RoundContext) -> dict[str, Any]:
        return {"c": server_state["c"]}

    def correction(
        self, p: Params, anchor: Params, client_state: dict[str, Any], server_state: dict[str, Any]
    ) -> Params:
        c, c_i = server_state["c"], client_state["c_i"]
        return {k: c[k] - c_i[k] for k in p}

    def finish_client(
        self,
        anchor: Params,
        trained: Params,
        client_state: dict[str, Any],
        server_state: dict[str, Any],
        run: LocalRun,
        ctx: RoundContext,
    ) -> dict[str, Any]:
        if self.coef == "steps":
            denom = run.lr_sum
        else:
            denom = run.n_samples * run.epochs * run.lr_sum / run.steps
        c, c_i = server_state["c"], client_state["c_i"]
        new_c_i = {k: c_i[k] - c[k] + (anchor[k] - trained[k]) / denom for k in c_i}
        delta_c = P.sub(new_c_i, c_i)
        client_state["c_i"] = new_c_i
        return {"delta_c": delta_c}

    def aggregate(
        self,
        params: Params,
        results: Sequence[ClientResult],
        weights: torch.Tensor,
        server_state: dict[str, Any],
        ctx: RoundContext,
    ) -> Params:
        step = P.weighted_sum([r.update for r in results], weights.tolist())
        frac = len(results) / ctx.num_clients
        mean_dc = P.weighted_sum([r.extras["delta_c"] for r in results], [1.0 / len(results)] * len(results))
        server_state["c"] = P.add(server_state["c"], mean_dc, alpha=frac)
        return P.add(params, step, alpha=self.server_lr)
