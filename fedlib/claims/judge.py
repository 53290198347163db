"""The one judge that applies every guard before a claim's rule.

A paper declares its claims (`fedlib.paper.claim.Claim`: an id, the paper's words and value, the runs it reads, a rule) in a tuple,
its `Paper.claims` (`fedlib.paper`), and builds one frozen bundle (a `Bundle` subclass) from the records and the
values its notebook computed. `judge(claims, bundle)` is the claims table. A claim's rule never sees evidence the guards
below have not passed, so no claim can opt out of them.

The judge's order, for a claim that reads runs (`Claim.reads`):
1. distinct seeds: a seed listed twice in a seed parameter is one seed, not two; else "not testable";
2. complete: every declared run (each combination of the `Runs.where` values, on each of its seeds) is in the
   records, and its scored test accuracies are finite; else "not testable", naming what is missing;
3. one run per name: no round repeated under one (cell, seed) (every id column declared: `Runs.ids`); accuracy in
   [0, 1]; cumulative costs never negative or falling; every run as long as the others; else "not testable";
4. converged: no run diverged (a `diverged` flag, a non-finite train loss, a non-finite test loss where it was
   scored) or ended at chance (`guards.chance_line`: absolute on K classes and relative to the claim's best run);
   else "not reproduced (diverged)", naming the runs. A claim about divergence marks the runs it expects to fail
   `may_diverge` (a reference baseline never does);
5. enough seeds: at least `Claim.min_seeds` seeds in the evidence; else "not testable";
6. prerequisites: a claim that `requires` others reads "not testable (nothing to test)" unless they reproduced;
7. the rule: statistical rules (`fedlib.report`) get one value per independent seed and state their effect floor or
   margin; a `Contrast` (or `AllOf` contrasts) declares them, and the judge extracts the values from the records.
A claim that reads no runs (an arithmetic check, a bound on a toy, a Monte Carlo) goes straight to its rule.
Every evidence cell of a claim that reads runs names the scale it was judged at (`fedlib.paper.scale`); a negative
or open verdict on a claim the paper made at a larger scale reads "... at this scale".
"""
from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from fedlib import report
from fedlib.claims import evidence, guards
from fedlib.paper import declared, paper
from fedlib.paper.bundle import Bundle
from fedlib.paper.claim import B, Claim, Finding, Runs
from fedlib.paper.scale import Scale
from fedlib.report import Claims, Judgement
from fedlib.targets import rounds_to_target


def run_mask(table: pd.DataFrame, cell: Mapping[str, Any], seed: int | None = None) -> np.ndarray:
    """The rows of `table` that belong to `cell`'s runs (on `seed`, if given)."""
    wanted = {**cell, **({} if seed is None else {"seed": seed})}
    if not wanted:
        return np.ones(len(table), dtype=bool)
    return np.logical_and.reduce([table[k].to_numpy() == v for k, v in wanted.items()])


def _label(cell: Mapping[str, Any], seed: int | None = None) -> str:
    parts = [f"{k}={v}" for k, v in cell.items()] + ([f"seed={seed}"] if seed is not None else [])
    return " ".join(parts)


def _summaries(claim: Claim, bundle: Bundle) -> list[pd.DataFrame | None]:
    """Each of the claim's declared runs' `guards.summary`, read once for every guard (None: no such table)."""
    return [guards.summary(runs.select(bundle.records), runs.by()) if runs.table in bundle.records else None
            for runs in claim.reads]


