"""What a run store key covers beyond the spec: the code the run reaches, the data files it reads, and the
environment that changes its numbers; and `Keys`, which whoever builds runs asks for each run's `KeyedRun` (the
store computes no key).

Code: `code_roots(spec)` builds the spec's run (`fedlib.runs.build.build_run`; where this machine lacks the dataset,
from fabricated files of its format, so that telling a run's code, and whether a ledger entry is stale, needs no
dataset) and names where it starts from:
the engine (`build_run`, `run_federation`, `records_of`), the registered components the spec names (experiment
plan, dataset loader, split, model, algorithm, codecs or codec policy, sampler, behaviour, lr schedule, hooks,
collectors) and the class or function of every object the built run holds, followed through attributes,
containers, partials and closures (the codecs inside a link and inside a codec policy, the hooks, the sampler,
the behaviour, the collectors, the model and its layers, the algorithm). `code_version(spec)` follows every
name those definitions use, across fedlib modules and the spec's `imports`, and hashes the definitions
reached (top-level functions, classes and assignments, as syntax trees without docstrings: comments,
docstrings, annotations and formatting never count), each by its name and syntax, not by the module it lives in:
a definition moved unchanged to another module changes no key. What no reached definition uses does not count either:
other papers, display helpers beside a plan, record readers, algorithms, codecs, models and datasets that the
run does not hold. Code outside fedlib and the spec's imports (torch, numpy) is not hashed.

Data: `data_fingerprint(dataset, root)` hashes the names and contents of the files the loader reads
(`fedlib.data.datasets.dataset_files`, bundled package files included), each hashed once per process and
cached by path, size and modification time (the folder does not count: the same data elsewhere, or on
another machine, gives the same key).

Environment: the torch version, the device type, and on a CPU the kernel capability torch dispatches to
(AVX2, AVX512, default) and the intra-op thread count where the run leaves it to torch (convolutional models: their
records differ between 1 and 2 threads; dense models run on one thread whatever the machine); and the numeric
switches of the process (`numerics`) where they differ from torch's defaults: on a GPU, TF32 in cuDNN's convolutions
(on by default) and in matrix products (off), cuDNN autotuning and determinism; on any device, an autocast in force.
A run under torch's defaults keeps its key; one that changes how its float32 arithmetic is done is keyed apart,
never filed beside the default's numbers.
"""
from __future__ import annotations

import ast
import atexit
import functools
import hashlib
import importlib
import json
import os
import random
import shutil
import sys
import tempfile
import time
import types
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from fedlib.data.datasets import MissingDatasetError, dataset_files
from fedlib.data.fabricate import FABRICATORS, fabricate_for
from fedlib.engine.federation import DEFAULT_THREADS, choose_threads, run_federation
from fedlib.registry import ALGORITHMS, CODEC_POLICIES, CODECS, DATASETS, EXPERIMENTS, MODELS, SPLITS
from fedlib.runs.build import FIELDS, Plans, build_run, records_of
from fedlib.runs.entry import file_sha256
from fedlib.runs.spec import KeyedRun, RunSpec
from fedlib.validate import instance

PACKAGE = "fedlib"
RECENT_NS = 2_000_000_000  # files modified this recently are not trusted to the (size, mtime) cache
# Never followed: the file finders of every dataset (for the data fingerprint, not code a run executes) and the
# gate on what a spec may import (`fedlib.trust`: it decides whether a run starts, not what it computes).
NOT_FOLLOWED = frozenset({("fedlib.data.datasets", "_FILES"), ("fedlib.trust", "require_allowed")})
_LEAVES = (str, bytes, int, float, complex, bool, type(None), torch.Tensor, np.ndarray, np.generic, torch.device,
           torch.dtype, torch.Generator, Path)


def _named_components(spec: RunSpec) -> list[Any]:
    """The registered components the spec names (the registries' entries, before they build anything)."""
    named = [EXPERIMENTS[spec.experiment], DATASETS[spec.dataset], MODELS[spec.model.name],
             ALGORITHMS[spec.algorithm.name.lower()], CODECS[spec.downlink.name]]
    named.append(CODEC_POLICIES[spec.uplink.name] if spec.uplink.name in CODEC_POLICIES else CODECS[spec.uplink.name])
    named += [SPLITS[spec.split.name]] if spec.split.name in SPLITS else []  # else the plan builds the split
    for spec_field in ("sampler", "client_behavior", "lr_schedule", "hooks", "collectors"):
        value = getattr(spec, spec_field)
        named += [FIELDS[spec_field][c.name] for c in (value if isinstance(value, tuple) else [value]) if c is not None]
    return named


