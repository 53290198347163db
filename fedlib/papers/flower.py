"""The Flower notebook's runs: a TACO run with planted freeloaders and a FedAQ run with quantized links, each
run by fedlib's loop (these specs, in the run store) and by Flower's simulation engine (fedlib.flower)."""
from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from fedlib.notebook_params import NOTEBOOKS
from fedlib.paper import Paper, declare
from fedlib.paper_params import ParameterError, PaperParams, param
from fedlib.papers.fedaq import SPLIT, downlink_resolution, link_components
from fedlib.runs import RunSpec


@dataclass(frozen=True)
class FlowerParams(PaperParams):
    """notebooks/flower.py's parameters (defaults: its quick profile)."""

    seeds: tuple[int, ...] = param([0], "seeds; each runs both specs in both loops")
    dataset: str = param("digits", "dataset name (fedlib.data)")
    model: str = param("mlp", "model name (fedlib.models)")
    model_kwargs: Mapping[str, Any] = param({"hidden": [32]}, "the model's keyword arguments")
    num_clients: int = param(10, "clients (one Flower node each)")
    dirichlet: float = param(0.5, "Dirichlet label skew of the TACO run (FedAQ uses its equal shards)")
    rounds: int = param(8, "communication rounds")
    local_steps: int = param(10, "local SGD steps per round")
    batch_size: int = param(32, "local minibatch size")
    lr: float = param(0.05, "local SGD learning rate")
    kappa: float = param(0.6, "the TACO freeloader threshold (Eq. 10)")
    expel_after: int = param(3, "rounds with alpha at or above kappa that expel a client (Eq. 10)")
    n_freeloaders: int = param(2, "planted freeloaders in the TACO run")
    fedaq_alpha: float = param(0.01, "the FedAQ uplink resolution; the downlink's is alpha / sqrt(2n) (Eq. 22)")
    flower_workers: int = param(2, "Ray actors running client apps")
    threads: int = param(1, "torch threads per run (pinned: bitwise parity across processes)")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_range(1, math.inf, "num_clients", "rounds", "local_steps", "batch_size", "expel_after",
                           "flower_workers", "threads")
        self.require_range(0, self.num_clients - 1, "n_freeloaders")
        self.require_positive("dirichlet", "lr", "kappa", "fedaq_alpha")
        self.require_nonempty("seeds")
        if self.ledger is not None:
            raise ParameterError(f"FlowerParams.ledger: the Flower notebook compares two loops it runs itself, so no "
                                 f"ledger can serve its runs (got {self.ledger!r}); leave ledger out")


def experiments(p: FlowerParams) -> list[RunSpec]:
    """[TACO with `n_freeloaders` freeloaders and live expulsion, FedAQ on both links] per seed."""
    common = {"local": {"lr": p.lr, "batch_size": p.batch_size, "steps": p.local_steps},
              "device": p.device}
    model = (p.model, p.model_kwargs)
    specs = []
    for seed in p.seeds:
        specs.append(RunSpec.make(
            "taco", p.dataset, ("dirichlet", {"num_clients": p.num_clients, "alpha": p.dirichlet, "min_size": 5}),
            model, ("taco", {"kappa": p.kappa, "expel_after": p.expel_after}), p.rounds, int(seed),
            loop={"aggregation_weights": "uniform", "executor": "sequential", "threads": p.threads},
            labels={"run": "TACO + freeloaders"}, client_behavior=("freeloaders", {"count": p.n_freeloaders}),
            collectors=[("taco_alpha", {}), ("taco_expelled", {})], **common))
        up, down = link_components("joint", "fedaq", alpha=p.fedaq_alpha,
                                   beta=downlink_resolution(p.fedaq_alpha, p.num_clients))
        specs.append(RunSpec.make(
            "fedaq", p.dataset, (SPLIT, {"num_clients": p.num_clients}), model, ("fedavg", {}), p.rounds,
            int(seed), uplink=up, downlink=down, loop={"executor": "sequential", "threads": p.threads},
            labels={"run": "FedAQ quantized links"}, **common))
    return specs


PAPER = declare(Paper(
    name="flower", notebooks=NOTEBOOKS, params=FlowerParams, experiments=experiments, headlines=(), claims=(),
    judge=None, bundle_from_runs=None, on_profile=None, scale=None, paper_scale=None, noise_rules={},
    notes="docs/flower.md", theory=None))
