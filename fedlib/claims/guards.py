"""The run guards of the judge: what every run a claim reads must satisfy before any rule sees it.

Each function takes the per-round rows of a claim's runs and `by`, the columns that name one run (every id column
and `seed`), and returns the labels of the runs that fail (or a sentence), so the judge can name them:
- `duplicated_runs`: two runs under one name (a round repeated): an id column the declaration does not name;
- `impossible_values`: an accuracy outside [0, 1] (percent beside fractions), a cumulative cost (`cum_*` column)
  negative or falling from one round to the next;
- `unequal_lengths`: runs of different lengths compared with one another;
- `diverged_runs`: a `diverged` flag, a non-finite train loss, a non-finite test loss where accuracy was scored, or a
  final accuracy at chance (`chance_line`).
"""
from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np
import pandas as pd

CHANCE_HEADROOM = 0.05  # at chance: within 5% of the way from chance (1/K) to a perfect score (0.145 for K = 10) ...
CHANCE_SHARE = 0.2  # ... or less than a fifth of the gain over chance of the claim's best run
COST_PREFIX = "cum_"  # a cumulative cost column (energy, traffic, time): never negative, never falling


def label(by: Sequence[str], key: Any) -> str:
    key = key if isinstance(key, tuple) else (key,)
    return " ".join(f"{c}={v}" for c, v in zip(by, key)) or "the run"


def runs(rows: pd.DataFrame, by: Sequence[str]) -> Iterator[tuple[str, pd.DataFrame]]:
    """(label, rows in round order) of every run in `rows`."""
    groups = rows.groupby(list(by), sort=False, dropna=False) if by else [((), rows)]
    for key, run in groups:
        yield label(by, key), run.sort_values("round", kind="stable") if "round" in run else run


def chance_line(best_final: float, num_classes: int) -> float:
    """The final accuracy at or below which a run is "at chance": 1/K plus the larger of `CHANCE_HEADROOM` of the way
    to 1 and `CHANCE_SHARE` of the best run's gain over 1/K."""
    chance = 1 / num_classes
    best = best_final if np.isfinite(best_final) else chance
    return chance + max(CHANCE_HEADROOM * (1 - chance), CHANCE_SHARE * (best - chance))


def final_accuracy(run: pd.DataFrame) -> float:
    """The run's last scored test accuracy (NaN if none)."""
    scored = run["test_acc"].dropna() if "test_acc" in run else pd.Series(dtype=float)
    return float(scored.iloc[-1]) if len(scored) else float("nan")


def duplicated_runs(rows: pd.DataFrame, by: Sequence[str]) -> list[str]:
    return [name for name, run in runs(rows, by) if "round" in run and run["round"].duplicated().any()]


def impossible_values(rows: pd.DataFrame, by: Sequence[str]) -> list[str]:
    bad = []
    costs = [c for c in rows.columns if str(c).startswith(COST_PREFIX)]
    for name, run in runs(rows, by):
        acc = run["test_acc"].dropna().to_numpy(dtype=float) if "test_acc" in run else np.array([])
        if ((acc < 0) | (acc > 1)).any():
            bad.append(f"{name} (accuracy {acc.min():.3g}-{acc.max():.3g} outside [0, 1]: percent?)")
        for col in costs:
            cost = run[col].dropna().to_numpy(dtype=float)
            if (cost < 0).any() or (np.diff(cost) < 0).any():
                bad.append(f"{name} ({col} negative or falling)")
    return bad


def unequal_lengths(rows: pd.DataFrame, by: Sequence[str]) -> str:
    """'' if every run has as many rounds as every other, else the lengths found."""
    lengths: dict[int, list[str]] = {}
    for name, run in runs(rows, by):
        lengths.setdefault(int(run["round"].nunique()) if "round" in run else len(run), []).append(name)
    if len(lengths) < 2:
        return ""
    return "; ".join(f"{n} rounds: {', '.join(names[:3])}" + (f" and {len(names) - 3} more" if len(names) > 3 else "")
                     for n, names in sorted(lengths.items()))


def diverged_runs(rows: pd.DataFrame, by: Sequence[str], line: float | None = None) -> list[str]:
    """Labels of the runs that diverged, or whose final accuracy is <= `line` (at chance; None: not checked)."""
    bad = []
    for name, run in runs(rows, by):
        flags = [run[c].fillna(False).astype(bool).any() for c in ("diverged",) if c in run]
        flags += [not np.isfinite(run[c].to_numpy(dtype=float)).all() for c in ("train_loss",) if c in run]
        if "test_loss" in run and "test_acc" in run:
            scored = run["test_acc"].notna()
            flags.append(not np.isfinite(run.loc[scored, "test_loss"].to_numpy(dtype=float)).all())
        final = final_accuracy(run)
        if line is not None and np.isfinite(final):
            flags.append(final <= line)
        if any(flags):
            bad.append(name)
    return bad