def _missing(runs: Runs, bundle: Bundle, found: pd.DataFrame | None) -> list[tuple[str, int]]:
    """Declared runs absent from the records (`found`: their summary), or with a NaN/inf scored accuracy, each
    (label, how many runs it names); a cell absent on every seed is named once (a parameter that left out a method
    names the method, not its seeds one by one)."""
    seeds = runs.seed_list(bundle.params)
    if found is None:
        return [(f"table {runs.table!r}", len(runs.cells()) * len(seeds))]
    broken_runs = _scored_broken(found, [*runs.where, "seed"], "test_acc" in bundle.records[runs.table])
    out = []
    for cell in runs.cells():
        absent, broken = [], []
        for seed in seeds:
            key = (*cell.values(), seed)
            if key not in broken_runs:
                absent.append(_label(cell, seed))
            elif broken_runs[key]:
                broken.append(f"{_label(cell, seed)} (accuracy NaN/inf)")
        out += ([(f"{_label(cell)} (every seed)", len(seeds))] if len(absent) == len(seeds) > 1
                else [(a, 1) for a in absent]) + [(b, 1) for b in broken]
    return out


def _scored_broken(found: pd.DataFrame, by: list[str], scored: bool) -> dict[tuple, bool]:
    """Every (cell, seed) of a summary (its values of `by`) -> whether a run of it has no scored accuracy or a
    NaN/inf one (never, for records without accuracy: `scored` False)."""
    broken = (found["final_acc"].isna().to_numpy() | ~np.isfinite(found[["acc_min", "acc_max"]].to_numpy()).all(axis=1)
              if scored else np.zeros(len(found), dtype=bool))
    out: dict[tuple, bool] = {}
    for key, bad in zip(zip(*(found[c] for c in by)), broken):
        out[key] = out.get(key, False) or bool(bad)
    return out


def missing_runs(claim: Claim, bundle: Bundle, summaries: list[pd.DataFrame | None] | None = None) -> list[str]:
    """The claim's declared runs that the records lack or score with a NaN/inf accuracy, labelled."""
    return [label for label, _ in _missing_counted(claim, bundle, summaries)]


def _missing_counted(claim: Claim, bundle: Bundle, summaries: list[pd.DataFrame | None] | None = None
                     ) -> list[tuple[str, int]]:
    found = _summaries(claim, bundle) if summaries is None else summaries
    return [m for runs, summary in zip(claim.reads, found) for m in _missing(runs, bundle, summary)]


def _declared_count(claim: Claim, bundle: Bundle) -> int:
    """How many runs the claim declares (each cell on each seed; a run two declarations share counted in each)."""
    return sum(len(runs.cells()) * len(runs.seed_list(bundle.params)) for runs in claim.reads)


def _listed(items: Sequence[str]) -> str:
    return ", ".join(items[:6]) + (f" and {len(items) - 6} more" if len(items) > 6 else "")


def guard(claim: Claim, bundle: Bundle) -> Judgement | None:
    """The first guard the claim's evidence fails, as its judgement; None when every guard passed."""
    summaries = _summaries(claim, bundle)
    return _guard(claim, bundle, _missing_counted(claim, bundle, summaries), summaries)


