"""Verdict rules: each on a hand-built case that could fail, and the claims table / REPORT.md."""
from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from fedlib import report as R
from fedlib.report import Claims, Judgement, collect_report
from fedlib.targets import NEVER, rounds_to_target


def runs(**accs: list[float]) -> pd.DataFrame:
    """Per-round records of several runs (one per keyword), finite losses."""
    return pd.concat([pd.DataFrame({"algorithm": name, "round": range(1, len(a) + 1), "test_acc": a,
                                    "test_loss": 1.0, "train_loss": 1.0}) for name, a in accs.items()], ignore_index=True)


# ------------------------------------------------------------------------------------------ divergence
def test_a_run_at_chance_cannot_support_reproduced():
    rec = runs(FedAvg=[0.5, 0.101], SCAFFOLD=[0.5, 0.10])
    ok = R.criterion_met("SCAFFOLD >= FedAvg - 0.01", True)
    j = ok.unless_diverged(rec, by=["algorithm"], num_classes=10)
    assert j.verdict == R.DIVERGED and "algorithm=FedAvg" in j.evidence and "algorithm=SCAFFOLD" in j.evidence
    assert "1/10 + 0.02" in j.criterion
    healthy = runs(FedAvg=[0.5, 0.8], SCAFFOLD=[0.5, 0.9])
    assert ok.unless_diverged(healthy, by=["algorithm"], num_classes=10).verdict == R.REPRODUCED
    # 0.13 is above chance + margin for 10 classes: not flagged
    assert ok.unless_diverged(runs(FedAvg=[0.13]), by=["algorithm"], num_classes=10).verdict == R.REPRODUCED


def test_non_finite_losses_and_the_diverged_flag_are_detected():
    rec = runs(a=[0.5, 0.9], b=[0.5, 0.9], c=[0.5, 0.9], d=[0.5, float("nan")])
    rec.loc[(rec.algorithm == "a") & (rec["round"] == 1), "train_loss"] = np.inf
    rec.loc[(rec.algorithm == "b") & (rec["round"] == 2), "test_loss"] = np.nan
    rec["diverged"] = rec.algorithm.eq("c") & rec["round"].eq(2)
    # d: an unevaluated round (no accuracy, no test loss) is not a divergence
    rec.loc[(rec.algorithm == "d") & (rec["round"] == 2), "test_loss"] = np.nan
    assert R.diverged_runs(rec, by=["algorithm"]) == ["algorithm=a", "algorithm=b", "algorithm=c"]


def test_divergence_overrides_every_run_verdict():
    rec = runs(x=[0.1])
    for j in (R.criterion_met("c", False), R.not_testable("one seed")):
        assert j.unless_diverged(rec, num_classes=10).verdict == R.DIVERGED


# ------------------------------------------------------------------------------------- censored rounds
def test_runs_that_never_arrive_are_counted_not_dropped():
    # A reaches the target quickly on one seed and never on the other two: its mean over the runs that
    # arrived (10) beats B's (25), but A is worse in 2 of 3 pairs.
    a, b = [10, NEVER, NEVER], [20, 25, 30]
    assert np.mean([v for v in a if v < NEVER]) < np.mean(b)
    j = R.reaches_sooner(a, b, names=("A", "B"))
    assert j.verdict == R.NOT_REPRODUCED
    assert "A reached it in 1/3, B in 3/3" in j.evidence and "A lower in 1, higher in 2, tied in 0 of 3" in j.evidence


def test_taco_c3_case_from_the_issue():
    # per seed: FedAvg never on seeds 0 and 2, TACO never on seed 2; on seed 1 TACO 23 vs FedAvg 21
    j = R.reaches_sooner([18, 23, NEVER], [NEVER, 21, NEVER], names=("TACO", "FedAvg"))
    assert j.verdict == R.NOT_REPRODUCED and "tied in 1" in j.evidence
    assert R.reaches_sooner([18, 20, NEVER], [NEVER, 21, NEVER]).verdict == R.REPRODUCED
    assert R.reaches_sooner([18, 23, NEVER, NEVER], [NEVER, 21, NEVER, NEVER]).verdict == R.NOT_REPRODUCED
    assert R.reaches_sooner([18, 20, NEVER, 30], [NEVER, 21, 5, 30]).verdict == R.PARTLY


def test_reaches_sooner_works_with_fedlib_targets():
    fast = runs(m=[0.2, 0.9, 0.9])
    never = runs(m=[0.2, 0.3, 0.4])
    a = [rounds_to_target(fast, 0.85)] * 3
    b = [rounds_to_target(never, 0.85)] * 3
    assert R.reaches_sooner(a, b).verdict == R.REPRODUCED
    assert R.reaches_sooner(b, a).verdict == R.NOT_REPRODUCED
    with pytest.raises(ValueError, match="paired"):
        R.reaches_sooner([1, 2], [1])


