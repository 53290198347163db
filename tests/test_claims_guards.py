"""fedlib.claims.guards.summary, the one pass every guard reads, on hand-made runs."""
from __future__ import annotations

import numpy as np
import pandas as pd

from fedlib.claims import guards

NAN = float("nan")


def _rows() -> pd.DataFrame:
    """Run b (listed first in round order) and run a, rows shuffled; a's cost falls 3 -> 2 across an unscored NaN."""
    return pd.DataFrame({
        "method": ["a", "b", "a", "b", "a", "b", "a"],
        "seed": [0, 0, 0, 0, 0, 0, 0],
        "round": [2, 1, 1, 2, 3, 3, 4],
        "test_acc": [0.5, 0.2, 0.4, NAN, 0.6, 0.3, NAN],
        "test_loss": [1.0, 1.0, 1.0, NAN, 1.0, 1.0, NAN],  # NaN only where accuracy was not scored: not broken
        "train_loss": [1.0] * 7,
        "cum_energy": [2.0, 1.0, 1.0, 2.0, 3.0, 3.0, 2.0],
    })


def test_summary_by_hand():
    s = guards.summary(_rows(), ["method", "seed"]).set_index("method")
    assert list(s.index) == ["b", "a"]  # first appearance in round order: b's row of round 1 comes first
    assert s.loc["a", "label"] == "method=a seed=0" and s.loc["a", "rounds"] == 4 and s.loc["b", "rounds"] == 3
    assert not s["repeated"].any()
    assert (s.loc["a", "acc_min"], s.loc["a", "acc_max"], s.loc["a", "final_acc"]) == (0.4, 0.6, 0.6)  # round 4 NaN
    assert s.loc["b", "final_acc"] == 0.3
    assert s.loc["a", "bad_costs"] == ("cum_energy",) and s.loc["b", "bad_costs"] == ()
    assert not s["broken"].any()
    assert guards.impossible_values(s) == ["method=a seed=0 (cum_energy negative or falling)"]
    assert guards.unequal_lengths(s) == "3 rounds: method=b seed=0; 4 rounds: method=a seed=0"


def test_summary_flags_repeats_percent_and_divergence():
    rows = _rows()
    rows.loc[6, ["round", "test_acc", "test_loss"]] = [3, 60.0, 1.0]  # a: round 3 twice, accuracy in percent
    rows.loc[5, "test_loss"] = np.inf  # b: a non-finite test loss where accuracy was scored
    s = guards.summary(rows, ["method", "seed"])
    assert guards.duplicated_runs(s) == ["method=a seed=0"]
    assert "method=a seed=0 (accuracy 0.4-60 outside [0, 1]: percent?)" in guards.impossible_values(s)
    assert guards.diverged_runs(s) == ["method=b seed=0"]
    assert guards.diverged_runs(s, line=0.35) == ["method=b seed=0"]  # b also at chance; a ends at 60
    lone = guards.summary(rows[rows["method"] == "b"].drop(columns=["method", "seed"]), [])
    assert list(lone["label"]) == ["the run"] and lone["final_acc"].iloc[0] == 0.3


def test_summary_of_no_rows_and_of_a_run_never_scored():
    empty = guards.summary(_rows().iloc[:0], ["method", "seed"])
    assert len(empty) == 0 and guards.duplicated_runs(empty) == [] and guards.unequal_lengths(empty) == ""
    unscored = _rows().assign(test_acc=NAN)
    assert guards.summary(unscored, ["method", "seed"])["final_acc"].isna().all()


def test_final_accuracies_are_the_summarys_runs_and_final_accuracy():
    """What a contrast reads (`final_accuracies`) is `summary`'s reading: the same runs, in the same order, the same
    final accuracy, on shuffled rows, a run never scored, a repeated round and no rows."""
    repeated = _rows()
    repeated.loc[6, "round"] = 3
    for rows in (_rows(), _rows().assign(test_acc=NAN), repeated, _rows().iloc[:0], _rows().drop(columns="test_acc")):
        for by in (["method", "seed"], ["seed"]):
            pd.testing.assert_frame_equal(guards.final_accuracies(rows, by),
                                          guards.summary(rows, by)[[*by, "final_acc"]])
    assert list(guards.final_accuracies(_rows(), ["method"])["final_acc"]) == [0.3, 0.6]
