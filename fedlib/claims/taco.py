"""TACO's claims table (notebooks/taco.py): the paper's claims C1-C9 and C2', the over-correction run, the
quadratic theory, Eq. 15, Lemma 2, Corollary 2, finding (a) and Theorem 1, judged by the rules in
`fedlib.report` on the tables the notebook computes.

Accuracy differences below `params["margin_pts"]` points count as ties; claims on the main runs are void if a
run they rest on diverged (`Judgement.unless_diverged`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fedlib import report
from fedlib.papers import taco as tp
from fedlib.papers.taco import Detection, missing
from fedlib.report import Claims, Judgement


def claims(params: Mapping[str, Any], *, num_classes: int, curves: pd.DataFrame, per_seed: pd.DataFrame,
           table5: pd.DataFrame, taco_final: pd.DataFrame, table1: pd.DataFrame, table2: pd.DataFrame,
           live_detection: Detection, table8: pd.DataFrame, table6: pd.DataFrame, fig7: pd.DataFrame,
           fig6: pd.DataFrame, table7: pd.DataFrame, overcorrection: pd.DataFrame, boundary: pd.DataFrame,
           fixed_points: pd.DataFrame, lemma_runs: pd.DataFrame, y_gradients_equal: bool,
           oscillation: pd.DataFrame, theorem1: Sequence[tuple[str, str, str, Judgement]]) -> Claims:
    """The claims table, one row per claim in the notebook's order.

    `params`: the notebook's parameters. Main runs: `curves` (per-round records, by algorithm and seed),
    `per_seed` (one row per algorithm and seed with `rounds_to_target`, `fedlib.targets.NEVER` if never
    reached), `table5` (`acc_mean` per algorithm; NaN for one not run), `taco_final` (TACO's final accuracy
    per seed, columns "w" and "z"; empty if TACO was not run). `table1`: `vs_fedavg_%` per algorithm.
    `table2`: mean alpha per group (A, B, C, Freeloaders). `live_detection`: the live expulsion run's rates;
    `table8`: replayed TPR_% / FPR_% per kappa and lambda. `table6`: final accuracy per ablation variant and
    partition, the paper's column last. `fig7`: per K and gamma, `final_acc` and `diverged`. `fig6`: final
    accuracy per plugged method and form (original, literal, factor). `table7`: `mean` per algorithm of the
    scalability runs. `overcorrection`: the uniform row, then the tailored one (`diverged`, `final_acc`,
    `final_test_loss`, `mean_alpha_last`). Theory: `boundary` (`agree` per run), `fixed_points` (rows
    FedAvg, constant correction, -, TACO), `lemma_runs` (residuals per round), `y_gradients_equal` (is
    dY_t/dalpha_i the same for every client), `theorem1` (theory.taco.theorem1_claims' rows, added last).
    `oscillation`: finding (a)'s rows per algorithm and seed (`tp.oscillation_rows`).
    """
    p = params
    margin_pts = p["margin_pts"]
    table = Claims()
    acc = table5["acc_mean"].dropna()
    main_note = f"{len(p['seeds'])} seed(s) x {len(p['algorithms'])} algorithms, main split, T = {p['rounds']}"

    why = missing(["FedAvg", "FedProx", "Scaffold"], acc.index)
    c1 = [a for a in ("FedProx", "Scaffold") if a in acc and acc[a] < acc.get("FedAvg", np.nan) - margin_pts]
    table.add("C1 FedProx (ζ=0.1) and SCAFFOLD (α=1) underperform FedAvg (over-correction)",
              "FMNIST: FedProx 67.14, Scaffold 68.84 < FedAvg 71.36; both diverge on SVHN",
              ", ".join(f"{a} {acc[a]:.2f}" for a in ("FedProx", "Scaffold", "FedAvg") if a in acc),
              report.not_testable(why) if why else
              report.criterion_met(f"mean final accuracy over seeds of FedProx and of SCAFFOLD below FedAvg's by more "
                                   f"than {margin_pts:g} points (partly: one of them)", len(c1) == 2, partly=bool(c1),
                                   evidence=f"{main_note}; below: {', '.join(c1) or 'none'}"))
    why = missing(["TACO"], acc.index) or ("needs at least one baseline" if len(acc) < 2 else "")
    base = acc.drop("TACO", errors="ignore")
    table.add("C2 TACO has the best final accuracy (Table V)", "TACO best on 6/6 datasets (e.g. FMNIST 73.28)",
              f"TACO {acc.get('TACO', np.nan):.2f} vs best baseline {base.idxmax() if len(base) else '-'} "
              f"{base.max():.2f}",
              report.not_testable(why) if why else
              report.criterion_met(f"TACO's mean final accuracy over seeds >= every baseline's (partly: above FedAvg's "
                                   f"by more than {margin_pts:g} points)", acc["TACO"] >= base.max(),
                                   partly=acc["TACO"] > acc.get("FedAvg", np.inf) + margin_pts, evidence=main_note)
              .unless_diverged(curves[curves["algorithm"].isin(["TACO"])], by=["algorithm", "seed"],
                               num_classes=num_classes))
    rt = per_seed.pivot(index="seed", columns="algorithm", values="rounds_to_target")
    why = missing(["TACO", "FedAvg"], rt.columns)
    table.add(f"C3 TACO reaches the target ({p['target_acc']:.0%}) in fewer rounds than FedAvg",
              "FMNIST 59 vs 85 rounds (70%)",
              "per seed TACO " + ", ".join(f"{v:g}" for v in rt.get("TACO", [])) + " vs FedAvg "
              + ", ".join(f"{v:g}" for v in rt.get("FedAvg", [])) + " rounds (inf: never)",
              report.not_testable(why) if why else
              report.reaches_sooner(rt["TACO"], rt["FedAvg"], names=("TACO", "FedAvg"),
                                    quantity=f"rounds to {p['target_acc']:.0%}",
                                    evidence=f"seeds {list(rt.index)}, T = {p['rounds']}")
              .unless_diverged(curves[curves["algorithm"].isin(["TACO", "FedAvg"])], by=["algorithm", "seed"],
                               num_classes=num_classes))

    ov = table1["vs_fedavg_%"]
    stem_cost, taco_cost = ov.get("STEM", np.nan), ov.get("TACO", np.nan)
    taco_cheap = taco_cost <= ov.reindex(["FedProx", "Scaffold", "FedACG"]).min()
    why = missing(["FedAvg", "STEM", "TACO"], ov.index)
    table.add("C4 client cost per local update: STEM highest, TACO small (Tables I/III)",
              "per round vs FedAvg: STEM +44.0%, FedProx +12.2%, TACO +6.9%",
              f"per 100 updates vs FedAvg: STEM {stem_cost:+.1f}%, TACO {taco_cost:+.1f}%, "
              f"FedProx {ov.get('FedProx', np.nan):+.1f}%",
              report.not_testable(why) if why else _timing_order(ov, table1.get("noise_%"), p))

    order = table2["mean"]
    table.add("C5 mean α ordered A < B < C < freeloaders (Table II)", "MNIST 0.23 < 0.27 < 0.41 < 0.88",
              " < ".join(f"{g} {order[g]:.2f}" for g in order.index),
              report.criterion_met("mean α strictly ordered A < B < C < freeloaders (partly: freeloaders highest)",
                                   order["A"] < order["B"] < order["C"] < order["Freeloaders"],
                                   partly=order["Freeloaders"] == order.max()))
    live = live_detection
    g = table8[table8["kappa"].isin([0.6, 0.7, 0.8])]
    never = table8[table8["kappa"] == 1.0]
    table.add("C6 freeloader detection TPR 100% / FPR 0% at κ = 0.6–0.8; κ = 1 never detects (Table VIII)",
              "TPR 100%, FPR 0% for κ 0.6–0.8, every λ; κ=1.0: TPR 0",
              f"live (κ={p['kappa']}, λ={tp.expel_after(p)}): TPR {live.tpr:.0%}, FPR {live.fpr:.0%}; replay κ "
              f"0.6–0.8: TPR min {g['TPR_%'].min():.0f}%, FPR max {g['FPR_%'].max():.0f}%; κ=1: TPR max "
              f"{never['TPR_%'].max():.0f}%",
              report.criterion_met("live run TPR 100% and FPR 0%, replays at κ 0.6–0.8 TPR 100% and FPR 0%, κ = 1 TPR "
                                   "0 (partly: the live run detects any freeloader)",
                                   live.tpr == 1.0 and live.fpr == 0.0 and g["TPR_%"].min() == 100
                                   and g["FPR_%"].max() == 0 and never["TPR_%"].max() == 0, partly=live.tpr > 0,
                                   evidence=f"{p['n_freeloaders']} planted freeloaders, κ grid {p['kappa_grid']}, "
                                            f"λ fractions {p['lambda_fracs']}"))

    abl_mean = table6.drop(columns=table6.columns[-1]).mean(axis=1)
    gain_corr, gain_agg = abl_mean["corr only"] - abl_mean["neither"], abl_mean["agg only"] - abl_mean["neither"]
    table.add("C7 tailored correction contributes more than tailored aggregation (Table VI)",
              "FEMNIST Dir(0.2): corr +5.18, agg +1.32 points over neither",
              f"corr {gain_corr:+.2f}, agg {gain_agg:+.2f}, both {abl_mean['both'] - abl_mean['neither']:+.2f} points",
              _enough_seeds(p["ablation_seeds"], report.criterion_met(
                  f"mean gain over 'neither' of 'corr only' larger than of 'agg only' and larger than {margin_pts:g} "
                  "points", gain_corr > gain_agg and gain_corr > margin_pts,
                  evidence=f"seeds {p['ablation_seeds']}, partitions {p['ablation_partitions']}")))
    best_gamma = fig7.loc[fig7.groupby("K")["final_acc"].idxmax()]
    gamma_inv_k = bool(all(np.isclose(best_gamma["gamma"], 1 / best_gamma["K"])))
    any_diverged = bool(fig7["diverged"].any())
    table.add("C8 best γ ≈ 1/K; too large a γ fails (Fig. 7)", "γ* ≈ 1/K; large γ can fail to converge",
              "; ".join(f"K={int(r.K)}: best γ={r.gamma:.3g} ({r.final_acc:.1f}%)" for r in best_gamma.itertuples())
              + f"; any divergence: {any_diverged}",
              report.criterion_met("the most accurate γ of the grid is 1/K for every K, and some γ diverges (final "
                                   "test loss non-finite or > 10x the first; partly: one of the two)",
                                   gamma_inv_k and any_diverged, partly=gamma_inv_k or any_diverged,
                                   evidence=f"γ grid {p['gamma_grid']} + 1/K, K in {p['gamma_steps']}, "
                                            f"seeds {p['extra_seeds']}"))
    gain6 = fig6[["literal", "factor"]].max(axis=1) - fig6["original"]
    table.add("C9 tailored α improves FedProx and SCAFFOLD (Fig. 6)", "gains on SVHN (FedProx), CIFAR-10 (Scaffold)",
              ", ".join(f"{m}: best form {gain6[m]:+.2f} points" for m in gain6.index),
              report.criterion_met(f"the better tailored form gains more than {margin_pts:g} points for both methods "
                                   "(partly: for one)", bool((gain6 > margin_pts).all()),
                                   partly=bool((gain6 > margin_pts).any()), evidence=f"seeds {p['extra_seeds']}"))
    t7 = table7["mean"]
    why = missing(["TACO"], t7.index) or ("needs at least one baseline" if len(t7) < 2 else "")
    why = why or _too_few_seeds(p["extra_seeds"])
    table.add(f"C2' TACO best with {p['scal_clients']} clients (Table VII)",
              "FEMNIST: TACO 92.86 vs Scaffold 92.26, FedAvg 88.14", ", ".join(f"{a} {v:.2f}" for a, v in t7.items()),
              report.not_testable(why) if why else
              report.criterion_met(f"TACO the most accurate and above FedAvg by more than {margin_pts:g} points "
                                   f"(partly: within {margin_pts:g} points of the best)",
                                   t7.idxmax() == "TACO" and t7["TACO"] > t7.get("FedAvg", -np.inf) + margin_pts,
                                   partly=t7["TACO"] >= t7.max() - margin_pts,
                                   evidence=f"{p['scal_clients']} clients, Dirichlet({p['scal_dirichlet']}), "
                                            f"T = {p['scal_rounds']}, seeds {p['extra_seeds']}"))

    u, tc = overcorrection.iloc[0], overcorrection.iloc[1]
    table.add("Over-correction: a uniform correction diverges where the tailored one does not (Fig. 1 mechanism)",
              "uniform coefficients over-correct (illustration; SCAFFOLD/FedProx × on SVHN)",
              f"γ={p['overcorrection_gamma']}: uniform diverged={bool(u['diverged'])} (loss "
              f"{u['final_test_loss']:.3g}), TACO diverged={bool(tc['diverged'])} (acc {tc['final_acc']:.1f}%, "
              f"mean α {tc['mean_alpha_last']:.2f})",
              report.criterion_met("the uniform-correction run diverges (final test loss non-finite or > 10x the "
                                   "first) and the TACO run does not", bool(u["diverged"]) and not bool(tc["diverged"])))
    agree = int(boundary["agree"].sum())
    table.add("Theory: exact over-correction boundary on quadratics (ours; the paper gives none)",
              "no explicit threshold in the paper",
              f"{agree}/{len(boundary)} runs on the predicted side (2 settings × TACO-uniform, SCAFFOLD × both sides)",
              report.criterion_met("every run on the side of the boundary the formula predicts (partly: most runs)",
                                   agree == len(boundary), partly=agree > len(boundary) / 2))
    fp = fixed_points.set_index("method")
    fixed_kept = fp.iloc[1]["prediction_error"] < 1e-4
    alpha_moves = fp.iloc[3]["excess_loss"] > fp.iloc[0]["excess_loss"]
    table.add("Ours: the correction never moves the fixed point; tailored α-weighting does (quadratic)",
              "not in the paper (specs/taco.md 6.7 E1)",
              f"prediction error FedAvg {fp.iloc[0]['prediction_error']:.1e}, constant correction "
              f"{fp.iloc[1]['prediction_error']:.1e}; excess loss FedAvg {fp.iloc[0]['excess_loss']:.3g} vs TACO "
              f"{fp.iloc[3]['excess_loss']:.3g} (settled: {bool(fp.iloc[3]['settled'])})",
              report.criterion_met("constant correction lands on the predicted fixed point (error < 1e-4) and TACO's "
                                   "excess loss exceeds FedAvg's (partly: one of the two)", fixed_kept and alpha_moves,
                                   partly=fixed_kept or alpha_moves) if bool(fp.iloc[3]["settled"]) else
              report.Judgement(report.INCONCLUSIVE, "TACO's quadratic run must settle for its excess loss to be a "
                                                    "fixed point's", "TACO's run is marked settled: False"))
    table.add("Eq. 15: the output model z_T is at least as accurate as w_T",
              "Algorithm 2 outputs z_T (tables: w_t or z_t unstated)",
              f"final accuracy z_T {taco_final['z'].mean():.2f} vs w_T {taco_final['w'].mean():.2f}",
              report.not_testable(missing(["TACO"], p["algorithms"])) if taco_final.empty else
              report.criterion_met(f"mean final accuracy of z_T over seeds >= that of w_T - {margin_pts:g} points",
                                   taco_final["z"].mean() >= taco_final["w"].mean() - margin_pts,
                                   evidence=f"seeds {list(taco_final.index)}"))
    table.add("Lemma 2: z_{t+1} = z_t − η_g Δ̃_t for z_t = w_t + (1−α_t)(w_t − w_{t−1})", "stated as exact",
              f"residual on runs: printed {lemma_runs['lemma2_printed_residual'].mean():.2f}, corrected z "
              f"{lemma_runs['lemma2_corrected_residual'].max():.1e} (relative)",
              report.criterion_met("the printed z_t satisfies the identity on some round of the runs (relative "
                                   "residual <= 0.1)", lemma_runs["lemma2_printed_residual"].min() <= 0.1,
                                   evidence=f"{len(lemma_runs)} rounds"))
    table.add("Corollary 2: (1−α_i) ∝ μ_i/c_i minimises the over-correction term Y_t", "derived by Cauchy–Schwarz",
              f"dY/dα_i identical for all i: {y_gradients_equal} (Y depends only on Σ(1−α_i))",
              report.criterion_met("sympy: dY_t/dα_i differs between clients (otherwise no allocation of α minimises "
                                   "Y_t)", not y_gradients_equal))

    osc_algorithms = p["oscillation_algorithms"]
    osc_by = oscillation.set_index(["algorithm", "seed"])
    eq9, unif, prev = (osc_by.xs(n, level="algorithm") if n in osc_algorithms else None
                       for n in ("TACO", tp.UNIFORM_AGGREGATION, tp.PREVIOUS_WEIGHTS))
    osc_note = (f"{p['oscillation_dataset']}, K = {p['oscillation_steps']}, eta_l = {p['oscillation_lr']}, rounds "
                f"{oscillation['first_round'].min()}-{p['oscillation_rounds']}, seeds {p['oscillation_seeds']}")
    why = missing(["TACO", tp.UNIFORM_AGGREGATION], osc_algorithms) or _too_few_seeds(p["oscillation_seeds"])
    cycle = None if why else (eq9["swing"] > 2 * unif["swing"]) & (eq9["alternation"] >= 0.8)
    table.add("Finding (a): Eq. 9's same-round α weights make TACO's accuracy alternate round to round (a 2-cycle); "
              "uniform aggregation does not (ours)", "not in the paper (TACO 73.28 on FMNIST)",
              "" if eq9 is None or unif is None else f"swing TACO {eq9['swing'].mean():.1f} vs uniform {unif['swing'].mean():.1f} points, "
              f"alternation {eq9['alternation'].mean():.2f}; TACO peak/final {eq9['late_peak_acc'].mean():.1f}/"
              f"{eq9['final_acc'].mean():.1f}",
              report.not_testable(why) if why else report.criterion_met(
                  "in every seed TACO's mean |acc_t - acc_(t-1)| over the second half > 2x that with uniform "
                  "aggregation and >= 80% of its consecutive differences change sign (partly: in some seed)",
                  bool(cycle.all()), partly=bool(cycle.any()), evidence=osc_note))
    why = (missing(["TACO", tp.UNIFORM_AGGREGATION, tp.PREVIOUS_WEIGHTS], osc_algorithms)
           or _too_few_seeds(p["oscillation_seeds"]))
    table.add("Finding (a): weights from the previous round's α_i^t (the lagged reading of Eq. 9) remove the "
              "oscillation (ours)", "Algorithm 2 uses α^{t+1} from this round's uploads",
              "" if prev is None or eq9 is None or unif is None else f"swing {prev['swing'].mean():.1f} (previous α), {eq9['swing'].mean():.1f} (Eq. 9), "
              f"{unif['swing'].mean():.1f} (uniform); final {prev['final_acc'].mean():.1f} / "
              f"{eq9['final_acc'].mean():.1f} / {unif['final_acc'].mean():.1f}",
              report.not_testable(why) if why else report.criterion_met(
                  "in every seed the lagged weights' swing <= 1.5x uniform aggregation's (partly: below Eq. 9's in "
                  "every seed)", bool((prev["swing"] <= 1.5 * unif["swing"]).all()),
                  partly=bool((prev["swing"] < eq9["swing"]).all()), evidence=osc_note))
    for row in theorem1:
        table.add(*row)
    return table


MIN_SEEDS = 3  # a mean over fewer seeds cannot order methods a few points apart


def _too_few_seeds(seeds: list[int]) -> str:
    """'' with enough seeds, else why a claim over a mean of `seeds` is not testable."""
    return "" if len(seeds) >= MIN_SEEDS else f"seeds {seeds}: an ordering of means needs >= {MIN_SEEDS} seeds"


def _enough_seeds(seeds: list[int], judgement: report.Judgement) -> report.Judgement:
    """`judgement`, or not testable when it rests on fewer than `MIN_SEEDS` seeds (a one-seed point comparison)."""
    why = _too_few_seeds(seeds)
    return report.not_testable(f"{judgement.criterion}; {why}", judgement.evidence) if why else judgement


def _timing_order(overhead: pd.Series, noise: pd.Series | None, p: Mapping[str, Any]) -> report.Judgement:
    """C4: STEM's overhead over FedAvg the largest, TACO's small; every gap the rule reads must exceed the timing
    noise (the largest spread between repeats of one algorithm, in % of its fastest repeat), else inconclusive."""
    stem, taco = overhead["STEM"], overhead["TACO"]
    cheap = overhead.reindex(["FedProx", "Scaffold", "FedACG"]).dropna()
    criterion = ("STEM's overhead over FedAvg the largest, TACO's below half of STEM's and no larger than FedProx's, "
                 "SCAFFOLD's and FedACG's (partly: all but the last); each gap larger than the noise between repeats "
                 "(else inconclusive)")
    evidence = (f"{p['timing_repeats']} timing runs of each, {p['timing_model']} on {p['timing_dataset']}, minimum of "
                f"the record's train_s per 100 updates")
    margin = float(noise.max()) if noise is not None and len(noise) else float("nan")
    if not np.isfinite(margin) or int(p["timing_repeats"]) < 2:
        return report.not_testable("a timing order needs a noise margin from >= 2 repeats", evidence)
    gaps = [stem - overhead.drop("STEM").max(), stem / 2 - taco, *(cheap - taco)]
    evidence += f"; noise {margin:.1f}%, smallest gap {min(abs(g) for g in gaps):.1f} points"
    if any(abs(g) <= margin for g in gaps):
        return report.Judgement(report.INCONCLUSIVE, criterion, evidence)
    first = stem == overhead.max() and taco < stem / 2
    return report.criterion_met(criterion, first and bool((taco <= cheap).all()), partly=first, evidence=evidence)
