"""Pure noise through every statistical rule and every declared claim: how often a verdict reads "reproduced" (or
"partly") when there is nothing to find.

The claims battery (tests/test_claims_battery.py) bounds these rates with few draws; scripts/noise_battery.py prints
them with many. Both read the definitions here, so the rules and claims they judge are the same:
- `NULL_EDGE`: each rule of `fedlib.report` on noise at the edge of its null (a gain exactly at its floor, a
  difference exactly at its margin, two arms drawn from one distribution), at `RULE_SEEDS` seeds; `fedaq_energy`:
  FedAQ's energy-to-target rule itself on runs of two schemes drawn from one distribution;
- `noise_cases()`: every declared claim that reads runs and is a contrast or a rule on the records alone
  (`RECORD_RULES`); `declared_verdict(paper, claim, rng, seeds)` judges it once on per-round records whose every arm
  is drawn from one distribution, shifted to the edge of each contrast's null (`null_edge`);
- `profile_seed_counts`: the seed counts a paper's profiles run, at which a declared claim is judged.
A rule at `ALPHA` may be positive on at most alpha + 3 Monte Carlo standard errors of the draws (`bound`).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from fedlib import report as R
from fedlib.claims import judge
from fedlib.claims.fedaq import SAVING_FLOOR
from fedlib.grids import profile_values
from fedlib.notebook_params import NOTEBOOKS
from fedlib.paper_params import PaperParams, params_class
from fedlib.papers.fedaq import energy_to_target_judgement

ALPHA = 0.05
K = 10  # classes of the synthetic task
ROUNDS = 8  # rounds of a synthetic run
Shape = Callable[[dict, int], tuple[float, float]]  # (cell, seed) -> a run's (peak accuracy, time constant)


def bound(draws: int, alpha: float = ALPHA) -> float:
    """The highest positive rate a rule at `alpha` may show over `draws` noise draws: alpha + 3 Monte Carlo SE."""
    return alpha + 3 * standard_error(alpha, draws)


def standard_error(rate: float, draws: int) -> float:
    return math.sqrt(rate * (1 - rate) / draws)


def positive_rate(judge_once: Callable[[np.random.Generator], str], draws: int, seed: int = 0) -> float:
    """The share of `draws` verdicts (`judge_once(rng)`, one generator seeded `seed`) that support the claim."""
    rng = np.random.default_rng(seed)
    return float(np.mean([judge_once(rng) in R.POSITIVE for _ in range(draws)]))


# ---- the rules of fedlib.report at the edge of their null ---------------------------------------------------------

def rounds_to_target(rng: np.random.Generator, n: int) -> np.ndarray:
    """Rounds to a target of n runs of one method: integer rounds with ties, a fifth never arriving."""
    rounds = np.ceil(rng.lognormal(np.log(15), 0.4, n))
    return np.where(rng.random(n) < 0.2, np.inf, rounds)


def fedaq_energy(rng: np.random.Generator, n: int) -> R.Judgement:
    """FedAQ's energy-to-target rule (`fedlib.papers.fedaq.energy_to_target_judgement`, its claims' floor) on runs of
    FedAQ and fixed 8-bit drawn from one distribution: a learning curve and an energy per round per run, three
    targets, some never reached."""
    rounds = np.arange(1, 41)
    runs = {}
    for scheme in ("fedaq", "fixed8"):
        for seed in range(n):
            acc = 0.1 + (0.72 + 0.03 * rng.standard_normal() - 0.1) * (1 - np.exp(-rounds / rng.lognormal(np.log(8), 0.3)))
            energy = np.cumsum(rng.lognormal(np.log(5.0), 0.1, len(rounds)))
            runs[("joint", scheme, seed)] = pd.DataFrame({"round": rounds, "test_acc": acc, "cum_energy_mJ": energy})
    return energy_to_target_judgement(runs, "joint", {t: "fixed8" for t in (0.6, 0.65, 0.7)}, "fedaq", list(range(n)),
                                      floor=SAVING_FLOOR)


NULL_EDGE: dict[str, Callable[[np.random.Generator, int], R.Judgement]] = {
    "paired_gain t": lambda rng, n: R.paired_gain(0.5 + rng.standard_normal(n), threshold=0.5, test="t"),
    "paired_gain wilcoxon": lambda rng, n: R.paired_gain(0.5 + rng.standard_normal(n), threshold=0.5),
    "paired_equivalence": lambda rng, n: R.paired_equivalence(0.1 + 0.05 * rng.standard_normal(n), margin=0.1),
    "reaches_sooner, margin 0": lambda rng, n: R.reaches_sooner(rounds_to_target(rng, n), rounds_to_target(rng, n),
                                                                 margin=0.0),
    "reaches_sooner, margin 0.1": lambda rng, n: R.reaches_sooner(rounds_to_target(rng, n), rounds_to_target(rng, n),
                                                                   margin=0.1),
    # energy summed over three targets per seed, a 5% floor, on drawn rounds to target
    "energy to target, floor 0.05": lambda rng, n: R.reaches_sooner(
        sum(rounds_to_target(rng, n) for _ in range(3)), sum(rounds_to_target(rng, n) for _ in range(3)), margin=0.05),
}
RULE_SEEDS = (2, 3, 5, 8)  # the seed counts at which the rules meet noise
FEDAQ_ENERGY = "FedAQ energy_to_target_judgement"  # `fedaq_energy`, at FedAQ's profiles' seed counts


# ---- declared claims on synthetic per-round records --------------------------------------------------------------

def curve(peak: float, tau: float) -> np.ndarray:
    r = np.arange(1, ROUNDS + 1)
    return 1 / K + (peak - 1 / K) * (1 - np.exp(-r / tau))


def records(claim: judge.Claim, shape: Shape, seeds: list[int]) -> dict[str, pd.DataFrame]:
    """Per-round records of every run the claim reads; `shape(cell, seed)` gives the run's (peak, tau). A run two
    declarations share is recorded once."""
    runs_of: dict[str, dict[tuple, tuple[dict, np.ndarray]]] = {}
    for runs in claim.reads:
        for cell in runs.cells():
            named = {**cell, **{c: f"{c}0" for c in runs.ids}}
            for seed in seeds:
                key = tuple(sorted({**named, "seed": seed}.items(), key=lambda kv: kv[0]))
                found = runs_of.setdefault(runs.table, {})
                if key not in found:
                    found[key] = ({**named, "seed": seed}, curve(*shape(cell, seed)))
    out = {}
    rounds = np.arange(1, ROUNDS + 1)
    for table, found in runs_of.items():
        columns = list(dict.fromkeys(c for named, _ in found.values() for c in named))
        acc = np.concatenate([a for _, a in found.values()])
        out[table] = pd.DataFrame({
            **{c: [named.get(c, np.nan) for named, _ in found.values() for _ in rounds] for c in columns},
            "round": np.tile(rounds, len(found)), "test_acc": acc, "test_loss": 2.3 * (1 - acc),
            "train_loss": 2.3 * (1 - acc), "cum_cost": np.tile(rounds.astype(float), len(found))})
    return out


def contrasts(claim: judge.Claim) -> list[judge.Contrast]:
    rule = claim.rule
    return [rule] if isinstance(rule, judge.Contrast) else list(rule.contrasts) if isinstance(rule, judge.AllOf) else []


def params(paper: str, claim: judge.Claim, seeds: list[int]) -> PaperParams:
    """The paper's default parameters with `seeds` for every seed list the claim reads (and a target of 0.6)."""
    changes: dict[str, object] = {runs.seeds: seeds for runs in claim.reads}
    for rule in contrasts(claim):
        if isinstance(rule.target, str):
            changes[rule.target] = 0.6
    return replace(params_class(paper)(), **changes)


