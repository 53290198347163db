"""Components buildable by name, so that a run spec can say what runs: one `Registry` per kind, all here.

Every kind of component registers the same way, with the kind's registry as a decorator where it is defined:

    from fedlib.registry import SPLITS

    @SPLITS.register("parity")
    def parity_split(dataset, num_clients, seeds, **args) -> list[np.ndarray]: ...

and `SPLITS["parity"]` finds it again (an unknown name: a KeyError listing the registered ones).
`register(name, examples=[{...}, ...])` also records argument sets the component builds from, for the
conformance battery (tests/test_conformance.py) to run.

`load_components(modules)` imports every fedlib module that registers components (the algorithms, codecs,
models, datasets, splits and every paper in `fedlib.papers`) and then the user's own `modules` (a run spec's
`imports`), each only if the user allowed it or imported it already (`fedlib.trust`: a spec read from a file, a
store or a ledger runs nothing by naming a module): `build_run` calls it, so a name means the same component in
this process, in the process pool's workers, on Ray workers and in Flower's client and server apps.
"""
from __future__ import annotations

import contextlib
import functools
import importlib
import pkgutil
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from fedlib.trust import require_allowed

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

    @contextlib.contextmanager
    def override(self, name: str, component: T) -> Iterator[T]:
        """`component` registered as `name` inside the block, in place of what `name` registers (an unknown name: the
        registry's KeyError), and that again after it: a test's variant of a registered component."""
        before = self[name]
        self._entries[name] = component
        try:
            yield component
        finally:
            self._entries[name] = before

    def withdraw(self, name: str) -> None:
        """Forget `name` (a component whose module a test imported and then unloads); an unknown name: the
        registry's KeyError."""
        self[name]
        del self._entries[name]
        self._examples.pop(name, None)

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
        component = self[name]
        return str((component.func if isinstance(component, functools.partial) else component).__module__)


ALGORITHMS: Registry[Any] = Registry("algorithm")  # Algorithm classes, built with the spec's arguments
CODECS: Registry[Any] = Registry("codec")  # Codec classes
CODEC_POLICIES: Registry[Any] = Registry("codec_policy")  # factory(run, **args) -> the uplink Link
MODELS: Registry[Any] = Registry("model")  # nn.Module classes: cls(input_shape, num_classes, **args)
DATASETS: Registry[Any] = Registry("dataset")  # loader(root, **args) -> raw arrays (fedlib.data.datasets)
SPLITS: Registry[Any] = Registry("split")  # split(dataset, num_clients, seeds, **args) -> client indices
SAMPLERS: Registry[Any] = Registry("sampler")  # factory(run, **args) -> run_federation's sampler
HOOKS: Registry[Any] = Registry("hook")  # factory(run, **args) -> a round hook
CLIENT_BEHAVIORS: Registry[Any] = Registry("client_behavior")  # factory(run, **args) -> a ClientBehavior
LR_SCHEDULES: Registry[Any] = Registry("lr_schedule")  # factory(run, **args) -> LocalTraining's lr
COLLECTORS: Registry[Any] = Registry("collector")  # factory(run, **args) -> Callable[[RunResult], Records]
EXPERIMENTS: Registry[Any] = Registry("experiment")  # plan(spec, run) -> run (fedlib.runs.build)

# fedlib's modules that register components; every module of fedlib.papers is imported too
FEDLIB_COMPONENT_MODULES = ("fedlib.algorithms", "fedlib.codecs", "fedlib.models", "fedlib.data.datasets",
                            "fedlib.runs.splits", "fedlib.runs.build")
PAPERS = "fedlib.papers"


def fedlib_component_modules() -> list[str]:
    """Every fedlib module that registers components (papers found in the fedlib.papers package)."""
    papers = importlib.import_module(PAPERS)
    return [*FEDLIB_COMPONENT_MODULES,
            *(f"{PAPERS}.{m.name}" for m in sorted(pkgutil.iter_modules(papers.__path__), key=lambda m: m.name)
              if not m.name.startswith("_"))]


def load_components(modules: Iterable[str] = (), spec: str = "a run spec") -> None:
    """Import fedlib's component modules, then the user's `modules` (each registers what it defines), each only if
    allowed (`fedlib.trust.require_allowed`; `spec` names the spec that imports them in the error)."""
    for name in fedlib_component_modules():
        importlib.import_module(name)
    for name in modules:
        require_allowed(name, spec)
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as err:
            if err.name is None or not name.startswith(err.name):
                raise
            raise ValueError(f"run spec imports: no module {name!r} here; make it importable in every process that "
                             "runs the spec (on its PYTHONPATH, or in Ray's runtime_env)") from None


def component_module(kind: str, name: str) -> str:
    """The module that defines the `kind` component registered as `name` (e.g. ("split", "parity"))."""
    if kind not in REGISTRIES:
        raise KeyError(f"unknown component kind {kind!r}; kinds: {', '.join(sorted(REGISTRIES))}")
    return REGISTRIES[kind].module_of(name)
