"""rounds_to_target / cost_to_target and their array form, at_first_hit, on hand-made records."""
from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fedlib.targets import NEVER, at_first_hit, cost_to_target, rounds_to_target


def record(acc: list[float]) -> pd.DataFrame:
    n = len(acc)
    return pd.DataFrame({"round": range(1, n + 1), "test_acc": acc, "bits": [10.0 * (r + 1) for r in range(n)],
                         "cum_energy": [float(sum(range(1, r + 2))) for r in range(n)]})


def test_never_is_infinite_and_worse_than_any_round():
    assert NEVER == math.inf and NEVER > 10**9


def test_first_hit_counts_the_first_row_reaching_the_target():
    rec = record([0.2, 0.5, 0.4, 0.6])
    assert rounds_to_target(rec, 0.5) == 2.0  # >= counts, the later dip does not matter
    assert rounds_to_target(rec, 0.55) == 4.0
    assert cost_to_target(rec, 0.5, "bits") == 10.0 + 20.0
    assert cost_to_target(rec, 0.55, "cum_energy", cumulative=True) == 1 + 2 + 3 + 4


def test_first_hit_at_round_one():
    rec = record([0.9, 0.1])
    assert rounds_to_target(rec, 0.9) == 1.0
    assert cost_to_target(rec, 0.9, "bits") == 10.0
    assert cost_to_target(rec, 0.9, "cum_energy", cumulative=True) == 1.0


def test_never_reached():
    rec = record([0.1, 0.2])
    assert rounds_to_target(rec, 0.5) == NEVER
    assert cost_to_target(rec, 0.5, "bits") == NEVER
    assert cost_to_target(rec, 0.5, "cum_energy", cumulative=True) == NEVER


def test_nan_rows_are_skipped_but_their_cost_counts():
    rec = record([float("nan"), 0.3, float("nan"), 0.7])
    assert rounds_to_target(rec, 0.5) == 4.0
    assert cost_to_target(rec, 0.5, "bits") == 10 + 20 + 30 + 40


def test_round_numbers_come_from_the_round_column():
    rec = pd.DataFrame({"round": [5, 10, 15], "test_loss": [3.0, 2.0, 1.0], "acc": [0.1, 0.8, 0.9]})
    assert rounds_to_target(rec, 0.8, metric="acc") == 10.0
    with pytest.raises(KeyError):
        rounds_to_target(rec, 0.8)


@pytest.mark.parametrize("acc", [[0.2, 0.5, 0.4, 0.6], [0.9, 0.1], [0.1, 0.2], [float("nan"), 0.3, float("nan"), 0.7]])
@pytest.mark.parametrize("target", [0.5, 0.55, 0.9])
def test_the_array_form_reads_what_the_record_form_reads(acc, target):
    rec = record(acc)
    metric = rec["test_acc"].to_numpy()
    assert at_first_hit(metric, rec["round"].to_numpy(), target) == rounds_to_target(rec, target)
    assert at_first_hit(metric, rec["cum_energy"].to_numpy(), target) == cost_to_target(rec, target, "cum_energy",
                                                                                        cumulative=True)


def test_a_missing_value_in_a_nullable_column_never_reaches_the_target():
    rec = record([0.2, 0.9, 0.7]).astype({"test_acc": "Float64"})
    rec.loc[1, "test_acc"] = pd.NA
    assert rounds_to_target(rec, 0.6) == 3.0
    assert cost_to_target(rec, 0.6, "cum_energy", cumulative=True) == 1 + 2 + 3
    assert at_first_hit(np.array([np.nan, np.nan]), np.array([1.0, 2.0]), 0.0) == NEVER
