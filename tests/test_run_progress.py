"""One line per finished run (fedlib.runs.progress): k of n, elapsed, and an ETA from the client-steps/s of the runs
finished so far, checked on a clock the test moves by hand."""
from __future__ import annotations

import io

import pytest

from fedlib.runs import RunSpec
from fedlib.runs.progress import RunProgress, span


def spec(seed: int) -> RunSpec:
    return RunSpec.make("quickstart", "digits", ("iid", {"num_clients": 4}), ("mlp", {}), ("fedavg", {}), 2, seed,
                        local={"lr": 0.1, "batch_size": 8, "steps": 1})


def test_each_finished_run_prints_k_of_n_elapsed_and_the_eta_at_the_rate_measured_so_far():
    now = [100.0]
    out = io.StringIO()
    a, b, c = spec(0), spec(1), spec(2)
    progress = RunProgress({a: 100, b: 300, c: 600}, out=out, clock=lambda: now[0])
    now[0] = 110.0  # a: 100 steps in 10 s = 10 client-steps/s; 900 steps left: 90 s
    progress.done(a)
    now[0] = 120.0  # a and b: 400 steps in 20 s = 20/s; 600 left: 30 s (not the 45 s one run's pace would say)
    progress.done(b)
    now[0] = 150.0
    progress.done(c)
    lines = out.getvalue().splitlines()
    assert lines == [
        "[1/3] quickstart seed=0 done; elapsed 10 s; ETA 1.5 min (10 client-steps/s over the 1 finished run(s), 900 local SGD "
        "steps left)",
        "[2/3] quickstart seed=1 done; elapsed 20 s; ETA 30 s (20 client-steps/s over the 2 finished run(s), 600 local SGD "
        "steps left)",
        "[3/3] quickstart seed=2 done; elapsed 50 s; all finished"]


def test_a_run_it_does_not_count_and_negative_steps_are_refused():
    with pytest.raises(KeyError, match="is not one of the 1 it counts"):
        RunProgress({spec(0): 5}, out=io.StringIO()).done(spec(1))
    with pytest.raises(ValueError, match="non-negative"):
        RunProgress({spec(0): -1})


def test_spans_in_seconds_minutes_and_hours():
    assert [span(s) for s in (42, 89, 90, 5399, 5400, 7560)] == ["42 s", "89 s", "1.5 min", "90.0 min", "1.5 h",
                                                                "2.1 h"]