# ---------------------------------------------------------------------------------------- paired gains
def test_paired_rule_rejects_a_noise_level_gain():
    # FedShift C7's case: +0.07 +/- 0.25 (SE) over 54 per-seed gains
    rng = np.random.default_rng(0)
    g = rng.standard_normal(54)
    g = (g - g.mean()) / g.std(ddof=1) * 0.25 * np.sqrt(54) + 0.07
    for test in ("wilcoxon", "t"):
        j = R.paired_gain(g, test=test)
        assert j.verdict == R.NOT_REPRODUCED, j.evidence
    assert "+0.07" in j.evidence and "54 pairs" in j.evidence and "paired t test" in j.criterion


def test_paired_rule_accepts_a_clear_gain_and_states_cells():
    g = np.array([2.1, 3.5, 1.2, 4.0, 2.8, 3.3, 1.9, 2.5])
    assert R.paired_gain(g).verdict == R.REPRODUCED
    assert R.paired_gain(g, threshold=5.0).verdict == R.NOT_REPRODUCED  # the threshold is the null
    assert R.paired_gain(g, cells=[3.0, -0.5]).verdict == R.PARTLY
    assert R.paired_gain(g, cells=[3.0, 0.5]).verdict == R.REPRODUCED


def test_paired_rule_with_too_few_pairs_is_not_testable():
    # four pairs can never give a one-sided Wilcoxon p below 1/16 > 0.05
    assert R.paired_gain([5.0, 6.0, 7.0, 8.0]).verdict == R.NOT_TESTABLE
    assert R.paired_gain([5.0, 6.0, 7.0, 8.0, 9.0]).verdict == R.REPRODUCED
    assert R.paired_gain([0.05], test="t").verdict == R.NOT_TESTABLE
    assert R.paired_gain([0.05, 0.05, 0.05], test="t").verdict == R.NOT_TESTABLE  # no spread to test against
    assert R.paired_gain([0.05, 0.06], test="t").verdict == R.NOT_TESTABLE  # 2 pairs
    assert R.paired_gain([0.05, 0.06, 0.055], test="t").verdict == R.REPRODUCED
    with pytest.raises(ValueError, match="test"):
        R.paired_gain([1.0] * 10, test="sign")


def test_paired_equivalence():
    assert R.paired_equivalence([0.004, -0.003, 0.001, 0.002], margin=0.02).verdict == R.REPRODUCED
    assert R.paired_equivalence([0.05, 0.06, 0.04], margin=0.02).verdict == R.NOT_REPRODUCED
    assert R.paired_equivalence([0.3, -0.3, 0.2, -0.2], margin=0.02).verdict == R.INCONCLUSIVE  # noisy: no power
    assert R.paired_equivalence([0.0], margin=0.02).verdict == R.NOT_TESTABLE


def test_proportion_above():
    # 0.55 of 360 predictions against a true share of 0.5: p ~ 0.03; 0.504 (FedShift C5's case) is noise
    assert R.proportion_above(198, 360, 0.5).verdict == R.REPRODUCED
    assert R.proportion_above(181, 360, 0.5).verdict == R.NOT_REPRODUCED
    assert R.proportion_above(198, 360, 0.55).verdict == R.NOT_REPRODUCED  # the reference is the null


# ------------------------------------------------------------------------- tolerance / arithmetic / rest
def test_within_tolerance_states_its_tolerance():
    j = R.within_tolerance([14.54, 196.6], [14.54, 196.57], rtol=0.001)
    assert j.verdict == R.REPRODUCED and "0.001 x |paper|" in j.criterion
    assert R.within_tolerance(7.7, 7.78, atol=0.005).verdict == R.NOT_REPRODUCED


def test_arithmetic_check_is_never_reproduced():
    agree = R.arithmetic_check(7.7832, 7.78, atol=0.005, inputs="Table III's sizes")
    assert agree.verdict == R.AGREES == "arithmetic check: agrees" and "Table III's sizes" in agree.criterion
    assert R.arithmetic_check(8.0, 7.78, atol=0.005).verdict == R.DISAGREES
    assert "reproduced" not in (R.AGREES + R.DISAGREES)


def test_illustrative_not_testable_and_criterion_met():
    j = R.illustrative("L = 1, sigma^2 = 1", "bound < 0 for tau > 5")
    assert j.verdict == R.ILLUSTRATIVE and "L = 1" in j.criterion and j.evidence == "bound < 0 for tau > 5"
    assert R.not_testable("needs CIFAR-10").verdict == R.NOT_TESTABLE
    assert R.criterion_met("all", False, partly=True).verdict == R.PARTLY
    assert R.criterion_met("all", False).verdict == R.NOT_REPRODUCED
    with pytest.raises(ValueError, match="verdict"):
        Judgement("maybe", "", "")


