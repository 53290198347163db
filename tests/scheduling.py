"""How `make test` (pytest-xdist, `--dist loadscope`) hands the tests to its workers (tests/conftest.py:
`pytest_xdist_make_scheduler`): each notebook and each test module stays one unit of one worker, as loadscope keeps
them, but the modules that start Ray are one unit together, and the longest units are handed out first."""
from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling

# The modules whose tests start the tests' shared Ray (tests/local_ray.py: one start per test process), in the order
# they run: in one worker they share one start, where spread over the workers each worker starts its own (about 18
# CPU-seconds each). test_user_components.py first: its Ray workers need the user's folder on their PYTHONPATH, and
# the modules after it need no folder that Ray lacks.
RAY_MODULES = ("tests/test_user_components.py", "tests/test_cluster.py", "tests/test_ray_environment.py",
               "tests/test_runs.py", "tests/test_flower.py")
RAY_UNIT = "tests/ (the modules that start Ray)"

# The longest units, longest first (pytest --durations on the 2-core development VM, 2026-11-29, other jobs running:
# the Ray modules 342 s; the notebooks taco 292, mucsc 255, fedshift 247, fedaq 195, flower 185 (its Ray start timing
# out); test_reproduce.py 114, test_flower_local_run.py 108, test_benchmarks.py 55). xdist hands out the units with
# the most tests first, which leaves these (few tests, minutes of work) to the end of a run, where one worker would
# finish one of them alone while the others stand idle.
LONGEST_FIRST = (RAY_UNIT, "notebooks/taco.ipynb", "notebooks/mucsc.ipynb", "notebooks/fedshift.ipynb",
                 "notebooks/fedaq.ipynb", "notebooks/flower.ipynb", "tests/test_reproduce.py",
                 "tests/test_flower_local_run.py", "tests/test_benchmarks.py")


class LongestFirst(LoadScopeScheduling):
    """loadscope, with the Ray modules one unit (in `RAY_MODULES` order) and the `LONGEST_FIRST` units handed out
    before the others."""

    def _split_scope(self, nodeid: str) -> str:
        return RAY_UNIT if _module(nodeid) in RAY_MODULES else super()._split_scope(nodeid)

    def _assign_work_unit(self, node) -> None:
        for unit in reversed(LONGEST_FIRST):
            if unit in self.workqueue:
                self.workqueue.move_to_end(unit, last=False)
        if RAY_UNIT in self.workqueue:  # a unit's tests run in the order of its dict
            tests = self.workqueue[RAY_UNIT]
            self.workqueue[RAY_UNIT] = dict(sorted(tests.items(), key=lambda test: RAY_MODULES.index(_module(test[0]))))
        super()._assign_work_unit(node)


def _module(nodeid: str) -> str:
    return nodeid.split("::", 1)[0]
