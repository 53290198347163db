"""Pure noise through every statistical rule and every declared claim: how often a verdict reads "reproduced" (or
"partly") when there is nothing to find.

The claims battery (tests/test_claims_battery.py) bounds these rates with few draws; scripts/noise_battery.py prints
them with many. Both read the definitions here, so the rules and claims they judge are the same:
- `NULL_EDGE`: each rule of `fedlib.report` on noise at the edge of its null (a gain exactly at its floor, a
  difference exactly at its margin, two arms drawn from one distribution), at `RULE_SEEDS` seeds; `paper_rules()`:
  the rules a paper declares for the battery (`Paper.noise_rules`: e.g. FedAQ's energy-to-target rule on runs of
  two schemes drawn from one distribution), at its profiles' seed counts;
- `noise_cases()`: every declared claim the batteries can feed (`fed`: a contrast, or a claim that declares its
  `Battery`); `declared_verdict(paper, claim, rng, seeds)` judges it once on per-round records whose every arm is
  drawn from one distribution, shifted to the edge of each contrast's null (`null_edge`), or, for a rule on values
  the notebook computes from runs (`Battery.bundle`), on those values drawn by the claim's maker at its null's edge;
- `profile_seed_counts`: the seed counts a paper's profiles run, at which a declared claim is judged.
A rule at `ALPHA` may be positive on at most alpha + 3 Monte Carlo standard errors of the draws (`bound`).
"""
from __future__ import annotations

import functools
import math
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import numpy as np
import pandas as pd

from fedlib import report as R
from fedlib.claims import judge
from fedlib.claims.decidability import JUDGING_PROFILES
from fedlib.grids import notebook_parameters, profile_values
from fedlib.paper import declared, notebooks_of, paper, papers, params_class
from fedlib.paper.bundle import Bundle
from fedlib.paper.claim import Cell, Claim
from fedlib.paper_params import PaperParams

ALPHA = 0.05
K = 10  # classes of the synthetic task
ROUNDS = 20  # rounds of a synthetic run: enough that rounds to a target differ from seed to seed
# (cell, seed) -> a run's (final accuracy, time constant) for `curve`, or its accuracy per round
Shape = Callable[[dict, int], "tuple[float, float] | np.ndarray"]


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


def few_rounds(rng: np.random.Generator, n: int) -> np.ndarray:
    """Rounds to an early target of n runs of one method, all arriving: 3 to 6 rounds mostly, as at the cpu
    profile's scale, where two methods often take the same rounds on every seed."""
    return np.ceil(rng.lognormal(np.log(4), 0.3, n))


Rule = Callable[[np.random.Generator, int], R.Judgement]
NULL_EDGE: dict[str, Rule] = {
    "paired_gain t": lambda rng, n: R.paired_gain(0.5 + rng.standard_normal(n), threshold=0.5, test="t"),
    "paired_gain wilcoxon": lambda rng, n: R.paired_gain(0.5 + rng.standard_normal(n), threshold=0.5,
                                                         test="wilcoxon"),
    # a few rounds to a target tie often: every seed equal leaves the t test to the sign test
    "paired_gain t, tied rounds": lambda rng, n: R.paired_gain(few_rounds(rng, n) - few_rounds(rng, n),
                                                               threshold=0.0, test="t"),
    "paired_equivalence": lambda rng, n: R.paired_equivalence(0.1 + 0.05 * rng.standard_normal(n), margin=0.1),
    "paired_equivalence, tied rounds": lambda rng, n: R.paired_equivalence(
        np.log(1.25 * few_rounds(rng, n) / few_rounds(rng, n)), margin=np.log(1.25)),
    "reaches_sooner, margin 0": lambda rng, n: R.reaches_sooner(rounds_to_target(rng, n), rounds_to_target(rng, n),
                                                                 margin=0.0),
    "reaches_sooner, margin 0.1": lambda rng, n: R.reaches_sooner(rounds_to_target(rng, n), rounds_to_target(rng, n),
                                                                   margin=0.1),
    # energy summed over three targets per seed, a 5% floor, on drawn rounds to target
    "energy to target, floor 0.05": lambda rng, n: R.reaches_sooner(
        sum(rounds_to_target(rng, n) for _ in range(3)), sum(rounds_to_target(rng, n) for _ in range(3)), margin=0.05),
}
RULE_SEEDS = (2, 3, 5, 8)  # the seed counts at which the rules meet noise


def paper_rules() -> dict[str, tuple[str, Rule]]:
    """"<paper> <rule>" -> (the paper, the rule) for every rule a paper declares for the battery (`noise_rules`)."""
    return {f"{p.name} {name}": (p.name, rule) for p in papers() for name, rule in p.noise_rules.items()}


# ---- declared claims on synthetic per-round records --------------------------------------------------------------

CLEAR = 0.1  # a clear effect: ten points of final accuracy beyond a contrast's floor, or three times the pace
CENSORING_TARGET = 0.72  # one spread above the runs' mean final accuracy: about one run in six reaches it
NOISE_KINDS = ("edge", "censored", "noisier arm on a plateau")  # the noise `declared_verdict` feeds a claim


