"""The quickstart's grid as data: FedAvg, FedProx and SCAFFOLD on one Dirichlet split per seed."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedlib.paper import Headline
from fedlib.paper_params import Executor, PaperParams, param
from fedlib.registry import EXPERIMENTS
from fedlib.runs import RunPlan, RunSpec

ALGORITHMS = {"FedAvg": "fedavg", "FedProx": "fedprox", "SCAFFOLD": "scaffold"}


@dataclass(frozen=True)
class QuickstartParams(PaperParams):
    """notebooks/quickstart.py's parameters (defaults: its quick profile)."""

    dataset: str = param("digits", "dataset name (fedlib.data)")
    model: str = param("mlp", "model name (fedlib.models)")
    model_kwargs: Mapping[str, Any] = param({"hidden": [64]}, "the model's keyword arguments")
    num_clients: int = param(10, "clients of the Dirichlet split")
    alpha: float = param(0.1, "Dirichlet concentration of the label split")
    min_size: int = param(10, "fewest training samples a client may get")
    rounds: int = param(15, "communication rounds")
    clients_per_round: int = param(5, "clients sampled each round")
    local_epochs: float = param(2, "local epochs per round")
    batch_size: int = param(16, "local minibatch size")
    lr: float = param(0.05, "local SGD learning rate")
    mu: float = param(0.01, "FedProx's proximal weight")
    seeds: tuple[int, ...] = param([0], "seeds; one run per seed and algorithm")
    executor: Executor = param("sequential",
                               "how a round's clients train (the executor of fedlib.engine.federation.run_federation)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_range(1, math.inf, "num_clients", "min_size", "rounds", "batch_size")
        self.require_range(1, self.num_clients, "clients_per_round")
        self.require_positive("alpha", "local_epochs", "lr")
        self.require_range(0, math.inf, "mu")
        self.require_nonempty("seeds")



# The runs that back the headline claims (fedlib/papers/quickstart/claims.py), most valued first: a piece of the gpu
# profile computes them in this order (fedlib.ledger.priority), each on every seed of the profile.
HEADLINE_RUNS = (Headline("Q1", {"algorithm": ("SCAFFOLD", "FedAvg")}),
                 Headline("Q2", {"algorithm": ("FedProx", "FedAvg")}))

def experiments(p: QuickstartParams) -> list[RunSpec]:
    """One run per (seed, algorithm); `p` are the notebook's parameters."""
    specs = []
    for seed in p.seeds:
        for label, name in ALGORITHMS.items():
            kwargs = {"mu": p.mu} if name == "fedprox" else {}
            specs.append(RunSpec.make(
                "quickstart", p.dataset,
                ("dirichlet", {"num_clients": p.num_clients, "alpha": p.alpha, "min_size": p.min_size}),
                (p.model, p.model_kwargs), (name, kwargs), p.rounds, seed,
                local={"lr": p.lr, "batch_size": p.batch_size, "epochs": p.local_epochs},
                sampler=("uniform", {"clients": p.clients_per_round}), loop={"executor": p.executor},
                labels={"algorithm": label}, device=p.device))
    return specs


@EXPERIMENTS.register("quickstart")
def plan(spec: RunSpec, run: RunPlan) -> RunPlan:
    """Nothing beyond the common recipe."""
    return run
