"""Execute run specs: build each run from its spec, keep it in the store, hand back tidy records.

    records = run_specs(specs, store=RunStore("results/runs"))          # local, in this process
    records = run_specs(specs, store=..., executor="ray")               # one Ray task per spec
    records["rounds"]   # every run's round rows, with the spec's labels, seed and key as columns
    records["layers"]   # every run's per-layer diagnostics, long (see `fedlib.contracts.RunResult`)

A spec already in the store is not recomputed; a run interrupted mid-way resumes from its checkpoint.

How a spec becomes a run: `build_run` does the common part (dataset through the data-root rule, split,
model, algorithm, local training, links from registered codecs, loop options); the spec's experiment
may then adjust it (`register_experiment(name)(plan)`: paper-specific samplers, codec policies, hooks,
client behaviours, learning-rate schedules, extra record tables). The experiment named `x` lives in the
module `fedlib.papers.x`, imported on demand; it registers its plan and any split of its own
(`fedlib.runs.splits.SPLITS`), so a new paper adds files and edits no engine file.
"""
from __future__ import annotations

import dataclasses
import importlib
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pandas as pd
import torch
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.algorithms.base import Algorithm
from fedlib.channel import Link
from fedlib.codecs import make_codec
from fedlib.contracts import ClientBehavior, FederatedData, LocalTraining, RunResult
from fedlib.data import Dataset, load_dataset
from fedlib.data.roots import data_root
from fedlib.federation import resolve_device, run_federation
from fedlib.models import build_model
from fedlib.registry import Registry
from fedlib.runs.components import make_component
from fedlib.runs.spec import Component, RunSpec
from fedlib.runs.splits import SPLITS
from fedlib.runs.store import Records, RunStore
from fedlib.seeding import Seeds

EXECUTORS = ("local", "ray")


@dataclass
class RunPlan:
    """Everything `run_federation` needs for one spec, and how to turn its result into record tables."""

    spec: RunSpec
    dataset: Dataset
    model_fn: Callable[[], nn.Module]
    data: FederatedData
    device: torch.device  # the spec's device, resolved once ("auto" -> cuda or cpu)
    kwargs: dict[str, Any]  # run_federation keywords (algorithm, rounds, local, links, sampler, hooks, ...)
    collect: list[Callable[[RunResult], Records]] = field(default_factory=list)

    @property
    def num_clients(self) -> int:
        return self.data.num_clients

    @property
    def local(self) -> LocalTraining:
        return self.kwargs["local"]

    @property
    def algorithm(self) -> Algorithm:
        return self.kwargs["algorithm"]

    @property
    def client_behavior(self) -> ClientBehavior | None:
        return self.kwargs.get("client_behavior")


Plan = Callable[[RunSpec, RunPlan], RunPlan]
EXPERIMENTS: Registry[Plan] = Registry("experiment")
EXPERIMENT_PACKAGE = "fedlib.papers"  # experiment `x` is defined by module fedlib.papers.x


def register_experiment(name: str) -> Callable[[Plan], Plan]:
    return EXPERIMENTS.register(name)


def experiment_plan(name: str) -> Plan:
    """The plan registered as `name`, importing `fedlib.papers.<name>` first if nothing registered it yet."""
    if name not in EXPERIMENTS:
        module = f"{EXPERIMENT_PACKAGE}.{name}"
        try:
            importlib.import_module(module)  # registers itself
        except ModuleNotFoundError as err:
            if err.name != module:
                raise
            raise ValueError(f"unknown experiment {name!r}: no module {module} and no register_experiment({name!r}); "
                             f"registered: {', '.join(sorted(EXPERIMENTS)) or 'none'}") from None
    if name not in EXPERIMENTS:
        raise ValueError(f"module {EXPERIMENT_PACKAGE}.{name} registers no experiment {name!r}: "
                         f"decorate its plan with @register_experiment({name!r})")
    return EXPERIMENTS[name]


def build_split(spec: RunSpec, ds: Dataset) -> FederatedData:
    """The spec's split through the split registry (the experiment's module is imported first)."""
    args = spec.split.args
    num_clients = args.pop("num_clients")
    if spec.split.name not in SPLITS:
        raise ValueError(f"run spec: unknown split {spec.split.name!r} for experiment {spec.experiment!r}; "
                         f"registered splits: {', '.join(sorted(SPLITS))}")
    return FederatedData(ds, SPLITS[spec.split.name](ds, num_clients, Seeds(spec.seed), **args))


