"""How `make test` hands units to its workers (tests/scheduling.py): the Ray modules together on one worker, the
longest units first; checked on xdist's own loadscope scheduler with stand-in workers."""
from __future__ import annotations

import ast
from pathlib import Path
from types import SimpleNamespace

import pytest

pytest.importorskip("xdist")
from scheduling import LONGEST_FIRST, RAY_MODULES, RAY_UNIT, LongestFirst  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RAY_FIXTURES = {"local_ray", "ray_started", "ray_if_it_starts"}  # tests/conftest.py


class Worker:
    """A stand-in for xdist's WorkerController: records the tests it is sent."""

    def __init__(self, name: str) -> None:
        self.gateway = SimpleNamespace(id=name)
        self.sent: list[int] = []
        self.shutting_down = False

    def send_runtest_some(self, indexes: list[int]) -> None:
        self.sent.extend(indexes)

    def shutdown(self) -> None:
        self.shutting_down = True


def scheduled(collection: list[str], workers: int = 2) -> list[list[str]]:
    """The tests each worker is sent when the run starts, in the order it is sent them."""
    config = SimpleNamespace(option=SimpleNamespace(loadscopereorder=True), getvalue=lambda name: [f"{workers}*popen"])
    scheduler, nodes = LongestFirst(config), [Worker(f"gw{i}") for i in range(workers)]
    for node in nodes:
        scheduler.add_node(node)
        scheduler.add_node_collection(node, collection)
    scheduler.schedule()
    return [[collection[i] for i in node.sent] for node in nodes]


def test_the_ray_modules_are_one_unit_and_the_longest_units_go_first():
    many = [f"tests/test_many.py::test_{i}" for i in range(40)]  # xdist alone would hand this one out first
    ray = [f"{module}::test_{i}" for module in RAY_MODULES for i in range(2)]
    notebook = [f"notebooks/taco.ipynb::Cell {i}" for i in range(3)]
    first, second = scheduled([*many, *notebook, *sorted(ray)])  # collected in file name order
    assert first == ray and second == notebook  # the Ray modules in RAY_MODULES order


def test_the_ray_modules_are_the_modules_whose_tests_use_the_shared_ray():
    using = set()
    for path in (ROOT / "tests").glob("test_*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.FunctionDef) and {a.arg for a in node.args.args} & RAY_FIXTURES:
                using.add(f"tests/{path.name}")
    assert using == set(RAY_MODULES)


def test_every_listed_long_unit_exists():
    assert all(unit == RAY_UNIT or (ROOT / unit).is_file() for unit in LONGEST_FIRST)
