"""The Ray a test process starts once for the tests that need one (tests/conftest.py: `ray_started`,
`ray_if_it_starts`)."""
from __future__ import annotations

import os

from fedlib.processes import MARK_VARIABLE, new_mark, stop_marked

RAY_CPUS = 2
# Ray 2.55 gives a starting node fixed waits that cannot be lengthened (its raylet ~15 s for the dashboard agent to
# report its ports, ray.init 30 s for the raylet to register): on a busy machine a start can time out, and the
# next one usually succeeds, the agent's imports then read from a warm file cache.
RAY_START_ATTEMPTS = 3
TIMED_OUT = "timed out during startup"


class LocalRay:
    """Ray in this test process, started once and shared by the tests that need it. Started again only where it
    stopped (Flower's simulation engine shuts down the Ray it ran on) or where a test's PYTHONPATH differs from the
    one its workers were started with (a test's own modules must be importable there)."""

    def __init__(self) -> None:
        self.marks: list[str] = []
        self.pythonpath: str | None = None

    def start(self) -> str | None:
        """None once Ray runs here; the reason it did not start, after RAY_START_ATTEMPTS timed out."""
        import ray

        if ray.is_initialized() and self.pythonpath == os.environ.get("PYTHONPATH"):
            return None
        ray.shutdown()
        for _ in range(RAY_START_ATTEMPTS):
            self.marks.append(new_mark())
            os.environ[MARK_VARIABLE] = self.marks[-1]  # inherited by the processes this start spawns only
            try:
                ray.init(num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False)
                self.pythonpath = os.environ.get("PYTHONPATH")
                return None
            except Exception as err:  # Ray raises a bare Exception for a node that timed out starting
                if TIMED_OUT not in str(err):
                    raise
                reason = str(err)
                stop_marked(self.marks[-1])  # what the failed start left running (GCS, dashboard)
            finally:
                del os.environ[MARK_VARIABLE]
        return f"Ray did not start here in {RAY_START_ATTEMPTS} attempts: {reason}"

    def stop(self) -> None:
        import ray

        ray.shutdown()
        for mark in self.marks:
            stop_marked(mark)
