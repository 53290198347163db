"""Claims tables, the rules that judge them, and the result folders shared by the notebooks.

Each notebook ends with a claims table written to `results/<notebook>/claims.csv` with columns
claim, paper_value, measured, criterion, evidence, p_value, seeds, verdict; `collect_report` gathers them into
`results/REPORT.md`. A verdict is never typed: a rule below turns the evidence into a `Judgement`
(verdict + the criterion in words + a short evidence string + the p-value and seeds it was decided on), and
`Claims.add` takes that. docs/verdicts.md explains the rules for readers.

Rules (each tests one value per independent seed against the claim's own floor or margin; none defaults to zero;
each can read both "reproduced" and "not reproduced" from `DECIDING_SEEDS` seeds on):
- `paired_gain`: mean gain above a floor, one-sided paired t (or Wilcoxon signed-rank) test; below it by the
  opposite test "not reproduced"; otherwise "inconclusive", with the seeds that would decide it.
- `paired_equivalence`: difference within a margin, two one-sided paired t tests (TOST); three outcomes.
  Where every seed gave the same value (no spread: a t test has nothing to weigh, yet every seed lies on one side),
  these two rules fall back on the exact sign test, as `reaches_sooner` does.
- `reaches_sooner`: rounds (or cost) to a target per seed, A below (1 - margin) x B: a one-sided paired t test on
  the log ratios where nothing is censored; a run that never arrives (`fedlib.targets.NEVER`) is censored at its
  end (`horizon`, a lower bound: used only on the side where it is conservative), and where censoring (or ties)
  leave no t test, the exact sign test, which needs `SIGN_SEEDS` seeds.
- `all_hold`: several tests that must all hold (an ordering, a best-of, "every algorithm"): an intersection-union
  test (each at alpha, no correction needed), "not reproduced" when one opposite test rejects at alpha / k
  (Bonferroni), "partly" when one holds at alpha / k.
- `within_tolerance`: a measured value against the paper's, relative/absolute tolerance stated.
- `arithmetic_check`: a value recomputed from the paper's own inputs ("arithmetic check: ...").
- `criterion_met`: an exact or qualitative check whose criterion is stated in words.
- `bound_holds`: a bound against measured values; a bound that holds only vacuously says so (`vacuous_if`: the same
  label on a bound judged by another criterion).
- `illustrative`, `not_testable`: bounds with assumed constants; evidence that this scale lacks.
Every "inconclusive" row says roughly how many seeds would decide it (`seeds_to_decide`, `sign_seeds_to_decide`).
"not testable" has one wording per cause (`NOT_TESTABLE`): runs not computed yet, a claim made at another scale, a
target neither arm reaches, too few seeds, impossible evidence.
The run guards (missing, duplicated, diverged, at chance, impossible values) are the judge's: `fedlib.claims.guards`.
"""
from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Iterable, Sequence

import numpy as np
import pandas as pd

from fedlib.lazy import LazyModule

stats = LazyModule("scipy.stats")  # imported on first use: a piece on a GPU machine needs no scipy

REPRODUCED = "reproduced"
PARTLY = "partly reproduced"
NOT_REPRODUCED = "not reproduced"
DIVERGED = "not reproduced (diverged)"
# "not testable", one wording per cause, so that a reader can tell them apart
NOT_COMPUTED = "not testable: runs not computed yet"
OTHER_SCALE = "not testable: claim made at another scale"
NEITHER_REACHES = "not testable: a target neither arm reaches"
TOO_FEW_SEEDS = "not testable: too few seeds"
IMPOSSIBLE = "not testable: impossible evidence"
NOT_TESTABLE = (NOT_COMPUTED, OTHER_SCALE, NEITHER_REACHES, TOO_FEW_SEEDS, IMPOSSIBLE)
NOTHING_TO_TEST = "not testable (nothing to test)"
AGREES = "arithmetic check: agrees"
DISAGREES = "arithmetic check: disagrees"
ILLUSTRATIVE = "illustrative"
INCONCLUSIVE = "inconclusive"
VACUOUS = "holds (vacuous)"
# A claim the paper made at a larger scale than the evidence's: its negative or open verdicts say so
AT_THIS_SCALE = {NOT_REPRODUCED: "not reproduced at this scale", INCONCLUSIVE: "inconclusive at this scale"}
VERDICTS = (REPRODUCED, PARTLY, NOT_REPRODUCED, DIVERGED, *NOT_TESTABLE, NOTHING_TO_TEST, AGREES, DISAGREES,
            ILLUSTRATIVE, INCONCLUSIVE, VACUOUS, *AT_THIS_SCALE.values())
POSITIVE = (REPRODUCED, PARTLY)  # the verdicts that support a claim
VACUOUS_FACTOR = 100.0  # a bound more than this many times the measured quantity everywhere says nothing about it
COLUMNS = ["claim", "paper_value", "measured", "criterion", "evidence", "p_value", "seeds", "verdict"]
ALPHA = 0.05
DECIDING_SEEDS = 3  # the fewest seeds with which a t test decides either way (2 pairs: one degree of freedom)
SIGN_SEEDS = 5  # the fewest with which the one-sided exact sign test can reach p < 0.05 (1/32)
POWER = 0.8  # the power at which `seeds_to_decide` counts the seeds that would decide an open test


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


