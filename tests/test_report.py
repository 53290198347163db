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


# ------------------------------------------------------------------------------------- censored rounds
def test_runs_that_never_arrive_are_counted_not_dropped():
    # A reaches the target quickly on one seed and never on the other two: its mean over the runs that
    # arrived (10) beats B's (25), but A counts on 1 seed of 3.
    a, b = [10, NEVER, NEVER], [20, 25, 30]
    assert np.mean([v for v in a if v < NEVER]) < np.mean(b)
    j = R.reaches_sooner(a, b, names=("A", "B"), margin=0.1)
    assert j.verdict == R.INCONCLUSIVE  # A censored: the sign test, which 3 seeds never decide at 5%
    assert "A reached it on 1/3 seeds, B on 3/3" in j.evidence and "A below 0.9 x B on 1 of 3 seeds" in j.evidence
    # on five seeds the same pattern refutes the claim: A never counts on 5 of 5
    assert R.reaches_sooner([NEVER] * 5, [20] * 5, margin=0.1).verdict == R.NOT_REPRODUCED


def test_taco_c3_case_from_the_issue_is_inconclusive_not_reproduced():
    # FedAvg peaking at 0.8472 against a 0.85 target on one seed: TACO 18 vs never, 23 vs 21, never vs never
    j = R.reaches_sooner([18, 23, NEVER], [NEVER, 21, NEVER], names=("TACO", "FedAvg"), margin=0.1)
    assert j.verdict == R.INCONCLUSIVE and "on 1 of 3 seeds" in j.evidence
    # 2 of 3 seeds sooner, the old vote's "reproduced": still inconclusive, with the seeds that would decide it
    two = R.reaches_sooner([18, 20, NEVER], [NEVER, 23, NEVER], margin=0.1)
    assert two.verdict == R.INCONCLUSIVE and "smallest p with 3 seeds is 0.12" in two.evidence
    assert "seeds would decide" in two.evidence


def test_the_margin_decides_what_a_seed_counts_for():
    # by hand: 19 < 0.9 x 22 = 19.8 counts, 20 does not; five seeds all counting: p = 1/32 < 0.05 (equal ratios on
    # every seed leave the t test no spread: the sign test decides)
    assert R.reaches_sooner([19] * 5, [22] * 5, margin=0.1).verdict == R.REPRODUCED
    assert R.reaches_sooner([20] * 5, [22] * 5, margin=0.1).verdict == R.NOT_REPRODUCED
    assert R.reaches_sooner([20] * 5, [22] * 5, margin=0.0).verdict == R.REPRODUCED
    j = R.reaches_sooner([19] * 5, [22] * 5, margin=0.1)
    assert "p = 0.031 (sooner, sign test)" in j.evidence
    with pytest.raises(ValueError, match="margin"):
        R.reaches_sooner([1, 2, 3], [1, 2, 3], margin=1.0)


def test_reaches_sooner_works_with_fedlib_targets():
    fast = runs(m=[0.2, 0.9, 0.9])
    never = runs(m=[0.2, 0.3, 0.4])
    a = [rounds_to_target(fast, 0.85)] * 5
    b = [rounds_to_target(never, 0.85)] * 5
    assert R.reaches_sooner(a, b, margin=0.1).verdict == R.REPRODUCED
    assert R.reaches_sooner(b, a, margin=0.1).verdict == R.NOT_REPRODUCED
    with pytest.raises(ValueError, match="paired"):
        R.reaches_sooner([1, 2], [1], margin=0.1)


def test_reaches_sooner_refuses_negative_costs():
    j = R.reaches_sooner([-5.0, 1.0, 2.0], [3.0, 4.0, 5.0], quantity="energy", margin=0.05)
    assert j.verdict == R.IMPOSSIBLE and "negative energy" in j.evidence


