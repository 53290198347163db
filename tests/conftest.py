"""Shared test settings."""
from __future__ import annotations

import pytest
import torch

from fedlib.trust import ALLOW_VAR


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
