"""Adversarial evidence against every statistical rule in fedlib.report, generated per rule and per scenario.

Each rule declares how to turn a per-pair effect into its evidence (`RULES`); each scenario declares the per-pair
effects (`SCENARIOS`). Every rule meets every scenario at several pair counts and seeds of the noise generator:
a missing run (NaN), a diverged one (inf), a single pair and a noise-level effect must never read "reproduced";
a large effect on enough pairs must. (The per-claim battery over declared claims is not built yet: claims are
still functions per paper, see issue 18.)
"""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from fedlib import report as R

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