@dataclass(frozen=True)
class Judgement:
    """A verdict with the rule's criterion (in words), the evidence it was computed from, the one-sided p-values of
    the test for the claim (`p_value`) and of the opposite test (`p_against`), NaN where no test ran, and the
    independent seeds it read (0: none, or a rule that reads no seeds)."""

    verdict: str
    criterion: str
    evidence: str
    p_value: float = float("nan")
    p_against: float = float("nan")
    seeds: int = 0

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


# ---- power: how many seeds would decide an open test ------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _t_critical(alpha: float, least: int, most: int) -> np.ndarray:
    """t_(1-alpha, n-1) for n = least..most (one scipy call, kept: every open test of a claims table asks for it)."""
    return stats.t.ppf(1 - alpha, np.arange(least, most + 1) - 1)


@functools.lru_cache(maxsize=None)
def _z_power() -> float:
    """z_POWER (a function, not a constant: importing this module then imports no scipy)."""
    return float(stats.norm.ppf(POWER))


def seeds_to_decide(distance: float, spread: float, alpha: float, *, least: int = 3, most: int = 1000) -> int | None:
    """Roughly the number of independent seeds with which a one-sided t test at `alpha` decides a mean lying
    `distance` from the floor (or margin) with per-seed standard deviation `spread`, with probability `POWER`
    (n >= ((t_(1-alpha, n-1) + z_power) spread / distance)^2); None if no number up to `most` does (a zero
    distance, a NaN)."""
    if not (np.isfinite(distance) and np.isfinite(spread)) or distance == 0:
        return None
    n = np.arange(least, most + 1)
    enough = np.sqrt(n) * abs(distance) >= (_t_critical(alpha, least, most) + _z_power()) * spread
    return int(n[enough.argmax()]) if enough.any() else None


@functools.lru_cache(maxsize=None)
def _sign_critical(alpha: float, most: int) -> np.ndarray:
    """For n = 1..most: the fewest wins of n with which the one-sided exact sign test rejects at `alpha`, i.e. the
    smallest k with P(X >= k) < alpha under Binomial(n, 1/2) (k > n: no number of wins does)."""
    n = np.arange(1, most + 1)
    k = stats.binom.isf(alpha, n, 0.5).astype(int) + 1  # a start near the answer; the loops make it exact
    while (up := (k <= n) & (stats.binom.sf(k - 1, n, 0.5) >= alpha)).any():
        k = k + up
    while (down := (k > 1) & (stats.binom.sf(k - 2, n, 0.5) < alpha)).any():
        k = k - down
    return k


@functools.lru_cache(maxsize=4096)  # shares are wins / seeds: a few values, asked again and again
def sign_seeds_to_decide(share: float, alpha: float, *, most: int = 1000) -> int | None:
    """Roughly the number of seeds with which the one-sided exact sign test at `alpha` decides (either way) a
    share `share` of seeds won, with probability `POWER`; None at a share of one half (nothing to decide)."""
    if not np.isfinite(share) or share == 0.5:
        return None
    n, k = np.arange(1, most + 1), _sign_critical(alpha, most)
    decides = (k <= n) & (stats.binom.sf(k - 1, n, max(share, 1 - share)) >= POWER)
    return int(n[decides.argmax()]) if decides.any() else None


def _decides(n: int | None, alpha: float) -> str:
    return (f"about {n} independent seeds would decide it at alpha = {alpha:g} ({POWER:.0%} power, if the observed "
            "effect and spread held)" if n is not None else
            "no number of seeds would decide it at the observed effect (it lies on the floor)")


# ---- the tests --------------------------------------------------------------------------------------------------

def _p_greater(values: np.ndarray, threshold: float, test: str) -> float:
    """One-sided p-value for "the mean (t) / median (wilcoxon) of `values` exceeds `threshold`"."""
    d = values - threshold
    if not np.any(d):
        return 1.0
    if test == "wilcoxon":  # zsplit: zero gains count half for, half against, never dropped after the pairs were counted
        return float(stats.wilcoxon(d, alternative="greater", zero_method="zsplit", correction=True).pvalue)
    if np.all(d == d[0]):  # zero variance: the t statistic is +-inf
        return 0.0 if d[0] > 0 else 1.0
    # the one-sample t test written out: scipy's ttest_1samp spends ~2 ms a call in its wrappers
    return float(stats.t.sf(d.mean() / (d.std(ddof=1) / math.sqrt(len(d))), len(d) - 1))


def _sign_p(wins: int, n: int) -> tuple[float, float]:
    """One-sided exact sign test p-values: (A wins more than half, A wins fewer than half) of n seeds."""
    return float(stats.binom.sf(wins - 1, n, 0.5)), float(stats.binom.cdf(wins, n, 0.5))


