"""Shared test settings, the one Ray each test process starts for the tests that need one, and how `make test`'s
workers get their tests (tests/scheduling.py)."""
from __future__ import annotations

import pytest
import torch
from local_ray import LocalRay

from fedlib.trust import ALLOW_VAR


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, which a run may leave out (-p no:xdist)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadscope` (`make test`) with the Ray modules one unit and the longest units first; any other
    distribution is xdist's own."""
    if config.getoption("dist") != "loadscope":
        return None
    from scheduling import LongestFirst

    return LongestFirst(config, log)


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Tiny tensors run fastest single-threaded on a 2-core machine (run_federation sets its own threads)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def no_allowed_imports(monkeypatch):
    """Every test starts with no module allowed (`fedlib.trust`), and what it allows is gone after it."""
    monkeypatch.setenv(ALLOW_VAR, "")  # (restored after the test, whatever it sets)


@pytest.fixture(scope="session")
def local_ray():
    pytest.importorskip("ray")
    ray = LocalRay()
    yield ray
    ray.stop()


@pytest.fixture
def ray_started(local_ray):
    """Ray running in this process, for a test whose subject is Ray: a start that times out fails the test."""
    failure = local_ray.start()
    if failure is not None:
        pytest.fail(failure)


@pytest.fixture
def ray_if_it_starts(local_ray):
    """Ray running in this process, for a test to which Ray is only the means (Flower's simulation engine runs on
    it): a start that times out skips the test, with the reason."""
    failure = local_ray.start()
    if failure is not None:
        pytest.skip(failure)
