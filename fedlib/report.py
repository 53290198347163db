"""Claims tables, the rules that judge them, and the result folders shared by the notebooks.

Each notebook ends with a claims table written to `results/<notebook>/claims.csv` with columns
claim, paper_value, measured, criterion, evidence, verdict; `collect_report` gathers them into
`results/REPORT.md`. A verdict is never typed: a rule below turns the evidence into a `Judgement`
(verdict + the criterion in words + a short evidence string), and `Claims.add` takes that.

Rules (each tests one value per independent seed against the claim's own floor or margin; none defaults to zero):
- `paired_gain`: mean gain above a floor, one-sided Wilcoxon signed-rank or paired t test; below it by the
  opposite test "not reproduced"; otherwise "inconclusive", with the seeds that would decide it.
- `paired_equivalence`: |difference| within a margin, two one-sided paired t tests (TOST); three outcomes.
- `reaches_sooner`: rounds (or cost) to a target per seed, a seed counting only where A is below (1 - margin) x B;
  a run that never arrives (`fedlib.targets.NEVER`) is a censored worst value, never dropped; exact sign test.
- `point_estimate`: an ordering or best-of of means that no test backs: "consistent with the paper, not tested".
- `within_tolerance`: a measured value against the paper's, relative/absolute tolerance stated.
- `arithmetic_check`: a value recomputed from the paper's own inputs ("arithmetic check: ...").
- `criterion_met`: an exact or qualitative check whose criterion is stated in words.
- `bound_holds`: a bound against measured values; a bound that holds only vacuously says so (`vacuous_if`: the same
  label on a bound judged by another criterion).
- `illustrative`, `not_testable`: bounds with assumed constants; evidence that this scale lacks.
Every "inconclusive" row says roughly how many seeds would decide it (`seeds_to_decide`, `sign_seeds_to_decide`).
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
NOT_TESTABLE = "not testable at this scale"
NOTHING_TO_TEST = "not testable (nothing to test)"
AGREES = "arithmetic check: agrees"
DISAGREES = "arithmetic check: disagrees"
ILLUSTRATIVE = "illustrative"
INCONCLUSIVE = "inconclusive"
VACUOUS = "holds (vacuous)"
CONSISTENT = "consistent with the paper, not tested"
AT_ODDS = "at odds with the paper, not tested"
# A claim the paper made at a larger scale than the evidence's: its negative or open verdicts say so
AT_THIS_SCALE = {NOT_REPRODUCED: "not reproduced at this scale", INCONCLUSIVE: "inconclusive at this scale",
                 AT_ODDS: "at odds with the paper at this scale, not tested"}
VERDICTS = (REPRODUCED, PARTLY, NOT_REPRODUCED, DIVERGED, NOT_TESTABLE, NOTHING_TO_TEST, AGREES, DISAGREES,
            ILLUSTRATIVE, INCONCLUSIVE, VACUOUS, CONSISTENT, AT_ODDS, *AT_THIS_SCALE.values())
POSITIVE = (REPRODUCED, PARTLY)  # the verdicts that support a claim
VACUOUS_FACTOR = 100.0  # a bound more than this many times the measured quantity everywhere says nothing about it
COLUMNS = ["claim", "paper_value", "measured", "criterion", "evidence", "verdict"]
POWER = 0.8  # the power at which `seeds_to_decide` counts the seeds that would decide an open test
_Z_POWER = float(stats.norm.ppf(POWER))


def _join(*parts: str) -> str:
    return "; ".join(p for p in parts if p)


@dataclass(frozen=True)
class Judgement:
    """A verdict with the rule's criterion (in words) and the evidence it was computed from."""

    verdict: str
    criterion: str
    evidence: str

    def __post_init__(self) -> None:
        if self.verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {self.verdict!r}")


# ---- power: how many seeds would decide an open test ------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def _t_critical(alpha: float, least: int, most: int) -> np.ndarray:
    """t_(1-alpha, n-1) for n = least..most (one scipy call, kept: every open test of a claims table asks for it)."""
    return stats.t.ppf(1 - alpha, np.arange(least, most + 1) - 1)


def seeds_to_decide(distance: float, spread: float, alpha: float, *, least: int = 3, most: int = 1000) -> int | None:
    """Roughly the number of independent seeds with which a one-sided t test at `alpha` decides a mean lying
    `distance` from the floor (or margin) with per-seed standard deviation `spread`, with probability `POWER`
    (n >= ((t_(1-alpha, n-1) + z_power) spread / distance)^2); None if no number up to `most` does (a zero
    distance, a NaN)."""
    if not (np.isfinite(distance) and np.isfinite(spread)) or distance == 0:
        return None
    n = np.arange(least, most + 1)
    enough = np.sqrt(n) * abs(distance) >= (_t_critical(alpha, least, most) + _Z_POWER) * spread
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
        return 3  # with 2 pairs one spread estimate from one degree of freedom decides everything
    raise ValueError(f"test must be 'wilcoxon' or 't', got {test!r}")