def _sign_sides(values: np.ndarray, threshold: float) -> tuple[float, float]:
    """One-sided exact sign test p-values over n seeds: (most values lie above `threshold`, most lie below it). A
    value on the threshold counts against both sides."""
    n = len(values)
    above, below = int((values > threshold).sum()), int((values < threshold).sum())
    return float(stats.binom.sf(above - 1, n, 0.5)), float(stats.binom.sf(below - 1, n, 0.5))


def _no_spread(values: np.ndarray, what: str, unit: str, alpha: float) -> str:
    """The evidence line of a rule that fell back on the sign test: every seed gave the same value."""
    n = len(values)
    line = f"all {n} {what} equal {values[0]:+.3g}{unit}: no spread for a t test, so the exact sign test decides"
    return line + (f" ({_sign_floor(n)})" if 0.5 ** n >= alpha else "")


def _sign_floor(n: int) -> str:
    """Why the sign test cannot decide on n seeds (where 2^-n >= alpha)."""
    return f"its smallest p with {n} seeds is {0.5 ** n:.2g}: it needs >= {SIGN_SEEDS}"


def _non_finite(values: np.ndarray, what: str) -> str:
    """'' if every value is finite, else which ones are not (a missing run or a diverged one)."""
    bad = np.flatnonzero(~np.isfinite(values))
    if not len(bad):
        return ""
    return (f"{len(bad)} of {len(values)} {what} are NaN/inf (positions {', '.join(map(str, bad[:8]))}): "
            "a run is missing or diverged")


def _min_pairs(test: str, alpha: float) -> int:
    """The fewest pairs with which the test can reach p < alpha at all."""
    if test == "wilcoxon":
        return math.floor(math.log2(1 / alpha)) + 1  # the smallest one-sided p with n pairs is 2**-n
    if test == "t":
        return DECIDING_SEEDS
    raise ValueError(f"test must be 'wilcoxon' or 't', got {test!r}")


def smallest_p(test: str, n: int) -> float:
    """The smallest one-sided p-value `test` ("t", "wilcoxon", "sign") can give with n seeds: 2**-n for the exact
    rank and sign tests; for the t test 0 (an effect large against its spread) from `DECIDING_SEEDS` seeds on, 1
    below (the rules read fewer seeds as too few)."""
    if test == "t":
        return 0.0 if n >= DECIDING_SEEDS else 1.0
    if test not in ("wilcoxon", "sign"):
        raise ValueError(f"test must be 't', 'wilcoxon' or 'sign', got {test!r}")
    return 0.5 ** n


_TEST_NAMES = {"wilcoxon": "one-sided Wilcoxon signed-rank test", "t": "one-sided paired t test"}


def paired_gain(gains: Sequence[float], *, threshold: float, alpha: float = ALPHA, test: str = "t",
                cells: Sequence[float] | None = None, unit: str = "", evidence: str = "",
                bounded: bool = False) -> Judgement:
    """Is the gain (method minus baseline, one value per independent seed) larger than the claim's `threshold`?

    reproduced: the one-sided test rejects "gain <= threshold" at `alpha` (and, given `cells`, every cell's mean
    gain exceeds `threshold`; otherwise partly reproduced); not reproduced: the opposite one-sided test rejects
    "gain >= threshold" at `alpha` (the interval lies below the floor); inconclusive otherwise, with the seeds that
    would decide it; not testable: a NaN/inf gain (runs not computed) or one pair (too few seeds). Gains without any
    spread leave the t test nothing to weigh, yet every seed lies on one side: the exact sign test decides them (the
    seeds above the floor against one half; `SIGN_SEEDS` seeds reach alpha). With fewer pairs than the test needs to
    ever reach `alpha`: inconclusive.
    `bounded`: values on a bounded scale (a detection rate), where every seed at one value is the scale's bound, not
    a sign of seeds that vary nothing: equal values beyond the floor decide (the t statistic is infinite).
    """
    g = np.asarray(gains, dtype=float)
    need = _min_pairs(test, alpha)
    every = "" if cells is None else f", and every cell's mean gain > {threshold:g} (else partly)"
    tied = f"; gains all equal (no spread): the exact sign test (>= {SIGN_SEEDS} seeds)" if test == "t" else ""
    criterion = (f"mean gain > {threshold:g}{unit} by a {_TEST_NAMES[test]} at alpha = {alpha:g}{every}; below "
                 f"{threshold:g}{unit} by the opposite test: not reproduced; else inconclusive{tied}")
    missing = _non_finite(g, "gains") or ("" if cells is None else _non_finite(np.asarray(cells, dtype=float), "cells"))
    if missing:
        return Judgement(NOT_COMPUTED, criterion, _join(evidence, missing), seeds=len(g))
    if len(g) < 2:
        return Judgement(TOO_FEW_SEEDS, criterion, _join(evidence, f"{len(g)} pair; a test needs a spread"),
                         seeds=len(g))
    sign = test == "t" and np.ptp(g) == 0 and not (bounded and g[0] != threshold)  # no spread: the sign test
    sd = float(g.std(ddof=1))
    se = sd / math.sqrt(len(g))
    half = float(stats.t.ppf(1 - alpha, len(g) - 1)) * se
    stat = (_no_spread(g, "gains", unit, alpha) if sign else
            f"mean gain {g.mean():+.3g}{unit} +/- {se:.2g} (SE) over {len(g)} seeds, {int((g > 0).sum())} positive, "
            f"{1 - 2 * alpha:.0%} CI [{g.mean() - half:+.3g}, {g.mean() + half:+.3g}]")
    if cells is not None:
        c = np.asarray(cells, dtype=float)
        stat += f"; {int((c > threshold).sum())}/{len(c)} cells above {threshold:g}"
    if len(g) < need and not sign:
        return Judgement(INCONCLUSIVE, criterion, _join(evidence, stat, f"{len(g)} pairs; the test needs >= {need} to "
                                                        f"reach alpha", _decides(max(need, seeds_to_decide(
                                                            g.mean() - threshold, sd, alpha) or need), alpha)),
                         seeds=len(g))
    up, down = _sign_sides(g, threshold) if sign else (_p_greater(g, threshold, test), _p_greater(-g, -threshold, test))
    stat += f", p = {up:.2g} (above the floor), {down:.2g} (below it)"
    tested = {"p_value": up, "p_against": down, "seeds": len(g)}
    if up < alpha:
        complete = cells is None or bool((np.asarray(cells, dtype=float) > threshold).all())
        return Judgement(REPRODUCED if complete else PARTLY, criterion, _join(evidence, stat), **tested)
    if down < alpha:
        return Judgement(NOT_REPRODUCED, criterion, _join(evidence, stat), **tested)
    # equal gains on the floor count against both sides: no number of seeds decides them
    more = ((None if g[0] == threshold else sign_seeds_to_decide(1.0, alpha)) if sign else
            seeds_to_decide(g.mean() - threshold, sd, alpha))
    return Judgement(INCONCLUSIVE, criterion, _join(evidence, stat, _decides(more, alpha)), **tested)


