"""Claims tables, the rules that judge them, and the result folders shared by the notebooks.

Each notebook ends with a claims table written to `results/<notebook>/claims.csv` with columns
claim, paper_value, measured, criterion, evidence, verdict; `collect_report` gathers them into
`results/REPORT.md`. A verdict is never typed: a rule below turns the evidence into a `Judgement`
(verdict + the criterion in words + a short evidence string), and `Claims.add` takes that.

Rules:
- `paired_gain`: mean gain across paired seeds/cells, one-sided Wilcoxon signed-rank or paired t test.
- `paired_equivalence`: |difference| within a margin, two one-sided paired t tests (TOST).
- `proportion_above`: a proportion above a reference value, one-sided exact binomial test.
- `reaches_sooner`: rounds (or cost) to a target per paired seed; a run that never arrives
  (`fedlib.targets.NEVER`) is counted as worse than any finite value, never dropped.
- `within_tolerance`: a measured value against the paper's, relative/absolute tolerance stated.
- `arithmetic_check`: a value recomputed from the paper's own inputs ("arithmetic check: ...").
- `criterion_met`: an exact or qualitative check whose criterion is stated in words.
- `illustrative`, `not_testable`: bounds with assumed constants; evidence that this scale lacks.
- `Judgement.unless_diverged`: a run that diverged (non-finite loss, a `diverged` flag, or final
  accuracy within a margin of chance) turns any verdict it supports into "not reproduced (diverged)".
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Sequence

import numpy as np
import pandas as pd
from scipy import stats

REPRODUCED = "reproduced"
PARTLY = "partly reproduced"
NOT_REPRODUCED = "not reproduced"
DIVERGED = "not reproduced (diverged)"
NOT_TESTABLE = "not testable at this scale"
AGREES = "arithmetic check: agrees"
DISAGREES = "arithmetic check: disagrees"
ILLUSTRATIVE = "illustrative"
INCONCLUSIVE = "inconclusive"
VACUOUS = "holds (vacuous)"
VERDICTS = (REPRODUCED, PARTLY, NOT_REPRODUCED, DIVERGED, NOT_TESTABLE, AGREES, DISAGREES, ILLUSTRATIVE, INCONCLUSIVE,
            VACUOUS)
VACUOUS_FACTOR = 100.0  # a bound more than this many times the measured quantity everywhere says nothing about it
COLUMNS = ["claim", "paper_value", "measured", "criterion", "evidence", "verdict"]
CHANCE_MARGIN = 0.02  # final accuracy <= 1/num_classes + this counts as "at chance"


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

    def unless_diverged(self, rounds: pd.DataFrame, *, by: Sequence[str] = (), num_classes: int | None = None,
                        margin: float = CHANCE_MARGIN) -> Judgement:
        """This judgement, or "not reproduced (diverged)" if any run in `rounds` diverged (see `diverged_runs`).

        `rounds` holds the per-round records of every run the claim depends on; `by` names the columns
        that identify a run (e.g. ["algorithm", "seed"]).
        """
        bad = diverged_runs(rounds, by=by, num_classes=num_classes, margin=margin)
        chance = f" or final accuracy <= 1/{num_classes} + {margin}" if num_classes else ""
        criterion = _join(self.criterion, f"a run with a non-finite loss{chance} cannot support the claim")
        if not bad:
            return replace(self, criterion=criterion)
        return Judgement(DIVERGED, criterion, _join(f"diverged: {', '.join(bad)}", self.evidence))


def diverged_runs(rounds: pd.DataFrame, *, by: Sequence[str] = (), num_classes: int | None = None,
                  margin: float = CHANCE_MARGIN) -> list[str]:
    """Labels of the runs in `rounds` that diverged.

    A run diverged if its `diverged` column is true in any row, its train loss is non-finite in any
    row, its test loss is non-finite in a row with a test accuracy, or (with `num_classes`) its last
    reported test accuracy is within `margin` of chance, 1/num_classes.
    """
    groups = rounds.groupby(list(by), sort=False) if by else [((), rounds)]
    bad = []
    for key, run in groups:
        flags = [run[c].fillna(False).astype(bool).any() for c in ("diverged",) if c in run]
        flags += [not np.isfinite(run[c].to_numpy(dtype=float)).all() for c in ("train_loss",) if c in run]
        if "test_loss" in run and "test_acc" in run:
            scored = run["test_acc"].notna()
            flags.append(not np.isfinite(run.loc[scored, "test_loss"].to_numpy(dtype=float)).all())
        if num_classes and "test_acc" in run and run["test_acc"].notna().any():
            flags.append(float(run["test_acc"].dropna().iloc[-1]) <= 1 / num_classes + margin)
        if any(flags):
            key = key if isinstance(key, tuple) else (key,)
            bad.append(" ".join(f"{c}={v}" for c, v in zip(by, key)) or "the run")
    return bad


def _p_greater(values: np.ndarray, threshold: float, test: str) -> float:
    """One-sided p-value for "the mean (t) / median (wilcoxon) of `values` exceeds `threshold`"."""
    d = values - threshold
    if not np.any(d):
        return 1.0
    if test == "wilcoxon":  # zsplit: zero gains count half for, half against, never dropped after the pairs were counted
        return float(stats.wilcoxon(d, alternative="greater", zero_method="zsplit", correction=True).pvalue)
    if np.all(d == d[0]):  # zero variance: the t statistic is +-inf
        return 0.0 if d[0] > 0 else 1.0
    return float(stats.ttest_1samp(d, 0.0, alternative="greater").pvalue)


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


def paired_gain(gains: Sequence[float], *, threshold: float = 0.0, alpha: float = 0.05, test: str = "wilcoxon",
                cells: Sequence[float] | None = None, unit: str = "", evidence: str = "") -> Judgement:
    """Is the gain (method minus baseline, one value per paired seed/cell) larger than `threshold`?

    reproduced: the one-sided test rejects "gain <= threshold" at `alpha` (and, given `cells`, every
    cell's mean gain exceeds `threshold`; otherwise partly reproduced); not reproduced: it does not;
    not testable: fewer pairs than the test needs to ever reach `alpha` (3 for the t test), or, for the
    t test, gains without any spread.
    """
    g = np.asarray(gains, dtype=float)
    need = _min_pairs(test, alpha)
    every = "" if cells is None else f", and every cell's mean gain > {threshold:g} (else partly)"
    criterion = f"mean gain > {threshold:g}{unit} by a {_TEST_NAMES[test]} at alpha = {alpha:g}{every}"
    missing = _non_finite(g, "gains") or ("" if cells is None else _non_finite(np.asarray(cells, dtype=float), "cells"))
    if missing:
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, missing))
    if len(g) < need:
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, f"{len(g)} pairs; the test needs >= {need}"))
    if test == "t" and np.ptp(g) == 0:
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, f"all {len(g)} gains equal {g[0]:+.3g}{unit}: "
                                                        "no spread for a t test"))
    p = _p_greater(g, threshold, test)
    se = g.std(ddof=1) / math.sqrt(len(g))
    stat = f"mean gain {g.mean():+.3g}{unit} +/- {se:.2g} (SE) over {len(g)} pairs, {int((g > 0).sum())} positive, p = {p:.2g}"
    if cells is not None:
        c = np.asarray(cells, dtype=float)
        stat += f"; {int((c > threshold).sum())}/{len(c)} cells above {threshold:g}"
    if p >= alpha:
        return Judgement(NOT_REPRODUCED, criterion, _join(evidence, stat))
    complete = cells is None or bool((np.asarray(cells, dtype=float) > threshold).all())
    return Judgement(REPRODUCED if complete else PARTLY, criterion, _join(evidence, stat))


def paired_equivalence(differences: Sequence[float], *, margin: float, alpha: float = 0.05, unit: str = "",
                       evidence: str = "") -> Judgement:
    """Are two methods equivalent within +-`margin` (one paired difference per seed/cell)?

    reproduced: both one-sided paired t tests (TOST) reject |difference| >= margin at `alpha` (equivalently the
    (1 - 2 alpha) confidence interval lies inside +-margin); not reproduced: that interval lies wholly outside
    +-margin; inconclusive: it straddles the margin (the test lacks the power to decide); not testable with
    fewer than 3 pairs, a NaN/inf difference, or when every difference is the same.
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
    se = d.std(ddof=1) / math.sqrt(len(d))
    half = float(stats.t.ppf(1 - alpha, len(d) - 1)) * se
    low, high = d.mean() - half, d.mean() + half
    stat = (f"mean difference {d.mean():+.3g}{unit} +/- {se:.2g} (SE) over {len(d)} pairs, "
            f"{1 - 2 * alpha:.0%} CI [{low:+.3g}, {high:+.3g}], p = {p:.2g}")
    if p < alpha:
        verdict = REPRODUCED
    elif low >= margin or high <= -margin:
        verdict = NOT_REPRODUCED
    else:
        verdict = INCONCLUSIVE
    return Judgement(verdict, criterion, _join(evidence, stat))


def proportion_above(successes: int, trials: int, p0: float, *, alpha: float = 0.05, evidence: str = "") -> Judgement:
    """Is a proportion (e.g. of test predictions falling in some classes) larger than `p0`?

    reproduced: a one-sided exact binomial test rejects "proportion <= p0" at `alpha`; not reproduced otherwise.
    """
    p = float(stats.binomtest(int(successes), int(trials), p0, alternative="greater").pvalue)
    criterion = f"proportion > {p0:.3g} by a one-sided exact binomial test at alpha = {alpha:g}"
    stat = f"{int(successes)}/{int(trials)} = {successes / trials:.3f}, p = {p:.2g}"
    return Judgement(REPRODUCED if p < alpha else NOT_REPRODUCED, criterion, _join(evidence, stat))


def reaches_sooner(a: Sequence[float], b: Sequence[float], *, names: tuple[str, str] = ("A", "B"),
                   quantity: str = "rounds to target", evidence: str = "", min_pairs: int = 3) -> Judgement:
    """Does method A reach the target sooner (fewer rounds, less energy, ...) than B, pair by pair?

    `a[i]`, `b[i]` are the two methods' values on pair i (the same seed, and target where several are
    compared), `fedlib.targets.NEVER` (inf) where a run never reached the target: it counts as worse than
    any finite value, and never vs never is a tie.
    reproduced: A is lower in more than half of the pairs; partly reproduced: A is lower in more pairs
    than it is higher, but not in most; not reproduced otherwise; not testable with fewer than `min_pairs`
    pairs (pairs must be independent: one per seed, not one per (seed, target)) or a NaN value (a missing run;
    NaN is not "never reached", that is inf).
    """
    x, y = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"a and b must be paired (same length), got {len(x)} and {len(y)}")
    n = len(x)
    na, nb = names
    criterion = (f"{quantity}, paired by seed, never reached counted as worse than any value: {na} lower in more than "
                 f"half of the pairs (partly: in more pairs than {nb})")
    if np.isnan(x).any() or np.isnan(y).any():
        bad = np.flatnonzero(np.isnan(x) | np.isnan(y))
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, f"pairs {', '.join(map(str, bad))} have a NaN "
                                                        f"{quantity}: a run is missing"))
    if n < min_pairs:
        return Judgement(NOT_TESTABLE, criterion, _join(evidence, f"{n} pairs; the rule needs >= {min_pairs} "
                                                        "independent pairs (seeds)"))
    wins, losses = int((x < y).sum()), int((x > y).sum())
    stat = (f"{na} reached it in {int(np.isfinite(x).sum())}/{n}, {nb} in {int(np.isfinite(y).sum())}/{n}; "
            f"{na} lower in {wins}, higher in {losses}, tied in {n - wins - losses} of {n} pairs")
    verdict = REPRODUCED if wins > n / 2 else PARTLY if wins > losses else NOT_REPRODUCED
    return Judgement(verdict, criterion, _join(evidence, stat))


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


