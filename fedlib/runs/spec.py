"""A run as data: `RunSpec` is frozen, hashable and JSON-serializable, so a grid of runs is a list.

A spec names everything a run depends on (experiment, data, split, model, algorithm and its arguments,
links and codecs, local training, rounds, seed, device, the experiment's own options) plus `labels`, the
columns its records carry in the tidy tables (e.g. {"method": "FedAvg", "cell": "32+4"}). Labels are part
of the identity only as far as they are listed in `labels`; two specs that differ only in labels are
different entries (a notebook names its runs as it likes).

Mappings are stored as sorted tuples of (key, value) pairs (`freeze`), lists as tuples; `thaw` turns them
back into dicts and lists. Values must be JSON types (str, int, float, bool, None) or nested containers.
"""
from __future__ import annotations

import hashlib
import json
import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from fedlib.trust import module_name
from fedlib.validate import count

Frozen = tuple  # a frozen mapping: tuple of (key, value) pairs sorted by key


def freeze(value: Any, where: str = "spec") -> Any:
    """Dicts -> sorted tuples of pairs, lists -> tuples; numbers and strings as they are. Rejects the rest."""
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) for k in value):
            raise ValueError(f"{where}: mapping keys must be strings, got {list(value)}")
        return tuple((k, freeze(value[k], f"{where}.{k}")) for k in sorted(value))
    if isinstance(value, (list, tuple)):
        return ("__list__", tuple(freeze(v, f"{where}[{i}]") for i, v in enumerate(value)))
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        v = float(value)
        if not math.isfinite(v):
            raise ValueError(f"{where}: spec values must be finite numbers, got {value!r}")
        return v
    raise ValueError(f"{where}: {type(value).__name__} {value!r} is not JSON data; a spec holds only "
                     "str, int, float, bool, None, lists and dicts (name callables by a string option)")


def thaw(value: Any) -> Any:
    """The inverse of `freeze`."""
    if isinstance(value, tuple):
        if len(value) == 2 and value[0] == "__list__":
            return [thaw(v) for v in value[1]]
        return {k: thaw(v) for k, v in value}
    return value


@dataclass(frozen=True)
class Component:
    """A named part with keyword arguments, e.g. Component("fedprox", {"mu": 0.01})."""

    name: str
    kwargs: Frozen = ()

    @staticmethod
    def of(name: str, kwargs: Mapping[str, Any] | None = None) -> Component:
        return Component(name, freeze(dict(kwargs or {}), name))

    @property
    def args(self) -> dict[str, Any]:
        return thaw(self.kwargs) if self.kwargs else {}


ComponentArg = tuple[str, Mapping[str, Any]]
OPTIONAL_COMPONENTS = ("sampler", "client_behavior", "lr_schedule", "hooks", "collectors")
OPTIONAL = (*OPTIONAL_COMPONENTS, "imports")  # left out of the JSON when absent or empty
# loop keys that a spec field names instead (one place for each thing)
FIELD_NOT_LOOP = ("algorithm", "rounds", "seed", "local", "uplink", "downlink", "device", "sampler", "hooks",
                  "client_behavior", "lr_schedule", "collectors")


