"""The tests' shared Ray (tests/local_ray.py): started once per test process, started again only where it stopped
or where a test's PYTHONPATH differs; a start that times out is retried, then reported with Ray's reason (the
`ray_if_it_starts` fixture skips on it, `ray_started` fails); any other error of a start is raised. Ray itself is
replaced here by a stand-in that records its calls."""
from __future__ import annotations

import os

import pytest
from local_ray import RAY_START_ATTEMPTS, LocalRay

from fedlib.processes import MARK_VARIABLE

TIMEOUT = "The current node timed out during startup. This could happen because ..."


class StandIn:
    """ray.init / is_initialized / shutdown, each init raising the next of `outcomes` (None: it starts)."""

    def __init__(self, *outcomes: Exception | None) -> None:
        self.outcomes, self.inits, self.running, self.marked = list(outcomes), 0, False, []

    def init(self, **kwargs) -> None:
        self.inits += 1
        self.marked.append(os.environ.get(MARK_VARIABLE))
        outcome = self.outcomes.pop(0)
        if outcome is not None:
            raise outcome
        self.running = True

    def is_initialized(self) -> bool:
        return self.running

    def shutdown(self) -> None:
        self.running = False


@pytest.fixture
def stand_in(monkeypatch):
    ray = pytest.importorskip("ray")

    def install(*outcomes: Exception | None) -> StandIn:
        fake = StandIn(*outcomes)
        for name in ("init", "is_initialized", "shutdown"):
            monkeypatch.setattr(ray, name, getattr(fake, name))
        return fake

    return install


def test_one_start_is_shared_until_ray_stops_or_the_pythonpath_changes(stand_in, monkeypatch):
    fake, local = stand_in(None, None, None), LocalRay()
    assert local.start() is None and local.start() is None and fake.inits == 1
    fake.shutdown()  # as Flower's simulation engine does after a run
    assert local.start() is None and fake.inits == 2
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else", prepend=os.pathsep)
    assert local.start() is None and fake.inits == 3


def test_a_start_that_times_out_is_retried_then_reported(stand_in):
    fake = stand_in(Exception(TIMEOUT), None)
    assert LocalRay().start() is None and fake.inits == 2
    fake = stand_in(*[Exception(TIMEOUT)] * RAY_START_ATTEMPTS)
    failure = LocalRay().start()
    assert failure == f"Ray did not start here in {RAY_START_ATTEMPTS} attempts: {TIMEOUT}"
    assert fake.inits == RAY_START_ATTEMPTS and len(set(fake.marked)) == RAY_START_ATTEMPTS and None not in fake.marked
    assert MARK_VARIABLE not in os.environ  # only the starts' own processes carry a mark


def test_another_error_of_a_start_is_raised(stand_in):
    stand_in(ValueError("bad argument"))
    with pytest.raises(ValueError, match="bad argument"):
        LocalRay().start()