def paired_equivalence(differences: Sequence[float], *, margin: float, alpha: float = ALPHA, unit: str = "",
                       evidence: str = "", lower: float | None = None) -> Judgement:
    """Are two methods equivalent, the difference (one paired value per independent seed) within (-`margin`,
    `margin`), or within (`lower`, `margin`) where the claim's interval is not symmetric?

    reproduced: both one-sided paired t tests (TOST) reject a difference outside at `alpha` (equivalently the
    (1 - 2 alpha) confidence interval lies inside); not reproduced: that interval lies wholly outside; inconclusive:
    it straddles a bound (the seeds that would decide it are stated); not testable with fewer than 3 pairs or a
    NaN/inf difference. Differences that are all the same leave the t tests nothing to weigh: two one-sided exact
    sign tests decide them (`SIGN_SEEDS` seeds reach alpha), the opposite reading by the sign test on its side.
    """
    d = np.asarray(differences, dtype=float)
    low = -margin if lower is None else lower
    if not low < margin:
        raise ValueError(f"the equivalence interval ({low:g}, {margin:g}) is empty")
    bounds = f"+-{margin:g}" if lower is None else f"({low:.3g}, {margin:.3g})"
    criterion = (f"mean difference inside {bounds}{unit} by two one-sided paired t tests (TOST) at alpha = {alpha:g}; "
                 f"a {1 - 2 * alpha:.0%} CI wholly outside: not reproduced; straddling a bound: inconclusive; "
                 f"differences all equal (no spread): two exact sign tests (>= {SIGN_SEEDS} seeds)")
    missing = _non_finite(d, "differences")
    if missing:
        return Judgement(NOT_COMPUTED, criterion, _join(evidence, missing), seeds=len(d))
    need = _min_pairs("t", alpha)
    if len(d) < need:
        return Judgement(TOO_FEW_SEEDS, criterion, _join(evidence, f"{len(d)} pairs; the test needs >= {need}"),
                         seeds=len(d))
    sign = np.ptp(d) == 0  # no spread: the sign test decides
    high = d.mean() > (low + margin) / 2  # the side an opposite reading lies on
    if sign:
        (above_low, below_low), (above_high, below_high) = _sign_sides(d, low), _sign_sides(d, margin)
        p, against = max(above_low, below_high), (above_high if high else below_low)
        stat = f"{_no_spread(d, 'differences', unit, alpha)}, p = {p:.2g} (inside), {against:.2g} (outside)"
        outside = against < alpha
        more = None if d[0] in (low, margin) else sign_seeds_to_decide(1.0, alpha)  # on a bound: nothing decides
    else:
        p = max(_p_greater(d, low, "t"), _p_greater(-d, -margin, "t"))
        sd = float(d.std(ddof=1))
        se = sd / math.sqrt(len(d))
        half = float(stats.t.ppf(1 - alpha, len(d) - 1)) * se
        ci_low, ci_high = d.mean() - half, d.mean() + half
        against = _p_greater(d, margin, "t") if high else _p_greater(-d, -low, "t")
        stat = (f"mean difference {d.mean():+.3g}{unit} +/- {se:.2g} (SE) over {len(d)} seeds, "
                f"{1 - 2 * alpha:.0%} CI [{ci_low:+.3g}, {ci_high:+.3g}], p = {p:.2g}")
        outside = ci_low >= margin or ci_high <= low
        more = seeds_to_decide(min(margin - d.mean(), d.mean() - low), sd, alpha)
    tested = {"p_value": p, "p_against": against, "seeds": len(d)}
    if p < alpha:
        return Judgement(REPRODUCED, criterion, _join(evidence, stat), **tested)
    if outside:
        return Judgement(NOT_REPRODUCED, criterion, _join(evidence, stat), **tested)
    return Judgement(INCONCLUSIVE, criterion, _join(evidence, stat, _decides(more, alpha)), **tested)


