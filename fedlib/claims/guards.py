"""The run guards of the judge: what every run a claim reads must satisfy before any rule sees it.

`summary(rows, by)` reads the per-round rows of a claim's runs once (`by`: the columns that name one run, every id
column and `seed`) into one row per run; the guards read that summary and return the labels of the runs that fail
(or a sentence), so the judge can name them:
- `duplicated_runs`: two runs under one name (a round repeated): an id column the declaration does not name;
- `impossible_values`: an accuracy outside [0, 1] (percent beside fractions), a cumulative cost (`cum_*` column)
  negative or falling from one round to the next;
- `unequal_lengths`: runs of different lengths compared with one another;
- `diverged_runs`: a `diverged` flag, a non-finite train loss, a non-finite test loss where accuracy was scored, or a
  final accuracy at chance (`chance_line`).
`final_accuracies(rows, by)`: the summary's runs and final accuracy alone, what a contrast reads (`judge.Contrast`).
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


def in_round_order(rows: pd.DataFrame) -> pd.DataFrame:
    return rows.sort_values("round", kind="stable") if "round" in rows else rows


def runs(rows: pd.DataFrame, by: Sequence[str]) -> Iterator[tuple[str, pd.DataFrame]]:
    """(label, rows in round order) of every run in `rows`."""
    groups = in_round_order(rows).groupby(list(by), sort=False, dropna=False) if by else [((), in_round_order(rows))]
    for key, run in groups:
        yield label(by, key), run


def chance_line(best_final: float, num_classes: int) -> float:
    """The final accuracy at or below which a run is "at chance": 1/K plus the larger of `CHANCE_HEADROOM` of the way
    to 1 and `CHANCE_SHARE` of the best run's gain over 1/K."""
    chance = 1 / num_classes
    best = best_final if np.isfinite(best_final) else chance
    return chance + max(CHANCE_HEADROOM * (1 - chance), CHANCE_SHARE * (best - chance))


def _run_codes(columns: Sequence[np.ndarray], total: int) -> np.ndarray:
    """Each row's run (0, 1, ... in order of first appearance; NaN a value like any other) from its `columns`."""
    codes = np.zeros(total, dtype=np.int64)
    for column in columns:
        each, _ = pd.factorize(column, use_na_sentinel=False)
        codes, _ = pd.factorize(codes * (int(each.max()) + 1 if total else 1) + each)
    return codes