# ---------------------------------------------------------------------------------------- paired gains
def test_paired_rule_refutes_a_gain_clearly_below_its_floor_and_leaves_a_noise_level_one_open():
    # FedShift C7's case: +0.07 +/- 0.25 (SE) over 54 gains against a floor of 1 point: below it, clearly
    rng = np.random.default_rng(0)
    g = rng.standard_normal(54)
    g = (g - g.mean()) / g.std(ddof=1) * 0.25 * np.sqrt(54) + 0.07
    for test in ("wilcoxon", "t"):
        assert R.paired_gain(g, threshold=1.0, test=test).verdict == R.NOT_REPRODUCED
    j = R.paired_gain(g, threshold=0.0, test="t")
    assert j.verdict == R.INCONCLUSIVE and "+0.07" in j.evidence and "54 seeds" in j.evidence
    assert "paired t test" in j.criterion and "seeds would decide it" in j.evidence


def test_quickstart_q1_case_from_the_issue_is_inconclusive():
    # SCAFFOLD ahead of FedAvg on 3/3 seeds, 90% CI of the gain [-3.0, +11.1] points around a -1 point floor
    j = R.paired_gain([0.005, 0.03, 0.078], threshold=-0.01, test="t")
    assert j.verdict == R.INCONCLUSIVE and "3 positive" in j.evidence


def test_paired_rule_accepts_a_clear_gain_and_states_cells():
    g = np.array([2.1, 3.5, 1.2, 4.0, 2.8, 3.3, 1.9, 2.5])
    assert R.paired_gain(g, threshold=0.0).verdict == R.REPRODUCED
    assert R.paired_gain(g, threshold=5.0).verdict == R.NOT_REPRODUCED  # the floor is the null
    assert R.paired_gain(g, threshold=0.0, cells=[3.0, -0.5]).verdict == R.PARTLY
    assert R.paired_gain(g, threshold=0.0, cells=[3.0, 0.5]).verdict == R.REPRODUCED
    with pytest.raises(TypeError, match="threshold"):
        R.paired_gain(g)  # no rule defaults to a zero floor


def test_paired_rule_with_too_few_pairs_is_inconclusive_or_not_testable():
    # four pairs can never give a one-sided Wilcoxon p below 1/16 > 0.05
    four = R.paired_gain([5.0, 6.0, 7.0, 8.0], threshold=0.0, test="wilcoxon")
    assert four.verdict == R.INCONCLUSIVE and "the test needs >= 5" in four.evidence
    assert R.paired_gain([5.0, 6.0, 7.0, 8.0, 9.0], threshold=0.0).verdict == R.REPRODUCED
    assert R.paired_gain([0.05], threshold=0.0, test="t").verdict in R.NOT_TESTABLE
    assert R.paired_gain([0.05, 0.05, 0.05], threshold=0.0, test="t").verdict == R.INCONCLUSIVE  # the sign test
    assert R.paired_gain([0.05, 0.06], threshold=0.0, test="t").verdict == R.INCONCLUSIVE  # 2 pairs
    assert R.paired_gain([0.05, 0.06, 0.055], threshold=0.0, test="t").verdict == R.REPRODUCED
    with pytest.raises(ValueError, match="test"):
        R.paired_gain([1.0] * 10, threshold=0.0, test="sign")


def test_seeds_to_decide_by_hand():
    # distance = spread: n >= (t_(0.95, n-1) + 0.8416)^2; n = 8: t = 1.895, (2.736)^2 = 7.49 <= 8; n = 7: 8.0 > 7
    assert R.seeds_to_decide(1.0, 1.0, 0.05) == 8
    assert R.seeds_to_decide(0.0, 1.0, 0.05) is None
    assert R.seeds_to_decide(1.0, 0.0, 0.05) == 3
    # sign test: a share of 1 needs 5 seeds (p = 1/32); at 4 the smallest p is 1/16
    assert R.sign_seeds_to_decide(1.0, 0.05) == 5
    assert R.sign_seeds_to_decide(0.5, 0.05) is None
    assert R.sign_seeds_to_decide(0.0, 0.05) == 5  # deciding the other way
    assert R.sign_seeds_to_decide(2 / 3, 0.05) > 5


