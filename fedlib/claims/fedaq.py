"""FedAQ's claims table: energy to a target against the paper's baselines (Tables II-IV), the bit and range
trends (Figs. 2-3), the fixed-width and AdaQuantFL s0 sweeps, Eq. 22 against the KKT optimum, Assumption 1
and Theorems 1-3 on toys. Energy and rounds to a target are compared seed by seed: a run that never reaches
the target counts as worse (`fedlib.targets.NEVER`), not dropped.

`runs` maps (mode, scheme, seed) to one run's rounds frame in round order, as the notebook builds it.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from fedlib import report
from fedlib.papers.fedaq import (BASELINE, MODES, PAPER_TABLES, energy_to_target_judgement, relative_targets,
                                 saving_table, to_target_per_seed)
from fedlib.report import Claims

Runs = Mapping[tuple[str, str, int], pd.DataFrame]
TABLE_OF_MODE = {"joint": "II", "up": "III", "down": "IV"}
_PAPER_RANGE = {"joint": "25.6-66.7%", "up": "18.6-64.5%", "down": "13.3-66.0%"}  # over the paper's rows
_WHAT = {"joint": "Joint FedAQ needs less energy than fixed 8-bit to reach the same accuracy",
         "up": "Uplink-only FedAQ saves energy vs AdaQuantFL",
         "down": "Downlink-only FedAQ saves energy vs fixed 8-bit (beta = alpha/sqrt(2n))"}


def has_runs(runs: Runs, mode: str, scheme: str, seeds: Sequence[int]) -> bool:
    """Whether `scheme` ran in `mode` for every seed (a parameter subset may lack a run)."""
    return all((mode, scheme, sd) in runs for sd in seeds)


def savings(runs: Runs, params: Mapping[str, Any], mode: str, baseline: str, proposed: str) -> pd.DataFrame:
    """`saving_table` at the paper's target for `mode` when `params["paper_targets"]` gives one, else at
    `params["target_fracs"]` x the lower of the two schemes' seed-mean best accuracies."""
    seeds, paper_targets = params["seeds"], params["paper_targets"]
    return saving_table(runs, mode, baseline, proposed, seeds, [paper_targets[mode]] if paper_targets else
                        relative_targets(runs, mode, [baseline, proposed], seeds, params["target_fracs"]))


def saving_tables(runs: Runs, params: Mapping[str, Any]) -> dict[str, pd.DataFrame]:
    """Tables II-IV analogues: `savings` of FedAQ against the paper's baseline, for every mode with both."""
    seeds = params["seeds"]
    return {mode: savings(runs, params, mode, BASELINE[mode], "fedaq") for mode in MODES
            if has_runs(runs, mode, BASELINE[mode], seeds) and has_runs(runs, mode, "fedaq", seeds)}


def savings_text(table: pd.DataFrame) -> str:
    """'target: saving%' for each row of a `savings` table."""
    return ", ".join(f"{t:.3f}: {s:.1f}%" for t, s in zip(table["target_acc"], table["saving_%"])) + " (seed-mean energies)"


