"""A paper's notebook parameters as one typed, frozen dataclass: the one place that knows their names, defaults,
one-line docs and valid values.

    @dataclass(frozen=True)
    class QuickstartParams(PaperParams):
        rounds: int = param(15, "communication rounds")

    QuickstartParams.from_mapping({"rounds": 40}, "notebooks/profiles/quickstart/cpu.yaml")

Every paper's class is its `Paper`'s `params` (`fedlib.paper.params_class` finds it there) and subclasses
`PaperParams`, which holds the fields scripts/reproduce.py sets for every notebook. Construction checks each value
against its field's annotation (`int`, `float`, `str`, `bool`, `X | None`, `Literal[...]`, `tuple[X, ...]`,
`Mapping[K, V]`, `Any`): YAML lists become tuples and dicts `FrozenMap`s, so an instance is hashable; an int is a
valid float and is kept an int (a run spec tells 5 from 5.0, and its store key with it); numpy numbers become
Python's. A count of rounds, steps or clients (a field with `rounds`, `steps` or `clients` in its name, typed
`int`) is at most `MAX_COUNT`. A paper's own checks (ranges, choices, lengths that must agree) go in its
`__post_init__`, after `super().__post_init__()`. A field's one-line doc is its `metadata["doc"]` (`param` sets
it).
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import math
import numbers
import types
import typing
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

T = TypeVar("T", bound="PaperParams")
# The most rounds, steps or clients a parameter may ask for (a field with one of COUNTED in its name): five times
# the largest any profile sets (mucsc's full toy_steps, 20,000; the longest federated run is 1,250 rounds), so a
# typo such as 100000000000000000000 rounds is an error before any planning, not a run that never ends.
MAX_COUNT = 100_000
COUNTED = frozenset({"rounds", "steps", "clients"})
Executor = typing.Literal["sequential", "vmap", "graph", "auto"]  # how a round's clients train (fedlib.engine)
Threads = int | typing.Literal["auto"]  # torch threads per run


class ParameterError(ValueError):
    """A notebook parameter with a wrong name, type or value; the message says which, where and what to do."""


class UnknownParameterError(ParameterError):
    """Parameters given to a notebook that its parameters dataclass does not declare."""


class FrozenMap(Mapping[Any, Any]):
    """A read-only, hashable mapping: a dict-valued parameter (`model_kwargs`) inside a frozen dataclass."""

    __slots__ = ("_items",)

    def __init__(self, items: Mapping[Any, Any]) -> None:
        self._items = dict(items)

    def __getitem__(self, key: Any) -> Any:
        return self._items[key]

    def __iter__(self) -> Iterator[Any]:
        return iter(self._items)

    def __len__(self) -> int:
        return len(self._items)

    def __hash__(self) -> int:
        return hash(frozenset(self._items.items()))

    def __repr__(self) -> str:
        return repr(self._items)

    def __reduce__(self) -> tuple[type, tuple[dict[Any, Any]]]:
        return FrozenMap, (self._items,)


def frozen(value: Any) -> Any:
    """`value` with lists and tuples as tuples and mappings as `FrozenMap`s, all the way down."""
    if isinstance(value, Mapping):
        return FrozenMap({frozen(k): frozen(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(frozen(v) for v in value)
    return value


def param(default: Any, doc: str) -> Any:
    """A parameter field: its default (lists and dicts frozen) and its one-line doc."""
    return dataclasses.field(default=frozen(default), metadata={"doc": doc})


def check_names(given: Iterable[str], declared: Iterable[str], where: str) -> None:
    """Raise `UnknownParameterError` if a name in `given` is not in `declared`; `where` names the source."""
    valid = sorted(declared)
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise UnknownParameterError(
            f"{where}: unknown parameter(s) {', '.join(map(_with_suggestion(valid), unknown))}. "
            f"Valid parameters: {', '.join(valid)}. Fix the name in the -p option or the profile YAML.")


def _with_suggestion(valid: list[str]) -> Callable[[str], str]:
    """`name` followed by the closest valid name, if one is close: "lrr (did you mean lr?)"."""
    def show(name: str) -> str:
        close = difflib.get_close_matches(name, valid, n=1)
        return f"{name} (did you mean {close[0]}?)" if close else name
    return show


def _name(hint: Any) -> str:
    """How an error message names a type: "int", "None", "one of 'a', 'b'"."""
    if hint is type(None):
        return "None"
    if typing.get_origin(hint) is typing.Literal:
        return "one of " + ", ".join(map(repr, typing.get_args(hint)))
    return getattr(hint, "__name__", None) or str(hint).replace("typing.", "")


def coerce(value: Any, hint: Any, where: str) -> Any:
    """`value` checked against the annotation `hint` (and frozen); `ParameterError` naming `where` if it does not
    fit."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any:
        return frozen(value)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        for arm in (a for a in args if a is not type(None)):
            try:
                return coerce(value, arm, where)
            except ParameterError:
                continue
        raise ParameterError(f"{where} must be {' or '.join(_name(a) for a in args)}, got {value!r}")
    if origin is typing.Literal:
        if value not in args or isinstance(value, bool) != any(isinstance(a, bool) for a in args):
            raise ParameterError(f"{where} must be {_name(hint)}, got {value!r}")
        return value
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ParameterError(f"{where} must be a list, got {value!r}")
        return tuple(coerce(v, args[0], f"{where}[{i}]") for i, v in enumerate(value))
    if origin is Mapping:
        if not isinstance(value, Mapping):
            raise ParameterError(f"{where} must be a mapping, got {value!r}")
        return FrozenMap({coerce(k, args[0], f"{where} key {k!r}"): coerce(v, args[1], f"{where}[{k!r}]")
                          for k, v in value.items()})
    if hint in (int, float) and isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)  # for a float too: run specs (and their store keys) tell 5 from 5.0
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
            raise ParameterError(f"{where} must be a finite number, got {value!r}")
        return float(value)
    if hint is int:
        raise ParameterError(f"{where} must be an integer, got {value!r}")
    if hint in (str, bool) and not isinstance(value, hint):
        raise ParameterError(f"{where} must be a {hint.__name__}, got {value!r}")
    return value


