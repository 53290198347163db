"""What a run store key covers beyond the spec: the code the run reaches, the data files it reads, and the
environment that changes its numbers.

Code: `code_roots(spec)` names the objects a spec's run starts from (the engine's `execute`, the experiment's
registered plan, and the spec's algorithm, codecs, model and dataset loader, looked up in their registries).
`code_version(spec)` follows every name those definitions use, across fedlib modules, and hashes the
definitions reached (top-level functions, classes and assignments, as syntax trees without docstrings:
comments, docstrings, annotations and formatting never count). What no reached definition uses does not
count either: other papers, display helpers beside a plan, record readers, algorithms, codecs, models and
datasets that the spec does not name. Registries (`REGISTRIES`) are not followed: a spec reaches its own
entries through `code_roots`, so adding an algorithm, codec, model, dataset or paper changes no key.
Code outside the fedlib package (torch, numpy, an experiment registered from a test) is not hashed.

Data: `data_fingerprint(dataset, root)` hashes the names and contents of the files the loader reads
(`fedlib.data.datasets.dataset_files`, bundled package files included), each hashed once per process and
cached by path, size and modification time (the folder does not count: the same data elsewhere, or on
another machine, gives the same key).

Environment: the torch version, the device type, and on a CPU the kernel capability torch dispatches to
(AVX2, AVX512, default) and the intra-op thread count where the run leaves it to torch (convolutional models: their records differ between 1 and 2 threads; dense models run on
one thread whatever the machine).
"""
from __future__ import annotations

import ast
import functools
import hashlib
import importlib
import json
import time
import types
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from fedlib.runs.entry import file_sha256
from fedlib.runs.spec import RunSpec

PACKAGE = "fedlib"
RECENT_NS = 2_000_000_000  # files modified this recently are not trusted to the (size, mtime) cache
# Name tables that map a spec's names to components: never followed (the spec's own entries are roots).
REGISTRIES = frozenset({
    ("fedlib.algorithms", "ALGORITHMS"), ("fedlib.codecs.base", "CODECS"), ("fedlib.models", "_MODELS"),
    ("fedlib.data.datasets", "_LOADERS"), ("fedlib.data.datasets", "_FILES"),
    ("fedlib.runs.runner", "EXPERIMENTS"), ("fedlib.runs.splits", "SPLITS"), ("fedlib.registry", "REGISTRIES"),
    *(("fedlib.runs.components", name) for name in ("SAMPLERS", "CODEC_POLICIES", "HOOKS", "CLIENT_BEHAVIORS",
                                                     "LR_SCHEDULES", "COLLECTORS")),
})


def code_roots(spec: RunSpec) -> list[Any]:
    """The objects `spec`'s run starts from: the engine, its experiment's plan and its named components."""
    from fedlib.algorithms import ALGORITHMS
    from fedlib.codecs.base import CODECS
    from fedlib.data.datasets import _LOADERS
    from fedlib.models import _MODELS
    from fedlib.runs.components import (CLIENT_BEHAVIORS, CODEC_POLICIES, COLLECTORS, HOOKS, LR_SCHEDULES,
                                        SAMPLERS)
    from fedlib.runs.runner import execute, experiment_plan
    from fedlib.runs.splits import SPLITS

    def entry(table: dict[str, Any], name: str, what: str) -> Any:
        if name not in table:
            raise ValueError(f"unknown {what} {name!r} in the spec; known: {', '.join(sorted(table))}")
        return table[name]

    loader = entry(_LOADERS, spec.dataset, "dataset")
    plan = experiment_plan(spec.experiment)  # imports the paper module, which registers its components
    named = [(SPLITS, spec.split.name)] if spec.split.name in SPLITS else []  # else the plan builds the split
    for registry, component in ((SAMPLERS, spec.sampler), (CODEC_POLICIES, spec.uplink_policy),
                                (CLIENT_BEHAVIORS, spec.client_behavior), (LR_SCHEDULES, spec.lr_schedule)):
        named += [(registry, component.name)] if component is not None else []
    named += [(HOOKS, h.name) for h in spec.hooks] + [(COLLECTORS, c.name) for c in spec.collectors]
    return [execute, plan, entry(ALGORITHMS, spec.algorithm.name.lower(), "algorithm"),
            entry(CODECS, spec.uplink.name, "codec").factory, entry(CODECS, spec.downlink.name, "codec").factory,
            entry(_MODELS, spec.model.name, "model"), getattr(loader, "func", loader),
            *(registry[name] for registry, name in named)]