def test_paired_equivalence():
    assert R.paired_equivalence([0.004, -0.003, 0.001, 0.002], margin=0.02).verdict == R.REPRODUCED
    assert R.paired_equivalence([0.05, 0.06, 0.04], margin=0.02).verdict == R.NOT_REPRODUCED
    open_ = R.paired_equivalence([0.3, -0.3, 0.2, -0.2], margin=0.02)  # noisy: no power
    assert open_.verdict == R.INCONCLUSIVE and "seeds would decide" in open_.evidence
    assert R.paired_equivalence([0.0], margin=0.02).verdict in R.NOT_TESTABLE


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
    assert R.not_testable(R.OTHER_SCALE, "needs CIFAR-10").verdict in R.NOT_TESTABLE
    assert R.criterion_met("all", False, partly=True).verdict == R.PARTLY
    assert R.criterion_met("all", False).verdict == R.NOT_REPRODUCED
    with pytest.raises(ValueError, match="verdict"):
        Judgement("maybe", "", "")


# ------------------------------------------------------------------------------- claims and REPORT.md
def test_claims_table_and_report_show_criterion_and_evidence(tmp_path):
    claims = Claims()
    claims.add("a | b", 1, 2, R.paired_gain([1.0, 2.0, 3.0, 2.0, 1.5], threshold=0.0, evidence="5 seeds"))
    claims.add("c", 7.78, 7.78, R.arithmetic_check(7.78, 7.78))
    with pytest.raises(TypeError, match="rule"):
        claims.add("x", 1, 2, "reproduced")
    assert list(claims.table().columns) == ["claim", "paper_value", "measured", "criterion", "evidence", "p_value",
                                            "seeds", "verdict"]
    (tmp_path / "nb").mkdir()
    claims.save(tmp_path / "nb")
    report = collect_report(tmp_path)
    assert "| claim | paper_value | measured | criterion | evidence | p_value | seeds | verdict |" in report
    assert "## nb" in report and "a \\| b" in report and "reproduced: 1" in report
    assert "not a refutation" in report and "Scale: not recorded" in report
    assert "paired t test" in report and "5 seeds; mean gain +1.9" in report
    assert "arithmetic check: agrees: 1" in report
    with pytest.raises(FileNotFoundError, match="make reproduce"):
        collect_report(tmp_path / "empty")


def test_equivalence_needs_three_pairs():
    from fedlib.report import NOT_TESTABLE, paired_equivalence

    assert paired_equivalence([0.001, 0.001], margin=0.02).verdict in NOT_TESTABLE  # two pairs
    assert paired_equivalence([0.001] * 5, margin=0.02).verdict not in NOT_TESTABLE  # no spread: the sign test
    assert paired_equivalence([0.001, -0.002, 0.0015, 0.0], margin=0.02).verdict not in NOT_TESTABLE


@pytest.mark.parametrize("n", [2, 3, 4, 5, 6])
def test_equal_values_are_decided_by_the_exact_sign_test(n):
    # By hand: n equal values on one side of the floor (or of both bounds): that side's one-sided sign test gives
    # P(all n on it | one half) = 2**-n, the other side 1; alpha = 0.05 is reached from 5 seeds on (1/32)
    decides = 0.5 ** n < R.ALPHA
    up = R.paired_gain([0.05] * n, threshold=0.0)
    assert (up.p_value, up.p_against, up.seeds) == (0.5 ** n, 1.0, n)
    assert up.verdict == (R.REPRODUCED if decides else R.INCONCLUSIVE) and "exact sign test" in up.evidence
    down = R.paired_gain([-0.05] * n, threshold=0.0)
    assert (down.p_value, down.p_against) == (1.0, 0.5 ** n)
    assert down.verdict == (R.NOT_REPRODUCED if decides else R.INCONCLUSIVE)
    if n >= 3:  # the TOST needs three pairs
        inside = R.paired_equivalence([0.001] * n, margin=0.02)
        assert (inside.p_value, inside.p_against) == (0.5 ** n, 1.0)
        assert inside.verdict == (R.REPRODUCED if decides else R.INCONCLUSIVE)
        for outside in ([0.05] * n, [-0.2] * n, [0.3] * n):
            j = R.paired_equivalence(outside, margin=0.02, lower=-0.1)
            assert (j.p_value, j.p_against) == (1.0, 0.5 ** n), outside
            assert j.verdict == (R.NOT_REPRODUCED if decides else R.INCONCLUSIVE)
    if not decides:
        assert f"smallest p with {n} seeds" in up.evidence and "needs >= 5" in up.evidence
        assert "about 5 independent seeds would decide it" in up.evidence


