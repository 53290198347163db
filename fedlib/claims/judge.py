"""A claim as a declaration, and the one judge that applies every guard before a claim's rule.

A paper's claims module declares its claims (`Claim`: an id, the paper's words and value, the runs it reads, a
rule) in a tuple `CLAIMS`, and builds one frozen bundle (a `Bundle` subclass) from the records and the values its
notebook computed. `judge(CLAIMS, bundle)` is the claims table. A claim's rule never sees evidence the guards
below have not passed, so no claim can opt out of them.

The judge's order, for a claim that reads runs (`Claim.reads`):
1. complete: every declared run (each combination of the `Runs.where` values, on each of its seeds) is in the
   records, and its scored test accuracies are finite; else "not testable", naming what is missing;
2. converged: no run diverged (a `diverged` flag, a non-finite train loss, a non-finite test loss where it was
   scored) or ended at chance (final accuracy <= (1 + CHANCE_FRACTION) / num_classes); else "not reproduced
   (diverged)", naming the runs. A claim about divergence marks the runs it expects to fail `may_diverge`;
3. enough seeds: at least `Claim.min_seeds` seeds in the evidence; else "not testable";
4. the rule: statistical rules (`fedlib.report`) state their effect floor or margin and their own minimum of
   independent pairs; a `Contrast` declares them, and the judge extracts its paired evidence from the records.
A claim that reads no runs (an arithmetic check, a bound on a toy, a Monte Carlo) goes straight to its rule.
"""
from __future__ import annotations

import importlib
import itertools
import pkgutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Generic, Literal, TypeVar

import numpy as np
import pandas as pd

from fedlib import report
from fedlib.claims import evidence
from fedlib.claims.bundle import Bundle
from fedlib.paper_params import PaperParams
from fedlib.report import Claims, Judgement
from fedlib.targets import rounds_to_target

CHANCE_FRACTION = 0.2  # final accuracy <= 1.2 / num_classes is "at chance" (0.12 for 10 classes, 0.6 for 2)


B = TypeVar("B", bound=Bundle)


@dataclass(frozen=True)
class Runs:
    """Runs a claim reads: the rows of `records[table]` whose columns take the listed values, one run per
    combination of values and seed (of the parameter named `seeds`). `may_diverge`: the claim is about these runs
    failing."""

    where: Mapping[str, Sequence[Any]]
    table: str = "runs"
    seeds: str = "seeds"
    may_diverge: bool = False

    def seed_list(self, params: PaperParams) -> list[int]:
        return [int(s) for s in getattr(params, self.seeds)]

    def cells(self) -> list[dict[str, Any]]:
        """Each combination of the `where` values, as {column: value}."""
        cols = list(self.where)
        return [dict(zip(cols, combo)) for combo in itertools.product(*(self.where[c] for c in cols))]

    def select(self, records: Mapping[str, pd.DataFrame]) -> pd.DataFrame:
        table = records[self.table]
        mask = np.ones(len(table), dtype=bool)
        for col, values in self.where.items():
            mask &= table[col].isin(list(values)).to_numpy()
        return table[mask]


@dataclass(frozen=True)
class Finding:
    """A rule's output: the measured value in words and the judgement."""

    measured: str
    judgement: Judgement


Rule = Callable[[B], Finding]


@dataclass(frozen=True)
class Claim(Generic[B]):
    """One row of a paper's claims table, declared: `rule(bundle)` judges it once the guards passed."""

    id: str
    statement: str | Callable[[Any], str]  # the paper's words; a function of the params (a PaperParams) if they vary
    paper_value: str
    rule: Rule
    reads: tuple[Runs, ...] = ()
    min_seeds: int = 2

    def __post_init__(self) -> None:
        if isinstance(self.rule, Contrast):
            object.__setattr__(self, "reads", self.reads or self.rule.runs())


def run_mask(table: pd.DataFrame, cell: Mapping[str, Any], seed: int) -> np.ndarray:
    """The rows of `table` that belong to `cell`'s run on `seed`."""
    return np.logical_and.reduce([table[k] == v for k, v in {**cell, "seed": seed}.items()])


def _label(cell: Mapping[str, Any], seed: int | None = None) -> str:
    parts = [f"{k}={v}" for k, v in cell.items()] + ([f"seed={seed}"] if seed is not None else [])
    return " ".join(parts)


def _by(runs: Runs) -> list[str]:
    return [*runs.where, "seed"]