def held_objects(roots: Iterable[Any], packages: tuple[str, ...]) -> list[Any]:
    """The classes and functions of `packages` that `roots` are or hold: instances give their class and their
    attributes, containers their items, partials their function and arguments, functions of `packages` their
    closures and defaults, torch modules their submodules."""
    found: list[Any] = []
    seen: set[int] = set()
    todo = list(roots)
    while todo:
        obj = todo.pop()
        if id(obj) in seen or isinstance(obj, _LEAVES):
            continue
        seen.add(id(obj))
        if isinstance(obj, Mapping):
            todo += [*obj.keys(), *obj.values()]
        elif isinstance(obj, (list, tuple, set, frozenset)):
            todo += list(obj)
        elif isinstance(obj, functools.partial):
            todo += [obj.func, *obj.args, *obj.keywords.values()]
        elif isinstance(obj, types.MethodType):
            todo += [obj.__func__, obj.__self__]
        elif isinstance(obj, types.FunctionType):
            if _in(obj.__module__, packages):
                found.append(obj)
                todo += [*(c.cell_contents for c in obj.__closure__ or () if _filled(c)), *(obj.__defaults__ or ()),
                         *(obj.__kwdefaults__ or {}).values()]
        elif isinstance(obj, type):
            found += [obj] if _in(obj.__module__, packages) else []
        elif _in(type(obj).__module__, packages):
            found.append(type(obj))
            todo += list(getattr(obj, "__dict__", {}).values())
            todo += [getattr(obj, name) for name in getattr(type(obj), "__slots__", ()) if hasattr(obj, name)]
        elif isinstance(obj, nn.Module):
            todo += list(obj.children())
    return found


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents
    except ValueError:  # a closure variable not yet assigned
        return False
    return True


def _in(module: Any, packages: tuple[str, ...]) -> bool:
    return isinstance(module, str) and any(module == p or module.startswith(p + ".") for p in packages)


def hashed_packages(spec: RunSpec) -> tuple[str, ...]:
    """Whose code the key hashes: fedlib's and the modules the spec imports."""
    return (PACKAGE, *spec.imports)


@functools.lru_cache(maxsize=None)
def _stand_in(dataset: str) -> str:
    """A folder of fabricated files of `dataset` at its real training size (`fedlib.data.fabricate`), removed at
    exit: what a run is built from, to tell its code, where this machine lacks its dataset."""
    folder = tempfile.mkdtemp(prefix="fedlib-stand-in-")
    atexit.register(shutil.rmtree, folder, True)
    fabricate_for({dataset}, Path(folder))
    return folder


# (spec, data root) -> (origins of the code roots, whether torch picks the thread count) of the spec's built run
_BUILT: dict[tuple[RunSpec, str | None], tuple[tuple[tuple[str, str], ...], bool]] = {}


def _built(spec: RunSpec, root: str | None, plans: Plans | None = None) -> tuple[tuple[tuple[str, str], ...], bool]:
    """(origins of the code roots, whether torch picks the thread count) of `spec`'s built run, computed once per
    process. The run is built in `plans` where given (kept there for the caller to run: `Plans.take`), else alone;
    with the random number generators' states restored afterwards (keying a spec leaves the run unchanged). Where
    the dataset is missing, the run is built from fabricated files of its format (`_stand_in`): the objects a run
    holds, so the code it reaches, do not depend on the data's values."""
    if (spec, root) in _BUILT:
        return _BUILT[spec, root]
    np_state, py_state = np.random.get_state(), random.getstate()
    with torch.random.fork_rng(devices=[]):
        try:
            try:
                plan = build_run(spec, root) if plans is None else plans(spec)
            except MissingDatasetError:
                if spec.dataset not in FABRICATORS:
                    raise
                plan = build_run(spec, _stand_in(spec.dataset))
            model = plan.model_fn()
        finally:
            np.random.set_state(np_state)
            random.setstate(py_state)
    objects = [*_named_components(spec), plan.kwargs, plan.collect, plan.data, model]
    roots = [build_run, run_federation, records_of, *held_objects(objects, hashed_packages(spec))]
    origins = {origin for origin in map(_origin, roots) if origin is not None}  # functions and classes: all
    threads = spec.get("loop").get("threads", "auto")
    torch_picks = device_type(spec.device) == "cpu" and threads == "auto" and choose_threads(model) != 1
    _BUILT[spec, root] = tuple(sorted(origins)), torch_picks
    return _BUILT[spec, root]


def run_threads(spec: RunSpec, root: str | Path | None = None) -> int:
    """The intra-op threads `spec`'s run trains with on a CPU: its loop's `threads`, or where it leaves them to
    fedlib ("auto", `fedlib.engine.federation.choose_threads`), torch's default for a convolutional model and one for a
    dense one."""
    threads = spec.get("loop").get("threads", "auto")
    if threads != "auto":
        return int(threads)
    return DEFAULT_THREADS if _built(spec, None if root is None else str(root))[1] else 1


