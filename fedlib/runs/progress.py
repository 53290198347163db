"""Progress of many runs as one line per finished run, readable in a log (`reproduce`'s compute phase):

    [3/39] <experiment> <its labels> seed=1 done; elapsed 2.1 min; ETA 24.0 min (4,535 client-steps/s over
    the 3 finished runs, 6,768,000 local SGD steps left)

The ETA is the local SGD steps of the runs not yet finished over the client-steps/s of those finished (their steps
over the time elapsed since the first started), so runs of different sizes, and runs finishing together in
several workers, count for what they are. Nothing is printed before the first run finishes: there is no rate yet.
"""
from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping
from typing import TextIO

from fedlib.runs.spec import RunSpec, run_name


def span(seconds: float) -> str:
    """"42 s", "3.5 min" or "2.1 h"."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min" if seconds < 5400 else \
        f"{seconds / 3600:.1f} h"


class RunProgress:
    """Call `done(spec)` as each of the runs `steps` names (run -> its local SGD steps) finishes; each call prints
    one line to `out` (standard error by default). The clock starts at construction."""

    def __init__(self, steps: Mapping[RunSpec, int], out: TextIO | None = None,
                 clock: Callable[[], float] = time.perf_counter) -> None:
        if any(n < 0 for n in steps.values()):
            raise ValueError("RunProgress steps must be non-negative counts of local SGD steps")
        self.steps, self.out, self.clock = dict(steps), out, clock
        self.start = clock()
        self.finished: list[RunSpec] = []

    def done(self, spec: RunSpec) -> None:
        if spec not in self.steps:
            raise KeyError(f"RunProgress: run {run_name(spec)} is not one of the {len(self.steps)} it counts")
        self.finished.append(spec)
        elapsed = self.clock() - self.start
        done_steps = sum(self.steps[s] for s in self.finished)
        left = sum(self.steps.values()) - done_steps
        k, n = len(self.finished), len(self.steps)
        if left == 0:
            eta = "all finished"
        elif done_steps == 0 or elapsed <= 0:
            eta = "ETA unknown (no local SGD step finished yet)"
        else:
            rate = done_steps / elapsed
            shown = f"{rate:,.0f}" if rate >= 10 else f"{rate:.2g}"
            eta = (f"ETA {span(left / rate)} ({shown} client-steps/s over the {k} finished run(s), "
                   f"{left:,} local SGD steps left)")
        print(f"[{k}/{n}] {spec.experiment} {run_name(spec)} done; elapsed {span(elapsed)}; {eta}",
              file=self.out or sys.stderr, flush=True)