def illustrative(assumptions: str, outcome: str) -> Judgement:
    """A bound evaluated with assumed (not measured) constants: it illustrates, it cannot test the claim."""
    return Judgement(ILLUSTRATIVE, f"evaluated with assumed constants ({assumptions}), so it cannot test the claim", outcome)


def not_testable(reason: str, evidence: str = "") -> Judgement:
    """The evidence the claim needs is absent at this scale; `reason` says why."""
    return Judgement(NOT_TESTABLE, reason, evidence)


def repo_root(start: Path | None = None) -> Path:
    """The folder holding pyproject.toml, searched upward from `start` (default: the cwd)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").exists() and (folder / "fedlib").is_dir():
            return folder
    raise FileNotFoundError(f"no fedlib checkout (pyproject.toml + fedlib/) above {here}")


def checkout() -> Path | None:
    """The fedlib checkout this package is imported from (an editable install), else the one above the working
    folder, else None (an installed package used outside any checkout)."""
    for start in (Path(__file__).parent, Path.cwd()):
        try:
            return repo_root(start)
        except FileNotFoundError:
            continue
    return None


def results_root() -> Path:
    """Where results go by default: `<checkout>/results` (see `checkout`), or `results/` in the working folder
    outside any checkout."""
    found = checkout()
    return (found if found is not None else Path.cwd()) / "results"


def results_dir(notebook: str, root: str | Path | None = None) -> Path:
    """`<results_root()>/<notebook>/` (or `<root>/<notebook>/`), created if missing."""
    base = Path(root) if root is not None else results_root()
    path = base / notebook
    path.mkdir(parents=True, exist_ok=True)
    return path


class Claims:
    """Accumulates claim rows; every measured value comes from a run or a computation, every verdict from a rule."""

    def __init__(self) -> None:
        self.rows: list[dict[str, str]] = []

    def add(self, claim: str, paper_value: object, measured: object, judgement: Judgement) -> None:
        if not isinstance(judgement, Judgement):
            raise TypeError(f"a claim's verdict comes from a rule in fedlib.report (a Judgement), got {judgement!r}")
        self.rows.append({"claim": claim, "paper_value": str(paper_value), "measured": str(measured),
                          "criterion": judgement.criterion, "evidence": judgement.evidence, "verdict": judgement.verdict})

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=COLUMNS)

    def save(self, folder: Path) -> Path:
        path = Path(folder) / "claims.csv"
        self.table().to_csv(path, index=False)
        return path


def collect_report(results: Path) -> str:
    """Markdown with every `<results>/*/claims.csv`, one section per notebook."""
    parts = []
    files = sorted(results.glob("*/claims.csv"))
    if not files:
        raise FileNotFoundError(f"no claims.csv under {results}: run `make reproduce` first")
    for f in files:
        df = pd.read_csv(f, dtype=str).reindex(columns=COLUMNS).fillna("")
        counts = df["verdict"].value_counts().to_dict()
        parts += [f"## {f.parent.name}", "", ", ".join(f"{v}: {n}" for v, n in counts.items()), ""]
        parts += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        for _, row in df.iterrows():
            parts.append("| " + " | ".join(str(row[c]).replace("|", "\\|") for c in COLUMNS) + " |")
        parts.append("")
    return "\n".join(parts)
