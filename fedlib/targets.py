"""Rounds and cost to a target metric: the one helper for "when did a run first reach X".

A run that never reaches the target gets `NEVER` (= math.inf), not NaN: it sorts after every
finite value and compares as worse, so a run that never arrives is counted, not dropped
(see `fedlib.report.fewer_rounds`). Rows whose metric is NaN (e.g. rounds without an
evaluation) are skipped. `at_first_hit` is the same rule on arrays, for callers that hold many runs as arrays
(the claims batteries judge thousands of synthetic runs).
"""
from __future__ import annotations

import math

import numpy as np
import pandas as pd

NEVER = math.inf


def _first_hit(metric: np.ndarray, target: float) -> int | None:
    """Position of the first value of `metric` that is >= `target` (NaN never matches); None if none is."""
    hits = np.flatnonzero(np.asarray(metric, dtype=float) >= target)
    return int(hits[0]) if len(hits) else None


def at_first_hit(metric: np.ndarray, values: np.ndarray, target: float) -> float:
    """`values` (a run's rounds, or a cumulative cost, row for row with `metric`) at the first row whose `metric` is
    >= `target`; `NEVER` if none is. The array form of `rounds_to_target` and `cost_to_target(cumulative=True)`, for
    callers that hold many runs as arrays."""
    first = _first_hit(metric, target)
    return NEVER if first is None else float(values[first])


def _metric(rounds: pd.DataFrame, metric: str) -> np.ndarray:
    return rounds[metric].to_numpy(dtype=float, na_value=np.nan)


def rounds_to_target(rounds: pd.DataFrame, target: float, metric: str = "test_acc") -> float:
    """The `round` of the first row whose `metric` >= `target`; `NEVER` if no row reaches it.

    `rounds` is a run's per-round record in round order (one row per round, a `round` column).
    """
    return at_first_hit(_metric(rounds, metric), rounds["round"].to_numpy(), target)


def cost_to_target(rounds: pd.DataFrame, target: float, cost: str, *, metric: str = "test_acc",
                   cumulative: bool = False) -> float:
    """The cost spent up to and including the first round whose `metric` >= `target`; `NEVER` if none does.

    cumulative=False: `cost` is a per-round column (bits, joules, seconds in that round) and is summed
    over the rows up to the hit; cumulative=True: `cost` is already cumulative and its value at the hit
    is returned.
    """
    if cumulative:
        return at_first_hit(_metric(rounds, metric), rounds[cost].to_numpy(), target)
    first = _first_hit(_metric(rounds, metric), target)
    return NEVER if first is None else float(rounds[cost].iloc[: first + 1].sum())
