"""Shared test settings."""
from __future__ import annotations

import pytest
import torch

from fedlib.runs.ray_runner import allow_a_slow_local_start

allow_a_slow_local_start()  # the tests that start Ray themselves, on a machine the other test workers load


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Tiny tensors run fastest single-threaded on a 2-core machine (run_federation sets its own threads)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