def _guard(claim: Claim, bundle: Bundle, missing: list[tuple[str, int]], found: list[pd.DataFrame | None]
           ) -> Judgement | None:
    """The first guard failed, from the missing runs and each declared runs' summary (`_summaries`)."""
    if not claim.reads:
        return None
    criterion = (f"every run present, once, with finite accuracy in [0, 1], costs never negative or falling, runs of "
                 f"equal length, none diverged or at chance, >= {claim.min_seeds} distinct seeds")
    repeated = {r.seeds: r.seed_list(bundle.params) for r in claim.reads}
    repeated = {name: seeds for name, seeds in repeated.items() if len(set(seeds)) != len(seeds)}
    if repeated:
        return report.not_testable(report.IMPOSSIBLE, criterion, "; ".join(f"{name} lists a seed twice ({seeds}): one value per "
                                                        "independent seed" for name, seeds in repeated.items()))
    if missing:
        return report.not_testable(report.NOT_COMPUTED, criterion, f"{sum(n for _, n in missing)} of "
                                                                   f"{_declared_count(claim, bundle)} runs not computed "
                                                                   f"yet: {_listed([m for m, _ in missing])}")
    summaries = list(zip(claim.reads, found))
    doubled = [b for _, runs in summaries for b in guards.duplicated_runs(runs)]
    if doubled:
        return report.not_testable(report.IMPOSSIBLE, criterion, f"more than one run under one name (a round repeated): "
                                              f"{_listed(doubled)}; the claim must name every id column (Runs.ids)")
    impossible = [b for _, runs in summaries for b in guards.impossible_values(runs)]
    if impossible:
        return report.not_testable(report.IMPOSSIBLE, criterion, f"impossible evidence: {_listed(impossible)}")
    lengths = guards.unequal_lengths(pd.concat([runs for _, runs in summaries]))
    if lengths:
        return report.not_testable(report.IMPOSSIBLE, criterion, f"runs of different lengths compared: {lengths}")
    finals = np.concatenate([runs["final_acc"].to_numpy(dtype=float) for _, runs in summaries])
    line = guards.chance_line(float(np.nanmax(finals)) if np.isfinite(finals).any() else float("nan"),
                              bundle.num_classes)
    bad = [b for declared, runs in summaries if not declared.may_diverge for b in guards.diverged_runs(runs, line)]
    if bad:
        return Judgement(report.DIVERGED, criterion, f"diverged or at chance (final accuracy <= {line:.3g}): "
                                                     f"{_listed(bad)}")
    seeds = {s for runs in claim.reads for s in runs.seed_list(bundle.params)}
    if claim.reads and len(seeds) < claim.min_seeds:
        return report.not_testable(report.TOO_FEW_SEEDS, criterion, f"{len(seeds)} seed(s) {sorted(seeds)}; the "
                                                                    f"claim's rule needs >= {claim.min_seeds} "
                                                                    "independent seeds to decide")
    return None


def judge_one(claim: Claim[B], bundle: B) -> Finding:
    """The claim's row: a guard's judgement if one fails, else its rule's, with the guards named in the criterion."""
    elsewhere = claim.elsewhere(bundle.params)
    if elsewhere:
        return Finding("-", report.not_testable(report.OTHER_SCALE, elsewhere))
    summaries = _summaries(claim, bundle)
    missing = _missing_counted(claim, bundle, summaries)
    stopped = _guard(claim, bundle, missing, summaries)
    if stopped is not None:
        # A contrast's values are still shown when its runs are all there (one seed, a diverged run): the judge
        # extracts them itself, so no paper code meets the failed evidence.
        complete = isinstance(claim.rule, (Contrast, AllOf)) and not missing and stopped.verdict == report.DIVERGED
        return Finding(claim.rule(bundle).measured if complete else "-", stopped)
    found = claim.rule(bundle)
    if not claim.reads:
        return found
    named = "runs checked complete, once each, in range, equal in length, converged, not at chance"
    return replace(found, judgement=replace(found.judgement, criterion=f"{found.judgement.criterion}; {named}"))


def _declaring_paper(claims: Sequence[Claim]) -> str:
    """The paper that declares these claims (a selection of them, or them on a profile's cells: the same rules)."""
    found = [name for name, theirs in declared().items() if all(any(c.rule is d.rule for d in theirs) for c in claims)]
    if len(found) != 1:
        raise ValueError("judge() takes claims one paper declares (its `Paper.claims`, fedlib.paper)")
    return found[0]


class JudgedClaims(Claims):
    """A claims table that saves, beside claims.csv, the bundle it was judged from (`fedlib.claims.evidence`) and the
    scale (`scale.json`: this notebook's and the paper's, for REPORT.md), so `reproduce --claims-only` can judge it
    again without executing the notebook: by its module's `claims(bundle)`, the one entry point every claims module
    has."""

    def __init__(self, module: str, bundle: Bundle) -> None:
        super().__init__()
        self.module, self.bundle = module, bundle

    def scales(self) -> tuple[Scale | None, Scale | None]:
        """(this notebook's scale, the paper's), from its paper's `scale(params)` and `paper_scale`."""
        declaring = paper(self.module)
        return declaring.scale(self.bundle.params) if declaring.scale else None, declaring.paper_scale

    def save(self, folder: Path) -> Path:
        path = super().save(folder)
        evidence.save(self.bundle, folder, self.module)
        here, paper = self.scales()
        (Path(folder) / SCALE_FILE).write_text(json.dumps({"here": str(here) if here else "",
                                                           "paper": str(paper) if paper else ""}))
        return path