@dataclass(frozen=True)
class RunSpec:
    experiment: str  # the plan that builds the run (fedlib.registry.EXPERIMENTS)
    dataset: str
    split: Component  # a fedlib.data.split_clients scheme or one the experiment defines
    model: Component
    algorithm: Component
    rounds: int
    seed: int
    local: Frozen = ()  # LocalTraining keyword arguments
    # a codec name + Link options, or a codec policy (fedlib.registry.CODEC_POLICIES) + its arguments
    uplink: Component = field(default_factory=lambda: Component("fp32"))
    downlink: Component = field(default_factory=lambda: Component("fp32", freeze({"payload": "weights"})))
    loop: Frozen = ()  # other run_federation keywords: aggregation_weights, eval_every, executor, threads, ...
    options: Frozen = ()  # the experiment's own settings
    labels: Frozen = ()
    device: str = "cpu"
    # named components (fedlib.registry); absent ones are left out of the JSON
    sampler: Component | None = None  # None: every client every round ("uniform" {"clients": K or fraction})
    client_behavior: Component | None = None
    lr_schedule: Component | None = None  # the local learning rate, when it is a schedule (local then has no lr)
    hooks: tuple[Component, ...] = ()
    collectors: tuple[Component, ...] = ()
    # the user's modules that register components the spec names; building the spec imports each only where the
    # user allowed it or imported it already (`fedlib.trust`): a spec read from a file, store or ledger runs nothing
    imports: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.rounds, int) or isinstance(self.rounds, bool) or self.rounds < 1:
            raise ValueError(f"RunSpec rounds must be an integer >= 1, got {self.rounds!r}")
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ValueError(f"RunSpec seed must be a non-negative integer, got {self.seed!r}")
        twins = sorted(set(self.get("loop")) & set(FIELD_NOT_LOOP))
        if twins:
            raise ValueError(f"RunSpec loop names {twins}: each is the spec's own field of that name (sampler: a "
                             "component such as ('uniform', {'clients': 10}); hooks: a list of components)")
        if self.lr_schedule is not None and "lr" in self.get("local"):
            raise ValueError(f"RunSpec names lr_schedule {self.lr_schedule.name!r} and local['lr']: the schedule is "
                             "the learning rate, so leave lr out of local")
        if not isinstance(self.imports, tuple):
            raise ValueError(f"RunSpec imports must be a tuple of module names, e.g. ('my_components',), got "
                             f"{self.imports!r}")
        for module in self.imports:
            module_name(module, "RunSpec imports")

    @staticmethod
    def make(experiment: str, dataset: str, split: tuple[str, Mapping[str, Any]], model: tuple[str, Mapping[str, Any]],
             algorithm: tuple[str, Mapping[str, Any]], rounds: int, seed: int, *, local: Mapping[str, Any] | None = None,
             uplink: tuple[str, Mapping[str, Any]] = ("fp32", {}),
             downlink: tuple[str, Mapping[str, Any]] = ("fp32", {"payload": "weights"}),
             loop: Mapping[str, Any] | None = None, options: Mapping[str, Any] | None = None,
             labels: Mapping[str, Any] | None = None, device: str = "cpu",
             sampler: ComponentArg | None = None, client_behavior: ComponentArg | None = None,
             lr_schedule: ComponentArg | None = None, hooks: Sequence[ComponentArg] = (),
             collectors: Sequence[ComponentArg] = (), imports: Sequence[str] = ()) -> RunSpec:
        """Build a spec from plain dicts (the readable way; `RunSpec(...)` takes the frozen forms)."""
        def one(c: ComponentArg | None) -> Component | None:
            return None if c is None else Component.of(*c)

        if not isinstance(imports, (list, tuple)):  # a string would become its letters, each a "module"
            raise ValueError(f"RunSpec imports must be a list of module names, e.g. ['my_components'], got "
                             f"{imports!r}")

        return RunSpec(experiment, dataset, Component.of(*split), Component.of(*model), Component.of(*algorithm),
                       count("RunSpec rounds", rounds), count("RunSpec seed", seed, low=0), freeze(dict(local or {}), "local"), Component.of(*uplink),
                       Component.of(*downlink), freeze(dict(loop or {}), "loop"), freeze(dict(options or {}), "options"),
                       freeze(dict(labels or {}), "labels"), device, one(sampler), one(client_behavior),
                       one(lr_schedule), tuple(Component.of(*h) for h in hooks),
                       tuple(Component.of(*c) for c in collectors), tuple(imports))

    def get(self, part: str) -> dict[str, Any]:
        """A frozen mapping field (local, loop, options, labels) as a dict."""
        return thaw(getattr(self, part)) if getattr(self, part) else {}

    def with_(self, **changes: Any) -> RunSpec:
        return replace(self, **changes)

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if f.name in OPTIONAL and not value:
                continue
            if isinstance(value, Component):
                out[f.name] = {"name": value.name, "kwargs": value.args}
            elif f.name == "imports":
                out[f.name] = list(value)
            elif f.name in ("hooks", "collectors"):
                out[f.name] = [{"name": c.name, "kwargs": c.args} for c in value]
            elif isinstance(value, tuple):
                out[f.name] = thaw(value) if value else {}
            else:
                out[f.name] = value
        return out

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> RunSpec:
        required = {f.name for f in fields(RunSpec)} - set(OPTIONAL)
        if not required <= set(data) <= required | set(OPTIONAL):
            raise ValueError(f"run spec JSON has keys {sorted(data)}; expected {sorted(required)} and optionally "
                             f"{sorted(OPTIONAL)}")
        comp = {k: (data[k]["name"], data[k]["kwargs"]) for k in ("split", "model", "algorithm", "uplink", "downlink")}
        named = {k: (data[k]["name"], data[k]["kwargs"]) for k in ("sampler", "client_behavior", "lr_schedule")
                 if k in data}
        lists = {k: [(c["name"], c["kwargs"]) for c in data[k]] for k in ("hooks", "collectors") if k in data}
        return RunSpec.make(data["experiment"], data["dataset"], comp["split"], comp["model"], comp["algorithm"],
                            data["rounds"], data["seed"], local=data["local"], uplink=comp["uplink"],
                            downlink=comp["downlink"], loop=data["loop"], options=data["options"],
                            labels=data["labels"], device=data["device"], imports=data.get("imports", ()),
                            **named, **lists)

    def key(self, code_version: str = "") -> str:
        """Content hash of the spec (and of the code that computes it, when given)."""
        text = json.dumps(self.to_json(), sort_keys=True, allow_nan=False) + "\n" + code_version
        return hashlib.sha256(text.encode()).hexdigest()[:24]

    def fields_for_selection(self) -> dict[str, str]:
        """The fields `--select` can name, as strings: seed, experiment, dataset, algorithm, model, device, rounds,
        the experiment's options and the notebook's labels (a label or option of the same name wins)."""
        flat = {"seed": self.seed, "experiment": self.experiment, "dataset": self.dataset,
                "algorithm": self.algorithm.name, "model": self.model.name, "device": self.device,
                "rounds": self.rounds, **self.get("options"), **self.get("labels")}
        return {k: str(v) for k, v in flat.items()}

    def matches(self, selection: Mapping[str, Sequence[str]]) -> bool:
        """True if every selected field has one of the given values (`fields_for_selection`), compared as strings
        without regard to case (`algorithm=fedavg` matches the label "FedAvg")."""
        flat = {k: v.casefold() for k, v in self.fields_for_selection().items()}
        return all(k in flat and flat[k] in {v.casefold() for v in values} for k, values in selection.items())


