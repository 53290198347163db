"""Adversarial evidence against every statistical rule in fedlib.report, generated per rule and per scenario.

Each rule declares how to turn a per-pair effect into its evidence (`RULES`); each scenario declares the per-pair
effects (`SCENARIOS`). Every rule meets every scenario at several pair counts and seeds of the noise generator:
a missing run (NaN), a diverged one (inf), a single pair and a noise-level effect must never read "reproduced";
a large effect on enough pairs must.

Then every declared claim (`fedlib.claims.judge.declared()`: each claims module's `CLAIMS`) meets synthetic runs in
the tables and cells it declares: every run at chance, one run missing, a NaN loss, an inf accuracy and a single
seed never read "reproduced" or "partly"; a `Contrast` also meets a noise-level difference (never "reproduced")
and a large effect in its direction (always "reproduced"). A new claim falls into the battery by being declared.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest

from fedlib import report as R
from fedlib.claims import judge
from fedlib.paper_params import PaperParams, params_class

NOISE = 0.5  # spread of a pair's measurement
LARGE = 5.0  # a large effect, in units of NOISE-sized spread

# rule name -> (evidence from per-pair effects (positive = the claim's direction) -> Judgement)
RULES: dict[str, Callable[[np.ndarray], R.Judgement]] = {
    "paired_gain wilcoxon": lambda e: R.paired_gain(e, threshold=0.5),
    "paired_gain t": lambda e: R.paired_gain(e, threshold=0.5, test="t"),
    "paired_gain cells": lambda e: R.paired_gain(e, threshold=0.5, cells=[np.mean(e)]),
    # rounds to target; inf is "never reached" by design (a diverged run is the divergence guard's), so a diverged
    # run enters as a missing value here
    "reaches_sooner": lambda e: R.reaches_sooner(np.where(np.isfinite(e), 50 - e * 5, np.nan), np.full(len(e), 50.0)),
    # equivalence: the claim's direction is "no difference", so a large effect is a difference near zero
    "paired_equivalence": lambda e: R.paired_equivalence(np.where(np.isfinite(e), (LARGE - e) / 20, e), margin=0.1),
}


def _pairs(n: int, seed: int, effect: float) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return effect + NOISE * rng.standard_normal(n)


SCENARIOS: dict[str, Callable[[int, int], np.ndarray]] = {
    "one run missing": lambda n, s: np.r_[_pairs(n - 1, s, LARGE), np.nan],
    "a diverged run": lambda n, s: np.r_[_pairs(n - 1, s, LARGE), np.inf * (1 if s % 2 else -1)],
    "a single seed": lambda n, s: _pairs(1, s, LARGE),
    # no effect: a zero-median spread of NOISE size (deterministic: a random draw passes a test at rate alpha)
    "noise-level effect": lambda n, s: NOISE * (-1.0) ** np.arange(n) * (1 + 0.1 * np.random.default_rng(s).random(n)),
    "large effect": lambda n, s: _pairs(n, s, LARGE),
}
NEVER_REPRODUCED = {"one run missing", "a diverged run", "a single seed", "noise-level effect"}


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("n", [8, 12])
@pytest.mark.parametrize("scenario", SCENARIOS)
@pytest.mark.parametrize("rule", RULES)
def test_rule_against_scenario(rule: str, scenario: str, n: int, seed: int) -> None:
    verdict = RULES[rule](SCENARIOS[scenario](n, seed)).verdict
    if scenario == "noise-level effect":
        assert verdict != R.REPRODUCED
    elif scenario in NEVER_REPRODUCED:
        assert verdict not in (R.REPRODUCED, R.PARTLY), verdict
    else:
        assert verdict == R.REPRODUCED, verdict


# ---- every declared claim against adversarial evidence in the shapes of the tables it reads ------------------------

DECLARED = [(paper, claim) for paper, claims in judge.declared().items() for claim in claims]
K = 10  # classes of the synthetic task
SEEDS = [0, 1, 2, 3, 4, 5]
ROUNDS = 12


def _curve(peak: float, tau: float) -> np.ndarray:
    r = np.arange(1, ROUNDS + 1)
    return 1 / K + (peak - 1 / K) * (1 - np.exp(-r / tau))


def _records(claim: judge.Claim, shape: Callable[[dict, int], tuple[float, float]]) -> dict[str, pd.DataFrame]:
    """Per-round records of every run the claim reads; `shape(cell, seed)` gives the run's (peak, tau)."""
    rows: dict[str, list[dict]] = {}
    for runs in claim.reads:
        for cell in runs.cells():
            for seed in SEEDS:
                peak, tau = shape(cell, seed)
                acc = _curve(peak, tau)
                rows.setdefault(runs.table, []).extend(
                    {**cell, "seed": seed, "round": r + 1, "test_acc": a, "test_loss": 2.3 * (1 - a),
                     "train_loss": 2.3 * (1 - a)} for r, a in enumerate(acc))
    return {t: pd.DataFrame(r).drop_duplicates(subset=[c for c in r[0] if c not in ("test_acc", "test_loss",
                                                                                 "train_loss")])
            for t, r in rows.items()}