def test_equal_values_on_the_floor_or_a_bound_count_against_both_sides():
    for j in (R.paired_gain([0.0] * 6, threshold=0.0), R.paired_gain([0.2] * 6, threshold=0.2),
              R.paired_equivalence([0.02] * 6, margin=0.02), R.paired_equivalence([-0.1] * 6, margin=0.02, lower=-0.1)):
        assert (j.verdict, j.p_value, j.p_against) == (R.INCONCLUSIVE, 1.0, 1.0), j
        assert "no number of seeds would decide it" in j.evidence


def test_equal_values_under_the_wilcoxon_test_or_on_a_bounded_scale_keep_their_own_rule():
    # the signed-rank test handles ties itself (zsplit), and on a bounded scale equal values beyond the floor decide
    assert "sign test" not in R.paired_gain([0.05] * 6, threshold=0.0, test="wilcoxon").evidence
    bounded = R.paired_gain([1.0] * 3, threshold=0.5, bounded=True)
    assert bounded.verdict == R.REPRODUCED and "sign test" not in bounded.evidence


def test_paired_gain_with_a_nan_or_inf_gain_is_not_testable():
    for bad in (float("nan"), float("inf"), -float("inf")):
        j = R.paired_gain([0.1, 0.12, bad, 0.11, 0.09], threshold=0.0, test="t")
        assert j.verdict in R.NOT_TESTABLE and "NaN/inf" in j.evidence
    assert R.paired_gain([float("nan")] * 6, threshold=0.0).verdict in R.NOT_TESTABLE
    assert R.paired_gain([0.1] * 6, threshold=0.0, cells=[0.1, float("nan")]).verdict in R.NOT_TESTABLE


def test_wilcoxon_counts_zero_gains():
    # 20 ties and 5 tiny gains: dropping the zeros would make this "reproduced" (p = 1/32); split, p > 0.05
    assert R.paired_gain([0.0] * 20 + [0.01] * 5, threshold=0.0, test="wilcoxon").verdict not in R.POSITIVE
    assert R.paired_gain([0.01] * 6, threshold=0.0, test="wilcoxon").verdict == R.REPRODUCED  # p = 2**-6 with no zeros


def test_reaches_sooner_needs_independent_pairs_and_no_nan():
    one = R.reaches_sooner([9], [11], names=("TACO", "FedAvg"), margin=0.1)
    assert one.verdict in R.NOT_TESTABLE and "1 pairs" in one.evidence
    assert R.reaches_sooner([9, 10], [11, 12], margin=0.1).verdict in R.NOT_TESTABLE
    nan = R.reaches_sooner([9, float("nan"), 8], [11, 12, 13], margin=0.1)
    assert nan.verdict in R.NOT_TESTABLE and "missing" in nan.evidence
    assert R.reaches_sooner([9, 10], [11, 12], min_pairs=2, margin=0.1).verdict == R.INCONCLUSIVE


def test_underpowered_tost_is_inconclusive_not_not_reproduced():
    # FedShift G2 at quick: mean +0.02, SE ~0.2 over 4 pairs, margin 0.02: the CI straddles the margin
    j = R.paired_equivalence([0.4, -0.35, 0.3, -0.27], margin=0.02)
    assert j.verdict == R.INCONCLUSIVE and "CI" in j.evidence
    # a tight interval wholly outside the margin is a real difference
    assert R.paired_equivalence([0.05, 0.06, 0.055, 0.052], margin=0.02).verdict == R.NOT_REPRODUCED
    assert R.paired_equivalence([0.001, float("nan"), 0.0, 0.002], margin=0.02).verdict in R.NOT_TESTABLE


