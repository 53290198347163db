"""Federated algorithms. Each registers its class (`@ALGORITHMS.register(name)`, fedlib.registry);
`make_algorithm(name, **kwargs)` builds one by name."""
from __future__ import annotations

from typing import Any

from fedlib.algorithms.base import Algorithm, ClientResult, LocalRun
from fedlib.algorithms.fedacg import FedACG
from fedlib.algorithms.fedavg import FedAvg
from fedlib.algorithms.fedprox import FedProx
from fedlib.algorithms.foolsgold import FoolsGold
from fedlib.algorithms.scaffold import Scaffold
from fedlib.algorithms.stem import Stem
from fedlib.algorithms.taco import Taco, TacoFedProx, TacoScaffold
from fedlib.registry import ALGORITHMS


def make_algorithm(name: str, **kwargs: Any) -> Algorithm:
    if name.lower() not in ALGORITHMS:
        raise ValueError(f"unknown algorithm {name!r}; available: {', '.join(sorted(ALGORITHMS))}")
    return ALGORITHMS[name.lower()](**kwargs)


__all__ = ["ALGORITHMS", "Algorithm", "ClientResult", "LocalRun", "make_algorithm", "FedACG", "FedAvg", "FedProx",
           "FoolsGold", "Scaffold", "Stem", "Taco", "TacoFedProx", "TacoScaffold"]