def _params(paper: str, claim: judge.Claim, seeds: list[int]) -> PaperParams:
    """The paper's default parameters with `seeds` for every seed list the claim reads (and its target)."""
    changes: dict[str, object] = {runs.seeds: seeds for runs in claim.reads}
    if isinstance(claim.rule, judge.Contrast) and isinstance(claim.rule.target, str):
        changes[claim.rule.target] = 0.6
    return replace(params_class(paper)(), **changes)


def _verdict(paper: str, claim: judge.Claim, records: dict[str, pd.DataFrame], seeds: list[int] = SEEDS) -> str:
    return judge.judge_one(claim, judge.Bundle(_params(paper, claim, seeds), records, K)).judgement.verdict


def _healthy(cell: dict, seed: int) -> tuple[float, float]:
    return 0.8, 3.0


def _drop_first_run(claim: judge.Claim, records: dict[str, pd.DataFrame]) -> dict[str, pd.DataFrame]:
    runs = claim.reads[0]
    table = records[runs.table]
    return {**records, runs.table: table[~judge.run_mask(table, runs.cells()[0], SEEDS[-1])]}


def _poison_first_run(claim: judge.Claim, records: dict[str, pd.DataFrame], column: str,
                      value: float) -> dict[str, pd.DataFrame]:
    runs = claim.reads[0]
    table = records[runs.table].copy()
    hit = judge.run_mask(table, runs.cells()[0], SEEDS[0]) & (table["round"] == ROUNDS)
    table.loc[hit, column] = value
    return {**records, runs.table: table}


GUARD_CASES: dict[str, Callable[[str, judge.Claim], str]] = {
    "every run at chance": lambda p, c: _verdict(p, c, _records(c, lambda cell, seed: (1 / K, 3.0))),
    "one run missing": lambda p, c: _verdict(p, c, _drop_first_run(c, _records(c, _healthy))),
    "a NaN loss": lambda p, c: _verdict(p, c, _poison_first_run(c, _records(c, _healthy), "train_loss", np.nan)),
    "an inf accuracy": lambda p, c: _verdict(p, c, _poison_first_run(c, _records(c, _healthy), "test_acc", np.inf)),
    "a single seed": lambda p, c: _verdict(p, c, {t: r[r.seed == 0] for t, r in _records(c, _healthy).items()}, [0]),
}
READING = [(p, c) for p, c in DECLARED if c.reads]


def _id(case: tuple[str, judge.Claim]) -> str:
    return f"{case[0]}:{case[1].id}"


def test_every_paper_declares_claims_with_unique_ids():
    assert DECLARED
    for paper, claims in judge.declared().items():
        ids = [c.id for c in claims]
        assert len(ids) == len(set(ids)), paper


@pytest.mark.parametrize("case", READING, ids=_id)
def test_healthy_evidence_passes_every_guard(case):
    """The declaration is satisfiable: healthy runs in the declared tables and cells reach the rule."""
    claim = case[1]
    assert judge.guard(claim, judge.Bundle(_params(case[0], claim, SEEDS), _records(claim, _healthy), K)) is None


@pytest.mark.parametrize("scenario", GUARD_CASES)
@pytest.mark.parametrize("case", READING, ids=_id)
def test_claim_never_supported_by_broken_evidence(case, scenario):
    verdict = GUARD_CASES[scenario](*case)
    assert verdict not in (R.REPRODUCED, R.PARTLY), verdict


CONTRASTS = [(p, c) for p, c in DECLARED if isinstance(c.rule, judge.Contrast)]


def _effect(claim: judge.Claim, large: bool) -> Callable[[dict, int], tuple[float, float]]:
    """(peak, tau) per run: on `large`, `a` clearly in the claim's direction on every seed; else no effect beyond
    the claim's own floor (a gain at the floor, a difference at 1.5 x the margin, a target reached sooner by either
    side), alternating in sign from seed to seed."""
    rule: judge.Contrast = claim.rule  # type: ignore[assignment]
    sign = lambda seed: 1.0 if seed % 2 else -1.0  # noqa: E731

    def shape(cell: dict, seed: int) -> tuple[float, float]:
        is_a = all(cell.get(k) == v for k, v in rule.a.items())
        jitter = 0.0005 * ((seed * 7919) % 5)
        if rule.test == "gain":
            lift = rule.floor + (0.1 + jitter if large else sign(seed) * 0.002)
            return (0.7 + (lift if is_a else 0.0), 3.0)
        if rule.test == "equivalent":
            gap = jitter * 0.1 if large else sign(seed) * 1.5 * rule.margin + jitter
            return (0.7 + (gap if is_a else 0.0), 3.0)
        fast, slow = (1.0 + jitter, 6.0) if large else ((2.0, 3.0) if seed % 2 else (3.0, 2.0))
        return (0.8, fast if is_a else slow)

    return shape


@pytest.mark.parametrize("case", CONTRASTS, ids=_id)
def test_contrast_reproduced_on_a_large_effect(case):
    claim = case[1]
    assert _verdict(case[0], claim, _records(claim, _effect(claim, large=True))) == R.REPRODUCED


@pytest.mark.parametrize("case", CONTRASTS, ids=_id)
def test_contrast_never_reproduced_on_noise(case):
    claim = case[1]
    assert _verdict(case[0], claim, _records(claim, _effect(claim, large=False))) != R.REPRODUCED
