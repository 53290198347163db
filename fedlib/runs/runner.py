"""Execute run specs: build each run from its spec, keep it in the store, hand back tidy records.

    records = run_specs(specs, store=RunStore("results/runs"))          # local, in this process
    records = run_specs(specs, store=..., executor="ray")               # one Ray task per spec
    records["rounds"]   # every run's round rows, with the spec's labels, seed and key as columns

A spec already in the store is not recomputed; a run interrupted mid-way resumes from its checkpoint.

How a spec becomes a run: `build_run` does the common part (dataset through the data-root rule, split,
model, algorithm, local training, links from registered codecs, loop options); the spec's experiment
may then adjust it (`register_experiment(name)(plan)`: paper-specific samplers, codec policies, hooks,
client behaviours, learning-rate schedules, extra record tables). Experiments live in `fedlib.papers`.
"""
from __future__ import annotations

import importlib
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.channel import Link
from fedlib.codecs import make_codec
from fedlib.contracts import FederatedData, LocalTraining, RunResult
from fedlib.data import Dataset, load_dataset, split_clients
from fedlib.data.roots import data_root
from fedlib.federation import run_federation
from fedlib.models import build_model
from fedlib.runs.spec import Component, RunSpec
from fedlib.runs.store import Records, RunStore
from fedlib.seeding import Seeds

EXECUTORS = ("local", "ray")


@dataclass
class RunPlan:
    """Everything `run_federation` needs for one spec, and how to turn its result into record tables."""

    dataset: Dataset
    model_fn: Callable[[], nn.Module]
    num_clients: int
    data: FederatedData | None  # None until the experiment's plan builds a split of its own
    kwargs: dict[str, Any]  # run_federation keywords (algorithm, rounds, local, links, sampler, hooks, ...)
    collect: list[Callable[[RunResult], Records]] = field(default_factory=list)


Plan = Callable[[RunSpec, RunPlan], RunPlan]
EXPERIMENTS: dict[str, Plan] = {}
_EXPERIMENT_MODULES = {"quickstart": "fedlib.papers.quickstart", "fedshift": "fedlib.papers.fedshift",
                       "taco": "fedlib.papers.taco", "fedaq": "fedlib.papers.fedaq", "mucsc": "fedlib.papers.mucsc"}


def register_experiment(name: str) -> Callable[[Plan], Plan]:
    def add(plan: Plan) -> Plan:
        EXPERIMENTS[name] = plan
        return plan

    return add


def experiment_plan(name: str) -> Plan:
    if name not in EXPERIMENTS and name in _EXPERIMENT_MODULES:
        importlib.import_module(_EXPERIMENT_MODULES[name])  # registers itself
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}; known: {', '.join(sorted(set(EXPERIMENTS) | set(_EXPERIMENT_MODULES)))}")
    return EXPERIMENTS[name]


def make_link(component: Component) -> Link:
    """Component(codec name, {codec arguments..., payload, error_feedback, granularity}) -> Link."""
    args = component.args
    link_args = {k: args.pop(k) for k in ("payload", "error_feedback", "granularity") if k in args}
    return Link(codec=make_codec(component.name, **args), **link_args)


def build_run(spec: RunSpec, root: str | Path | None = None) -> RunPlan:
    ds = load_dataset(spec.dataset, root=data_root(root))
    split = spec.split.args
    num_clients = split.pop("num_clients")
    data = None
    if spec.split.name in ("dirichlet", "iid", "shards", "labels"):
        data = FederatedData(ds, split_clients(ds.y_train.numpy(), num_clients, spec.split.name,
                                               Seeds(spec.seed).numpy("partition"), **split))
    model = spec.model

    def model_fn() -> nn.Module:
        return build_model(model.name, ds.input_shape, ds.num_classes, **model.args)

    kwargs = {"algorithm": make_algorithm(spec.algorithm.name, **spec.algorithm.args), "rounds": spec.rounds,
              "local": LocalTraining(**spec.get("local")), "uplink": make_link(spec.uplink),
              "downlink": make_link(spec.downlink), "seed": spec.seed, "device": spec.device, **spec.get("loop")}
    plan = experiment_plan(spec.experiment)(spec, RunPlan(ds, model_fn, num_clients, data, kwargs))
    if plan.data is None:
        raise ValueError(f"split {spec.split.name!r} is no fedlib.data scheme and experiment {spec.experiment!r} "
                         "built no split for it: name a scheme (dirichlet, iid, shards, labels) or the paper's own")
    return plan


def execute(spec: RunSpec, store: RunStore, *, root: str | Path | None = None, checkpoint_every: int = 10,
            progress: bool = False) -> Records:
    """Run one spec (resuming from its checkpoint if there is one), store its records and return them."""
    store = store.reading(root)
    plan = build_run(spec, root)
    result = run_federation(plan.model_fn, plan.data, progress=progress,
                            checkpoint=store.checkpoint(spec, checkpoint_every), **plan.kwargs)
    records: Records = {"rounds": result.rounds, "clients": result.clients}
    for collect in plan.collect:
        records.update(collect(result))
    store.save(spec, records)
    return store.load(spec)


def run_specs(specs: Sequence[RunSpec], *, store: RunStore, executor: str = "local", ray_address: str | None = None,
              root: str | Path | None = None, checkpoint_every: int = 10, progress: bool = True,
              gpus_per_run: float | None = None) -> Records:
    """Execute the specs not yet in the store and return every spec's records as tidy tables."""
    if executor not in EXECUTORS:
        raise ValueError(f"executor must be one of {EXECUTORS}, got {executor!r}")
    specs = list(dict.fromkeys(specs))  # duplicates run once
    store = store.reading(root)  # keys cover the data files under the root the runs read
    todo = [s for s in specs if not store.has(s)]
    print(f"{len(specs)} runs: {len(specs) - len(todo)} from the store ({store.root}), {len(todo)} to compute"
          + (f" ({executor})" if todo else ""), file=sys.stderr, flush=True)
    start = time.perf_counter()
    if todo and executor == "local":
        from tqdm.auto import tqdm

        for spec in tqdm(todo, desc="runs", disable=not progress):
            execute(spec, store, root=root, checkpoint_every=checkpoint_every, progress=progress)
    elif todo:
        from fedlib.runs.ray_runner import run_on_ray

        run_on_ray(todo, store, root=root, checkpoint_every=checkpoint_every, address=ray_address,
                   gpus_per_run=gpus_per_run)
    if todo:
        print(f"computed {len(todo)} runs in {time.perf_counter() - start:.1f} s", file=sys.stderr, flush=True)
    return tidy(specs, store)


def tidy(specs: Sequence[RunSpec], store: RunStore) -> Records:
    """Concatenate each table over specs, with the spec's labels, seed and store key as leading columns."""
    tables: dict[str, list[pd.DataFrame]] = {}
    for spec in specs:
        ids = {**spec.get("labels"), "seed": spec.seed, "run": store.key(spec)}
        for name, frame in store.load(spec).items():
            tables.setdefault(name, []).append(frame.assign(**ids)[[*ids, *frame.columns]])
    return {name: pd.concat(frames, ignore_index=True) for name, frames in tables.items()}
