"""The quickstart's claims table on hand-built records: each verdict follows from its rule."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from fedlib import report
from fedlib.papers.quickstart import QuickstartParams
from fedlib.papers.quickstart.claims import bundle, claims

PARAMS = QuickstartParams(rounds=2, mu=0.01)


def params(rec: pd.DataFrame) -> QuickstartParams:
    return replace(PARAMS, seeds=sorted(rec["seed"].unique()))


def record(final: dict[str, list[float]]) -> pd.DataFrame:
    """Two rounds per (algorithm, seed); round 2 carries `final[algorithm][seed]`."""
    rows = [{"algorithm": a, "seed": s, "round": r, "test_acc": 0.5 if r == 1 else acc, "test_loss": 1.0,
             "train_loss": 1.0} for a, accs in final.items() for s, acc in enumerate(accs) for r in (1, 2)]
    return pd.DataFrame(rows)


def verdicts(rec: pd.DataFrame) -> list[str]:
    return claims(bundle(rec, params(rec), num_classes=10)).table()["verdict"].tolist()


def test_scaffold_ahead_and_fedprox_level_reproduce_both():
    rec = record({"FedAvg": [0.80, 0.82, 0.81], "SCAFFOLD": [0.86, 0.87, 0.88], "FedProx": [0.801, 0.819, 0.812]})
    table = claims(bundle(rec, params(rec), num_classes=10)).table()
    assert table["verdict"].tolist() == [report.REPRODUCED, report.REPRODUCED]
    assert table["measured"].iloc[0] == "0.870 vs 0.810 (+0.060)"  # means over the three seeds, by hand
    # Q1 by scipy's one-sample t test of the gains [0.06, 0.05, 0.07] against the -0.01 floor: t = 0.07 / (0.01 /
    # sqrt 3) = 12.1 on 2 df
    q1 = stats.ttest_1samp([0.06, 0.05, 0.07], -0.01, alternative="greater").pvalue
    assert q1 == pytest.approx(0.0034, abs=5e-5)
    assert table["p_value"].iloc[0] == f"{q1:.2g}" and table["seeds"].tolist() == ["3", "3"]
    # Q2 by TOST: the larger of the two one-sided p-values of the differences [0.001, -0.001, 0.002] against +-0.02
    d = np.array([0.001, -0.001, 0.002])
    tost = max(stats.ttest_1samp(d, -0.02, alternative="greater").pvalue,
               stats.ttest_1samp(d, 0.02, alternative="less").pvalue)
    assert table["p_value"].iloc[1] == f"{tost:.2g}"


def test_a_consistent_deficit_inside_the_floor_reads_non_inferior_and_says_so():
    """SCAFFOLD 0.85 points below FedAvg on every seed (0.75-0.95): inside the 1-point non-inferiority floor, so Q1
    reproduces, and its row's words say it is a non-inferiority reading, not "SCAFFOLD > FedAvg"."""
    rec = record({"FedAvg": [0.80, 0.82, 0.81], "SCAFFOLD": [0.792, 0.811, 0.8015], "FedProx": [0.80, 0.82, 0.81]})
    table = claims(bundle(rec, params(rec), num_classes=10)).table()
    assert table["verdict"].iloc[0] == report.REPRODUCED
    assert "non-inferior" in table["claim"].iloc[0] and "> -0.01" in table["paper_value"].iloc[0]
    # the gains [-0.008, -0.009, -0.0085] against -0.01 by scipy: t = 0.0015 / (0.0005 / sqrt 3) = 5.2 on 2 df
    p = stats.ttest_1samp([-0.008, -0.009, -0.0085], -0.01, alternative="greater").pvalue
    assert p == pytest.approx(0.0175, abs=5e-4) and table["p_value"].iloc[0] == f"{p:.2g}"


def test_scaffold_behind_and_fedprox_far_are_not_reproduced():
    rec = record({"FedAvg": [0.80, 0.82, 0.81], "SCAFFOLD": [0.70, 0.72, 0.69], "FedProx": [0.70, 0.71, 0.72]})
    assert verdicts(rec) == [report.NOT_REPRODUCED, report.NOT_REPRODUCED]


def test_one_seed_is_not_testable_and_a_diverged_run_overrides_the_rule():
    one = record({"FedAvg": [0.80], "SCAFFOLD": [0.86], "FedProx": [0.80]})
    assert verdicts(one) == [report.TOO_FEW_SEEDS, report.TOO_FEW_SEEDS]
    rec = record({"FedAvg": [0.80, 0.82, 0.81], "SCAFFOLD": [0.86, 0.87, 0.88], "FedProx": [0.801, 0.819, 0.812]})
    rec.loc[(rec["algorithm"] == "SCAFFOLD") & (rec["seed"] == 1), "train_loss"] = np.nan
    assert verdicts(rec) == [report.DIVERGED, report.REPRODUCED]


def test_a_missing_run_is_not_testable_and_named():
    rec = record({"FedAvg": [0.80, 0.82, 0.81], "SCAFFOLD": [0.86, 0.87, 0.88], "FedProx": [0.801, 0.819, 0.812]})
    rec = rec[~((rec["algorithm"] == "SCAFFOLD") & (rec["seed"] == 2))]
    table = claims(bundle(rec, replace(PARAMS, seeds=[0, 1, 2]), num_classes=10)).table()
    assert table["verdict"].tolist() == [report.NOT_COMPUTED, report.REPRODUCED]
    assert "algorithm=SCAFFOLD seed=2" in table["evidence"].iloc[0]
