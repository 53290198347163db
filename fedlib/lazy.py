"""A module imported on its first attribute access: what the run path imports without using (scipy's statistics
for verdicts) stays out of a piece on a bare GPU machine (`scripts/prepare_gpu_carry.py`)."""
from __future__ import annotations

import importlib
from typing import Any


class LazyModule:
    """Stands for module `name`; imports it when an attribute is first read."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attr: str) -> Any:
        return getattr(importlib.import_module(self._name), attr)