def _sooner_criterion(quantity: str, names: tuple[str, str], margin: float, alpha: float) -> str:
    return (f"{quantity}, one value per seed: {names[0]} below {1 - margin:g} x {names[1]} by a one-sided paired t "
            f"test on the log ratios at alpha = {alpha:g}, a run that never reached it counted at its end on the side "
            "where that is conservative; where censoring or ties leave no t test, by the exact sign test "
            f"(>= {SIGN_SEEDS} seeds); the opposite test rejecting: not reproduced; else inconclusive")


def _sooner_untestable(x: np.ndarray, y: np.ndarray, names: tuple[str, str], quantity: str,
                       min_pairs: int) -> tuple[str, str] | None:
    """(verdict, why) where `reaches_sooner`'s values cannot be tested: a NaN, a negative value, too few seeds."""
    na, nb = names
    if np.isnan(x).any() or np.isnan(y).any():
        bad = np.flatnonzero(np.isnan(x) | np.isnan(y))
        return NOT_COMPUTED, f"pairs {', '.join(map(str, bad))} have a NaN {quantity}: a run is missing"
    if (x < 0).any() or (y < 0).any():
        return IMPOSSIBLE, f"a negative {quantity} ({na} {list(x)}, {nb} {list(y)}): impossible evidence"
    if len(x) < min_pairs:
        return TOO_FEW_SEEDS, f"{len(x)} pairs; the rule needs >= {min_pairs} independent pairs (seeds)"
    return None


def _sooner_side(t_ok: bool, ratios: np.ndarray, sign: float, floor: float, up: bool) -> tuple[float, str]:
    """(p, "t") of one side of `reaches_sooner` where the t test applies to the log `ratios`, else (`sign`, "sign")."""
    if t_ok and len(ratios) >= DECIDING_SEEDS and np.all(np.isfinite(ratios)) and np.ptp(ratios) > 0:
        return (_p_greater(-ratios, -floor, "t") if up else _p_greater(ratios, floor, "t")), "t"
    return sign, "sign"


