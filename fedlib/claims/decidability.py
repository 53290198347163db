"""Whether each claim that reads runs can decide at a profile's seeds: both "reproduced" and "not reproduced"
reachable, before any run is computed.

A claim decides at a profile when the profile can test it at all (`Claim.elsewhere`: not a claim made at another
scale or setting), when its prerequisites (`Claim.requires`) decide, and when the profile gives every seed list it
reads at least the seeds its rule needs (`Claim.min_seeds`: 3 for a paired t test, whose smallest p-value is then
as small as the effect makes it; the exact sign test's smallest is 2**-n). `reproduce --dry-run` prints one line
per claim ("decidable at N seeds" or "cannot decide: <why>"); tests/test_decidability.py fails when a headline
claim of a profile that judges (`JUDGING_PROFILES`) cannot decide.
"""
from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from fedlib import report
from fedlib.claims.judge import AllOf, Contrast
from fedlib.paper import paper
from fedlib.paper.claim import Claim

# The profiles whose verdicts are read (the cpu record, the gpu ledger, the papers' scale). The quick profile runs
# one seed of every grid: it checks that each notebook runs, in `make test`, and decides no run-based claim.
JUDGING_PROFILES = ("cpu", "gpu", "full")


@dataclass(frozen=True)
class Decidability:
    """A claim at a profile: its rule, the seeds the profile gives it, the seeds the rule needs, the smallest
    p-value attainable with those seeds, and why it cannot decide ('' where it can)."""

    claim: str
    headline: bool
    rule: str
    seeds: int
    needs: int
    smallest_p: float
    why: str

    @property
    def decides(self) -> bool:
        return not self.why

    def line(self) -> str:
        return f"decidable at {self.seeds} seeds" if self.decides else f"cannot decide: {self.why}"


def rule_name(claim: Claim) -> str:
    """The claim's rule in words: a contrast's test, the tests an `AllOf` combines, a rule function's name."""
    rule: Any = claim.rule
    if isinstance(rule, Contrast):
        return {"gain": "paired gain (t)", "equivalent": "paired equivalence (TOST)",
                "sooner": "reaches sooner (t on log ratios / sign)"}[rule.test]
    if isinstance(rule, AllOf):
        return f"all of {len(rule.contrasts)} contrasts (intersection-union, Bonferroni)"
    rule = getattr(rule, "func", rule)  # a functools.partial over a partition
    return getattr(rule, "__qualname__", type(rule).__name__).split(".<locals>")[0]


def _seeds(claim: Claim, params: Any) -> int:
    return min(len(set(runs.seed_list(params))) for runs in claim.reads)


def decidability(claims: tuple[Claim, ...], params: Any, headlines: set[str]) -> list[Decidability]:
    """Each of `claims` that reads runs (in declaration order) at the parameters `params`."""
    by_id = {c.id: c for c in claims}

    @functools.cache
    def why(claim_id: str) -> str:
        claim = by_id[claim_id]
        elsewhere = claim.elsewhere(params)
        if elsewhere:
            return f"claim made at another scale ({elsewhere})"
        blocked = [r for r in claim.requires if why(r)]
        if blocked:
            return f"it needs {', '.join(blocked)} reproduced first, which cannot decide"
        seeds = _seeds(claim, params)
        if seeds < claim.min_seeds:
            return (f"{seeds} seed(s); its rule needs >= {claim.min_seeds} (smallest p with {seeds}: "
                    f"{report.smallest_p(claim.test, seeds):.3g})")
        return ""

    return [Decidability(c.id, c.id in headlines, rule_name(c), _seeds(c, params), c.min_seeds,
                         report.smallest_p(c.test, _seeds(c, params)), why(c.id)) for c in claims if c.reads]


def notebook_decidability(notebook: str, params: Any) -> list[Decidability]:
    """`decidability` of the claims `notebook`'s paper declares (on the profile's cells, where it has
    `on_profile`), its headline claims marked; [] for a paper without declared claims."""
    declared = paper(notebook)
    claims = tuple(declared.on(c, params) for c in declared.claims)
    return decidability(claims, params, {c.id for c in declared.headline_claims()})
