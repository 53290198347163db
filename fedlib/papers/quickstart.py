"""The quickstart's grid as data: FedAvg, FedProx and SCAFFOLD on one Dirichlet split per seed."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedlib.runs import RunPlan, RunSpec, register_experiment

ALGORITHMS = {"FedAvg": "fedavg", "FedProx": "fedprox", "SCAFFOLD": "scaffold"}


def experiments(params: Mapping[str, Any]) -> list[RunSpec]:
    """One run per (seed, algorithm); `params` are the notebook's parameters."""
    p = dict(params)
    specs = []
    for seed in p["seeds"]:
        for label, name in ALGORITHMS.items():
            kwargs = {"mu": p["mu"]} if name == "fedprox" else {}
            specs.append(RunSpec.make(
                "quickstart", p["dataset"],
                ("dirichlet", {"num_clients": p["num_clients"], "alpha": p["alpha"], "min_size": p["min_size"]}),
                (p["model"], p["model_kwargs"]), (name, kwargs), p["rounds"], seed,
                local={"lr": p["lr"], "batch_size": p["batch_size"], "epochs": p["local_epochs"]},
                loop={"sampler": p["clients_per_round"], "executor": p["executor"]},
                labels={"algorithm": label}, device=p["device"]))
    return specs


@register_experiment("quickstart")
def plan(spec: RunSpec, run: RunPlan) -> RunPlan:
    """Nothing beyond the common recipe."""
    return run
