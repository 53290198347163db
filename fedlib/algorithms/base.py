"""The algorithm contract.

An algorithm never sees codecs or executors. The round loop (`fedlib.engine.federation`) calls, per round t
(`ctx` is the `fedlib.core.contracts.RoundContext`: round, number of clients, and the client where one applies):

    sent = algo.broadcast(global, server_state)                  # what the downlink carries
    for each selected client i (client_state created by init_client_state on first use):
        algo.start_client(client_state, server_state, ctx_i)     # per-round per-client values, as tensors
        every local step:  d = algo.local_direction(p, grad, anchor=received, ...)
                           p <- p - lr * momentum_buffer(d + weight_decay * p)
        extras_i = algo.finish_client(anchor, trained, client_state, server_state, run, ctx_i)
    global = algo.aggregate(global, results, weights, server_state, ctx)  # results carry decoded updates

`local_direction` defaults to `grad + correction(...)`, so FedProx/SCAFFOLD-style methods only define
`correction`. The batched executor vmaps `local_direction` over the clients' stacked states and threads
the state through the steps, so every per-client quantity lives in client_state as tensors: a per-round
value (TACO's alpha_i) is put there by `start_client`, per-step memory (STEM's recursive momentum) by
`local_direction` itself, which may also ask `grad_at(q)` for the current mini-batch's gradient at other
parameters q. Control flow on client values must be tensor ops (`torch.where`), not Python branches.
An algorithm whose client step cannot be written so sets `vmap_compatible = False`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from fedlib.codecs.base import FLOAT_BITS
from fedlib.core import params as P
from fedlib.core.contracts import ClientResult, LocalRun, RoundContext
from fedlib.core.params import Params


def view_bits(obj: Any) -> int:
    """32 bits per tensor value or number, 1 per flag, 0 for None, in a (nested) dict."""
    if isinstance(obj, torch.Tensor):
        return FLOAT_BITS * obj.numel()
    if isinstance(obj, dict):
        return sum(view_bits(v) for v in obj.values())
    if obj is None:
        return 0
    if isinstance(obj, bool):
        return 1
    if isinstance(obj, (int, float)):
        return FLOAT_BITS
    raise TypeError(f"a client view holds tensors, numbers, flags or dicts of them, not {type(obj).__name__}")


class Algorithm:
    name = "base"
    vmap_compatible = True

    # ---- state ---------------------------------------------------------------------------------
    def init_server_state(self, params: Params, num_clients: int) -> dict[str, Any]:
        return {}

    def init_client_state(self, params: Params) -> dict[str, Any]:
        return {}

    def start_client(self, client_state: dict[str, Any], server_state: dict[str, Any], ctx: RoundContext) -> None:
        """Before client ctx.client trains in round ctx.round: store what its correction needs (tensors only)."""

    # ---- downlink ------------------------------------------------------------------------------
    def broadcast(self, params: Params, server_state: dict[str, Any]) -> Params:
        """The model the server sends this round (FedACG sends a look-ahead model)."""
        return params

    def client_view(self, server_state: dict[str, Any], ctx: RoundContext) -> dict[str, Any]:
        """Everything client code (start_client, correction, local_direction, finish_client) reads from the
        server in round ctx.round, as a sub-dict of the server state: the client methods receive this view,
        not the server state, and it is counted on the downlink at full precision (`client_view_bits`)."""
        return {}

    def client_view_bits(self, view: dict[str, Any]) -> int:
        """Downlink bits of a client's view beyond the model (bits_down_extra)."""
        return view_bits(view)

    # ---- client --------------------------------------------------------------------------------
    def correction(
        self, p: Params, anchor: Params, client_state: dict[str, Any], server_state: dict[str, Any]
    ) -> Params | None:
        """Term added to the mini-batch gradient at every local step; None for plain SGD."""
        return None

    def local_direction(
        self,
        p: Params,
        grad: Params,
        anchor: Params,
        client_state: dict[str, Any],
        server_state: dict[str, Any],
        grad_at: Callable[[Params], Params],
    ) -> Params:
        corr = self.correction(p, anchor, client_state, server_state)
        if corr is None:
            return grad
        return {k: grad[k] + corr[k] for k in grad}

    def finish_client(
        self,
        anchor: Params,
        trained: Params,
        client_state: dict[str, Any],
        server_state: dict[str, Any],
        run: LocalRun,
        ctx: RoundContext,
    ) -> dict[str, Any]:
        """Update client_state in place after local training; return extras to upload."""
        return {}

    # ---- server --------------------------------------------------------------------------------
    def aggregate(
        self,
        params: Params,
        results: Sequence[ClientResult],
        weights: torch.Tensor,
        server_state: dict[str, Any],
        ctx: RoundContext,
    ) -> Params:
        """Default: params + sum_i w_i * update_i (weights already normalised over the selected)."""
        step = P.weighted_sum([r.update for r in results], weights.tolist())
        return P.add(params, step)

    def eval_params(self, params: Params, server_state: dict[str, Any]) -> Params:
        """The model that is evaluated and reported (TACO reports an averaged output model)."""
        return params

    def diagnostics(self, server_state: dict[str, Any]) -> dict[str, float]:
        """Scalars added to this round's record row."""
        return {}

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({fields})"
