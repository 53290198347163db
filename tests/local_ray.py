"""The Ray a test process starts once for the tests that need one (tests/conftest.py: `ray_started`,
`ray_if_it_starts`)."""
from __future__ import annotations

import os

from fedlib.processes import stop_marked
from fedlib.ray_start import START_MARK_VARIABLE, RayStartTimeout, start_local_ray

RAY_CPUS = 2


class LocalRay:
    """Ray in this test process, started once and shared by the tests that need it (Flower's simulation engine
    leaves it running: `fedlib.flower.simulation`). Started again only where it stopped, or where a test's PYTHONPATH
    names a folder that the one its workers were started with did not (a test's own modules must be importable
    there: tests/scheduling.py runs that module first)."""

    def __init__(self) -> None:
        self.marks: list[str] = []
        self.pythonpath: str | None = None

    def start(self) -> str | None:
        """None once Ray runs here; why it did not start where every attempt timed out (fedlib.ray_start)."""
        import ray

        if ray.is_initialized() and _folders(os.environ.get("PYTHONPATH")) <= _folders(self.pythonpath):
            return None
        ray.shutdown()
        try:
            self.marks.append(start_local_ray(num_cpus=RAY_CPUS, include_dashboard=False, log_to_driver=False))
        except RayStartTimeout as err:
            return str(err)
        self.pythonpath = os.environ.get("PYTHONPATH")
        return None

    @staticmethod
    def address() -> str:
        """The running Ray's GCS address ("<this machine's address>:<port>"), which another driver joins
        (`--ray-address`)."""
        import ray

        return ray.get_runtime_context().gcs_address

    def stop(self) -> None:
        """Ray shut down, and whatever of the processes it started outlives that stopped."""
        import ray

        ray.shutdown()
        for mark in self.marks:
            stop_marked(mark, variable=START_MARK_VARIABLE)


def _folders(pythonpath: str | None) -> set[str]:
    return set(filter(None, (pythonpath or "").split(os.pathsep)))