def _missing(runs: Runs, bundle: Bundle) -> list[str]:
    """Declared runs absent from the records, or with a NaN/inf scored accuracy; a cell absent on every seed is
    named once (a parameter that left out a method names the method, not its seeds one by one)."""
    if runs.table not in bundle.records:
        return [f"table {runs.table!r}"]
    rows = runs.select(bundle.records)
    seeds = runs.seed_list(bundle.params)
    out = []
    for cell in runs.cells():
        absent, broken = [], []
        for seed in seeds:
            run = rows[run_mask(rows, cell, seed)]
            acc = run["test_acc"].dropna().to_numpy(dtype=float) if "test_acc" in run else np.array([])
            if run.empty:
                absent.append(_label(cell, seed))
            elif "test_acc" in run and (not acc.size or not np.isfinite(acc).all()):
                broken.append(f"{_label(cell, seed)} (accuracy NaN/inf)")
        out += ([f"{_label(cell)} (every seed)"] if len(absent) == len(seeds) > 1 else absent) + broken
    return out


def missing_runs(claim: Claim, bundle: Bundle) -> list[str]:
    """The claim's declared runs that the records lack or score with a NaN/inf accuracy, labelled."""
    return [m for runs in claim.reads for m in _missing(runs, bundle)]


def guard(claim: Claim, bundle: Bundle) -> Judgement | None:
    """The first guard the claim's evidence fails, as its judgement; None when every guard passed."""
    return _guard(claim, bundle, missing_runs(claim, bundle))


def _guard(claim: Claim, bundle: Bundle, missing: list[str]) -> Judgement | None:
    criterion = (f"every run present with finite accuracy, none diverged or at chance (<= {1 + CHANCE_FRACTION:g}/"
                 f"{bundle.num_classes}), >= {claim.min_seeds} seeds")
    if missing:
        return report.not_testable(criterion, f"missing: {', '.join(missing[:6])}"
                                              + (f" and {len(missing) - 6} more" if len(missing) > 6 else ""))
    margin = CHANCE_FRACTION / bundle.num_classes
    bad = [b for runs in claim.reads if not runs.may_diverge
           for b in report.diverged_runs(runs.select(bundle.records), by=_by(runs), num_classes=bundle.num_classes,
                                         margin=margin)]
    if bad:
        return Judgement(report.DIVERGED, criterion, f"diverged or at chance: {', '.join(bad[:6])}")
    seeds = {s for runs in claim.reads for s in runs.seed_list(bundle.params)}
    if claim.reads and len(seeds) < claim.min_seeds:
        return report.not_testable(criterion, f"{len(seeds)} seed(s) {sorted(seeds)}; the claim needs "
                                              f">= {claim.min_seeds} independent seeds")
    return None


def judge_one(claim: Claim[B], bundle: B) -> Finding:
    """The claim's row: a guard's judgement if one fails, else its rule's, with the guards named in the criterion."""
    missing = missing_runs(claim, bundle)
    stopped = _guard(claim, bundle, missing)
    if stopped is not None:
        # A contrast's values are still shown when its runs are all there (one seed, a diverged run): the judge
        # extracts them itself, so no paper code meets the failed evidence.
        complete = isinstance(claim.rule, Contrast) and not missing
        return Finding(claim.rule(bundle).measured if complete else "-", stopped)
    found = claim.rule(bundle)
    if not claim.reads:
        return found
    named = "runs checked complete, converged, not at chance"
    return replace(found, judgement=replace(found.judgement, criterion=f"{found.judgement.criterion}; {named}"))


def _declaring_module(claims: Sequence[Claim]) -> str:
    """The `fedlib.claims` module whose CLAIMS these are (a selection of them, or them on a profile's cells)."""
    prefix = "fedlib.claims."
    rules = {getattr(c.rule, "__module__", "") for c in claims} - {__name__}
    if len(rules) == 1 and next(iter(rules)).startswith(prefix):
        return next(iter(rules)).removeprefix(prefix)
    found = [name for name, declared_claims in declared().items() if all(c in declared_claims for c in claims)]
    if len(found) != 1:
        raise ValueError("judge() takes claims declared in one module's CLAIMS (fedlib.claims.<module>.CLAIMS)")
    return found[0]


class JudgedClaims(Claims):
    """A claims table that saves, beside claims.csv, the bundle it was judged from (`fedlib.claims.evidence`), so
    `reproduce --claims-only` can judge it again without executing the notebook: by its module's `claims(bundle)`,
    the one entry point every claims module has."""

    def __init__(self, module: str, bundle: Bundle) -> None:
        super().__init__()
        self.module, self.bundle = module, bundle

    def save(self, folder: Path) -> Path:
        path = super().save(folder)
        evidence.save(self.bundle, folder, self.module)
        return path


