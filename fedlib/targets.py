"""Rounds and cost to a target metric: the one helper for "when did a run first reach X".

A run that never reaches the target gets `NEVER` (= math.inf), not NaN: it sorts after every
finite value and compares as worse, so a run that never arrives is counted, not dropped
(see `fedlib.report.fewer_rounds`). Rows whose metric is NaN (e.g. rounds without an
evaluation) are skipped.
"""
from __future__ import annotations

import math

import pandas as pd

NEVER = math.inf


def _first_hit(rounds: pd.DataFrame, target: float, metric: str) -> int | None:
    """Positional index of the first row whose `metric` is >= `target` (NaN rows never match)."""
    hits = (rounds[metric] >= target).to_numpy().nonzero()[0]
    return int(hits[0]) if len(hits) else None


def rounds_to_target(rounds: pd.DataFrame, target: float, metric: str = "test_acc") -> float:
    """The `round` of the first row whose `metric` >= `target`; `NEVER` if no row reaches it.

    `rounds` is a run's per-round record in round order (one row per round, a `round` column).
    """
    first = _first_hit(rounds, target, metric)
    return NEVER if first is None else float(rounds["round"].iloc[first])


def cost_to_target(rounds: pd.DataFrame, target: float, cost: str, *, metric: str = "test_acc",
                   cumulative: bool = False) -> float:
    """The cost spent up to and including the first round whose `metric` >= `target`; `NEVER` if none does.

    cumulative=False: `cost` is a per-round column (bits, joules, seconds in that round) and is summed
    over the rows up to the hit; cumulative=True: `cost` is already cumulative and its value at the hit
    is returned.
    """
    first = _first_hit(rounds, target, metric)
    if first is None:
        return NEVER
    column = rounds[cost]
    return float(column.iloc[first]) if cumulative else float(column.iloc[: first + 1].sum())