SCALE_FILE = "scale.json"


def _with_scale(claim: Claim, found: Finding, here: Scale | None, paper: Scale | None) -> Finding:
    """The finding with the scale in its evidence and "... at this scale" on a negative or open verdict where the
    paper's scale is larger."""
    if not claim.reads or here is None:
        return found
    j = found.judgement
    verdict = report.AT_THIS_SCALE.get(j.verdict, j.verdict) if paper is not None and here.smaller_than(paper) \
        else j.verdict
    words = f"scale: {here}" + (f" (paper: {paper})" if paper is not None else "")
    return replace(found, judgement=replace(j, verdict=verdict, evidence=report._join(j.evidence, words)))


def _prerequisite(claim: Claim, verdicts: Mapping[str, str]) -> Judgement | None:
    """"not testable (nothing to test)" when a claim this one requires did not read "reproduced"."""
    unknown = [r for r in claim.requires if r not in verdicts]
    if unknown:
        raise ValueError(f"claim {claim.id} requires {unknown}, which are not declared before it")
    failed = {r: verdicts[r] for r in claim.requires if verdicts[r] != report.REPRODUCED}
    if not failed:
        return None
    return Judgement(report.NOTHING_TO_TEST, f"needs {', '.join(claim.requires)} reproduced first",
                     "; ".join(f"{r} reads {v!r}: nothing for this claim to act on" for r, v in failed.items()))


def judge(claims: Sequence[Claim[B]], bundle: B) -> JudgedClaims:
    """The claims table: every claim judged by `judge_one`, in declaration order (a claim's prerequisites first).
    `claims`: claims one paper declares (`Paper.claims`)."""
    ids = [c.id for c in claims]
    if len(set(ids)) != len(ids):
        raise ValueError(f"claim ids must be unique, got {sorted(i for i in ids if ids.count(i) > 1)}")
    table = JudgedClaims(_declaring_paper(claims), bundle)
    here, paper = table.scales()
    verdicts: dict[str, str] = {}
    for claim in claims:
        blocked = _prerequisite(claim, verdicts)
        found = Finding("-", blocked) if blocked is not None else judge_one(claim, bundle)
        found = _with_scale(claim, found, claim.scale(bundle.params) if claim.scale else here,
                            None if claim.ours else claim.paper_scale or paper)
        verdicts[claim.id] = found.judgement.verdict
        words = claim.statement if isinstance(claim.statement, str) else claim.statement(bundle.params)
        table.add(f"{claim.id} {words}", claim.paper_value, found.measured, found.judgement, erratum=claim.erratum)
    return table