def make_link(component: Component) -> Link:
    """Component(codec name, {codec arguments..., payload, error_feedback, granularity}) -> Link."""
    args = component.args
    link_args = {k: args.pop(k) for k in ("payload", "error_feedback", "granularity") if k in args}
    return Link(codec=make_codec(component.name, **args), **link_args)


def build_run(spec: RunSpec, root: str | Path | None = None) -> RunPlan:
    experiment = experiment_plan(spec.experiment)
    ds = load_dataset(spec.dataset, root=data_root(root))
    data = build_split(spec, ds)
    model = spec.model

    def model_fn() -> nn.Module:
        return build_model(model.name, ds.input_shape, ds.num_classes, **model.args)

    if spec.sampler is not None and "sampler" in spec.get("loop"):
        raise ValueError("run spec names a sampler component and loop['sampler']: keep one")
    if spec.hooks and "hooks" in spec.get("loop"):
        raise ValueError("run spec names hooks components and loop['hooks']: keep one")
    kwargs = {"algorithm": make_algorithm(spec.algorithm.name, **spec.algorithm.args), "rounds": spec.rounds,
              "local": LocalTraining(**spec.get("local")), "uplink": make_link(spec.uplink),
              "downlink": make_link(spec.downlink), "seed": spec.seed, "device": spec.device, **spec.get("loop")}
    run = RunPlan(spec, ds, model_fn, data, resolve_device(spec.device), kwargs)
    add_components(run)
    return experiment(spec, run)


def add_components(run: RunPlan) -> None:
    """Build the spec's named components (fedlib.runs.components) into the run's keywords and collectors."""
    spec = run.spec
    if spec.lr_schedule is not None:
        lr = make_component("lr_schedule", run, spec.lr_schedule.name, spec.lr_schedule.args)
        run.kwargs["local"] = dataclasses.replace(run.kwargs["local"], lr=lr)
    if spec.uplink_policy is not None:
        if spec.uplink.name != "fp32":
            raise ValueError(f"run spec: uplink_policy {spec.uplink_policy.name!r} replaces the uplink codec, so "
                             f"the uplink must be the 'fp32' placeholder, got {spec.uplink.name!r}")
        run.kwargs["uplink"] = make_component("uplink_policy", run, spec.uplink_policy.name, spec.uplink_policy.args)
    for name in ("sampler", "client_behavior"):
        component = getattr(spec, name)
        if component is not None:
            run.kwargs[name] = make_component(name, run, component.name, component.args)
    if spec.hooks:
        run.kwargs["hooks"] = [make_component("hooks", run, h.name, h.args) for h in spec.hooks]
    run.collect += [make_component("collectors", run, c.name, c.args) for c in spec.collectors]


def execute(spec: RunSpec, store: RunStore, *, root: str | Path | None = None, checkpoint_every: int = 10,
            progress: bool = False) -> Records:
    """Run one spec (resuming from its checkpoint if there is one), store its records and return them."""
    store = store.reading(root)
    plan = build_run(spec, root)
    result = run_federation(plan.model_fn, plan.data, progress=progress,
                            checkpoint=store.checkpoint(spec, checkpoint_every), **plan.kwargs)
    store.save(spec, records_of(plan, result))
    return store.load(spec)


def records_of(plan: RunPlan, result: RunResult) -> Records:
    """A run's record tables: "rounds", "clients", "layers" and those of the spec's collectors."""
    records: Records = {"rounds": result.rounds, "clients": result.clients, "layers": result.layers}
    for collect in plan.collect:
        records.update(collect(result))
    return records


def run_specs(specs: Sequence[RunSpec], *, store: RunStore, executor: str = "local", ray_address: str | None = None,
              root: str | Path | None = None, checkpoint_every: int = 10, progress: bool = True,
              gpus_per_run: float | None = None, workers: int = 1) -> Records:
    """Execute the specs not yet in the store and return every spec's records as tidy tables.

    `workers` > 1 runs the local executor's specs in that many worker processes (`fedlib.runs.pool`)."""
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

        with tqdm(total=len(todo), desc="runs", unit="run", disable=not progress) as bar:
            if workers > 1:
                from fedlib.runs.pool import run_in_processes

                run_in_processes(todo, store, workers=workers, root=root, checkpoint_every=checkpoint_every,
                                 on_done=lambda spec: bar.update())
            else:
                for spec in todo:
                    execute(spec, store, root=root, checkpoint_every=checkpoint_every, progress=progress)
                    bar.update()
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