def reaches_sooner(a: Sequence[float], b: Sequence[float], *, names: tuple[str, str] = ("A", "B"),
                   quantity: str = "rounds to target", evidence: str = "", min_pairs: int = DECIDING_SEEDS,
                   margin: float, alpha: float = ALPHA,
                   horizon: tuple[Sequence[float], Sequence[float]] | None = None) -> Judgement:
    """Does method A reach the target sooner (fewer rounds, less energy, ...) than B by more than `margin` (a
    fraction of B's value), seed by seed?

    `a[i]`, `b[i]` are the two methods' values on independent seed i, `fedlib.targets.NEVER` (inf) where a run never
    reached the target: censored. `horizon` gives each run's value at its end ((A's, B's), the rounds it ran or the
    cost it spent), a lower bound of a censored value. Each side is tested on its own:
    - "A sooner" (reproduced) by a one-sided paired t test of the log ratios log(a / b) < log(1 - margin), a
      censored B replaced by its horizon (which only understates B: conservative); where A is censored on a seed
      (or no horizon is given for a censored B), by the one-sided exact sign test, a seed counting for A where
      a < (1 - margin) x b;
    - "A not sooner" (not reproduced) the same way mirrored: a censored A at its horizon, the sign test where B is
      censored.
    The sign test (also where the log ratios have no spread) needs `SIGN_SEEDS` seeds to reach p < 0.05.
    inconclusive: neither side rejects at `alpha` (the seeds that would decide it are stated); not testable: a NaN
    value (runs not computed: NaN is not "never reached", that is inf), a negative one (impossible evidence), fewer
    than `min_pairs` seeds, or a target that neither arm reaches on any seed.
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"a and b must be paired (same length), got {len(x)} and {len(y)}")
    if not 0 <= margin < 1:
        raise ValueError(f"margin is a fraction of B's value in [0, 1), got {margin!r}")
    n = len(x)
    na, nb = names
    criterion = _sooner_criterion(quantity, names, margin, alpha)
    refused = _sooner_untestable(x, y, names, quantity, min_pairs)
    if refused is not None:
        return Judgement(refused[0], criterion, _join(evidence, refused[1]), seeds=n)
    never_a, never_b = ~np.isfinite(x), ~np.isfinite(y)
    reached = f"{na} reached it on {int((~never_a).sum())}/{n} seeds, {nb} on {int((~never_b).sum())}/{n}"
    if (never_a & never_b).all():
        return Judgement(NEITHER_REACHES, criterion, _join(evidence, reached), seeds=n)
    ha, hb = (np.full(n, np.nan), np.full(n, np.nan)) if horizon is None else map(np.asarray, horizon)
    floor = math.log(1 - margin) if margin > 0 else 0.0
    wins = int((x < (1 - margin) * y).sum())
    sign_up, sign_down = _sign_p(wins, n)
    with np.errstate(divide="ignore", invalid="ignore"):
        up_ratios = np.log(x / np.where(never_b, hb, y))
        down_ratios = np.log(np.where(never_a, ha, x) / y)
    up, up_test = _sooner_side(not never_a.any(), up_ratios, sign_up, floor, True)
    down, down_test = _sooner_side(not never_b.any(), down_ratios, sign_down, floor, False)
    shown = up_ratios if up_test == "t" else down_ratios if down_test == "t" else None
    ratio = (f"mean log ratio {np.mean(shown):+.3g} (ratio {math.exp(np.mean(shown)):.3g}) vs floor {floor:+.3g}; "
             if shown is not None else "")
    stat = (f"{reached}; {ratio}{na} below {1 - margin:g} x {nb} on {wins} of {n} seeds; p = {up:.2g} (sooner, "
            f"{up_test} test), {down:.2g} (not sooner, {down_test} test)")
    tested = {"p_value": up, "p_against": down, "seeds": n}
    if up < alpha:
        return Judgement(REPRODUCED, criterion, _join(evidence, stat), **tested)
    if down < alpha:
        return Judgement(NOT_REPRODUCED, criterion, _join(evidence, stat), **tested)
    floor_note = (f"censoring or ties leave the sign test, whose {_sign_floor(n).removeprefix('its ')}"
                  if "sign" in (up_test, down_test) and 0.5 ** n >= alpha else "")
    more = (seeds_to_decide(float(np.mean(shown)) - floor, float(np.std(shown, ddof=1)), alpha) if shown is not None
            else sign_seeds_to_decide(wins / n, alpha))
    return Judgement(INCONCLUSIVE, criterion, _join(evidence, stat, floor_note, _decides(more, alpha)), **tested)


def _combined(parts: Sequence[tuple[str, Judgement]]) -> tuple[int, str | None, np.ndarray, np.ndarray]:
    """The parts' most seeds, the first not-testable cause among them (None: none), and their p-values for and
    against (an untested part's NaN read as 1)."""
    blocked = next((j.verdict for _, j in parts if j.verdict in NOT_TESTABLE), None)
    p_for = np.nan_to_num(np.array([j.p_value for _, j in parts]), nan=1.0)
    p_against = np.nan_to_num(np.array([j.p_against for _, j in parts]), nan=1.0)
    return max(j.seeds for _, j in parts), blocked, p_for, p_against


def all_hold(parts: Sequence[tuple[str, Judgement]], *, what: str, alpha: float = ALPHA, partly: bool = False,
             measured_with: str = "") -> Judgement:
    """Tests that must all hold (an ordering between neighbours, a best-of against each other method, "for every
    algorithm"), each (name, its judgement at `alpha`) on the same seeds.

    reproduced: every test rejects at `alpha` (an intersection-union test: its level is alpha with no correction);
    not reproduced: some opposite test rejects at alpha / k (Bonferroni over the k tests); partly (where the claim
    allows it): some test rejects at alpha / k; the first not-testable cause of a part stands for the whole;
    inconclusive otherwise."""
    k = len(parts)
    if not k:
        raise ValueError("all_hold needs at least one test")
    criterion = (f"{what}: each of {k} tests at alpha = {alpha:g} (intersection-union: no correction needed); the "
                 f"opposite of one at alpha / {k} (Bonferroni): not reproduced"
                 + (f"; one at alpha / {k}: partly" if partly else "") + f" ({parts[0][1].criterion})")
    evidence = _join(measured_with, "; ".join(f"{name}: {j.verdict}, {j.evidence}" for name, j in parts))
    seeds, blocked, p_for, p_against = _combined(parts)
    if blocked is not None:
        return Judgement(blocked, criterion, evidence, seeds=seeds)
    tested = {"p_value": float(p_for.max()), "p_against": float(min(1.0, k * p_against.min())), "seeds": seeds}
    if (p_for < alpha).all():
        return Judgement(REPRODUCED, criterion, evidence, **tested)
    if (p_against < alpha / k).any():
        return Judgement(NOT_REPRODUCED, criterion, evidence, **tested)
    if partly and (p_for < alpha / k).any():
        return Judgement(PARTLY, criterion, evidence, **tested)
    return Judgement(INCONCLUSIVE, criterion, evidence, **tested)


def any_holds(parts: Sequence[tuple[str, Judgement]], *, what: str, alpha: float = ALPHA) -> Judgement:
    """Tests of which one holding suffices (a claim two readings of a method can make, "A or B is fastest"), each
    (name, its judgement at `alpha`) on the same seeds: the dual of `all_hold`.

    reproduced: some test rejects at alpha / k (Bonferroni over the k tests: the union keeps its level at alpha);
    not reproduced: every opposite test rejects at `alpha` (intersection-union); the first not-testable cause of a
    part stands for the whole; inconclusive otherwise. Its p-value is k x the smallest part's (at most 1), its
    opposite p-value the largest opposite one, so that it can be a part of `all_hold`."""
    k = len(parts)
    if not k:
        raise ValueError("any_holds needs at least one test")
    criterion = (f"{what}: one of {k} tests at alpha / {k} = {alpha / k:.3g} (Bonferroni); the opposite of every one at "
                 f"alpha = {alpha:g} (intersection-union): not reproduced ({parts[0][1].criterion})")
    evidence = "; ".join(f"{name}: {j.verdict}, {j.evidence}" for name, j in parts)
    seeds, blocked, p_for, p_against = _combined(parts)
    if blocked is not None:
        return Judgement(blocked, criterion, evidence, seeds=seeds)
    tested = {"p_value": float(min(1.0, k * p_for.min())), "p_against": float(p_against.max()), "seeds": seeds}
    if (p_for < alpha / k).any():
        return Judgement(REPRODUCED, criterion, evidence, **tested)
    if (p_against < alpha).all():
        return Judgement(NOT_REPRODUCED, criterion, evidence, **tested)
    return Judgement(INCONCLUSIVE, criterion, evidence, **tested)


def _tolerance(measured: object, reference: object, rtol: float, atol: float) -> tuple[bool, str, str]:
    """(all within tolerance, the tolerance in words, the largest deviation in words)."""
    m, r = np.asarray(measured, dtype=float), np.asarray(reference, dtype=float)
    dev = np.abs(m - r)
    ok = bool(np.all(dev <= atol + rtol * np.abs(r)))
    words = " + ".join(t for t in (f"{atol:g}" if atol else "", f"{rtol:g} x |paper|" if rtol else "") if t) or "0"
    return ok, f"|measured - paper| <= {words}", f"largest |difference| {float(dev.max()):.3g} over {dev.size} values"


def within_tolerance(measured: object, paper: object, *, rtol: float = 0.0, atol: float = 0.0,
                     evidence: str = "") -> Judgement:
    """A measured value (or array) against the paper's: reproduced iff every value is within tolerance."""
    ok, words, dev = _tolerance(measured, paper, rtol, atol)
    return Judgement(REPRODUCED if ok else NOT_REPRODUCED, words, _join(evidence, dev))


def arithmetic_check(recomputed: object, paper: object, *, rtol: float = 0.0, atol: float = 0.0,
                     inputs: str = "the paper's own inputs") -> Judgement:
    """A value recomputed from the paper's own inputs: it checks the paper's arithmetic, it reproduces nothing."""
    ok, words, dev = _tolerance(recomputed, paper, rtol, atol)
    return Judgement(AGREES if ok else DISAGREES, f"recomputed from {inputs}: {words}", dev)


def criterion_met(criterion: str, passed: bool, *, partly: bool = False, evidence: str = "") -> Judgement:
    """An exact or qualitative check stated in `criterion`: reproduced if `passed`, else partly reproduced
    if `partly` (the criterion must say what partly means), else not reproduced."""
    verdict = REPRODUCED if passed else PARTLY if partly else NOT_REPRODUCED
    return Judgement(verdict, criterion, evidence)


def bound_holds(measured: object, bound: object, *, what: str, vacuous_factor: float = VACUOUS_FACTOR,
                evidence: str = "") -> Judgement:
    """Does an upper bound hold on measured values (elementwise, measured <= bound)?

    not testable: a NaN/inf value (a missing or diverged run); not reproduced: measured > bound somewhere;
    holds (vacuous): it holds but the bound exceeds the measured value by more than `vacuous_factor` everywhere
    (it would hold for almost anything); reproduced: it holds and is tight somewhere.
    """
    m, b = np.asarray(measured, dtype=float).ravel(), np.asarray(bound, dtype=float).ravel()
    if m.shape != b.shape or not m.size:
        raise ValueError(f"measured and bound must be paired and non-empty, got {m.size} and {b.size} values")
    criterion = (f"{what}: measured <= bound at every point; a bound > {vacuous_factor:g} x measured at every point "
                 "holds only vacuously")
    missing = _non_finite(m, "measured values") or _non_finite(b, "bound values")
    if missing:
        return Judgement(NOT_COMPUTED, criterion, _join(evidence, missing))
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(m > 0, b / m, np.inf)
    stat = (f"bound holds at {int((m <= b).sum())}/{m.size} points; smallest bound / measured "
            f"{float(ratio.min()):.3g}")
    if not (m <= b).all():
        return Judgement(NOT_REPRODUCED, criterion, _join(evidence, stat))
    return Judgement(VACUOUS if ratio.min() > vacuous_factor else REPRODUCED, criterion, _join(evidence, stat))


def vacuous_if(judgement: Judgement, measured: object, bound: object, *, what: str) -> Judgement:
    """`judgement`, a verdict that a bound holds (judged by another criterion), read "holds (vacuous)" where
    `bound_holds(measured, bound)` finds the bound above `VACUOUS_FACTOR` x the measured value at every point (it
    would hold for almost anything); a positive verdict gets that rule's criterion and evidence (the smallest
    bound / measured) either way."""
    if judgement.verdict not in POSITIVE:
        return judgement
    tightness = bound_holds(measured, bound, what=what)
    return Judgement(VACUOUS if tightness.verdict == VACUOUS else judgement.verdict,
                     _join(judgement.criterion, tightness.criterion), _join(judgement.evidence, tightness.evidence))


def illustrative(assumptions: str, outcome: str) -> Judgement:
    """A bound evaluated with assumed (not measured) constants: it illustrates, it cannot test the claim."""
    return Judgement(ILLUSTRATIVE, f"evaluated with assumed constants ({assumptions}), so it cannot test the claim", outcome)


def not_testable(cause: str, reason: str, evidence: str = "") -> Judgement:
    """The evidence the claim needs is absent: `cause` is one of `NOT_TESTABLE`, `reason` says why."""
    if cause not in NOT_TESTABLE:
        raise ValueError(f"cause must be one of {NOT_TESTABLE}, got {cause!r}")
    return Judgement(cause, reason, evidence)


def p_text(p: float) -> str:
    """A p-value as a claims table shows it ("-": no test ran)."""
    return "-" if not np.isfinite(p) else f"{p:.2g}"


class Claims:
    """Accumulates claim rows; every measured value comes from a run or a computation, every verdict from a rule."""

    def __init__(self) -> None:
        self.rows: list[dict[str, str]] = []
        self.errata: list[bool] = []  # per row: an errata check (a formula or derivation the paper prints, checked)

    def add(self, claim: str, paper_value: object, measured: object, judgement: Judgement,
            erratum: bool = False) -> None:
        """One row; `erratum`: it checks a formula or derivation the paper prints, so that its "not reproduced"
        confirms an erratum (shown apart from the experimental verdicts: `errata_checks`)."""
        if not isinstance(judgement, Judgement):
            raise TypeError(f"a claim's verdict comes from a rule in fedlib.report (a Judgement), got {judgement!r}")
        self.rows.append({"claim": claim, "paper_value": str(paper_value), "measured": str(measured),
                          "criterion": judgement.criterion, "evidence": judgement.evidence,
                          "p_value": p_text(judgement.p_value), "seeds": str(judgement.seeds or "-"),
                          "verdict": judgement.verdict})
        self.errata.append(erratum)

    def errata_checks(self) -> pd.Series:
        """Per row of `table()`, whether it is an errata check."""
        return pd.Series(self.errata, dtype=bool)

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=COLUMNS)

    def save(self, folder: Path) -> Path:
        path = Path(folder) / "claims.csv"
        self.table().to_csv(path, index=False)
        return path


