"""The house's shape, as the imports draw it: fedlib's rooms (its top-level modules and subpackages) and the arrows
between them (every import of one room's module by another's, at module level or inside a function).

What a run executes imports nothing of the layers that serve papers, and no room sits in a circle. Under a run, the
layers run one way: `core` (parameter dicts, the round's contracts, seeds) under the components (`algorithms`,
`codecs`, `models`, `data`) under the round loop (`engine`) under `runs` (specs, building, the store). Serving papers,
they run one way too: `paper_params` under `paper` (a paper's declared type and registry, with its claims' declarations,
bundle and scale), under the generic judge and batteries (`claims`), grids, ledger and notebook parameters that read
`fedlib.paper`, under `papers` (one folder per paper: its components and its claims). An arrow that closes a circle
fails here.
"""
from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "fedlib"
ENGINE = frozenset({"algorithms", "codecs", "core", "data", "energy", "engine", "models", "registry", "runs",
                    "trust", "validate"})
SERVING_PAPERS = frozenset({"app", "claims", "dryrun", "grids", "ledger", "notebook_params", "notebook_runs", "paper",
                            "paper_params", "papers", "report", "report_html", "display", "targets", "flower"})


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imported(tree: ast.AST, module: str, is_package: bool) -> list[str]:
    package = module if is_package else module.rsplit(".", 1)[0]
    names = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[:len(package.split(".")) - node.level + 1]
                names.append(".".join(base + ([node.module] if node.module else [])))
            else:
                names.append(node.module or "")
    return names


def _room(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "fedlib" and len(parts) > 1 else None


def arrows() -> dict[tuple[str, str], list[str]]:
    """(room, room it imports) -> the modules of the first room that import the second."""
    found: dict[tuple[str, str], list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        for target in _imported(ast.parse(path.read_text()), module, path.name == "__init__.py"):
            a, b = _room(module), _room(target)
            if a and b and a != b:
                found.setdefault((a, b), []).append(module)
    return found


def circles(edges: set[tuple[str, str]]) -> list[frozenset[str]]:
    """The strongly connected sets of more than one room (Tarjan)."""
    graph: dict[str, set[str]] = {}
    for a, b in edges:
        graph.setdefault(a, set()).add(b)
        graph.setdefault(b, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_circles_are_found_on_a_drawn_house():
    assert circles({("a", "b"), ("b", "c"), ("c", "a"), ("c", "d"), ("d", "e")}) == [frozenset("abc")]
    assert circles({("a", "b"), ("b", "c")}) == []


def test_the_engine_imports_none_of_the_layers_that_serve_papers():
    up = {(a, b): who for (a, b), who in arrows().items() if a in ENGINE and b in SERVING_PAPERS}
    assert not up, f"engine modules importing a paper-serving room: {up}"


def test_the_engine_runs_components_that_speak_the_core_and_neither_imports_the_engine():
    edges = arrows()
    for below, above in (("core", "engine"), ("core", "algorithms"), ("core", "codecs"), ("core", "models"),
                         ("algorithms", "engine"), ("codecs", "engine"), ("models", "engine"), ("data", "engine")):
        assert (below, above) not in edges, f"{below} imports {above}: {edges[below, above]}"


def test_every_room_is_classified_and_none_sits_in_a_circle():
    edges = arrows()
    rooms = {room for edge in edges for room in edge}
    assert rooms <= ENGINE | SERVING_PAPERS | {"__main__", "lazy", "paths", "processes", "ray_start"}, \
        f"unclassified rooms: {sorted(rooms - ENGINE - SERVING_PAPERS)}"
    found = circles(set(edges))
    assert not found, "rooms importing each other: " + "; ".join(
        f"{sorted(circle)} by {sorted(e for e in edges if set(e) <= circle)}" for circle in found)


def reached_modules(start: str) -> set[str]:
    """The fedlib modules `start` imports, directly or through the modules it imports."""
    todo, seen = [start], set()
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = PACKAGE.parent / Path(*module.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        if path.is_file():
            todo += [m for m in _imported(ast.parse(path.read_text()), module, path.name == "__init__.py")
                     if m.startswith("fedlib.")]
    return seen - {start}


def test_the_store_files_under_the_key_it_is_handed_and_imports_no_run_building():
    reached = reached_modules("fedlib.runs.store")
    building = {m for m in reached if _room(m) in {"engine", "algorithms", "codecs", "models", "data"}
                or m in {"fedlib.runs.build", "fedlib.runs.fingerprint", "fedlib.runs.execute"}}
    assert not building, f"the run store reaches what builds or keys a run: {sorted(building)}"
    assert "fedlib.runs.spec" in reached  # a sanity check of the walk: the store speaks `KeyedRun`
