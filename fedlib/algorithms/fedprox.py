"""FedProx (Li et al., 2020): local objective F_i(w) + mu/2 ||w - w_global||^2."""
from __future__ import annotations

from typing import Any

from fedlib.algorithms.base import Algorithm
from fedlib.core.params import Params
from fedlib.registry import ALGORITHMS
from fedlib.validate import real


@ALGORITHMS.register("fedprox")
class FedProx(Algorithm):
    name = "fedprox"

    def __init__(self, mu: float = 0.01) -> None:
        self.mu = real("FedProx mu", mu, low=0)

    def correction(
        self, p: Params, anchor: Params, client_state: dict[str, Any], server_state: dict[str, Any]
    ) -> Params:
        return {k: self.mu * (p[k] - anchor[k]) for k in p}