class _Module:
    """A module's top-level definitions (name -> statements binding it) and imported names."""

    def __init__(self, name: str, source: str, is_package: bool) -> None:
        self.name = name
        self.definitions: dict[str, list[ast.stmt]] = {}
        self.imports: dict[str, tuple[str, str | None]] = {}  # local name -> (module, attribute or None)
        self._digested: dict[str, tuple[str, set[str]]] = {}
        tree = ast.parse(source)
        for stmt in tree.body:
            for bound in _bound_names(stmt):
                self.definitions.setdefault(bound, []).append(stmt)
        package = name if is_package else name.rpartition(".")[0]
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                base = _absolute(node.module or "", node.level, package)
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (base, alias.name)
            elif isinstance(node, ast.Import):
                for alias in node.names:
                    local = alias.asname or alias.name.split(".")[0]
                    self.imports[local] = (alias.name if alias.asname else local, None)

    def digest(self, name: str) -> tuple[str, set[str]]:
        """(syntax dump without docstrings and annotations, names used) of the statements defining `name`."""
        if name not in self._digested:
            trees = [_without_docs_and_annotations(stmt) for stmt in self.definitions.get(name, [])]
            self._digested[name] = ("\n".join(map(ast.dump, trees)),
                                    {n.id for tree in trees for n in ast.walk(tree) if isinstance(n, ast.Name)})
        return self._digested[name]


def _absolute(module: str, level: int, package: str) -> str:
    if not level:
        return module
    base = package.rsplit(".", level - 1)[0] if level > 1 else package
    return f"{base}.{module}" if module else base


def _bound_names(stmt: ast.stmt) -> list[str]:
    """Names a top-level statement defines (imports and bare expressions define none that we follow)."""
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [stmt.name]
    if isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Expr)):
        return []
    names = []
    for node in ast.walk(stmt):
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.append(node.id)
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and isinstance(node.value, ast.Name):
            names.append(node.value.id)  # TABLE["x"] = ... belongs to TABLE
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.append(node.name)
    return names