def curve(final: float, tau: float) -> np.ndarray:
    """Accuracy per round rising from chance at pace `tau` to exactly `final` at the last round."""
    r = np.arange(1, ROUNDS + 1)
    return 1 / K + (final - 1 / K) * (1 - np.exp(-r / tau)) / (1 - np.exp(-ROUNDS / tau))


def records(claim: Claim, shape: Shape, seeds: list[int]) -> dict[str, pd.DataFrame]:
    """Per-round records of every run the claim reads; `shape(cell, seed)` gives the run's accuracy per round (or its
    (final, tau) for `curve`). A run two declarations share is recorded once."""
    runs_of: dict[str, dict[tuple, tuple[dict, np.ndarray]]] = {}
    for runs in claim.reads:
        for cell in runs.cells():
            named = {**cell, **{c: f"{c}0" for c in runs.ids}}
            for seed in seeds:
                key = tuple(sorted({**named, "seed": seed}.items(), key=lambda kv: kv[0]))
                found = runs_of.setdefault(runs.table, {})
                if key not in found:
                    made = shape(cell, seed)
                    found[key] = ({**named, "seed": seed}, curve(*made) if isinstance(made, tuple) else made)
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


def contrasts(claim: Claim) -> list[judge.Contrast]:
    rule = claim.rule
    return [rule] if isinstance(rule, judge.Contrast) else list(rule.contrasts) if isinstance(rule, judge.AllOf) else []


def fed(claim: Claim) -> bool:
    """Whether the batteries can feed the claim evidence: a contrast, or a rule that declares its `battery`."""
    return bool(contrasts(claim)) or claim.battery is not None


Arms = tuple[tuple[Cell, float, float], ...]  # (cell, lift of final accuracy, factor on its pace tau)


def arms(claim: Claim, effect: int) -> Arms:
    """Each declared cell's lift and pace at `effect` (0: the edge of every contrast's null; +1, -1: a clear effect
    each way): a contrast's `a` sits its floor (or margin, or pace) from `b`'s level, so an ordering climbs from its
    lowest arm and a best-of's arm clears its highest floor; a `Claim.battery` declares its own."""
    if claim.battery is not None:
        if claim.battery.lift is None:
            raise ValueError(f"claim {claim.id} declares its battery's bundle, not arms (`Battery.bundle`)")
        return tuple((cell, lift, 1.0) for cell, lift in claim.battery.lift(effect))
    level: dict[tuple, float] = {}
    pace: dict[tuple, float] = {}
    for rule in contrasts(claim):
        a, b = tuple(sorted(rule.a.items())), tuple(sorted(rule.b.items()))
        if rule.test == "sooner":
            pace[a] = {0: 1 - float(rule.margin), 1: 1 / 3, -1: 3.0}[effect]
            continue
        step = (float(rule.floor) + CLEAR * effect if rule.test == "gain"
                else {0: float(rule.margin), 1: 0.0, -1: float(rule.margin) + CLEAR}[effect])
        level[a] = max(level.get(a, -np.inf), level.get(b, 0.0) + step)
    return tuple((dict(k), level.get(k, 0.0), pace.get(k, 1.0)) for k in dict.fromkeys([*level, *pace]))


def _matched(found: Arms, cell: dict) -> int:
    """The position (1-based) of the first declared cell that `cell` matches; 0 where none."""
    return next((i + 1 for i, (c, _, _) in enumerate(found) if all(cell.get(k) == v for k, v in c.items())), 0)


def clear_effect(claim: Claim, effect: int) -> Shape:
    """(final, tau) per run at a clear `effect` (+1 or -1): the declared arms' levels and paces, each run a little
    apart (a fixed draw per seed and arm, so every paired test has a spread and the verdict is the same each time)."""
    found = arms(claim, effect)

    def shape(cell: dict, seed: int) -> tuple[float, float]:
        i = _matched(found, cell)
        lift, pace = (found[i - 1][1], found[i - 1][2]) if i else (0.0, 1.0)
        u = np.random.default_rng([seed, i]).random(2)
        return 0.7 + lift + 0.004 * u[0], 8.0 * pace * (1 + 0.15 * u[1])

    return shape


def params(paper: str, claim: Claim, seeds: list[int], target: float = 0.6) -> PaperParams:
    """The paper's default parameters with `seeds` for every seed list the claim reads (and `target` for every
    target a contrast names)."""
    changes: dict[str, object] = {runs.seeds: seeds for runs in claim.reads}
    for rule in contrasts(claim):
        if isinstance(rule.target, str):
            changes[rule.target] = target
    return replace(params_class(paper)(), **changes)


def verdict(paper: str, claim: Claim, evidence: dict[str, pd.DataFrame], seeds: list[int],
            given: PaperParams | None = None) -> str:
    """The judge's verdict on `claim` from `evidence` (records) under `given` (default: `params(paper, ...)`)."""
    bundle = Bundle(given or params(paper, claim, seeds), evidence, K)
    return judge.judge_one(claim, bundle).judgement.verdict