def _run_rows(rows: pd.DataFrame, by: Sequence[str]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(the rows' positions in round order (stable), each of those rows' run (`_run_codes` of its `by` values), each
    run's first of those rows)."""
    total = len(rows)
    order = np.argsort(rows["round"].to_numpy(), kind="stable") if "round" in rows else np.arange(total)
    codes = _run_codes([rows[c].to_numpy()[order] for c in by], total)
    first = np.full(int(codes.max()) + 1 if total else 0, total)
    np.minimum.at(first, codes, np.arange(total))
    return order, codes, first


def _accuracy(rows: pd.DataFrame, order: np.ndarray) -> np.ndarray:
    return rows["test_acc"].to_numpy(dtype=float)[order] if "test_acc" in rows else np.full(len(rows), np.nan)


def _last_scored(acc: np.ndarray, codes: np.ndarray, n: int) -> np.ndarray:
    """Per run (of `n`): the position in `acc` of its last scored (not NaN) accuracy; -1 where it has none."""
    scored = ~np.isnan(acc)
    last = np.full(n, -1)
    np.maximum.at(last, codes[scored], np.arange(len(acc))[scored])
    return last


def _at_last(acc: np.ndarray, last: np.ndarray) -> np.ndarray:
    """Each run's final accuracy, at its `last` scored position (`_last_scored`); NaN where it has none."""
    return np.where(last < 0, np.nan, acc[np.maximum(last, 0)] if len(acc) else np.nan)


def final_accuracies(rows: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """`summary`'s `by` columns and `final_acc` alone: what a rule on final accuracy reads of the runs, without the
    guards' columns."""
    order, codes, first = _run_rows(rows, by)
    acc = _accuracy(rows, order)
    return pd.DataFrame({**{c: rows[c].to_numpy()[order][first] for c in by},
                         "final_acc": _at_last(acc, _last_scored(acc, codes, len(first)))})


def summary(rows: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """One row per run of `rows`, in order of first appearance in round order: its `by` values, `label`, `rounds`
    (distinct), `repeated` (a round listed twice), `acc_min`, `acc_max` (NaN ignored), `final_acc` (the last scored
    accuracy in round order, NaN if none), `bad_costs` (the `cum_*` columns negative or falling) and `broken` (a
    `diverged` flag, a non-finite train loss, or a non-finite test loss where accuracy was scored). One pass of
    array arithmetic: the judge reads every claim's runs through it."""
    total = len(rows)
    order, codes, first = _run_rows(rows, by)
    n = len(first)

    def column(name: str, dtype: type | None = None) -> np.ndarray:
        return rows[name].to_numpy(dtype=dtype)[order]

    out: dict[str, object] = {c: column(c)[first] for c in by}
    out["label"] = [label(by, k) for k in zip(*(out[c] for c in by))] if by else ["the run"] * n

    def any_of(flags: np.ndarray) -> np.ndarray:
        return np.bincount(codes, weights=flags.astype(float), minlength=n) > 0

    if "round" in rows:
        rounds = column("round")
        each, _ = pd.factorize(rounds, use_na_sentinel=False)  # NaN a value: two NaN rounds repeat one another
        repeated = np.ones(total, dtype=bool)
        repeated[np.unique(codes * (int(each.max()) + 1 if total else 1) + each, return_index=True)[1]] = False
        out["rounds"] = np.bincount(codes[~repeated & ~pd.isna(rounds)], minlength=n)
        out["repeated"] = any_of(repeated)
    else:
        out["rounds"], out["repeated"] = np.bincount(codes, minlength=n), np.zeros(n, dtype=bool)
    acc = _accuracy(rows, order)
    scored = ~np.isnan(acc)
    low, high, last = np.full(n, np.inf), np.full(n, -np.inf), _last_scored(acc, codes, n)
    np.minimum.at(low, codes[scored], acc[scored])
    np.maximum.at(high, codes[scored], acc[scored])
    none = last < 0
    out["acc_min"], out["acc_max"] = np.where(none, np.nan, low), np.where(none, np.nan, high)
    out["final_acc"] = _at_last(acc, last)
    bad_costs: dict[str, np.ndarray] = {}
    grouped = np.argsort(codes, kind="stable")  # each run's rows together, still in round order
    for col in (c for c in rows.columns if str(c).startswith(COST_PREFIX)):
        cost, run = column(col, float)[grouped], codes[grouped]
        valid = ~np.isnan(cost)
        cost, run = cost[valid], run[valid]
        falls = (run[1:] == run[:-1]) & (cost[1:] < cost[:-1])
        bad_costs[col] = (np.bincount(run[1:][falls], minlength=n) > 0) | (np.bincount(run[cost < 0], minlength=n) > 0)
    out["bad_costs"] = [tuple(c for c, bad in bad_costs.items() if bad[i]) for i in range(n)]
    broken = np.zeros(total, dtype=bool)
    if "diverged" in rows:
        broken |= rows["diverged"].fillna(False).to_numpy(dtype=bool)[order]
    if "train_loss" in rows:
        broken |= ~np.isfinite(column("train_loss", float))
    if "test_loss" in rows and "test_acc" in rows:
        broken |= scored & ~np.isfinite(column("test_loss", float))
    out["broken"] = any_of(broken)
    return pd.DataFrame(out)


def duplicated_runs(runs: pd.DataFrame) -> list[str]:
    """Labels of the runs (a `summary`) under whose name a round appears twice."""
    return list(runs.loc[runs["repeated"], "label"])


def impossible_values(runs: pd.DataFrame) -> list[str]:
    """Labels of the runs (a `summary`) with an accuracy outside [0, 1] or a cost negative or falling, with why."""
    bad = []
    for r in runs.itertuples():
        if r.acc_min < 0 or r.acc_max > 1:
            bad.append(f"{r.label} (accuracy {r.acc_min:.3g}-{r.acc_max:.3g} outside [0, 1]: percent?)")
        bad += [f"{r.label} ({col} negative or falling)" for col in r.bad_costs]
    return bad


def unequal_lengths(runs: pd.DataFrame) -> str:
    """'' if every run (a `summary`) has as many rounds as every other, else the lengths found."""
    lengths: dict[int, list[str]] = {}
    for n, name in zip(runs["rounds"], runs["label"]):
        lengths.setdefault(int(n), []).append(name)
    if len(lengths) < 2:
        return ""
    return "; ".join(f"{n} rounds: {', '.join(names[:3])}" + (f" and {len(names) - 3} more" if len(names) > 3 else "")
                     for n, names in sorted(lengths.items()))


def diverged_runs(runs: pd.DataFrame, line: float | None = None) -> list[str]:
    """Labels of the runs (a `summary`) that diverged, or whose final accuracy is <= `line` (at chance; None: not
    checked)."""
    final = runs["final_acc"].to_numpy(dtype=float)
    at_chance = np.isfinite(final) & (final <= line) if line is not None else np.zeros(len(runs), dtype=bool)
    return list(runs.loc[runs["broken"].to_numpy(dtype=bool) | at_chance, "label"])