@dataclass(frozen=True)
class Contrast:
    """A rule over paired seeds that the judge extracts from the records: `a` against `b` (each a {column: value}
    cell of `table`), tested on final accuracy as a gain above `floor` or an equivalence within `margin`, or on
    rounds to `target` (a number or a parameter name) as reaching it sooner by more than `margin` (a fraction of
    b's rounds). Floors and margins are the claim's, never a default. `ids`: id columns of `table` besides the cell's
    (each value a separate run), averaged within a seed before any test."""

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
    ids: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        needs = {"gain": ("floor",), "equivalent": ("margin",), "sooner": ("target", "margin")}[self.test]
        for name in needs:
            if getattr(self, name) is None:
                raise ValueError(f"a {self.test!r} contrast must state its {name}")

    def runs(self) -> tuple[Runs, ...]:
        return tuple(Runs({k: (v,) for k, v in cell.items()}, self.table, self.seeds, ids=self.ids)
                     for cell in (self.a, self.b))

    def _names(self) -> tuple[str, str]:
        return self.names or (" ".join(map(str, self.a.values())), " ".join(map(str, self.b.values())))

    def _target(self, bundle: Bundle) -> float:
        return float(getattr(bundle.params, self.target) if isinstance(self.target, str) else self.target)

    def values(self, bundle: Bundle, cell: Mapping[str, Any], *, horizon: bool = False) -> np.ndarray:
        """One value per seed (in the order of the parameter named `seeds`) of `cell`'s runs on this contrast's
        metric: the mean over the runs of the `ids` columns within the seed. `horizon`: for a "sooner" contrast, each
        seed's last round instead (the lower bound of a run that never reached the target)."""
        table = bundle.records[self.table]
        rows = table[run_mask(table, cell)]
        by = ["seed", *self.ids]
        if self.test == "sooner":
            target = self._target(bundle)
            per_run = [(run["seed"].iloc[0], float(run["round"].max()) if horizon else rounds_to_target(run, target))
                       for _, run in guards.runs(rows, by)]
        else:
            finals = guards.final_accuracies(rows, by)
            per_run = list(zip(finals["seed"], finals["final_acc"]))
        out = []
        for seed in getattr(bundle.params, self.seeds):
            found = [value for s, value in per_run if s == seed]
            out.append(float(np.mean(found)) if found else float("nan"))
        return np.asarray(out, dtype=float)

    def __call__(self, bundle: Bundle) -> Finding:
        a, b = self.values(bundle, self.a), self.values(bundle, self.b)
        na, nb = self._names()
        evidence = f"{len(a)} seeds paired, {self.table}"
        if self.test == "sooner":
            target = self._target(bundle)
            judgement = report.reaches_sooner(a, b, names=(na, nb), margin=float(self.margin),
                                              evidence=f"{evidence}, target {target:g}",
                                              horizon=(self.values(bundle, self.a, horizon=True),
                                                       self.values(bundle, self.b, horizon=True)))
            return Finding(f"{na} {_rounds(a)} vs {nb} {_rounds(b)} rounds to {target:g}", judgement)
        gap = a - b
        judgement = (report.paired_gain(gap, threshold=float(self.floor), test=self.stat, evidence=evidence)
                     if self.test == "gain" else
                     report.paired_equivalence(gap, margin=float(self.margin), evidence=evidence))
        return Finding(f"{np.mean(a):.3f} vs {np.mean(b):.3f} ({np.mean(gap):+.3f})", judgement)


@dataclass(frozen=True)
class AllOf:
    """Contrasts that must all hold (an ordering between neighbours, a best-of against each other method), judged
    by `report.all_hold`: an intersection-union test for "reproduced", Bonferroni over the contrasts for "not
    reproduced" (and for "partly", where `partly`)."""

    contrasts: tuple[Contrast, ...]
    what: str
    partly: bool = False

    def runs(self) -> tuple[Runs, ...]:
        found: list[Runs] = []
        for runs in (r for c in self.contrasts for r in c.runs()):
            if runs not in found:  # an arm shared by two contrasts (the middle of an ordering) is read once
                found.append(runs)
        return tuple(found)

    def __call__(self, bundle: Bundle) -> Finding:
        found = [c(bundle) for c in self.contrasts]
        names = [" > ".join(c._names()) for c in self.contrasts]
        return Finding("; ".join(f"{n}: {f.measured}" for n, f in zip(names, found)),
                       report.all_hold([(n, f.judgement) for n, f in zip(names, found)], what=self.what,
                                       partly=self.partly))


def _rounds(values: np.ndarray) -> str:
    return "[" + ", ".join("never" if not np.isfinite(v) else f"{v:g}" for v in values) + "]"