def claims(params: Mapping[str, Any], *, runs: Runs, tables: Mapping[str, pd.DataFrame], down_schemes: Sequence[str],
           trend: pd.DataFrame, fixed: Sequence[str], best_fixed_at: Mapping[float, str | None],
           best_s0_at: Mapping[float, str | None], s0_sweep: pd.DataFrame, alloc: pd.DataFrame, mc: pd.DataFrame,
           curves: pd.DataFrame, quad: pd.DataFrame) -> Claims:
    """Judge every claim by the rules in `fedlib.report`; the arguments are the notebook's tables:

    runs: (mode, scheme, seed) -> rounds frame; tables: `saving_tables`; down_schemes: the downlink-only
    schemes in grid order (the last "fedaq β×m" is the coarser-beta claim's); trend: Spearman rho of each
    quantity ("up_bits", "down_bits", "up_range", "down_range") against the round; fixed: the fixed-width
    schemes swept in joint mode; best_fixed_at: fixed-bit sweep target -> best fixed width (`best_by_energy`),
    in target order (the 8-bit claim is judged at the middle one); best_s0_at: uplink target -> best AdaQuantFL scheme; s0_sweep: `energy_to_targets` rows of
    the s0 sweep with an "s0" column; alloc: `compare_allocations` with e1, e2 and "Eq.22 excess"; mc:
    `quantizer_check` rows with "unbiased" and "variance_ok"; curves: Theorem 1's softmax toy, every prefix
    of rounds per scheme; quad: Theorems 2-3 on the quadratic toys, one row per (n, scheme, seed).
    """
    seeds, paper_row = params["seeds"], params["paper_row"]
    toy_rounds, toy_seeds = params["toy_rounds"], params["toy_seeds"]
    table = Claims()

    def energy_judgement(mode: str, baselines: Mapping[float, str | None], proposed: str) -> report.Judgement:
        return energy_to_target_judgement(runs, mode, baselines, proposed, seeds)

    def versus(mode: str, saving: pd.DataFrame, baseline: str) -> report.Judgement:
        return energy_judgement(mode, {float(t): baseline for t in saving["target_acc"]}, "fedaq")

    jt = tables.get("joint")
    if paper_row == "ResNet-18 on CIFAR-10" and jt is not None:
        headline = report.within_tolerance(jt["saving_%"].iloc[-1], 66.7, rtol=0.1, evidence=f"seeds {seeds}, highest target")
    else:
        headline = report.not_testable(f"the paper's headline is ResNet-18 on CIFAR-10; this profile runs {paper_row}")
    table.add("Up to 66.7% energy saving, joint FedAQ vs fixed 8-bit (Table II, ResNet-18/CIFAR-10, 86%)", "66.7%",
              f"best joint saving here {jt['saving_%'].max():.1f}% ({params['dataset']}/{params['model']})"
              if jt is not None else "-", headline)
    for mode in MODES:
        table.add(f"{_WHAT[mode]} (Table {TABLE_OF_MODE[mode]}; {paper_row})",
                  f"{PAPER_TABLES[mode][paper_row][3]}% ({_PAPER_RANGE[mode]} over rows)",
                  savings_text(tables[mode]) if mode in tables else "-",
                  versus(mode, tables[mode], BASELINE[mode]) if mode in tables else
                  report.not_testable(f"this parameter set has no {mode}-mode FedAQ/{BASELINE[mode]} pair"))
    if jt is not None:
        round_pairs = [pair for t in jt["target_acc"]
                       for pair in zip(to_target_per_seed(runs, "joint", "fedaq", seeds, t),
                                       to_target_per_seed(runs, "joint", BASELINE["joint"], seeds, t))]
        similar = [p_ == b_ or abs(p_ - b_) <= 0.2 * b_ for p_, b_ in round_pairs]
        table.add("Similar number of rounds to the target as fixed 8-bit (no loss of convergence speed)", "similar",
                  "rounds FedAQ/fixed8 per seed and target: " + ", ".join(f"{a:g}/{b:g}" for a, b in round_pairs),
                  report.criterion_met("FedAQ's rounds to each target within 20% of fixed 8-bit's on every seed (never "
                                       "reached by one of the two counts as not similar; by both, as similar)", all(similar),
                                       evidence=f"{len(round_pairs)} (seed, target) pairs, targets {list(jt['target_acc'])}"))
    rho = dict(zip(trend["quantity"], trend["spearman rho vs round"]))
    for claim, q_up, q_dn in (("Uplink bits decrease and downlink bits increase over rounds (Fig. 3)", "up_bits", "down_bits"),
                              ("Update ranges shrink, global-weight ranges grow (Fig. 2)", "up_range", "down_range")):
        table.add(claim, "decreasing / increasing", f"Spearman rho: {q_up} {rho[q_up]:.2f}, {q_dn} {rho[q_dn]:.2f}",
                  report.criterion_met(f"Spearman rho vs round < 0 for {q_up} and > 0 for {q_dn} (partly: one of the two)",
                                       rho[q_up] < 0 and rho[q_dn] > 0, partly=rho[q_up] < 0 or rho[q_dn] > 0))
    coarser = [s for s in down_schemes if s.startswith("fedaq β×")]
    if coarser and has_runs(runs, "down", "fixed8", seeds):
        dt_best = savings(runs, params, "down", "fixed8", coarser[-1])
        table.add(f"(ours) Downlink-only FedAQ with a coarser beta = {coarser[-1].split('×')[1]} alpha/sqrt(2n) saves "
                  "vs fixed 8-bit", "no beta given for this mode", savings_text(dt_best),
                  energy_judgement("down", {float(t): "fixed8" for t in dt_best["target_acc"]}, coarser[-1]))
    sweep_targets = list(best_fixed_at)
    mid_target = sweep_targets[len(sweep_targets) // 2]
    best_fixed = best_fixed_at[mid_target]
    table.add("8-bit is the best fixed bit-length of {2, 4, 8, 16}", "8 bits",
              f"best fixed width at the middle target {mid_target} among {list(fixed)}: {best_fixed}",
              report.criterion_met(f"fixed 8-bit is the width fewest seeds miss the middle target {mid_target} with, then "
                                   f"with the lowest median energy, among {list(fixed)}", best_fixed == "fixed8",
                                   evidence=f"seeds {seeds}, joint mode") if "fixed8" in fixed and len(fixed) > 1
              else report.not_testable(f"needs fixed 8 bits and another width; this profile runs {list(fixed)}"))

    def median_mj(scheme: str, target: float) -> float:
        return float(np.median(to_target_per_seed(runs, "joint", scheme, seeds, target, "cum_energy_mJ")))

    table.add("(ours) Joint FedAQ needs less energy than the best fixed width (the paper's comparison, at the width "
              "that is best here)", "FedAQ < best fixed",
              "median mJ FedAQ vs best fixed: " + ", ".join(f"{t}: {median_mj('fedaq', t):.4g} vs {median_mj(b, t):.4g} ({b})"
                                                            for t, b in best_fixed_at.items() if b),
              energy_judgement("joint", best_fixed_at, "fedaq") if fixed and has_runs(runs, "joint", "fedaq", seeds)
              else report.not_testable("no fixed widths or no joint FedAQ run in this parameter set"))
    s0_tried = sorted(s0_sweep["s0"].dropna().unique().tolist())
    table.add("(ours) Uplink-only FedAQ needs less energy than AdaQuantFL at its best s0 (s0 swept)", "FedAQ < AdaQuantFL",
              f"best AdaQuantFL per target: {dict(best_s0_at)}; s0 tried {s0_tried}",
              energy_judgement("up", best_s0_at, "fedaq") if best_s0_at and len(s0_tried) > 1
              else report.not_testable("needs the uplink comparison and at least two AdaQuantFL s0 values"))
    eq22 = alloc.set_index(["e1", "e2"])["Eq.22 excess"]
    table.add("beta = alpha/sqrt(2n) (Eq. 22) is the optimal downlink resolution", "optimal",
              f"KKT optimum beta/alpha = sqrt(e2/(2n e1)); Eq. 22 exact at e1 = e2 (excess {eq22[(1, 1)]:.1e}), "
              f"{100 * eq22[(1, 3)]:.1f}% worse at e2 = 3 e1",
              report.criterion_met("Eq. 22's objective within 1e-6 (relative) of the KKT optimum at every tested link-cost "
                                   "ratio e2/e1 (partly: at e1 = e2 only)", bool((eq22.abs() <= 1e-6).all()),
                                   partly=abs(eq22[(1, 1)]) <= 1e-6,
                                   evidence=f"{len(eq22)} (e1, e2) pairs, KKT checked by SLSQP"))
    table.add("Quantizer is unbiased with E||Q(w)-w||^2 <= q_s R^2 (Assumption 1)", "holds",
              f"{mc['unbiased'].sum()}/{len(mc)} unbiased, {mc['variance_ok'].sum()}/{len(mc)} variance within bound; "
              f"exact/bound {mc['exact_over_A1'].min():.3f}-{mc['exact_over_A1'].max():.3f}",
              report.criterion_met("Monte Carlo bias within its tolerance and variance within q_s R^2 for every tested "
                                   "vector and bit width", bool(mc["unbiased"].all() and mc["variance_ok"].all()),
                                   evidence=f"{len(mc)} cases, {params['mc_draws']} draws each"))
    # The bound is informative about quantization only where the measured side exceeds its other terms (the initial
    # gap and the SGD noise): there the uplink/downlink terms are what keeps it above the measurement.
    informative = curves["lhs"] > curves["initial_gap"] + curves["sgd_noise"]
    toy_schemes = list(curves["scheme"].unique())
    fl = curves[curves["scheme"] == "fedaq"].iloc[-1]
    table.add("Theorem 1's bound holds and its quantization terms matter (convex toy with known L, sigma^2)", "bound (9)",
              f"holds at {int(curves['holds'].sum())}/{len(curves)} prefixes over {toy_schemes}; FedAQ at K = {toy_rounds}: "
              f"initial-gap term {fl['initial_gap']:.3g} of a {fl['rhs']:.3g} bound vs {fl['lhs']:.3g} measured",
              report.criterion_met("the bound holds at every prefix, and at some prefix the measured side exceeds the "
                                   "initial-gap + SGD-noise terms, so the quantization terms are tested (partly: it holds, "
                                   "but by those terms alone)", bool(curves["holds"].all() and informative.any()),
                                   partly=bool(curves["holds"].all()),
                                   evidence=f"softmax regression on digits, {len(toy_schemes)} schemes, {toy_rounds} rounds"))
    for theorem, eq in (("Theorem 2", "(27), uplink-only"), ("Theorem 3", "(30), downlink-only")):
        rows = quad[quad["theorem"] == theorem]
        table.add(f"{theorem}'s bound {eq} holds and its quantization term matters (quadratic clients, exact constants)",
                  f"bound {eq.split(',')[0]}",
                  f"holds in {int(rows['holds'].sum())}/{len(rows)} runs; max measured/initial-gap term "
                  f"{rows['lhs_over_gap_term'].max():.2f}; max measured/bound {(rows['lhs'] / rows['rhs']).max():.3f}",
                  report.criterion_met("the bound holds in every run (the toy's L, sigma^2 = 0 and f(w0) - f* are exact), "
                                       "and in some run the measured side exceeds the initial-gap term, so the quantization "
                                       "term is tested (partly: it holds, but by the initial-gap term alone)",
                                       bool(rows["holds"].all() and (rows["lhs_over_gap_term"] > 1).any()),
                                       partly=bool(rows["holds"].all()),
                                       evidence=f"run_federation on d = 200 quadratics, n = 1 and 4, "
                                                f"{list(rows['scheme'].unique())}, seeds {toy_seeds}, {toy_rounds} rounds"))
    return table
