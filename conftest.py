"""Settings for every test pytest collects here, the notebooks nbval re-executes included."""
from __future__ import annotations

import pytest

# nbval waits 5 s (fixed in its code) for a cell's output messages after the kernel has replied. A kernel that
# just finished a cell of many runs, on a 2-core machine where other test workers compete for the CPU, can
# take longer to send them; nbval then fails the cell ("Timeout of 5 seconds exceeded waiting for output"),
# although it ran. A cell's own run time stays limited by --nbval-cell-timeout.
NBVAL_OUTPUT_TIMEOUT_S = 120


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if hasattr(item, "output_timeout") and type(item).__module__ == "nbval.plugin":
            item.output_timeout = NBVAL_OUTPUT_TIMEOUT_S
