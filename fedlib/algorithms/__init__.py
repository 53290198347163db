"""Federated algorithms. `make_algorithm(name, **kwargs)` builds one by name."""
from __future__ import annotations

from typing import Any

from fedlib.algorithms.base import Algorithm, ClientResult, LocalRun
from fedlib.algorithms.fedavg import FedAvg
from fedlib.algorithms.fedprox import FedProx
from fedlib.algorithms.scaffold import Scaffold
from fedlib.algorithms.taco import Taco, TacoFedProx, TacoScaffold
from fedlib.algorithms.foolsgold import FoolsGold
from fedlib.algorithms.stem import Stem
from fedlib.algorithms.fedacg import FedACG

ALGORITHMS: dict[str, type[Algorithm]] = {
    "fedavg": FedAvg,
    "fedprox": FedProx,
    "scaffold": Scaffold,
    "taco": Taco,
    "taco_fedprox": TacoFedProx,
    "taco_scaffold": TacoScaffold,
    "foolsgold": FoolsGold,
    "stem": Stem,
    "fedacg": FedACG,
}


def make_algorithm(name: str, **kwargs: Any) -> Algorithm:
    try:
        cls = ALGORITHMS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown algorithm {name!r}; available: {', '.join(sorted(ALGORITHMS))}") from None
    return cls(**kwargs)


__all__ = ["ALGORITHMS", "Algorithm", "ClientResult", "LocalRun", "make_algorithm", *[c.__name__ for c in ALGORITHMS.values()]]