_TEST_NAMES = {"wilcoxon": "one-sided Wilcoxon signed-rank test", "t": "one-sided paired t test"}


def paired_gain(gains: Sequence[float], *, threshold: float, alpha: float = 0.05, test: str = "wilcoxon",
                cells: Sequence[float] | None = None, unit: str = "", evidence: str = "") -> Judgement:
    """Is the gain (method minus baseline, one value per independent seed) larger than the claim's `threshold`?

    reproduced: the one-sided test rejects "gain <= threshold" at `alpha` (and, given `cells`, every cell's mean
    gain exceeds `threshold`; otherwise partly reproduced); not reproduced: the opposite one-sided test rejects
    "gain >= threshold" at `alpha` (the interval lies below the floor); inconclusive otherwise, with the seeds that
    would decide it; not testable: a NaN/inf gain, one pair, or, for the t test, gains without any spread. With
    fewer pairs than the test needs to ever reach `alpha` the verdict is inconclusive.
    """
    g = np.asarray(gains, dtype=float)
    need = _min_pairs(test, alpha)
    every = "" if cells is None else f", and every cell's mean gain > {threshold:g} (else partly)"
    criterion = (f"mean gain > {threshold:g}{unit} by a {_TEST_NAMES[test]} at alpha = {alpha:g}{every}; below "
                 f"{threshold:g}{unit} by the opposite test: not reproduced; else inconclusive")
    missing = _non_finite(g, "gains") or ("" if cells is None else _non_finite(np.asarray(cells, dtype=float), "cells"))
    if missing:
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, missing))
    if len(g) < 2:
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, f"{len(g)} pair; a test needs a spread"))
    if test == "t" and np.ptp(g) == 0:
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, f"all {len(g)} gains equal {g[0]:+.3g}{unit}: "
                                                        "no spread for a t test"))
    sd = float(g.std(ddof=1))
    se = sd / math.sqrt(len(g))
    half = float(stats.t.ppf(1 - alpha, len(g) - 1)) * se
    stat = (f"mean gain {g.mean():+.3g}{unit} +/- {se:.2g} (SE) over {len(g)} seeds, {int((g > 0).sum())} positive, "
            f"{1 - 2 * alpha:.0%} CI [{g.mean() - half:+.3g}, {g.mean() + half:+.3g}]")
    if cells is not None:
        c = np.asarray(cells, dtype=float)
        stat += f"; {int((c > threshold).sum())}/{len(c)} cells above {threshold:g}"
    if len(g) < need:
        return Judgement(INCONCLUSIVE, criterion, _join(evidence, stat, f"{len(g)} pairs; the test needs >= {need} to "
                                                        f"reach alpha", _decides(max(need, seeds_to_decide(
                                                            g.mean() - threshold, sd, alpha) or need), alpha)))
    up, down = _p_greater(g, threshold, test), _p_greater(-g, -threshold, test)
    stat += f", p = {up:.2g} (above the floor), {down:.2g} (below it)"
    if up < alpha:
        complete = cells is None or bool((np.asarray(cells, dtype=float) > threshold).all())
        return Judgement(REPRODUCED if complete else PARTLY, criterion, _join(evidence, stat))
    if down < alpha:
        return Judgement(NOT_REPRODUCED, criterion, _join(evidence, stat))
    return Judgement(INCONCLUSIVE, criterion, _join(evidence, stat, _decides(
        seeds_to_decide(g.mean() - threshold, sd, alpha), alpha)))


def paired_equivalence(differences: Sequence[float], *, margin: float, alpha: float = 0.05, unit: str = "",
                       evidence: str = "") -> Judgement:
    """Are two methods equivalent within +-`margin` (one paired difference per independent seed)?

    reproduced: both one-sided paired t tests (TOST) reject |difference| >= margin at `alpha` (equivalently the
    (1 - 2 alpha) confidence interval lies inside +-margin); not reproduced: that interval lies wholly outside
    +-margin; inconclusive: it straddles the margin (the test lacks the power to decide; the seeds that would
    decide it are stated); not testable with fewer than 3 pairs, a NaN/inf difference, or when every difference
    is the same.
    """
    d = np.asarray(differences, dtype=float)
    criterion = (f"|mean difference| < {margin:g}{unit} by two one-sided paired t tests (TOST) at alpha = {alpha:g}; "
                 f"a {1 - 2 * alpha:.0%} CI straddling +-{margin:g} is inconclusive")
    missing = _non_finite(d, "differences")
    if missing:
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, missing))
    need = _min_pairs("t", alpha)
    if len(d) < need:
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, f"{len(d)} pairs; the test needs >= {need}"))
    if np.ptp(d) == 0:
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, f"all {len(d)} differences equal {d[0]:+.3g}{unit}: "
                                                        "no spread to test against"))
    p = max(_p_greater(d, -margin, "t"), _p_greater(-d, -margin, "t"))
    sd = float(d.std(ddof=1))
    se = sd / math.sqrt(len(d))
    half = float(stats.t.ppf(1 - alpha, len(d) - 1)) * se
    low, high = d.mean() - half, d.mean() + half
    stat = (f"mean difference {d.mean():+.3g}{unit} +/- {se:.2g} (SE) over {len(d)} seeds, "
            f"{1 - 2 * alpha:.0%} CI [{low:+.3g}, {high:+.3g}], p = {p:.2g}")
    if p < alpha:
        return Judgement(REPRODUCED, criterion, _join(evidence, stat))
    if low >= margin or high <= -margin:
        return Judgement(NOT_REPRODUCED, criterion, _join(evidence, stat))
    return Judgement(INCONCLUSIVE, criterion, _join(evidence, stat, _decides(
        seeds_to_decide(margin - abs(d.mean()), sd, alpha), alpha)))


