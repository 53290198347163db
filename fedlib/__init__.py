"""fedlib: a compact federated-learning library for the FedShift, TACO, FedAQ and MUCSC companions.

The names below are imported on first use (PEP 562), so that `import fedlib` and the commands' `--help` start
without torch."""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

# name -> the module that defines it
_EXPORTS = {
    "make_algorithm": "fedlib.algorithms", "Link": "fedlib.engine.channel", "LinkContext": "fedlib.engine.channel",
    "Dataset": "fedlib.data", "load_dataset": "fedlib.data", "FederatedData": "fedlib.engine.federation",
    "LocalTraining": "fedlib.engine.federation", "RunResult": "fedlib.engine.federation",
    "run_federation": "fedlib.engine.federation", "build_model": "fedlib.models", "Seeds": "fedlib.core.seeding",
    "ImportNotAllowedError": "fedlib.trust", "allow_imports": "fedlib.trust",
}
__all__ = sorted(_EXPORTS)

if TYPE_CHECKING:
    from fedlib.algorithms import make_algorithm
    from fedlib.engine.channel import Link, LinkContext
    from fedlib.data import Dataset, load_dataset
    from fedlib.engine.federation import FederatedData, LocalTraining, RunResult, run_federation
    from fedlib.models import build_model
    from fedlib.core.seeding import Seeds
    from fedlib.trust import ImportNotAllowedError, allow_imports


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'fedlib' has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name]), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
