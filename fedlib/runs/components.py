"""Run components by name: what a spec's sampler, uplink policy, hooks, client behaviour, learning-rate
schedule and record collectors are.

Each kind has a `Registry`; a component is a factory `factory(run, **args)` taking the `RunPlan` being built
(dataset, model_fn, data, spec, device, the run_federation keywords so far) and the spec's arguments:

    @HOOKS.register("divergence")
    def divergence(run: RunPlan) -> Hook: ...

    RunSpec.make(..., hooks=[("divergence", {})])

`build_run` applies them in this order: lr_schedule (returns the `lr` of LocalTraining: a float or a
schedule), uplink_policy (returns the uplink `Link`; the spec's uplink codec must then be "fp32"), sampler,
client_behavior, hooks, collectors (return `Callable[[RunResult], Records]`).

A codec policy registers the argument sets it builds from, `@CODEC_POLICIES.register(name, examples=[...])`: the
conformance battery (tests/test_conformance.py) builds each and checks every client's codec.
"""
from __future__ import annotations

import inspect
from typing import TYPE_CHECKING, Any, Callable

from fedlib.registry import Registry

if TYPE_CHECKING:
    from fedlib.runs.runner import RunPlan

Factory = Callable[..., Any]

SAMPLERS: Registry[Factory] = Registry("sampler")
CODEC_POLICIES: Registry[Factory] = Registry("codec_policy")
HOOKS: Registry[Factory] = Registry("hook")
CLIENT_BEHAVIORS: Registry[Factory] = Registry("client_behavior")
LR_SCHEDULES: Registry[Factory] = Registry("lr_schedule")
COLLECTORS: Registry[Factory] = Registry("collector")

# RunSpec field -> registry of the components it names
FIELDS: dict[str, Registry[Factory]] = {"lr_schedule": LR_SCHEDULES, "uplink_policy": CODEC_POLICIES,
                                        "sampler": SAMPLERS, "client_behavior": CLIENT_BEHAVIORS, "hooks": HOOKS,
                                        "collectors": COLLECTORS}


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