@dataclass(frozen=True)
class KeyedRun:
    """A run as the store files it: its spec, and `context`, everything else its key hashes (the code the built run
    reaches, the data it reads, the environment: `fedlib.runs.fingerprint.Keys`, which whoever builds the run asks).
    The store files and finds it under `key` and computes nothing of it."""

    spec: RunSpec
    context: str
    key: str = field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "key", self.spec.key(self.context))


def run_name(spec: RunSpec) -> str:
    """A run by its labels and seed, as the claims tables and the ledger name runs. (A function, not a method:
    every method of `RunSpec` is part of every store key.)"""
    return " ".join([*(f"{k}={v}" for k, v in spec.get("labels").items()), f"seed={spec.seed}"])


def named_runs(specs: Sequence[RunSpec], shown: int = 6) -> str:
    """The first `shown` runs of `specs` by name (`run_name`), "; "-separated, then how many more."""
    names = [run_name(s) for s in specs]
    return "; ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


class SelectionError(ValueError):
    """A `--select` that cannot be read or names a key or value no run has; the message says which and what to do."""


_SELECTION_PAIR = re.compile(r'(?:[^,"]|"[^"]*")+')  # a key=value pair: up to a comma outside double quotes
_QUOTING = 'a value holding a comma is double-quoted: key="a, b"'


def parse_selection(text: str | None) -> dict[str, list[str]]:
    """"algorithm=fedavg,seed=0,seed=1" -> {"algorithm": ["fedavg"], "seed": ["0", "1"]} (values OR, keys AND).
    A value holding a comma is double-quoted (`selection_value`): 'setting="Z_U=4, Z_D=4, descent",seed=0'."""
    text = text or ""
    if text.count('"') % 2:
        raise SelectionError(f"--select {text!r} has a double quote that is not closed; {_QUOTING}")
    out: dict[str, list[str]] = {}
    for part in _SELECTION_PAIR.findall(text):
        if not part.strip():
            continue
        if "=" not in part:
            raise SelectionError(f"--select takes key=value pairs separated by commas, got {part!r} in {text!r}; "
                             f"{_QUOTING}")
        key, value = (s.strip() for s in part.split("=", 1))
        quoted = len(value) >= 2 and value[0] == value[-1] == '"' and '"' not in value[1:-1]
        if '"' in value and not quoted:
            raise SelectionError(f"--select {key}={value}: quote the whole value or none of it; {_QUOTING}")
        out.setdefault(key, []).append(value[1:-1] if quoted else value)
    return out


def selection_value(value: str) -> str:
    """`value` as `--select` takes it (`parse_selection`): double-quoted if it holds a comma."""
    return f'"{value}"' if "," in value else value
