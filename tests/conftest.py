"""Shared test settings."""
from __future__ import annotations

import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_thread():
    """Tiny tensors run fastest single-threaded on a 2-core machine (run_federation sets its own threads)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