def test_bound_holds_tight_vacuous_broken_and_missing():
    assert R.bound_holds([1.0, 2.0], [1.5, 2.1], what="b").verdict == R.REPRODUCED
    vac = R.bound_holds([1.0, 2.0], [512.0, 1024.0], what="b")  # FedShift C9d: bound >= 512 x the gap
    assert vac.verdict == R.VACUOUS and "512" in vac.evidence
    assert R.bound_holds([1.0, 3.0], [1.5, 2.0], what="b").verdict == R.NOT_REPRODUCED
    assert R.bound_holds([1.0, float("nan")], [1.5, 2.0], what="b").verdict in R.NOT_TESTABLE
    assert R.bound_holds([1.0], [1e4], what="b", vacuous_factor=1e5).verdict == R.REPRODUCED


def test_vacuous_if_labels_a_bound_that_holds_only_by_more_than_the_factor():
    held = R.criterion_met("the bound holds", True)
    # bound / measured = 150 and 200 everywhere (> 100): vacuous; 150 and 50: tight at the second point
    vac = R.vacuous_if(held, [1.0, 2.0], [150.0, 400.0], what="b")
    assert vac.verdict == R.VACUOUS and "smallest bound / measured 150" in vac.evidence
    tight = R.vacuous_if(held, [1.0, 2.0], [150.0, 100.0], what="b")
    assert tight.verdict == R.REPRODUCED and "smallest bound / measured 50" in tight.evidence
    partly = R.criterion_met("the bound holds", False, partly=True)
    assert R.vacuous_if(partly, [1.0], [1e3], what="b").verdict == R.VACUOUS
    failed = R.criterion_met("the bound holds", False)
    assert R.vacuous_if(failed, [1.0], [1e3], what="b") == failed  # a failed bound is not relabelled


# ------------------------------------------------------------------------------ decidable by construction
def test_uncensored_energies_are_tested_on_log_ratios_at_three_seeds():
    # FedAQ C2 at the gpu scale (committed ledger): 39.3 / 33.5 / 41.8 % less energy, nothing censored. By hand:
    # log ratios log(0.607), log(0.665), log(0.582) = -0.499, -0.408, -0.541, mean -0.483, SD 0.068, against
    # log(0.95) = -0.0513: t = (-0.483 + 0.0513) / (0.068 / sqrt 3) = -11.0 on 2 df, one-sided p = 0.004
    j = R.reaches_sooner([60.7, 66.5, 58.2], [100.0, 100.0, 100.0], names=("fedaq", "fixed8"), margin=0.05)
    assert j.verdict == R.REPRODUCED and j.seeds == 3 and 0.003 < j.p_value < 0.005
    # the mirror image: FedAQ spending 1.5-1.7 x as much reads "not reproduced" on the same three seeds
    assert R.reaches_sooner([165.0, 150.0, 171.0], [100.0] * 3, margin=0.05).verdict == R.NOT_REPRODUCED


def test_a_censored_arm_is_counted_at_its_end_only_where_that_is_conservative():
    # B never reaches the target on seed 2: at its end (40 rounds) it is a lower bound, so "A sooner" stays a t test
    j = R.reaches_sooner([10, 11, 12], [30, NEVER, 33], margin=0.1, horizon=([40] * 3, [40] * 3))
    assert j.verdict == R.REPRODUCED and "(sooner, t test)" in j.evidence
    # A never reaching it on a seed leaves "A sooner" to the sign test: with 3 seeds it cannot reach 0.05
    k = R.reaches_sooner([10, NEVER, 12], [30, 31, 33], margin=0.1, horizon=([40] * 3, [40] * 3))
    assert k.verdict == R.INCONCLUSIVE and "(sooner, sign test)" in k.evidence and f">= {R.SIGN_SEEDS}" in k.evidence
    # neither arm ever reaching it is its own cause, not "not reproduced"
    both = R.reaches_sooner([NEVER] * 5, [NEVER] * 5, margin=0.1)
    assert both.verdict == R.NEITHER_REACHES


