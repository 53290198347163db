"""MUCSC / B-MUCSC's claims (notebooks/mucsc.py, section 9), judged on the tables the notebook computes.

Tables II-V and C4/C6 recompute the paper's numbers from its own inputs (d, T, Eqs. 16-17): arithmetic checks,
not reproductions. A claim whose runs a parameter left out (e.g. `-p methods '["mucsc"]'`) is "not testable",
with the missing methods named.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fedlib import report
from fedlib.papers.mucsc import D_CIFAR, LABELS, METHODS, setting_label
from fedlib.report import Claims, Judgement

Judged = tuple[str, Judgement]  # (measured, judgement)


def _add(table: Claims, methods: Sequence[str], claim: str, paper_value: str, needed: Sequence[str],
         judge: Callable[[], Judged]) -> None:
    """Add a claim judged by `judge()`, or "not testable" if a method it needs was not run."""
    absent = [LABELS[m] for m in needed if m not in methods]
    measured, judgement = ("-", report.not_testable(f"needs the runs of {', '.join(absent)} (`methods` = {methods})")
                           ) if absent else judge()
    table.add(claim, paper_value, measured, judgement)


def _federated(table: Claims, params: Mapping[str, Any], runs: pd.DataFrame, to_target: pd.DataFrame,
               num_classes: int) -> None:
    """C5, C7, C10 and C9 on each partition of the main grid (traffic, accuracy and time to target)."""
    seeds, rounds, methods = params["seeds"], params["rounds"], params["methods"]
    tgt = to_target.set_index(["partition", "method"])
    fin = runs[runs["round"] == rounds].groupby(["partition", "method"])["test_acc"].mean()
    n_seeds = len(seeds)

    def reach(part: str, m: str) -> bool:
        return tgt.loc[(part, m), "seeds_reached"] == n_seeds

    def pct(part: str, m: str) -> str:
        traffic = tgt.loc[(part, m), "traffic_pct_of_NC"]
        return (f"{traffic:.1f}% ({tgt.loc[(part, m), 'seeds_reached']}/{n_seeds} seeds reached)"
                if np.isfinite(traffic) else "not reached on every seed")

    def c5(part: str) -> Judged:
        mu_ok = bool(reach(part, "mucsc") and tgt.loc[(part, "mucsc"), "traffic_pct_of_NC"] < 20)
        bm_ok = bool(reach(part, "bmucsc") and tgt.loc[(part, "bmucsc"), "traffic_pct_of_NC"] < 5)
        measured = (f"MUCSC {pct(part, 'mucsc')}, B-MUCSC {pct(part, 'bmucsc')} "
                    f"(target acc {tgt.loc[(part, 'nc'), 'target']:.3f})")
        return measured, report.criterion_met(
            "every seed reaches the target and the mean traffic to it is < 20% of NC's for MUCSC and "
            "< 5% for B-MUCSC (partly: one of the two)", mu_ok and bm_ok, partly=mu_ok or bm_ok,
            evidence=f"seeds {seeds}, target {params['target_frac']:g} x NC's final accuracy")

    def c7(part: str) -> Judged:
        acc = fin.loc[part]
        per_seed = runs[(runs.partition == part) & (runs["round"] == rounds)].pivot(
            index="seed", columns="method", values="test_acc").reindex(index=seeds, columns=METHODS)
        close = {m: report.paired_equivalence(per_seed[m] - per_seed["nc"], margin=0.02, evidence=f"{LABELS[m]} - NC")
                 for m in ("mucsc", "qsgd")}
        below = all(acc[m] < acc["nc"] for m in ("ssgd", "bmucsc", "dgc", "stc"))
        judged = runs[(runs.partition == part) & runs.method.isin(["nc", "mucsc", "qsgd"])]
        undecided = [j for j in close.values() if j.verdict != report.REPRODUCED]
        judgement = undecided[0] if undecided else report.criterion_met(
            "final accuracy of MUCSC and QSGD equivalent to NC's within 0.02 (paired TOST per seed), and SSGD's, "
            "B-MUCSC's, DGC's and STC's mean below NC's (partly: the first)", below, partly=True,
            evidence="; ".join(j.evidence for j in close.values()))
        return ", ".join(f"{LABELS[m]} {acc[m]:.3f}" for m in METHODS), judgement.unless_diverged(
            judged, by=["method", "seed"], num_classes=num_classes)

    def c10(part: str) -> Judged:
        more = not reach(part, "dgc") or bool(tgt.loc[(part, "dgc"), "traffic_pct_of_NC"] > 100)
        return pct(part, "dgc") + " of NC's traffic", report.criterion_met(
            "DGC's mean traffic to the target > NC's, a seed on which DGC never reaches the target counting as more",
            more, evidence=f"seeds {seeds}")

    def c9(part: str) -> Judged:
        eligible = [m for m in METHODS if m != "nc" and reach(part, m)]
        times = tgt.loc[part].loc[eligible, "total_pct_of_NC"]
        best = LABELS[times.idxmin()] if len(times) else None
        measured = f"best: {best} ({times.min():.1f}% of NC)" if best else "no method reached the target on every seed"
        return measured, report.criterion_met(
            "among the methods reaching the target on every seed, MUCSC or B-MUCSC has the lowest mean total time to it",
            best in ("MUCSC", "B-MUCSC"),
            evidence=f"seeds {seeds}; eligible: {', '.join(LABELS[m] for m in eligible) or 'none'}")

    for part in params["partitions"]:
        _add(table, methods, f"C5 traffic to target, {part}: MUCSC < 20%, B-MUCSC < 5% of NC",
             "18.75-28.13% / 2.78-3.69%", ["nc", "mucsc", "bmucsc"], lambda: c5(part))
        _add(table, methods, f"C7 accuracy, {part}: MUCSC ~ QSGD ~ NC; SSGD and biased methods below NC", "Figs. 2-4",
             METHODS, lambda: c7(part))
        _add(table, methods, f"C10 DGC needs more total traffic than NC, {part}", "190.61% / 211.78% / 165.19%",
             ["nc", "dgc"], lambda: c10(part))
        _add(table, methods, f"C9 total time to target, {part}: MUCSC or B-MUCSC best",
             "MUCSC 74.39%/49.59% (CIFAR), B-MUCSC 45.05% (FEMNIST)", METHODS, lambda: c9(part))


def claims(params: Mapping[str, Any], *, d: int, num_classes: int, table2: pd.DataFrame, traffic: pd.DataFrame,
           traffic_ok: bool, update_size: int, rounding: Mapping[str, float], unbiased: bool, bias: pd.DataFrame,
           bias_draws: int, convergence: pd.DataFrame, partial: pd.DataFrame, partial_clients: int,
           partial_population: int, partial_seeds: int, levels: pd.DataFrame, large_d: pd.DataFrame,
           level_runs: pd.DataFrame, level_final: pd.DataFrame, measured_rates: pd.DataFrame, runs: pd.DataFrame,
           to_target: pd.DataFrame, z_final: pd.Series, jensen: Mapping[str, Any]) -> Claims:
    """The claims table, from the notebook's parameters and what its sections computed.

    `d`: this model's parameter count; `table2`: `papers.mucsc.table2()`; `traffic`: the rows of
    `traffic_tables()` that are checked (the FEMNIST QSGD misprint left out), `traffic_ok` whether each is within
    0.05 MB; `update_size`, `rounding` (`theory.mucsc.monte_carlo_rounding`) and `unbiased` (its verdict): the
    Monte Carlo on a real update; `bias` (`bmucsc_bias`, over `bias_draws` draws); `convergence`
    (`convergence_check`); `partial` (`partial_check` with `partial_clients` of `partial_population` clients per
    round, `partial_seeds` seeds); `levels` (`levels_table`, its "real update (subset)" rows) and `large_d`
    (`large_d_levels` at the paper's d); `level_runs` (`level_variants`' rows) and `level_final` (their final
    accuracy, seed x variant); `measured_rates`, `runs` and `to_target` (`target_table`, empty without NC) of the
    main grid; `z_final` (final accuracy by Z-sweep setting); `jensen` (`jensen_step_check`).
    """
    seeds, rounds, z_sweep, mc_draws = params["seeds"], params["rounds"], params["z_sweep"], params["mc_draws"]
    part0 = params["partitions"][0]
    table = Claims()
    rate_at = table2.set_index(["dataset", "method"])["rate_conventionA"]
    rate_here = measured_rates.set_index(measured_rates.method.map(LABELS))["rate_conventionA_paperKN"]
    not_dgc = table2[table2.method != "dgc"]
    table.add("Table II rates from Eqs. (16)-(17) at the paper's d", "14.54x / 196.57x (CIFAR-10)",
              f"{rate_at['cifar10', 'mucsc']:.3f}x / {rate_at['cifar10', 'bmucsc']:.3f}x (Z_U = 16 for all, no '+h')",
              report.arithmetic_check(not_dgc.rate_conventionA.round(2), not_dgc.paper_rate, atol=1e-6,
                                      inputs="Eqs. (16)-(17) at the paper's d, rounded to 2 decimals like Table II"))
    table.add("Tables III-V traffic from d and T", "e.g. MUCSC 587.88 MB, B-MUCSC 72.49 MB (CIFAR iid)",
              f"all within 0.05 MB except the FEMNIST QSGD misprint: {traffic_ok}",
              report.arithmetic_check(traffic["MB"], traffic["paper_MB"], atol=0.05,
                                      inputs="the paper's d and T (the FEMNIST QSGD misprint excluded)"))
    mc = rounding
    table.add("C1 MUCSC is unbiased (Eq. 6)", "E[U~] = U",
              f"{update_size:,} elements, {mc_draws} draws: mean R(mean-U)^2/J_m = {mc['mean_sq_z']:.3f} "
              f"± {mc['mean_sq_z_se']:.3f} (1 if unbiased), sum bias {mc['sum_bias_z']:+.2f} SD; "
              f"J emp/analytic = {mc['J_empirical'] / mc['J_analytic']:.4f}",
              report.criterion_met("Monte Carlo: the standardised squared bias consistent with 1 and the summed bias "
                                   "within its tolerance (theory.mucsc.is_unbiased), and the empirical J within 5 SE of "
                                   "Eq. 6's", bool(unbiased), evidence=f"a real update, {mc_draws} draws"))
    rest = bias.set_index("part").loc["super cluster"]
    table.add("B-MUCSC is biased (paper: 'biased algorithm')", "biased per coordinate",
              f"super-cluster bias^2 = {rest.bias_sq_norm / rest.signal_sq_norm:.1%} of its signal^2, kept part ~ 0",
              report.criterion_met("Monte Carlo: the super cluster's squared bias > 10% of its squared signal",
                                   bool(rest.bias_sq_norm > 0.1 * rest.signal_sq_norm),
                                   evidence=f"a real update, {bias_draws} draws"))
    conv = convergence.set_index("run")
    slopes_ok = bool(conv.loglog_slope.between(-1.4, -0.7).all() and conv.holds.all())
    table.add("C2 O(1/T) rate with MUCSC (Thms 1-2, full participation)", "same rate as FedAvg",
              f"toy slopes {', '.join(f'{v:.2f}' for v in conv.loglog_slope)}; bound holds: {bool(conv.holds.all())}",
              report.criterion_met("on every toy run the log-log slope of the error vs T lies in [-1.4, -0.7] "
                                   "(O(1/T): -1) and the bound holds", slopes_ok, evidence=f"{len(conv)} toy runs"))
    table.add("C2b Theorems 3-4 (partial participation) bound the error", "E F(w_T) - F* <= bound, O(1/T)",
              f"{len(partial)} runs through the round loop, K = {partial_clients} of {partial_population}: "
              f"measured / Thm 3 (measured psi) max {float((partial.measured_gap / partial.thm3_measured_psi).max()):.2e}, "
              f"/ Thm 4 max {float((partial.measured_gap / partial.thm4).max()):.2e}",
              report.bound_holds(partial.measured_gap, np.minimum(partial.thm3_measured_psi, partial.thm4),
                                 what="the seed-mean final gap <= min(Theorem 3 with the measured psi_t, Theorem 4), "
                                      "mu, L, Gamma, sigma = 0 exact and G^2 measured on the trajectory",
                                 evidence=f"{partial_seeds} seeds per run, {params['partial_rounds']} rounds; every "
                                          f"sync step held: {bool(partial.holds.all())}")
              if partial.holds.all() else
              report.criterion_met("the seed-mean gap at every sync step <= Theorem 3 with the measured psi_t and <= "
                                   "Theorem 4", False, evidence=f"{partial_seeds} seeds per run"))
    real = levels[levels.data == "real update (subset)"]
    printed_near = bool((real.paper_uniform_init / real.optimal).max() < 1.05
                        and (large_d.paper / large_d.optimal).max() < 1.05)
    table.add("C3 Algorithm 1 finds (near-)optimal centroids", "'very reliably'",
              f"real update: J/J_unif Algorithm 1 as printed {', '.join(f'{v:.2f}' for v in real.paper_uniform_init)}; "
              f"optimum {', '.join(f'{v:.2f}' for v in real.optimal)} (Z = {z_sweep}); at d = {D_CIFAR:,}: printed "
              f"{', '.join(f'{v:.3f}' for v in large_d.paper)} vs optimum "
              f"{', '.join(f'{v:.3f}' for v in large_d.optimal)}",
              report.criterion_met("Algorithm 1 as printed ends within 5% of the optimal J at every Z, on the real update "
                                   "and at the paper's d (partly: below the uniform levels' J at every Z on both)",
                                   printed_near,
                                   partly=bool((real.paper_uniform_init < 1).all() and (large_d.paper < 1).all()),
                                   evidence=f"Z = {z_sweep}"))
    descent_large_d = bool((large_d.descent / large_d.optimal).max() < 1.05)
    table.add("C3' coordinate descent on J (our reading) finds near-optimal centroids", "(the aim of Algorithm 1)",
              f"J/J_opt: real update {', '.join(f'{v:.3f}' for v in real.descent / real.optimal)}; at d = {D_CIFAR:,}: "
              f"{', '.join(f'{v:.3f}' for v in large_d.descent / large_d.optimal)}",
              report.criterion_met("coordinate descent's J within 5% of the optimal J at every Z, on the real update and "
                                   "at the paper's d (partly: at the paper's d)",
                                   bool((real.descent / real.optimal).max() < 1.05 and descent_large_d),
                                   partly=descent_large_d, evidence=f"Z = {z_sweep}"))
    level_evidence = f"seeds {seeds}, partition {part0}, round {rounds}"

    def both(a: str, b: str) -> str:
        if not {a, b} <= set(level_final):
            return "-"
        return f"final acc {a} {level_final[a].mean():.4f} vs {b} {level_final[b].mean():.4f}"

    adapted = (report.paired_gain(level_final["MUCSC descent"] - level_final["MUCSC uniform"], threshold=0.0, test="t",
                                  evidence=level_evidence)
               .unless_diverged(level_runs[level_runs.variant.str.startswith("MUCSC")], by=["variant", "seed"],
                                num_classes=num_classes)
               if {"MUCSC descent", "MUCSC uniform"} <= set(level_final)
               else report.not_testable("needs level_searches 'descent' and 'uniform'"))
    table.add(f"C3b adapted levels (min J) beat uniform levels in FL (Z = {params['zu']})",
              "implied by Sec. V-C (J enters the bound)", both("MUCSC descent", "MUCSC uniform"), adapted)
    like_qsgd = (report.paired_equivalence(level_final["MUCSC descent"] - level_final["QSGD"], margin=0.01,
                                           evidence=level_evidence)
                 .unless_diverged(level_runs[level_runs.variant.isin(["MUCSC descent", "QSGD"])], by=["variant", "seed"],
                                  num_classes=num_classes)
                 if "MUCSC descent" in level_final else report.not_testable("needs the 'descent' level search"))
    table.add("C3c MUCSC (adapted levels) ~ QSGD at 4 bits per element", "Figs. 2-4 (MUCSC ~ QSGD)",
              both("MUCSC descent", "QSGD"), like_qsgd)
    boost_paper = rate_at["cifar10", "bmucsc"] / rate_at["cifar10", "mucsc"]
    boost_here = (f"this d = {d:,}: {rate_here['B-MUCSC'] / rate_here['MUCSC']:.1f}x"
                  if {"B-MUCSC", "MUCSC"} <= set(rate_here.index) else "this d: not run")
    table.add("C4 B-MUCSC raises compression >10x over MUCSC (at the paper's d)", "196.57/14.54 = 13.5x",
              f"paper d: {boost_paper:.1f}x; {boost_here}",
              report.arithmetic_check(boost_paper, 196.57 / 14.54, rtol=0.005,
                                      inputs="Eqs. (16)-(17) at the paper's d (CIFAR-10)"))
    cut_paper = 100 * (1 - 1 / rate_at["cifar10", "bmucsc"])
    cut_here = f"this d: {100 * (1 - 1 / rate_here['B-MUCSC']):.2f}%" if "B-MUCSC" in rate_here else "this d: not run"
    table.add("C6 B-MUCSC cuts >99% of traffic per round (at the paper's d)", "196x => 99.49%",
              f"paper d: {cut_paper:.2f}%; {cut_here}",
              report.arithmetic_check(cut_paper, 99.49, atol=0.005, inputs="Eq. (17)'s rate at the paper's d (CIFAR-10)"))
    _federated(table, params, runs, to_target, num_classes)
    z_acc = [z_final[setting_label(z, z, params["level_search"])] for z in z_sweep]
    table.add("C8 larger Z gives better accuracy (Fig. 5)", "Z = 16 > 8 > 4",
              ", ".join(f"Z={z}: {a:.3f}" for z, a in zip(z_sweep, z_acc)),
              report.criterion_met("final accuracy (mean over seeds) never drops by 0.005 or more as Z grows, and the "
                                   "largest Z beats the smallest by more than 0.005",
                                   bool(all(np.diff(z_acc) > -0.005) and z_acc[-1] - z_acc[0] > 0.005),
                                   evidence=f"Z = {z_sweep}, partition {part0}, seeds {seeds}"))
    table.add("Thm 2 proof, step (34): E||sum p_i U~i||^2 <= sum p_i^2 E||U~i||^2", "holds (used for the downlink term)",
              f"10 identical clients: {jensen['lhs']:.2f} vs sum p_i^2 bound {jensen['paper_rhs_sum_p2']:.2f} "
              f"(Jensen's sum p_i bound {jensen['jensen_rhs_sum_p']:.2f} holds)",
              report.criterion_met("the inequality holds for 10 identical clients (a counterexample refutes it)",
                                   bool(jensen["paper_step_holds"])))
    return table