def null_edge(claim: Claim, rng: np.random.Generator, kind: str = "edge") -> Shape:
    """Per run, noise at the edge of every contrast's null (`arms` at effect 0: a gain exactly at its floor, a
    difference at its margin, a pace exactly its margin faster). `kind` "censored": a target near the final
    accuracy, rarely reached (`declared_verdict`); "noisier arm on a plateau": every run levels off early, and the
    first declared arm's accuracy jumps around its plateau from round to round three times as much as the others'
    final accuracies vary."""
    found = arms(claim, 0)
    plateau = kind == "noisier arm on a plateau"

    def shape(cell: dict, seed: int) -> tuple[float, float] | np.ndarray:
        i = _matched(found, cell)
        lift, pace = (found[i - 1][1], found[i - 1][2]) if i else (0.0, 1.0)
        final = 0.7 + lift + 0.02 * rng.standard_normal()
        tau = float(pace * np.exp(np.log(1.0 if plateau else 8.0) + 0.4 * rng.standard_normal()))
        if not (plateau and i == 1):
            return final, tau
        return np.clip(curve(0.7 + lift, tau) + 0.06 * rng.standard_normal(ROUNDS), 0.0, 1.0)

    return shape


def declared_verdict(paper: str, claim: Claim, rng: np.random.Generator, seeds: list[int],
                     kind: str = "edge") -> str:
    """The claim judged once on noise of `kind` (`NOISE_KINDS`) at the edge of its null, on `seeds`."""
    given = params(paper, claim, seeds, target=CENSORING_TARGET if kind == "censored" else 0.6)
    if _reads_fields(claim):
        return _field_verdict(paper, claim, given, seeds, 0, rng, kind)
    return verdict(paper, claim, records(claim, null_edge(claim, rng, kind), seeds), seeds, given)


def effect_verdict(paper: str, claim: Claim, effect: int, seeds: list[int]) -> str:
    """The claim judged on a clear `effect` (+1: in the claim's direction, -1: the other way) on `seeds`."""
    if _reads_fields(claim):
        return _field_verdict(paper, claim, params(paper, claim, seeds), seeds, effect,
                              np.random.default_rng(len(seeds)))
    return verdict(paper, claim, records(claim, clear_effect(claim, effect), seeds), seeds)


def _reads_fields(claim: Claim) -> bool:
    return claim.battery is not None and claim.battery.bundle is not None


def _field_verdict(name: str, claim: Claim, given: PaperParams, seeds: list[int], effect: int, rng: np.random.Generator,
                   kind: str = "edge") -> str:
    """A rule on the bundle's fields (`Battery.bundle`), judged on the fields its battery draws at `effect`, beside
    healthy records of the runs it reads (each run levelling off near 0.7: what the guards read)."""
    healthy = records(claim, lambda cell, seed: (0.7 + 0.02 * rng.standard_normal(), 8.0), seeds)
    base = replace(_empty_bundle(name, given), records=healthy)
    return judge.judge_one(claim, claim.battery.bundle(base, effect, rng, kind)).judgement.verdict


@functools.lru_cache(maxsize=64)
def _empty_bundle(name: str, given: PaperParams) -> Bundle:
    """Paper `name`'s bundle from no runs under `given`: every field the notebook computes empty (its
    `bundle_from_runs`)."""
    return paper(name).bundle_from_runs(given, {}, K)


def expected(claim: Claim, effect: int) -> str:
    """What a clear `effect` must read: "reproduced" one way, "not reproduced" the other, unless the claim declares
    why its rule has no "not reproduced" (`Battery.opposite`), where any verdict but a positive one will do."""
    if effect > 0:
        return R.REPRODUCED
    return "not positive" if claim.battery is not None and claim.battery.opposite else R.NOT_REPRODUCED


def reading() -> list[tuple[str, Claim]]:
    """Every declared claim that reads runs, with its paper."""
    return [(paper, c) for paper, claims in declared().items() for c in claims if c.reads]


def noise_cases() -> list[tuple[str, Claim]]:
    """The declared claims the batteries feed (`fed`): contrasts and claims that declare their `battery`."""
    return [(p, c) for p, c in reading() if fed(c)]


QUICK_EXCLUDED = ("the quick profile runs 1 seed: a smoke test that each notebook runs, which decides no run-based "
                  "claim (fedlib.claims.decidability.JUDGING_PROFILES)")


def judging_seed_counts(paper: str, seeds: str) -> dict[str, int]:
    """How many seeds the parameter `seeds` lists under each profile of `paper` that judges (`JUDGING_PROFILES`; not
    the quick profile: `QUICK_EXCLUDED`)."""
    return {profile: len(getattr(notebook_parameters(paper, profile), seeds)) for profile in JUDGING_PROFILES}


def profile_seed_counts(paper: str, seeds: str, notebooks: Path | None = None) -> list[int]:
    """How many seeds the parameter `seeds` lists under each profile of `paper` (quick: the defaults)."""
    counts = {len(getattr(params_class(paper)(), seeds))}
    for path in sorted((notebooks_of(paper, notebooks) / "profiles" / paper).glob("*.yaml")):
        values = profile_values(paper, path.stem, notebooks)
        if seeds in values:
            counts.add(len(values[seeds]))
    return sorted(counts)
