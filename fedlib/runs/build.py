"""Build one run from its spec: `build_run(spec)` is everything `run_federation` needs (a `RunPlan`).

`build_run` first loads the components (`fedlib.registry.load_components`: fedlib's and the spec's `imports`, these
only where the user allowed them: `fedlib.trust`), then does the common part (dataset through the data-root rule,
split, model, algorithm, local training, links from registered codecs or a codec policy, loop options), then builds
the spec's named components in this order: lr_schedule (returns the `lr` of LocalTraining: a float or a schedule),
the uplink's codec policy if it names one (returns the uplink `Link`), sampler, client_behavior, hooks,
collectors (return `Callable[[RunResult], Records]`). Each is a factory `factory(run, **args)` taking the
`RunPlan` being built and the spec's arguments:

    @HOOKS.register("divergence")
    def divergence(run: RunPlan) -> Hook: ...

    RunSpec.make(..., hooks=[("divergence", {})])

Last, the spec's experiment (`@EXPERIMENTS.register(name)` on `plan(spec, run) -> run`) may adjust the run.
Nothing here files or reads records: `fedlib.runs.execute` runs a built spec into the store.
"""
from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.algorithms.base import Algorithm
from fedlib.codecs import make_codec
from fedlib.core.contracts import ClientBehavior, FederatedData, LocalTraining, RunResult
from fedlib.core.seeding import Seeds
from fedlib.data import Dataset, load_dataset
from fedlib.data.roots import data_root
from fedlib.engine.channel import Link
from fedlib.engine.federation import resolve_device
from fedlib.models import build_model
from fedlib.registry import (CLIENT_BEHAVIORS, CODEC_POLICIES, CODECS, COLLECTORS, EXPERIMENTS, HOOKS, LR_SCHEDULES,
                             SAMPLERS, SPLITS, Registry, load_components)
from fedlib.runs.entry import Records
from fedlib.runs.spec import Component, RunSpec, run_name


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

# RunSpec field -> registry of the components it names (built with the run being built)
FIELDS: dict[str, Registry[Any]] = {"lr_schedule": LR_SCHEDULES, "uplink": CODEC_POLICIES, "sampler": SAMPLERS,
                                    "client_behavior": CLIENT_BEHAVIORS, "hooks": HOOKS, "collectors": COLLECTORS}


@SAMPLERS.register("uniform", examples=({"clients": 2}, {"clients": 0.5}))
def uniform_sampler(run: RunPlan, clients: int | float) -> int | float:
    """`clients` clients a round (an int), or that fraction of them (a float), uniformly without replacement."""
    return clients


def experiment_plan(name: str) -> Plan:
    """The plan registered as experiment `name` (fedlib's and the loaded modules')."""
    load_components()
    if name not in EXPERIMENTS:
        raise ValueError(f"unknown experiment {name!r}: register its plan with @EXPERIMENTS.register({name!r}) in a "
                         f"module the spec imports; registered: {', '.join(sorted(EXPERIMENTS))}")
    return EXPERIMENTS[name]


def make_component(spec_field: str, run: RunPlan, name: str, args: dict[str, Any]) -> Any:
    """Build the component the spec's `spec_field` names, with a clear error for an unknown name."""
    registry = FIELDS[spec_field]
    if name not in registry:
        raise ValueError(f"run spec {spec_field}: unknown {registry.kind} {name!r} (experiment "
                         f"{run.spec.experiment!r}); registered: {', '.join(sorted(registry)) or 'none'}")
    factory = registry[name]
    try:
        inspect.signature(factory).bind(run, **args)
    except TypeError as err:
        raise ValueError(f"run spec {spec_field} {name!r} ({factory.__module__}.{factory.__name__}"
                         f"{inspect.signature(factory)}): {err}") from None
    return factory(run, **args)


def build_split(spec: RunSpec, ds: Dataset) -> FederatedData:
    """The spec's split through the split registry."""
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


def make_uplink(run: RunPlan) -> Link:
    """The spec's uplink: a registered codec (`make_link`) or a registered codec policy's Link."""
    uplink = run.spec.uplink
    if uplink.name in CODECS and uplink.name in CODEC_POLICIES:
        raise ValueError(f"run spec uplink {uplink.name!r} is both a codec and a codec policy: rename one")
    if uplink.name in CODEC_POLICIES:
        return make_component("uplink", run, uplink.name, uplink.args)
    if uplink.name not in CODECS:
        raise ValueError(f"run spec uplink: {uplink.name!r} is no registered codec ({', '.join(sorted(CODECS))}) "
                         f"and no codec policy ({', '.join(sorted(CODEC_POLICIES))})")
    return make_link(uplink)


def build_run(spec: RunSpec, root: str | Path | None = None) -> RunPlan:
    load_components(spec.imports, f"run spec {spec.experiment!r} ({run_name(spec)})")
    experiment = experiment_plan(spec.experiment)
    ds = load_dataset(spec.dataset, root=data_root(root))
    data = build_split(spec, ds)
    model = spec.model

    def model_fn() -> nn.Module:
        return build_model(model.name, ds.input_shape, ds.num_classes, **model.args)

    kwargs = {"algorithm": make_algorithm(spec.algorithm.name, **spec.algorithm.args), "rounds": spec.rounds,
              "local": LocalTraining(**spec.get("local")), "downlink": make_link(spec.downlink), "seed": spec.seed,
              "device": spec.device, **spec.get("loop")}
    run = RunPlan(spec, ds, model_fn, data, resolve_device(spec.device), kwargs)
    add_components(run)
    return experiment(spec, run)


class Plans:
    """Each spec's run built once (`build_run`) for a caller that asks about it before running it: `plans(spec)`
    builds it or gives the one built before (to look at: its model, its split); `take(spec)` hands it over to be run
    and forgets it, since running a plan uses its components (an algorithm's state, a codec's memory)."""

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = root
        self._built: dict[RunSpec, RunPlan] = {}

    def __call__(self, spec: RunSpec) -> RunPlan:
        if spec not in self._built:
            self._built[spec] = build_run(spec, self.root)
        return self._built[spec]

    def take(self, spec: RunSpec) -> RunPlan:
        return self._built.pop(spec, None) or build_run(spec, self.root)


def add_components(run: RunPlan) -> None:
    """Build the spec's named components into the run's keywords and collectors."""
    spec = run.spec
    if spec.lr_schedule is not None:
        lr = make_component("lr_schedule", run, spec.lr_schedule.name, spec.lr_schedule.args)
        run.kwargs["local"] = dataclasses.replace(run.kwargs["local"], lr=lr)
    run.kwargs["uplink"] = make_uplink(run)
    for name in ("sampler", "client_behavior"):
        component = getattr(spec, name)
        if component is not None:
            run.kwargs[name] = make_component(name, run, component.name, component.args)
    if spec.hooks:
        run.kwargs["hooks"] = [make_component("hooks", run, h.name, h.args) for h in spec.hooks]
    run.collect += [make_component("collectors", run, c.name, c.args) for c in spec.collectors]


def records_of(plan: RunPlan, result: RunResult) -> Records:
    """A run's record tables: "rounds", "clients", "layers" and those of the spec's collectors."""
    records: Records = {"rounds": result.rounds, "clients": result.clients, "layers": result.layers}
    for collect in plan.collect:
        records.update(collect(result))
    return records
