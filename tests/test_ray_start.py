"""Starting a local Ray on a busy machine (fedlib.ray_start): a start that times out is retried, then reported
with Ray's reason; any other error of a start is raised at once; only the processes a start spawns carry its
mark. The tests' shared Ray (tests/local_ray.py) is started once per test process, again only where it stopped or
where a test's PYTHONPATH differs, and reports a start that timed out (`ray_if_it_starts` skips on it,
`ray_started` fails). Ray itself is replaced here by a stand-in that records its calls."""
from __future__ import annotations

import os

import pytest
from local_ray import LocalRay

from fedlib.ray_start import RETRY_PAUSE_S, START_ATTEMPTS, START_MARK_VARIABLE, RayStartTimeout, start_local_ray

TIMEOUT = "The current node timed out during startup. This could happen because ..."


class StandIn:
    """ray.init / is_initialized / shutdown, each init raising the next of `outcomes` (None: it starts)."""

    def __init__(self, *outcomes: Exception | None) -> None:
        self.outcomes, self.inits, self.running, self.marked = list(outcomes), 0, False, []

    def init(self, **kwargs) -> None:
        self.inits += 1
        self.marked.append(os.environ.get(START_MARK_VARIABLE))
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


def test_a_start_that_times_out_is_retried_after_a_growing_pause_then_reported(stand_in, monkeypatch):
    import fedlib.ray_start

    pauses = []
    monkeypatch.setattr(fedlib.ray_start.time, "sleep", pauses.append)
    fake = stand_in(Exception(TIMEOUT), None)
    mark = start_local_ray(num_cpus=1)
    assert fake.inits == 2 and fake.marked[-1] == mark and fake.marked[0] != mark and pauses == [RETRY_PAUSE_S]
    fake, pauses[:] = stand_in(*[Exception(TIMEOUT)] * START_ATTEMPTS), []
    with pytest.raises(RayStartTimeout, match=f"did not start in {START_ATTEMPTS} attempts .*: {TIMEOUT}"):
        start_local_ray(pause_s=2.0)
    assert fake.inits == START_ATTEMPTS and len(set(fake.marked)) == START_ATTEMPTS and None not in fake.marked
    assert pauses == [2.0 * k for k in range(1, START_ATTEMPTS)]
    assert START_MARK_VARIABLE not in os.environ  # only the starts' own processes carry a mark


def test_another_error_of_a_start_is_raised_at_once(stand_in):
    fake = stand_in(ValueError("bad argument"), None)
    with pytest.raises(ValueError, match="bad argument"):
        start_local_ray()
    assert fake.inits == 1
    with pytest.raises(ValueError, match="attempts must be at least 1, got 0"):
        start_local_ray(attempts=0)


def test_the_tests_ray_is_shared_until_it_stops_or_the_pythonpath_changes(stand_in, monkeypatch):
    fake, local = stand_in(None, None, None), LocalRay()
    assert local.start() is None and local.start() is None and fake.inits == 1
    fake.shutdown()  # as Flower's simulation engine does after a run
    assert local.start() is None and fake.inits == 2
    monkeypatch.setenv("PYTHONPATH", "/somewhere/else", prepend=os.pathsep)
    assert local.start() is None and fake.inits == 3


def test_the_tests_ray_reports_a_start_that_timed_out(stand_in, monkeypatch):
    import fedlib.ray_start

    monkeypatch.setattr(fedlib.ray_start.time, "sleep", lambda seconds: None)  # the pauses: the test above
    stand_in(*[Exception(TIMEOUT)] * START_ATTEMPTS)
    assert f"did not start in {START_ATTEMPTS} attempts" in LocalRay().start()