def reaches_sooner(a: Sequence[float], b: Sequence[float], *, names: tuple[str, str] = ("A", "B"),
                   quantity: str = "rounds to target", evidence: str = "", min_pairs: int = 3, margin: float,
                   alpha: float = 0.05) -> Judgement:
    """Does method A reach the target sooner (fewer rounds, less energy, ...) than B by more than `margin` (a
    fraction of B's value), seed by seed?

    `a[i]`, `b[i]` are the two methods' values on independent seed i, `fedlib.targets.NEVER` (inf) where a run never
    reached the target: a censored value worse than any finite one. A seed counts for A only where
    a < (1 - margin) x b (never vs never does not count). reproduced: a one-sided exact sign test rejects "A wins at
    most half of the seeds" at `alpha`; not reproduced: the opposite test rejects "A wins at least half"; inconclusive
    otherwise, with the seeds that would decide it (3 seeds can never decide: the smallest p is 1/8); not testable
    with fewer than `min_pairs` seeds, a NaN value (a missing run; NaN is not "never reached", that is inf) or a
    negative one (no count of rounds or cost is negative).
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"a and b must be paired (same length), got {len(x)} and {len(y)}")
    if not 0 <= margin < 1:
        raise ValueError(f"margin is a fraction of B's value in [0, 1), got {margin!r}")
    n = len(x)
    na, nb = names
    criterion = (f"{quantity}, one value per seed, never reached counted as worse than any value: a seed counts for "
                 f"{na} where it is below {1 - margin:g} x {nb}'s; {na} counts on more than half of the seeds by a "
                 f"one-sided exact sign test at alpha = {alpha:g} (on fewer than half by the opposite test: not "
                 "reproduced; else inconclusive)")
    if np.isnan(x).any() or np.isnan(y).any():
        bad = np.flatnonzero(np.isnan(x) | np.isnan(y))
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, f"pairs {', '.join(map(str, bad))} have a NaN "
                                                        f"{quantity}: a run is missing"))
    if (x < 0).any() or (y < 0).any():
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, f"a negative {quantity} ({na} {list(x)}, {nb} "
                                                        f"{list(y)}): impossible evidence"))
    if n < min_pairs:
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, f"{n} pairs; the rule needs >= {min_pairs} "
                                                        "independent pairs (seeds)"))
    wins = int((x < (1 - margin) * y).sum())
    up, down = float(stats.binom.sf(wins - 1, n, 0.5)), float(stats.binom.cdf(wins, n, 0.5))
    stat = (f"{na} reached it in {int(np.isfinite(x).sum())}/{n}, {nb} in {int(np.isfinite(y).sum())}/{n}; {na} "
            f"below {1 - margin:g} x {nb} on {wins} of {n} seeds, p = {up:.2g} (sooner), {down:.2g} (not sooner)")
    if up < alpha:
        return Judgement(REPRODUCED, criterion, _join(evidence, stat))
    if down < alpha:
        return Judgement(NOT_REPRODUCED, criterion, _join(evidence, stat))
    floor = f"with {n} seeds the smallest p is {0.5 ** n:.2g}" if 0.5 ** n >= alpha else ""
    return Judgement(INCONCLUSIVE, criterion, _join(evidence, stat, floor,
                                                    _decides(sign_seeds_to_decide(wins / n, alpha), alpha)))


def point_estimate(criterion: str, agrees: bool, *, evidence: str = "") -> Judgement:
    """A comparison of point estimates (means over seeds, an ordering, a best-of) that no test backs: it can agree
    with the paper or not, but it tests nothing ("consistent with the paper, not tested" / "at odds ...")."""
    return Judgement(CONSISTENT if agrees else AT_ODDS, f"{criterion} (point estimates, no test)", evidence)


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
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, missing))
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


def not_testable(reason: str, evidence: str = "") -> Judgement:
    """The evidence the claim needs is absent at this scale; `reason` says why."""
    return Judgement(NOT_TESTABLE, reason, evidence)


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
                          "criterion": judgement.criterion, "evidence": judgement.evidence, "verdict": judgement.verdict})
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