SCALE_NOTE = ("Verdicts judged at a smaller scale than the paper's (another dataset or model, fewer clients per round or "
              "rounds) are small-scale analogues: a negative or open one reads \"... at this scale\" and is not a "
              "refutation of the paper.")


def _scale_line(folder: Path) -> str:
    """'Scale: ...; the paper's: ...' from the folder's scale.json (written beside claims.csv by the judge)."""
    path = folder / "scale.json"
    if not path.exists():
        return "Scale: not recorded (rendered before scales were saved)"
    try:
        scale = json.loads(path.read_text())
        return f"Scale: {scale['here'] or 'not stated'}; the paper's: {scale['paper'] or 'no single setting'}"
    except (ValueError, KeyError, TypeError) as err:
        raise ValueError(f"{path}: unreadable scale ({err}); judge the claims again (reproduce --claims-only)") from err


def markdown_row(cells: Iterable[object]) -> str:
    """One row of a markdown table: each cell as text, its pipes escaped and its line breaks spaces (either would
    break the row)."""
    return "| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |"


def collect_report(results: Path) -> str:
    """Markdown with every `<results>/*/claims.csv`, one section per notebook, each with its scale beside the
    paper's."""
    parts = [SCALE_NOTE, ""]
    files = sorted(results.glob("*/claims.csv"))
    if not files:
        raise FileNotFoundError(f"no claims.csv under {results}: run `make reproduce` first")
    for f in files:
        df = pd.read_csv(f, dtype=str).reindex(columns=COLUMNS).fillna("")
        counts = df["verdict"].value_counts().to_dict()
        parts += [f"## {f.parent.name}", "", _scale_line(f.parent), "", ", ".join(f"{v}: {n}" for v, n in counts.items()),
                  ""]
        parts += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        for _, row in df.iterrows():
            parts.append(markdown_row(row[c] for c in COLUMNS))
        parts.append("")
    return "\n".join(parts)
