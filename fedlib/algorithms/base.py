"""The algorithm contract.

An algorithm never sees codecs or executors. The round loop (`fedlib.federation`) calls, per round:

    sent = algo.broadcast(global, server_state)                  # what the downlink carries
    for each selected client i (client_state created by init_client_state on first use):
        every local step:  d = algo.local_direction(p, grad, anchor=received, ...)
                           p <- p - lr * momentum_buffer(d + weight_decay * p)
        extras_i = algo.finish_client(anchor, trained, client_state, server_state, run)
    global = algo.aggregate(global, results, weights, server_state)  # results carry decoded updates

`local_direction` defaults to `grad + correction(...)`, so FedProx/SCAFFOLD-style methods only define
`correction`. Methods that need more per step (STEM) override `local_direction`, using the per-round
`scratch` dict and `grad_at(q)` (the gradient of the current mini-batch at other parameters q); those
set `vmap_compatible = False`.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from fedlib import params as P
from fedlib.params import Params


@dataclass(frozen=True)
class LocalRun:
    """Facts about one client's local training in one round."""

    steps: int  # local SGD steps taken (K in SCAFFOLD)
    lr_sum: float  # sum of the step sizes used (K * lr for a constant rate)
    n_samples: int  # the client's training-set size
    epochs: float  # passes over the local data


@dataclass
class ClientResult:
    """What the server holds from one client after the uplink."""

    client: int
    n_samples: int
    steps: int
    update: Params  # decoded (sent weights - received weights), as the server reconstructs it
    loss: float  # mean local training loss over the round's steps
    extras: dict[str, Any] = field(default_factory=dict)  # algorithm uploads sent at full precision


class Algorithm:
    name = "base"
    vmap_compatible = True

    # ---- state ---------------------------------------------------------------------------------
    def init_server_state(self, params: Params, num_clients: int) -> dict[str, Any]:
        return {"num_clients": num_clients}

    def init_client_state(self, params: Params) -> dict[str, Any]:
        return {}

    # ---- downlink ------------------------------------------------------------------------------
    def broadcast(self, params: Params, server_state: dict[str, Any]) -> Params:
        """The model the server sends this round (FedACG sends a look-ahead model)."""
        return params

    def broadcast_extras(self, server_state: dict[str, Any]) -> Params:
        """Extra tensors sent to each client at full precision (SCAFFOLD's c); counted in bits."""
        return {}

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
        scratch: dict[str, Any],
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
