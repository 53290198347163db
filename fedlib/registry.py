"""Components buildable by name, so that a run spec can say what runs.

One `Registry` per kind of component (splits, experiments, ...). A module registers what it defines:

    @SPLITS.register("parity")
    def parity_split(dataset, num_clients, seeds, **args) -> list[np.ndarray]: ...

and `SPLITS.get("parity")` finds it again. `register(name, examples=[{...}, ...])` also records argument sets the
component builds from, for a conformance battery to run (as `fedlib.codecs.register_codec` does for codecs).
`component_module(kind, name)` names the module that defines a registered component (a store's code-version key
hashes that module, not the whole engine).
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

T = TypeVar("T")

REGISTRIES: dict[str, Registry[Any]] = {}


class Registry(Mapping[str, T]):
    """Name -> component of one kind; registering a name twice is an error (two modules would disagree)."""

    def __init__(self, kind: str) -> None:
        if kind in REGISTRIES:
            raise ValueError(f"a registry of kind {kind!r} exists already")
        self.kind = kind
        self._entries: dict[str, T] = {}
        self._examples: dict[str, tuple[dict[str, Any], ...]] = {}
        REGISTRIES[kind] = self

    def register(self, name: str, examples: Sequence[Mapping[str, Any]] = ({},)) -> Callable[[T], T]:
        """Decorator: make `component` findable as `name`; `examples` are argument sets it builds from."""

        def add(component: T) -> T:
            if name in self._entries:
                raise ValueError(f"{self.kind} {name!r} is registered twice ({self._entries[name]!r} and {component!r})")
            self._entries[name] = component
            self._examples[name] = tuple(dict(e) for e in examples)
            return component

        return add

    def __getitem__(self, name: str) -> T:
        if name not in self._entries:
            known = ", ".join(sorted(self._entries)) or "none"
            raise KeyError(f"unknown {self.kind} {name!r}; registered: {known}")
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def examples(self, name: str) -> tuple[dict[str, Any], ...]:
        """The argument sets registered with `name` (one empty set unless the registration gave some)."""
        self[name]  # an unknown name: the registry's KeyError
        return tuple(dict(e) for e in self._examples[name])

    def module_of(self, name: str) -> str:
        """The module that defines the component registered as `name`."""
        return str(getattr(self[name], "__module__"))


def component_module(kind: str, name: str) -> str:
    """The module that defines the `kind` component registered as `name` (e.g. ("split", "parity"))."""
    if kind not in REGISTRIES:
        raise KeyError(f"unknown component kind {kind!r}; kinds: {', '.join(sorted(REGISTRIES))}")
    return REGISTRIES[kind].module_of(name)