# ------------------------------------------------------------------------------- claims and REPORT.md
def test_claims_table_and_report_show_criterion_and_evidence(tmp_path):
    claims = Claims()
    claims.add("a | b", 1, 2, R.paired_gain([1.0, 2.0, 3.0, 2.0, 1.5], evidence="5 seeds"))
    claims.add("c", 7.78, 7.78, R.arithmetic_check(7.78, 7.78))
    with pytest.raises(TypeError, match="rule"):
        claims.add("x", 1, 2, "reproduced")
    assert list(claims.table().columns) == ["claim", "paper_value", "measured", "criterion", "evidence", "verdict"]
    (tmp_path / "nb").mkdir()
    claims.save(tmp_path / "nb")
    report = collect_report(tmp_path)
    assert "| claim | paper_value | measured | criterion | evidence | verdict |" in report
    assert "## nb" in report and "a \\| b" in report and "reproduced: 1" in report
    assert "Wilcoxon signed-rank" in report and "5 seeds; mean gain +1.9" in report
    assert "arithmetic check: agrees: 1" in report
    with pytest.raises(FileNotFoundError, match="make reproduce"):
        collect_report(tmp_path / "empty")


def test_equivalence_needs_pairs_with_spread():
    from fedlib.report import NOT_TESTABLE, paired_equivalence

    assert paired_equivalence([0.001, 0.001], margin=0.02).verdict == NOT_TESTABLE  # two pairs
    assert paired_equivalence([0.001] * 5, margin=0.02).verdict == NOT_TESTABLE  # no spread
    assert paired_equivalence([0.001, -0.002, 0.0015, 0.0], margin=0.02).verdict != NOT_TESTABLE


def test_paired_gain_with_a_nan_or_inf_gain_is_not_testable():
    for bad in (float("nan"), float("inf"), -float("inf")):
        j = R.paired_gain([0.1, 0.12, bad, 0.11, 0.09], test="t")
        assert j.verdict == R.NOT_TESTABLE and "NaN/inf" in j.evidence
    assert R.paired_gain([float("nan")] * 6).verdict == R.NOT_TESTABLE
    assert R.paired_gain([0.1] * 6, cells=[0.1, float("nan")]).verdict == R.NOT_TESTABLE


def test_wilcoxon_counts_zero_gains():
    # 20 ties and 5 tiny gains: dropping the zeros would make this "reproduced" (p = 1/32); split, p > 0.05
    assert R.paired_gain([0.0] * 20 + [0.01] * 5).verdict == R.NOT_REPRODUCED
    assert R.paired_gain([0.01] * 6).verdict == R.REPRODUCED  # p = 2**-6 with no zeros


def test_reaches_sooner_needs_independent_pairs_and_no_nan():
    one = R.reaches_sooner([9], [11], names=("TACO", "FedAvg"))
    assert one.verdict == R.NOT_TESTABLE and "1 pairs" in one.evidence
    assert R.reaches_sooner([9, 10], [11, 12]).verdict == R.NOT_TESTABLE
    nan = R.reaches_sooner([9, float("nan"), 8], [11, 12, 13])
    assert nan.verdict == R.NOT_TESTABLE and "missing" in nan.evidence
    assert R.reaches_sooner([9, float("nan"), 8], [11, 12, 13]).verdict != R.PARTLY
    assert R.reaches_sooner([9, 10], [11, 12], min_pairs=2).verdict == R.REPRODUCED


def test_underpowered_tost_is_inconclusive_not_not_reproduced():
    # FedShift G2 at quick: mean +0.02, SE ~0.2 over 4 pairs, margin 0.02: the CI straddles the margin
    j = R.paired_equivalence([0.4, -0.35, 0.3, -0.27], margin=0.02)
    assert j.verdict == R.INCONCLUSIVE and "CI" in j.evidence
    # a tight interval wholly outside the margin is a real difference
    assert R.paired_equivalence([0.05, 0.06, 0.055, 0.052], margin=0.02).verdict == R.NOT_REPRODUCED
    assert R.paired_equivalence([0.001, float("nan"), 0.0, 0.002], margin=0.02).verdict == R.NOT_TESTABLE


def test_bound_holds_tight_vacuous_broken_and_missing():
    assert R.bound_holds([1.0, 2.0], [1.5, 2.1], what="b").verdict == R.REPRODUCED
    vac = R.bound_holds([1.0, 2.0], [512.0, 1024.0], what="b")  # FedShift C9d: bound >= 512 x the gap
    assert vac.verdict == R.VACUOUS and "512" in vac.evidence
    assert R.bound_holds([1.0, 3.0], [1.5, 2.0], what="b").verdict == R.NOT_REPRODUCED
    assert R.bound_holds([1.0, float("nan")], [1.5, 2.0], what="b").verdict == R.NOT_TESTABLE
    assert R.bound_holds([1.0], [1e4], what="b", vacuous_factor=1e5).verdict == R.REPRODUCED
