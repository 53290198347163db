"""TACO's claims table on hand-built tables: each verdict follows from its rule, measured strings by hand."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from fedlib import report
from fedlib.claims.taco import claims
from fedlib.papers import taco as tp
from fedlib.papers.taco import Detection
from fedlib.targets import NEVER

ALGORITHMS = ["FedAvg", "FedProx", "FoolsGold", "Scaffold", "STEM", "FedACG", "TACO"]
OSCILLATION = ["TACO", "FedAvg", tp.UNIFORM_AGGREGATION, tp.PREVIOUS_WEIGHTS]
PARAMS = {"seeds": [0, 1, 2], "algorithms": ALGORITHMS, "rounds": 15, "margin_pts": 1.0, "target_acc": 0.75,
          "timing_repeats": 3, "timing_model": "taco_cnn", "timing_dataset": "mnist5k", "kappa": 0.6,
          "lambda_frac": 0.2, "n_freeloaders": 8, "kappa_grid": [0.6, 0.7, 0.8, 1.0], "lambda_fracs": [0.2],
          "ablation_seeds": [0, 1, 2], "ablation_partitions": ["groups"], "gamma_grid": [0.0, 0.01, 0.1, 1.0],
          "gamma_steps": [10], "extra_seeds": [0, 1, 2], "scal_clients": 100, "scal_dirichlet": 0.5, "scal_rounds": 10,
          "overcorrection_gamma": 3.0, "oscillation_algorithms": OSCILLATION, "oscillation_dataset": "digits",
          "oscillation_steps": 10, "oscillation_lr": 0.05, "oscillation_rounds": 15, "oscillation_seeds": [0, 1, 2]}
SEEDS = PARAMS["seeds"]


NOISE = 0.5  # % spread between timing repeats


def by_algorithm(column: str, values: dict[str, float]) -> pd.DataFrame:
    return pd.DataFrame({column: values}).rename_axis("algorithm")


def oscillation(swing: dict[str, list[float]], alternation: list[float]) -> pd.DataFrame:
    """Finding (a)'s rows: `swing[algorithm][seed]`; TACO's alternation per seed (the others' 0.5)."""
    return pd.DataFrame([{"algorithm": a, "seed": s, "first_round": 8, "swing": v, "final_acc": 60.0 + s,
                          "late_peak_acc": 75.0, "alternation": alternation[s] if a == "TACO" else 0.5}
                         for a, vs in swing.items() for s, v in enumerate(vs)])


def evidence() -> dict[str, Any]:
    """Tables on which every claim but none is reproduced (each test changes one)."""
    curves = pd.DataFrame([{"algorithm": a, "seed": s, "round": r, "test_acc": 0.5 if r == 1 else 0.8,
                            "test_loss": 1.0, "train_loss": 1.0} for a in ALGORITHMS for s in SEEDS for r in (1, 2)])
    rounds_to_target = {"TACO": [5, 6, 7], "FedAvg": [8, 9, 10]}
    return dict(
        num_classes=10, curves=curves,
        per_seed=pd.DataFrame([{"algorithm": a, "seed": s, "rounds_to_target": float(v)}
                               for a, vs in rounds_to_target.items() for s, v in enumerate(vs)]),
        table5=by_algorithm("acc_mean", {"FedAvg": 80.0, "FedProx": 75.0, "FoolsGold": 79.0, "Scaffold": 76.0,
                                         "STEM": 78.0, "FedACG": 81.0, "TACO": 85.0}),
        taco_final=pd.DataFrame({"w": [80.0, 81.0, 82.0], "z": [80.5, 81.0, 82.0]}, index=pd.Index(SEEDS, name="seed")),
        table1=by_algorithm("vs_fedavg_%", {"FedAvg": 0.0, "FedProx": 10.0, "FoolsGold": 0.5, "Scaffold": 8.0,
                                            "STEM": 100.0, "FedACG": 12.0, "TACO": 5.0}).assign(**{"noise_%": NOISE}),
        table2=pd.DataFrame({"mean": [0.2, 0.3, 0.4, 0.9]}, index=["A", "B", "C", "Freeloaders"]),
        live_detection=Detection(tpr=1.0, fpr=0.0, caught=8, freeloaders=8, misjudged=0, normal=12),
        table8=pd.DataFrame({"kappa": [0.6, 0.7, 0.8, 1.0], "lambda": "T*0.2", "TPR_%": [100.0, 100.0, 100.0, 0.0],
                             "FPR_%": [0.0, 0.0, 0.0, 0.0]}),
        table6=pd.DataFrame({"groups": [80.0, 81.0, 85.0, 86.0], "dirichlet": [82.0, 83.0, 87.0, 88.0],
                             "paper": ["a", "b", "c", "d"]},
                            index=["neither", "agg only", "corr only", "both"]),
        fig7=pd.DataFrame({"K": 10, "gamma": [0.0, 0.01, 0.1, 1.0], "final_acc": [70.0, 75.0, 85.0, 10.0],
                           "diverged": [False, False, False, True]}),
        fig6=pd.DataFrame({"original": [80.0, 80.0], "literal": [82.0, 79.0], "factor": [81.0, 83.0]},
                          index=["FedProx", "Scaffold"]),
        table7=by_algorithm("mean", {"FedAvg": 80.0, "Scaffold": 84.0, "TACO": 85.0}),
        overcorrection=pd.DataFrame({"diverged": [True, False], "final_acc": [10.0, 80.0],
                                     "final_test_loss": [np.inf, 0.5], "mean_alpha_last": [0.3, 0.6]},
                                    index=list(tp.OVERCORRECTION)),
        boundary=pd.DataFrame({"agree": [True, True, True, True]}),
        fixed_points=pd.DataFrame({"method": ["FedAvg", "constant", "tailored uniform", "TACO"],
                                   "prediction_error": [1e-6, 2e-6, 1e-6, 0.1], "excess_loss": [0.0, 0.0, 0.0, 0.5],
                                   "settled": [True, True, True, True]}),
        lemma_runs=pd.DataFrame({"lemma2_printed_residual": [0.5, 0.05], "lemma2_corrected_residual": [1e-8, 2e-8]}),
        y_gradients_equal=False,
        oscillation=oscillation({"TACO": [10.0, 12.0, 12.0], "FedAvg": [3.0, 3.0, 3.0], tp.UNIFORM_AGGREGATION: [2.0, 2.0, 2.0],
                                 tp.PREVIOUS_WEIGHTS: [2.5, 3.0, 3.0]}, alternation=[1.0, 0.9, 0.9]),
        theorem1=[("Theorem 1 (hand-built)", "holds", "2/2 rounds", report.criterion_met("holds", True))],
    )


CLAIMS = ["C1 ", "C2 ", "C3 ", "C4 ", "C5 ", "C6 ", "C7 ", "C8 ", "C9 ", "C2' ", "Over-correction", "Theory:", "Ours:",
          "Eq. 15", "Lemma 2", "Corollary 2", "Finding (a): Eq. 9", "Finding (a): weights", "Theorem 1 (hand-built)"]


def table(params: dict[str, Any] | None = None, **changes: Any) -> pd.DataFrame:
    return claims({**PARAMS, **(params or {})}, **{**evidence(), **changes}).table()


def row(t: pd.DataFrame, claim: str) -> pd.Series:
    hits = t[t["claim"].str.startswith(claim)]
    assert len(hits) == 1, claim
    return hits.iloc[0]


def test_every_claim_reproduced_in_the_notebooks_order_with_theorem1_last():
    t = table()
    assert [next(c for c in CLAIMS if claim.startswith(c)) for claim in t["claim"]] == CLAIMS
    assert t["verdict"].tolist() == [report.REPRODUCED] * len(CLAIMS)
    assert list(t.columns) == report.COLUMNS


def test_measured_strings_by_hand():
    t = table()
    assert row(t, "C1 ")["measured"] == "FedProx 75.00, Scaffold 76.00, FedAvg 80.00"
    assert row(t, "C2 ")["measured"] == "TACO 85.00 vs best baseline FedACG 81.00"
    assert row(t, "C4 ")["measured"] == "per 100 updates vs FedAvg: STEM +100.0%, TACO +5.0%, FedProx +10.0%"
    assert row(t, "C5 ")["measured"] == "A 0.20 < B 0.30 < C 0.40 < Freeloaders 0.90"
    # lambda = max(1, round(0.2 * 15)) = 3
    assert row(t, "C6 ")["measured"] == ("live (κ=0.6, λ=3): TPR 100%, FPR 0%; replay κ 0.6–0.8: TPR min 100%, "
                                         "FPR max 0%; κ=1: TPR max 0%")
    # means over the two partitions, the paper's column (last) left out: neither 81, agg only 82, corr only 86, both 87
    assert row(t, "C7 ")["measured"] == "corr +5.00, agg +1.00, both +6.00 points"
    assert row(t, "C8 ")["measured"] == "K=10: best γ=0.1 (85.0%); any divergence: True"
    assert row(t, "C9 ")["measured"] == "FedProx: best form +2.00 points, Scaffold: best form +3.00 points"
    assert row(t, "Theory:")["measured"].startswith("4/4 runs on the predicted side")
    # z: (80.5 + 81 + 82) / 3 = 81.17, w: 81
    assert row(t, "Eq. 15")["measured"] == "final accuracy z_T 81.17 vs w_T 81.00"
    assert row(t, "Finding (a): Eq. 9")["measured"] == ("swing TACO 11.3 vs uniform 2.0 points, alternation 0.93; "
                                                        "TACO peak/final 75.0/61.0")  # (10+12+12)/3, (1+.9+.9)/3, (60+61+62)/3
    assert row(t, "Finding (a): Eq. 9")["evidence"] == "digits, K = 10, eta_l = 0.05, rounds 8-15, seeds [0, 1, 2]"
    assert row(t, "C1 ")["evidence"] == "3 seed(s) x 7 algorithms, main split, T = 15; below: FedProx, Scaffold"


def test_c1_one_baseline_below_is_partly_and_a_missing_one_not_testable():
    t5 = evidence()["table5"]
    assert row(table(table5=t5.assign(acc_mean=t5["acc_mean"].replace({76.0: 79.5}))), "C1 ")["verdict"] == report.PARTLY
    t = table(table5=t5.assign(acc_mean=t5["acc_mean"].where(t5.index != "Scaffold")))  # Scaffold not run: NaN
    assert row(t, "C1 ")["verdict"] == report.NOT_TESTABLE
    assert "needs Scaffold" in row(t, "C1 ")["criterion"]


def test_c2_taco_behind_a_baseline_is_not_reproduced_and_a_diverged_taco_run_voids_it():
    t5 = evidence()["table5"]
    assert row(table(table5=t5.assign(acc_mean=t5["acc_mean"].replace({85.0: 80.5}))), "C2 ")["verdict"] == \
        report.NOT_REPRODUCED
    assert row(table(table5=t5.assign(acc_mean=t5["acc_mean"].replace({85.0: 80.9}))), "C2 ")["verdict"] == \
        report.NOT_REPRODUCED  # above FedAvg by less than margin_pts: a tie, so not even partly
    curves = evidence()["curves"]
    curves.loc[(curves["algorithm"] == "TACO") & (curves["seed"] == 2), "train_loss"] = np.nan
    t = table(curves=curves)
    assert row(t, "C2 ")["verdict"] == report.DIVERGED
    assert "algorithm=TACO seed=2" in row(t, "C2 ")["evidence"]


def test_c3_a_taco_run_that_never_reaches_the_target_counts_as_worse():
    per_seed = evidence()["per_seed"]
    per_seed.loc[(per_seed["algorithm"] == "TACO") & (per_seed["seed"] > 0), "rounds_to_target"] = NEVER
    r = row(table(per_seed=per_seed), "C3 ")
    assert r["verdict"] == report.NOT_REPRODUCED
    assert r["measured"] == "per seed TACO 5, inf, inf vs FedAvg 8, 9, 10 rounds (inf: never)"
    assert "TACO reached it in 1/3, FedAvg in 3/3" in r["evidence"]  # counted, not dropped
    assert row(table(per_seed=per_seed[per_seed["algorithm"] != "FedAvg"]), "C3 ")["verdict"] == report.NOT_TESTABLE
    curves = evidence()["curves"]
    curves.loc[(curves["algorithm"] == "FedAvg") & (curves["round"] == 2), "test_acc"] = 0.1  # at chance
    assert row(table(curves=curves), "C3 ")["verdict"] == report.DIVERGED


def test_c4_taco_dearer_than_scaffold_is_partly_and_stem_not_highest_is_not_reproduced():
    t1 = evidence()["table1"]
    assert row(table(table1=t1.replace({5.0: 9.0})), "C4 ")["verdict"] == report.PARTLY
    assert row(table(table1=t1.replace({12.0: 150.0})), "C4 ")["verdict"] == report.NOT_REPRODUCED
    assert row(table(table1=t1.drop("STEM")), "C4 ")["verdict"] == report.NOT_TESTABLE


def test_c4_needs_gaps_above_the_noise_between_timing_repeats():
    t1 = evidence()["table1"]
    # TACO 9% vs SCAFFOLD 8%: a 1-point gap inside 2% noise cannot order them (the flip between executions)
    noisy = t1.replace({5.0: 9.0}).assign(**{"noise_%": 2.0})
    assert row(table(table1=noisy), "C4 ")["verdict"] == report.INCONCLUSIVE
    assert row(table(table1=t1.drop(columns="noise_%")), "C4 ")["verdict"] == report.NOT_TESTABLE
    one_repeat = {**PARAMS, "timing_repeats": 1}
    assert row(claims(one_repeat, **evidence()).table(), "C4 ")["verdict"] == report.NOT_TESTABLE


def test_one_seed_secondary_cells_and_an_unsettled_fixed_point_decide_nothing():
    one_seed = {**PARAMS, "extra_seeds": [0]}
    assert row(claims(one_seed, **evidence()).table(), "C2' ")["verdict"] == report.NOT_TESTABLE
    fp = evidence()["fixed_points"].assign(settled=[True, True, True, False])
    assert row(table(fixed_points=fp), "Ours:")["verdict"] == report.INCONCLUSIVE


def test_c5_and_c6_partly():
    t2 = pd.DataFrame({"mean": [0.3, 0.2, 0.4, 0.9]}, index=["A", "B", "C", "Freeloaders"])
    assert row(table(table2=t2), "C5 ")["verdict"] == report.PARTLY
    t2 = pd.DataFrame({"mean": [0.2, 0.3, 0.95, 0.9]}, index=["A", "B", "C", "Freeloaders"])
    assert row(table(table2=t2), "C5 ")["verdict"] == report.NOT_REPRODUCED
    live = Detection(tpr=1.0, fpr=1 / 12, caught=8, freeloaders=8, misjudged=1, normal=12)
    assert row(table(live_detection=live), "C6 ")["verdict"] == report.PARTLY
    no_catch = Detection(tpr=0.0, fpr=0.0, caught=0, freeloaders=8, misjudged=0, normal=12)
    assert row(table(live_detection=no_catch), "C6 ")["verdict"] == report.NOT_REPRODUCED
    t8 = evidence()["table8"]
    assert row(table(table8=t8.assign(**{"TPR_%": [100.0, 100.0, 100.0, 50.0]})), "C6 ")["verdict"] == report.PARTLY


def test_c7_c8_c9_fail_and_partly():
    t6 = evidence()["table6"].assign(groups=[80.0, 86.0, 85.0, 86.0], dirichlet=[82.0, 88.0, 87.0, 88.0])  # agg gains more
    assert row(table(table6=t6), "C7 ")["verdict"] == report.NOT_REPRODUCED
    fig7 = evidence()["fig7"]
    assert row(table(fig7=fig7.assign(diverged=False)), "C8 ")["verdict"] == report.PARTLY
    assert row(table(fig7=fig7.assign(final_acc=[70.0, 90.0, 85.0, 10.0], diverged=False)), "C8 ")["verdict"] == \
        report.NOT_REPRODUCED
    fig6 = evidence()["fig6"].assign(factor=[81.0, 80.5])  # Scaffold gains 0.5 < margin_pts
    assert row(table(fig6=fig6), "C9 ")["verdict"] == report.PARTLY


def test_c2_prime_without_taco_is_not_testable_and_within_margin_is_partly():
    assert row(table(table7=by_algorithm("mean", {"FedAvg": 80.0, "Scaffold": 84.0})), "C2' ")["verdict"] == \
        report.NOT_TESTABLE
    t7 = by_algorithm("mean", {"FedAvg": 80.0, "Scaffold": 84.5, "TACO": 84.0})
    assert row(table(table7=t7), "C2' ")["verdict"] == report.PARTLY


def test_theory_rows_fail_when_their_evidence_does():
    oc = evidence()["overcorrection"].assign(diverged=[True, True])
    assert row(table(overcorrection=oc), "Over-correction")["verdict"] == report.NOT_REPRODUCED
    assert row(table(boundary=pd.DataFrame({"agree": [True, True, True, False]})), "Theory:")["verdict"] == \
        report.PARTLY
    fp = evidence()["fixed_points"].assign(excess_loss=[0.5, 0.0, 0.0, 0.1])
    assert row(table(fixed_points=fp), "Ours:")["verdict"] == report.PARTLY
    lemma = pd.DataFrame({"lemma2_printed_residual": [0.5, 0.2], "lemma2_corrected_residual": [1e-8, 2e-8]})
    assert row(table(lemma_runs=lemma), "Lemma 2")["verdict"] == report.NOT_REPRODUCED
    assert row(table(y_gradients_equal=True), "Corollary 2")["verdict"] == report.NOT_REPRODUCED


def test_eq15_z_behind_w_fails_and_no_taco_is_not_testable():
    tf = evidence()["taco_final"].assign(z=[78.0, 79.0, 80.0])
    assert row(table(taco_final=tf), "Eq. 15")["verdict"] == report.NOT_REPRODUCED
    t = table({"algorithms": ALGORITHMS[:-1]}, taco_final=pd.DataFrame(columns=["w", "z"], dtype=float))
    assert row(t, "Eq. 15")["verdict"] == report.NOT_TESTABLE
    assert "needs TACO" in row(t, "Eq. 15")["criterion"]


def test_finding_a_cycle_in_one_seed_is_partly_and_lagged_weights_that_swing_fail():
    osc = oscillation({"TACO": [10.0, 3.0, 3.0], tp.UNIFORM_AGGREGATION: [2.0, 2.0, 2.0], tp.PREVIOUS_WEIGHTS: [2.5, 2.0, 2.0]},
                      alternation=[1.0, 0.9, 0.9])
    assert row(table(oscillation=osc), "Finding (a): Eq. 9")["verdict"] == report.PARTLY
    osc = oscillation({"TACO": [10.0, 12.0, 12.0], tp.UNIFORM_AGGREGATION: [2.0, 2.0, 2.0], tp.PREVIOUS_WEIGHTS: [2.5, 8.0, 8.0]},
                      alternation=[1.0, 0.9, 0.9])
    assert row(table(oscillation=osc), "Finding (a): weights")["verdict"] == report.PARTLY  # below Eq. 9's
    osc = oscillation({"TACO": [10.0, 12.0, 12.0], tp.UNIFORM_AGGREGATION: [2.0, 2.0, 2.0], tp.PREVIOUS_WEIGHTS: [2.5, 13.0, 13.0]},
                      alternation=[1.0, 0.9, 0.9])
    assert row(table(oscillation=osc), "Finding (a): weights")["verdict"] == report.NOT_REPRODUCED


@pytest.mark.parametrize("left_out", [tp.UNIFORM_AGGREGATION, tp.PREVIOUS_WEIGHTS])
def test_finding_a_without_its_variants_is_not_testable(left_out):
    kept = [a for a in OSCILLATION if a != left_out]
    osc = evidence()["oscillation"]
    t = table({"oscillation_algorithms": kept}, oscillation=osc[osc["algorithm"] != left_out])
    expected = [report.NOT_TESTABLE if left_out == tp.UNIFORM_AGGREGATION else report.REPRODUCED, report.NOT_TESTABLE]
    assert [row(t, c)["verdict"] for c in ("Finding (a): Eq. 9", "Finding (a): weights")] == expected
    assert row(t, "Finding (a): weights")["measured"] == ""


def test_one_seed_point_comparisons_are_not_testable():
    """C7 and finding (a) compare means: on one seed (the quick profile) they cannot order anything."""
    osc = evidence()["oscillation"]
    t = table({"ablation_seeds": [0], "oscillation_seeds": [0]}, oscillation=osc[osc["seed"] == 0])
    for claim in ("C7", "Finding (a): Eq. 9", "Finding (a): weights"):
        assert row(t, claim)["verdict"] == report.NOT_TESTABLE, claim
        assert "needs >= 3 seeds" in row(t, claim)["criterion"]