@functools.cache
def _type_hints(cls: type) -> dict[str, Any]:
    """`cls`'s resolved field types: resolving them is most of the cost of building a notebook's parameters."""
    return typing.get_type_hints(cls)


@dataclass(frozen=True)
class PaperParams:
    """The parameters every notebook has; scripts/reproduce.py sets the first six."""

    profile: str = param("quick", "the profile the notebook runs under (quick: these defaults)")
    results_root: str | None = param(None, "folder of the notebook's tables, figures and claims (None: none saved)")
    runs_root: str | None = param(None, "the run store's folder (None: results/runs)")
    runner: typing.Literal["local", "ray"] = param("local", "how runs execute: local processes or Ray tasks")
    ray_address: str | None = param(None, "an existing Ray cluster's address (None: a local Ray)")
    ledger: str | None = param(None, "an evidence ledger folder to read the runs from, computing none: a run it "
                                     "lacks is named where a table needs it (None: compute them into the run store)")
    data_root: str | None = param(None, "the datasets' folder (None: the data-root rule, fedlib.data.roots)")
    device: str = param("cpu", "torch device of the runs (auto: a CUDA GPU when there is one)")

    def __post_init__(self) -> None:
        hints = _type_hints(type(self))
        for f in dataclasses.fields(self):
            where = f"{type(self).__name__}.{f.name}"
            object.__setattr__(self, f.name, coerce(getattr(self, f.name), hints[f.name], where))
        self._check_device()
        self._check_seeds_distinct()
        self._require([n for n in self.names() if COUNTED & set(n.split("_"))],
                      lambda v: not isinstance(v, int) or v <= MAX_COUNT,
                      f"must be at most {MAX_COUNT:,}, the bound on a count of rounds, steps or clients "
                      "(fedlib.paper_params.MAX_COUNT)")

    def _check_seeds_distinct(self) -> None:
        """A list of seeds (a field named `seeds` or `*_seeds`) names each seed once: a repeated seed is the same
        run again, not an independent replicate."""
        for name in self.names():
            value = getattr(self, name)
            if (name == "seeds" or name.endswith("_seeds")) and isinstance(value, tuple) \
                    and len(set(value)) != len(value):
                raise ParameterError(f"{type(self).__name__}.{name} lists a seed more than once ({list(value)}); "
                                     "give each seed once")

    def _check_device(self) -> None:
        """A device torch can name ("cpu", "cuda", "cuda:1", ...) or "auto"; whether this machine has it is
        checked when a run starts (a gpu profile is planned and dry-run on machines without one)."""
        if self.device == "auto":
            return
        try:
            import torch

            torch.device(self.device)
        except (RuntimeError, ValueError):
            raise ParameterError(f"{type(self).__name__}.device must be 'auto' or a torch device such as 'cpu', "
                                 f"'cuda' or 'cuda:0', got {self.device!r}") from None

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in dataclasses.fields(cls))

    @classmethod
    def from_mapping(cls: type[T], values: Mapping[str, Any], where: str) -> T:
        """The defaults updated by `values` (names checked first); `where` (a file, `-p option`) starts every
        error message."""
        check_names(values, cls.names(), where)
        try:
            return cls(**values)
        except ParameterError as err:
            raise ParameterError(f"{where}: {err}") from None

    def values(self) -> list[Any]:
        """Every field's value, in field order."""
        return [getattr(self, f.name) for f in dataclasses.fields(self)]

    # The checks a paper's __post_init__ runs: each applies to every element of a list field and skips None.

    def require_range(self, low: float, high: float, *names: str) -> None:
        """low <= value <= high (high may be math.inf)."""
        bound = f">= {low:g}" if high == math.inf else f"in [{low:g}, {high:g}]"
        self._require(names, lambda v: low <= v <= high, f"must be {bound}")

    def require_positive(self, *names: str, high: float = math.inf) -> None:
        """0 < value <= high."""
        must = "must be > 0" if high == math.inf else f"must be in (0, {high:g}]"
        self._require(names, lambda v: 0 < v <= high, must)

    def require_choice(self, choices: Iterable[Any], *names: str) -> None:
        valid = list(choices)
        self._require(names, lambda v: v in valid, f"must be one of {', '.join(map(repr, valid))}")

    def require_nonempty(self, *names: str) -> None:
        for name in names:
            if not getattr(self, name):
                raise ParameterError(f"{type(self).__name__}.{name} must list at least one value, got none")

    def _require(self, names: Iterable[str], ok: Callable[[Any], bool], must: str) -> None:
        for name in names:
            value = getattr(self, name)
            for v in value if isinstance(value, tuple) else (value,):
                if v is not None and not ok(v):
                    raise ParameterError(f"{type(self).__name__}.{name} {must}, got {v!r}")