def test_smallest_attainable_p():
    assert R.smallest_p("sign", 3) == 0.125 and R.smallest_p("sign", 5) == 1 / 32
    assert R.smallest_p("t", 3) == 0.0 and R.smallest_p("t", 2) == 1.0
    with pytest.raises(ValueError, match="test must be"):
        R.smallest_p("z", 3)


def test_all_hold_is_an_intersection_union_test_with_bonferroni_against():
    up = R.paired_gain([1.0, 1.2, 1.1], threshold=0.0)  # p ~ 0.004 for
    open_ = R.paired_gain([0.1, -0.1, 0.05], threshold=0.0)
    down = R.paired_gain([-1.0, -1.2, -1.1], threshold=0.0)  # p ~ 0.004 against
    assert R.all_hold([("a", up), ("b", up)], what="both").verdict == R.REPRODUCED
    assert R.all_hold([("a", up), ("b", open_)], what="both").verdict == R.INCONCLUSIVE
    assert R.all_hold([("a", up), ("b", open_)], what="both", partly=True).verdict == R.PARTLY
    assert R.all_hold([("a", up), ("b", down)], what="both").verdict == R.NOT_REPRODUCED
    # an opposite test at 0.03 rejects alone (< 0.05) but not at 0.05 / 2 (Bonferroni over two)
    weak = R.Judgement(R.NOT_REPRODUCED, "c", "e", p_value=0.97, p_against=0.03, seeds=3)
    assert R.all_hold([("a", open_), ("b", weak)], what="both").verdict == R.INCONCLUSIVE
    missing = R.paired_gain([1.0, float("nan"), 1.1], threshold=0.0)
    assert R.all_hold([("a", up), ("b", missing)], what="both").verdict == R.NOT_COMPUTED


def test_any_holds_is_a_union_test_at_alpha_over_k_and_its_opposite_an_intersection_union():
    """The dual of all_hold: one test at alpha / k suffices for "reproduced"; every opposite test at alpha for "not
    reproduced"; a p-value of 0.03 for passes alone (< 0.05) but not one of two (0.06 after Bonferroni)."""
    one = R.Judgement(R.REPRODUCED, "c", "e", p_value=0.03, p_against=0.97, seeds=3)
    strong = R.Judgement(R.REPRODUCED, "c", "e", p_value=0.01, p_against=0.99, seeds=3)
    against = R.Judgement(R.NOT_REPRODUCED, "c", "e", p_value=0.96, p_against=0.04, seeds=3)
    assert R.any_holds([("a", one)], what="one").verdict == R.REPRODUCED
    assert R.any_holds([("a", one), ("b", against)], what="either").verdict == R.INCONCLUSIVE
    found = R.any_holds([("a", strong), ("b", against)], what="either")
    assert (found.verdict, found.p_value, found.p_against) == (R.REPRODUCED, 0.02, 0.99)
    assert R.any_holds([("a", against), ("b", against)], what="either").verdict == R.NOT_REPRODUCED
    # as a part of all_hold, its p-values carry the correction: 2 x 0.03 = 0.06 is not below 0.05
    assert R.all_hold([("x", R.any_holds([("a", one), ("b", one)], what="either"))], what="all").verdict == \
        R.INCONCLUSIVE
    missing = R.paired_gain([1.0, float("nan"), 1.1], threshold=0.0)
    assert R.any_holds([("a", strong), ("b", missing)], what="either").verdict == R.NOT_COMPUTED


def test_not_testable_names_its_cause():
    assert R.not_testable(R.NOT_COMPUTED, "every run").verdict == "not testable: runs not computed yet"
    with pytest.raises(ValueError, match="cause must be one of"):
        R.not_testable("not testable at this scale", "why")
    assert len(set(R.NOT_TESTABLE)) == len(R.NOT_TESTABLE) == 5