def verdict(paper: str, claim: judge.Claim, evidence: dict[str, pd.DataFrame], seeds: list[int],
            given: PaperParams | None = None) -> str:
    """The judge's verdict on `claim` from `evidence` (records) under `given` (default: `params(paper, ...)`)."""
    bundle = judge.Bundle(given or params(paper, claim, seeds), evidence, K)
    return judge.judge_one(claim, bundle).judgement.verdict


def null_edge(claim: judge.Claim, rng: np.random.Generator) -> Shape:
    """(peak, tau) per run: every arm drawn from one distribution, shifted to the edge of each contrast's null (a
    gain exactly at its floor, a difference exactly at its margin; rounds to target from one distribution)."""
    shift: dict[tuple, float] = {}
    for rule in contrasts(claim):
        edge = rule.floor if rule.test == "gain" else rule.margin if rule.test == "equivalent" else 0.0
        shift.setdefault(tuple(sorted(rule.a.items())), edge)

    def shape(cell: dict, seed: int) -> tuple[float, float]:
        lift = next((v for k, v in shift.items() if all(cell.get(c) == x for c, x in k)), 0.0)
        return 0.7 + lift + 0.02 * rng.standard_normal(), float(np.exp(np.log(3.0) + 0.4 * rng.standard_normal()))

    return shape


def declared_verdict(paper: str, claim: judge.Claim, rng: np.random.Generator, seeds: list[int]) -> str:
    """The claim judged once on pure noise at the edge of its null, on `seeds`."""
    return verdict(paper, claim, records(claim, null_edge(claim, rng), seeds), seeds)


# Rules other than contrasts that read only the records (and the parameters): the battery can feed them noise
RECORD_RULES = {("taco", "C1"), ("taco", "C2"), *(("mucsc", f"C7 {part}") for part in ("iid", "noniid", "writers"))}


def reading() -> list[tuple[str, judge.Claim]]:
    """Every declared claim that reads runs, with its paper."""
    return [(paper, c) for paper, claims in judge.declared().items() for c in claims if c.reads]


def noise_cases() -> list[tuple[str, judge.Claim]]:
    """The declared claims pure noise is fed to: contrasts and `RECORD_RULES`."""
    return [(p, c) for p, c in reading() if contrasts(c) or (p, c.id) in RECORD_RULES]


def profile_seed_counts(paper: str, seeds: str, notebooks: Path = NOTEBOOKS) -> list[int]:
    """How many seeds the parameter `seeds` lists under each profile of `paper` (quick: the defaults)."""
    counts = {len(getattr(params_class(paper)(), seeds))}
    for path in sorted((notebooks / "profiles" / paper).glob("*.yaml")):
        values = profile_values(paper, path.stem, notebooks)
        if seeds in values:
            counts.add(len(values[seeds]))
    return sorted(counts)