def judge(claims: Sequence[Claim[B]], bundle: B) -> JudgedClaims:
    """The claims table: every claim judged by `judge_one`, in declaration order. `claims` is a declared tuple
    (some module's `CLAIMS`)."""
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise ValueError(f"claim ids must be unique, got {sorted(i for i in ids if ids.count(i) > 1)}")
    table = JudgedClaims(_declaring_module(claims), bundle)
    for claim in claims:
        found = judge_one(claim, bundle)
        words = claim.statement if isinstance(claim.statement, str) else claim.statement(bundle.params)
        table.add(f"{claim.id} {words}", claim.paper_value, found.measured, found.judgement)
    return table


@dataclass(frozen=True)
class Contrast:
    """A rule over paired seeds that the judge extracts from the records: `a` against `b` (each a {column: value}
    cell of `table`), tested on final accuracy as a gain above `floor` or an equivalence within `margin`, or on
    rounds to `target` (a number or a parameter name) as reaching it sooner. Floors and margins are the claim's,
    never a default."""

    a: Mapping[str, Any]
    b: Mapping[str, Any]
    test: Literal["gain", "equivalent", "sooner"]
    floor: float | None = None
    margin: float | None = None
    target: float | str | None = None
    table: str = "runs"
    seeds: str = "seeds"
    stat: Literal["t", "wilcoxon"] = "t"
    names: tuple[str, str] | None = None

    def __post_init__(self) -> None:
        needs = {"gain": "floor", "equivalent": "margin", "sooner": "target"}[self.test]
        if getattr(self, needs) is None:
            raise ValueError(f"a {self.test!r} contrast must state its {needs}")

    def runs(self) -> tuple[Runs, ...]:
        return tuple(Runs({k: (v,) for k, v in cell.items()}, self.table, self.seeds) for cell in (self.a, self.b))

    def _names(self) -> tuple[str, str]:
        return self.names or (" ".join(map(str, self.a.values())), " ".join(map(str, self.b.values())))

    def _target(self, bundle: Bundle) -> float:
        return float(getattr(bundle.params, self.target) if isinstance(self.target, str) else self.target)

    def values(self, bundle: Bundle, cell: Mapping[str, Any]) -> np.ndarray:
        """One value per seed (in the order of the parameter named `seeds`) of `cell`'s runs on this contrast's
        metric."""
        table = bundle.records[self.table]
        out = []
        for seed in getattr(bundle.params, self.seeds):
            run = table[run_mask(table, cell, seed)].sort_values("round")
            if self.test == "sooner":
                out.append(rounds_to_target(run, self._target(bundle)))
            else:
                out.append(float(run["test_acc"].dropna().iloc[-1]))
        return np.asarray(out, dtype=float)

    def __call__(self, bundle: Bundle) -> Finding:
        a, b = self.values(bundle, self.a), self.values(bundle, self.b)
        na, nb = self._names()
        evidence = f"{len(a)} seeds paired, {self.table}"
        if self.test == "sooner":
            target = self._target(bundle)
            judgement = report.reaches_sooner(a, b, names=(na, nb), evidence=f"{evidence}, target {target:g}")
            return Finding(f"{na} {_rounds(a)} vs {nb} {_rounds(b)} rounds to {target:g}", judgement)
        gap = a - b
        judgement = (report.paired_gain(gap, threshold=self.floor, test=self.stat, evidence=evidence)
                     if self.test == "gain" else report.paired_equivalence(gap, margin=self.margin, evidence=evidence))
        return Finding(f"{a.mean():.3f} vs {b.mean():.3f} ({gap.mean():+.3f})", judgement)


def _rounds(values: np.ndarray) -> str:
    return "[" + ", ".join("never" if not np.isfinite(v) else f"{v:g}" for v in values) + "]"


Declared = Mapping[str, tuple[Claim, ...]]


def declared() -> Declared:
    """Every paper's declared claims, by module name: each module of `fedlib.claims` with a `CLAIMS` tuple
    (the registry the claims battery runs over; a paper falls into it by declaring its claims)."""
    import fedlib.claims as package

    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        if hasattr(module, "CLAIMS"):
            found[info.name] = tuple(module.CLAIMS)
    return found