def _without_docs_and_annotations(stmt: ast.stmt) -> ast.AST:
    """A copy of `stmt` without docstrings and annotations (neither changes what the code computes)."""
    node = ast.parse(ast.unparse(stmt))
    for sub in ast.walk(node):
        body = getattr(sub, "body", None)
        if (isinstance(sub, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            sub.body = body[1:] or [ast.Pass()]
        if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
            sub.returns = None
        elif isinstance(sub, ast.arg):
            sub.annotation = None
        elif isinstance(sub, ast.AnnAssign):
            sub.annotation = ast.Constant(None)
    return node


@functools.lru_cache(maxsize=None)
def _parsed(module: str, path: str, size: int, mtime_ns: int) -> _Module:
    return _Module(module, Path(path).read_text(), Path(path).name == "__init__.py")


def _module(name: str) -> _Module | None:
    """The parsed source of fedlib module `name` (None for code outside the package)."""
    if name != PACKAGE and not name.startswith(PACKAGE + "."):
        return None
    path = getattr(importlib.import_module(name), "__file__", None)
    if not path or not path.endswith(".py"):
        return None
    stat = Path(path).stat()
    return _parsed(name, path, stat.st_size, stat.st_mtime_ns)


def _origin(obj: Any) -> tuple[str, str] | None:
    """(module, top-level name) where a function or class is defined."""
    module, qualname = getattr(obj, "__module__", None), getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    return module, qualname.split(".")[0]


def _resolve(module: _Module, name: str) -> list[tuple[str, str]]:
    """The definitions `name` stands for in `module`: its own, or an imported one's origin."""
    if name in module.definitions:
        return [(module.name, name)]
    if name not in module.imports:
        return []  # a builtin, a local variable or an attribute
    source, attribute = module.imports[name]
    target = _module(source)
    if target is None:
        return []
    if attribute is None:  # `import fedlib.x`: the whole module is used
        return [(source, defined) for defined in target.definitions]
    if attribute in target.definitions:
        return [(source, attribute)]
    obj = getattr(importlib.import_module(source), attribute, None)
    if isinstance(obj, types.ModuleType):  # `from fedlib import channel`: the whole module is used
        used = _module(obj.__name__)
        return [] if used is None else [(used.name, defined) for defined in used.definitions]
    origin = _origin(obj)
    if origin is not None and origin[0] != source:
        return [origin]
    return _resolve(target, attribute)  # re-exported through the package's imports


def reached_definitions(roots: Iterable[Any]) -> dict[tuple[str, str], str]:
    """(module, name) -> docstring-free syntax dump of every fedlib definition the roots reach."""
    todo = []
    for root in roots:
        origin = _origin(root)
        if origin is None:
            raise TypeError(f"cannot tell where {root!r} is defined: register a function or a class")
        todo.append(origin)
    reached: dict[tuple[str, str], str] = {}
    while todo:
        module_name, name = todo.pop()
        module = _module(module_name)
        if (module_name, name) in reached or (module_name, name) in REGISTRIES or module is None:
            continue
        reached[module_name, name], references = module.digest(name)
        for ref in references:
            todo.extend(_resolve(module, ref))
    return reached


def code_version(spec: RunSpec) -> str:
    """Hash of the fedlib definitions `spec`'s run reaches (see the module docstring)."""
    digest = hashlib.sha256()
    for (module, name), dump in sorted(reached_definitions(code_roots(spec)).items()):
        digest.update(f"{module}.{name}\n{dump}\n".encode())
    return digest.hexdigest()[:16]


@functools.lru_cache(maxsize=None)
def _content_hash(path: str, size: int, mtime_ns: int) -> str:
    return file_sha256(Path(path))


def file_fingerprint(path: Path) -> str:
    """SHA-256 of a file's content, computed once per (path, size, modification time) in this process. A file
    modified in the last seconds is hashed afresh: a same-size rewrite within the file system's clock tick
    keeps its modification time."""
    stat = path.stat()
    if time.time_ns() - stat.st_mtime_ns < RECENT_NS:
        return file_sha256(path)
    return _content_hash(str(path.resolve()), stat.st_size, stat.st_mtime_ns)


def data_fingerprint(dataset: str, root: str | Path | None = None) -> str:
    """Hash of the names and contents of the files `load_dataset(dataset, root)` reads."""
    from fedlib.data.datasets import dataset_files

    digest = hashlib.sha256()
    for path in dataset_files(dataset, root):
        digest.update(f"{path.name}\n{file_fingerprint(path)}\n".encode())
    return digest.hexdigest()[:16]


def device_type(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device).type


@functools.lru_cache(maxsize=None)
def _torch_picks_threads(spec: RunSpec, root: str | None) -> bool:
    """True if the run's thread count is torch's default (a CPU run of a convolutional model, threads "auto")."""
    from fedlib.data import load_dataset
    from fedlib.federation import choose_threads
    from fedlib.models import build_model

    if device_type(spec.device) != "cpu" or spec.get("loop").get("threads", "auto") != "auto":
        return False
    ds = load_dataset(spec.dataset, root=root)
    return choose_threads(build_model(spec.model.name, ds.input_shape, ds.num_classes, **spec.model.args)) != 1


def environment(spec: RunSpec, root: str | Path | None = None) -> dict[str, Any]:
    """What changes `spec`'s numbers beyond its code and data, as this process would run it: torch version,
    device type, on a CPU the kernel capability torch dispatches to (`ATEN_CPU_CAPABILITY`: AVX2 and
    "default" kernels round differently) and the thread count where the run leaves it to torch. Computed in
    the process that runs the spec; the process that files its records checks it (`RunStore.check_context`)."""
    from fedlib.federation import DEFAULT_THREADS

    env: dict[str, Any] = {"torch": torch.__version__, "device": device_type(spec.device)}
    if env["device"] == "cpu":
        env["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    if _torch_picks_threads(spec, None if root is None else str(root)):
        env["threads"] = DEFAULT_THREADS
    return env


def key_context(spec: RunSpec, root: str | Path | None = None) -> str:
    """Everything besides the spec that `spec`'s store key covers, as one string."""
    return json.dumps({"code": code_version(spec), "data": data_fingerprint(spec.dataset, root),
                       **environment(spec, root)}, sort_keys=True)
