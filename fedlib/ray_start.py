"""Starting a local Ray on a busy machine: a start that times out is cleaned up and tried again.

Ray 2.55 gives a starting node fixed waits that cannot be lengthened (its raylet about 15 s for the dashboard agent
to report its ports, `ray.init` 30 s for the raylet to register with the GCS), and a start that misses them raises
"The current node timed out during startup", leaving the GCS and the dashboard it had started running until this
process exits. On a machine whose cores other jobs keep busy the agent's imports can take longer than that once;
the next start usually succeeds, the imports then read from a warm file cache; under a sustained load (another
`make test` beside this one) a pause before each new attempt, longer each time, lets a burst of load pass.
"""
from __future__ import annotations

import os
import time
from typing import Any

from fedlib.processes import new_mark, stop_marked

START_ATTEMPTS = 5
RETRY_PAUSE_S = 10.0  # before attempt k + 1: k times this (at most 100 s in all after 5 attempts)
TIMED_OUT = "timed out during startup"
# Set only while a start runs, so only the processes it spawns carry it; a variable of its own, so that a mark this
# process already carries (fedlib.processes.MARK_VARIABLE, set by a command that started it) passes on unchanged.
START_MARK_VARIABLE = "FEDLIB_RAY_START_MARK"


class RayStartTimeout(RuntimeError):
    """Every attempt to start a local Ray timed out."""


def start_local_ray(attempts: int = START_ATTEMPTS, pause_s: float = RETRY_PAUSE_S, **init_args: Any) -> str:
    """`ray.init(**init_args)` for a local Ray, tried up to `attempts` times while it times out starting (what a
    timed-out start left running is stopped first, then k x `pause_s` waited before attempt k + 1). Returns the mark its processes carry in START_MARK_VARIABLE
    (`fedlib.processes.stop_marked(mark, variable=START_MARK_VARIABLE)` stops whatever of them outlives
    `ray.shutdown()`); raises RayStartTimeout after the last attempt, and any other error of a start at once."""
    import ray

    if attempts < 1:
        raise ValueError(f"start_local_ray attempts must be at least 1, got {attempts}")
    for attempt in range(attempts):
        if attempt:
            time.sleep(attempt * pause_s)
        mark = new_mark()
        os.environ[START_MARK_VARIABLE] = mark
        try:
            ray.init(**init_args)
            return mark
        except Exception as err:  # Ray raises a bare Exception for a node that timed out starting
            if TIMED_OUT not in str(err):
                raise
            reason = str(err)
            stop_marked(mark, variable=START_MARK_VARIABLE)
        finally:
            del os.environ[START_MARK_VARIABLE]
    raise RayStartTimeout(f"a local Ray did not start in {attempts} attempts (this machine's cores may be busy with "
                          f"other jobs): {reason}")
