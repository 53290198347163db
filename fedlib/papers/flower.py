"""The Flower notebook's runs: a TACO run with planted freeloaders and a FedAQ run with quantized links, each
run by fedlib's loop (these specs, in the run store) and by Flower's simulation engine (fedlib.flower)."""
from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from fedlib.papers.fedaq import SPLIT, downlink_resolution, link_components
from fedlib.runs import RunSpec


def experiments(params: Mapping[str, Any]) -> list[RunSpec]:
    """[TACO with `n_freeloaders` freeloaders and live expulsion, FedAQ on both links] per seed."""
    p = dict(params)
    common = {"local": {"lr": p["lr"], "batch_size": p["batch_size"], "steps": p["local_steps"]},
              "device": p["device"]}
    model = (p["model"], p["model_kwargs"])
    specs = []
    for seed in p["seeds"]:
        specs.append(RunSpec.make(
            "taco", p["dataset"], ("dirichlet", {"num_clients": p["num_clients"], "alpha": p["dirichlet"], "min_size": 5}),
            model, ("taco", {"kappa": p["kappa"], "expel_after": p["expel_after"]}), p["rounds"], int(seed),
            loop={"aggregation_weights": "uniform", "executor": "sequential", "threads": p["threads"]},
            labels={"run": "TACO + freeloaders"}, client_behavior=("freeloaders", {"count": p["n_freeloaders"]}),
            collectors=[("taco_alpha", {}), ("taco_expelled", {})], **common))
        up, down = link_components("joint", "fedaq", alpha=p["fedaq_alpha"],
                                   beta=downlink_resolution(p["fedaq_alpha"], p["num_clients"]))
        specs.append(RunSpec.make(
            "fedaq", p["dataset"], (SPLIT, {"num_clients": p["num_clients"]}), model, ("fedavg", {}), p["rounds"],
            int(seed), uplink=up, downlink=down, loop={"executor": "sequential", "threads": p["threads"]},
            labels={"run": "FedAQ quantized links"}, **common))
    return specs