def code_roots(spec: RunSpec, root: str | Path | None = None) -> list[tuple[str, str]]:
    """(module, top-level name) of every definition `spec`'s built run starts from (see the module docstring)."""
    return list(_built(spec, None if root is None else str(root))[0])


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
            self._digested[name] = ("\n".join(map(syntax_dump, trees)),
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


def syntax_dump(tree: ast.AST) -> str:
    """`ast.dump` in one form on every Python this project runs on (a run keyed on a 3.11 CPU and on a GPU
    machine's 3.12 must hash alike): 3.12 adds an empty `type_params` to every function and class, and 3.13
    leaves empty fields out unless asked."""
    text = ast.dump(tree, show_empty=True) if sys.version_info >= (3, 13) else ast.dump(tree)  # type: ignore[call-arg]
    return text.replace(", type_params=[]", "")


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


def _module(name: str, packages: tuple[str, ...]) -> _Module | None:
    """The parsed source of module `name` of the hashed `packages` (None for code outside them)."""
    if not _in(name, packages):
        return None
    path = getattr(importlib.import_module(name), "__file__", None)
    if not path or not path.endswith(".py"):
        return None
    stat = Path(path).stat()
    return _parsed(name, path, stat.st_size, stat.st_mtime_ns)


def _origin(obj: Any) -> tuple[str, str] | None:
    """(module, top-level name) where a function or class is defined (a function renamed after its definition,
    such as a registered closure, by its code's own qualified name)."""
    code = getattr(obj, "__code__", None)
    module = getattr(obj, "__module__", None)
    qualname = getattr(code, "co_qualname", None) or getattr(obj, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(qualname, str):
        return None
    return module, qualname.split(".")[0]


def _resolve(module: _Module, name: str, packages: tuple[str, ...]) -> list[tuple[str, str]]:
    """The definitions `name` stands for in `module`: its own, or an imported one's origin."""
    if name in module.definitions:
        return [(module.name, name)]
    if name not in module.imports:
        return []  # a builtin, a local variable or an attribute
    source, attribute = module.imports[name]
    target = _module(source, packages)
    if target is None:
        return []
    if attribute is None:  # `import fedlib.x`: the whole module is used
        return [(source, defined) for defined in target.definitions]
    if attribute in target.definitions:
        return [(source, attribute)]
    obj = getattr(importlib.import_module(source), attribute, None)
    if isinstance(obj, types.ModuleType):  # `from fedlib import channel`: the whole module is used
        used = _module(obj.__name__, packages)
        return [] if used is None else [(used.name, defined) for defined in used.definitions]
    origin = _origin(obj)
    if origin is not None and origin[0] != source:
        return [origin]
    return _resolve(target, attribute, packages)  # re-exported through the package's imports


def reached_definitions(origins: Iterable[tuple[str, str]], packages: tuple[str, ...] = (PACKAGE,)
                        ) -> dict[tuple[str, str], str]:
    """(module, name) -> docstring-free syntax dump of every definition of `packages` the origins reach."""
    todo = list(origins)
    reached: dict[tuple[str, str], str] = {}
    while todo:
        module_name, name = todo.pop()
        module = _module(module_name, packages)
        if (module_name, name) in reached or (module_name, name) in NOT_FOLLOWED or module is None:
            continue
        reached[module_name, name], references = module.digest(name)
        for ref in references:
            todo.extend(_resolve(module, ref, packages))
    return reached


# (roots, packages) -> (the modules reached, their files' (size, mtime) then, the code version)
_VERSIONS: dict[tuple[tuple[tuple[str, str], ...], tuple[str, ...]], tuple[tuple[str, ...], tuple[Any, ...], str]] = {}


def _stamp(modules: Iterable[str]) -> tuple[Any, ...]:
    """Size and modification time of each module's file (the parse cache's own test of a changed file)."""
    stats = []
    for module in modules:
        path = getattr(importlib.import_module(module), "__file__", None)
        stat = Path(path).stat() if path else None
        stats.append((module, stat and stat.st_size, stat and stat.st_mtime_ns))
    return tuple(stats)


def code_version(spec: RunSpec, root: str | Path | None = None) -> str:
    """Hash of the definitions `spec`'s built run reaches (see the module docstring); computed once per set of
    roots while the files of the modules it reached are unchanged."""
    roots, packages = tuple(code_roots(spec, root)), hashed_packages(spec)
    cached = _VERSIONS.get((roots, packages))
    if cached is not None and _stamp(cached[0]) == cached[1]:
        return cached[2]
    reached = reached_definitions(roots, packages)
    digest = hashlib.sha256()
    for name, dump in sorted((name, dump) for (_, name), dump in reached.items()):  # not where each lives
        digest.update(f"{name}\n{dump}\n".encode())
    modules = tuple(sorted({module for module, _ in reached}))
    _VERSIONS[roots, packages] = (modules, _stamp(modules), digest.hexdigest()[:16])
    return _VERSIONS[roots, packages][2]


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
    digest = hashlib.sha256()
    for path in dataset_files(dataset, root):
        digest.update(f"{path.name}\n{file_fingerprint(path)}\n".encode())
    return digest.hexdigest()[:16]


def device_type(device: str) -> str:
    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    return torch.device(device).type


# torch's defaults for the switches `numerics` reads on a GPU (cuDNN's convolutions run in TF32 by default)
CUDA_NUMERIC_DEFAULTS = {"cudnn_tf32": True, "matmul_tf32": False, "cudnn_benchmark": False,
                         "cudnn_deterministic": False}


def numerics(device: str) -> dict[str, Any]:
    """This process's switches that change a run's arithmetic on `device` (a device type): on "cuda", TF32 in
    cuDNN's convolutions and in matrix products, cuDNN autotuning and determinism; on any device, the dtype of an
    autocast in force ("autocast")."""
    found: dict[str, Any] = {}
    if device == "cuda":
        found = {"cudnn_tf32": torch.backends.cudnn.allow_tf32, "matmul_tf32": torch.backends.cuda.matmul.allow_tf32,
                 "cudnn_benchmark": torch.backends.cudnn.benchmark,
                 "cudnn_deterministic": torch.backends.cudnn.deterministic}
    if torch.is_autocast_enabled(device):
        found["autocast"] = str(torch.get_autocast_dtype(device))
    return found


def off_default(switches: dict[str, Any]) -> dict[str, Any]:
    """Those of `switches` (as `numerics` reads them) that differ from torch's defaults: what a run's key holds."""
    return {k: v for k, v in switches.items() if CUDA_NUMERIC_DEFAULTS.get(k) != v}


def environment(spec: RunSpec, root: str | Path | None = None) -> dict[str, Any]:
    """What changes `spec`'s numbers beyond its code and data, as this process would run it: torch version,
    device type, on a CPU the kernel capability torch dispatches to (`ATEN_CPU_CAPABILITY`: AVX2 and
    "default" kernels round differently), the thread count where the run leaves it to torch, and the `numerics` that
    differ from torch's defaults. Computed in the process that runs the spec; the process that files its records
    checks it (`RunStore.check_context`)."""
    env: dict[str, Any] = {"torch": torch.__version__, "device": device_type(spec.device)}
    if env["device"] == "cpu":
        env["cpu_capability"] = torch.backends.cpu.get_cpu_capability()
    changed = off_default(numerics(env["device"]))
    if changed:
        env["numerics"] = changed
    if _built(spec, None if root is None else str(root))[1]:
        env["threads"] = DEFAULT_THREADS
    return env


def key_context(spec: RunSpec, root: str | Path | None = None) -> str:
    """Everything besides the spec that `spec`'s store key covers, as one string."""
    return json.dumps({"code": code_version(spec, root), "data": data_fingerprint(spec.dataset, root),
                       **environment(spec, root)}, sort_keys=True)


class Keys:
    """How this process keys runs for the store (`KeyedRun`): each spec's `key_context`, reading the datasets under
    `data_root` (None: the data-root rule, `fedlib.data.roots`), or one `fixed` context for every spec (tests).
    With `plans` (of the same data root), the run keying builds is kept there, so a caller that keys a run and then
    runs it (`Plans.take`) builds it once."""

    def __init__(self, data_root: str | Path | None = None, *, fixed: str | None = None,
                 plans: Plans | None = None) -> None:
        instance("Keys data_root", data_root, (str, os.PathLike, type(None)), "a folder of datasets")
        instance("Keys fixed", fixed, (str, type(None)))
        self.data_root = None if data_root is None or str(data_root) == "" else str(data_root)
        self.fixed, self.plans = fixed, plans

    @staticmethod
    def building(plans: Plans) -> Keys:
        """Keys for the runs of `plans`' data root, built there."""
        return Keys(plans.root, plans=plans)

    def reading(self, data_root: str | Path | None) -> Keys:
        """These keys for runs that read the datasets under `data_root` (themselves when None or already so)."""
        if data_root is None or str(data_root) == "" or str(data_root) == self.data_root:
            return self
        return Keys(data_root, fixed=self.fixed)

    def __call__(self, spec: RunSpec) -> KeyedRun:
        if self.fixed is not None:
            return KeyedRun(spec, self.fixed)
        _built(spec, self.data_root, self.plans)
        return KeyedRun(spec, key_context(spec, self.data_root))
