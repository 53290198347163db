"""A claim as a paper declares it (`Claim`: an id, the paper's words and value, the runs it reads, a rule), and what
its rule returns (`Finding`). The judge that applies them is `fedlib.claims.judge`; a `Paper` (`fedlib.paper`)
holds its claims, so the declaration sits here, below both.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, Literal, Protocol, TypeVar, runtime_checkable

import numpy as np
import pandas as pd

from fedlib import report
from fedlib.paper.bundle import Bundle
from fedlib.paper.scale import Scale
from fedlib.paper_params import PaperParams
from fedlib.report import Judgement

B = TypeVar("B", bound=Bundle)


@dataclass(frozen=True)
class Runs:
    """Runs a claim reads: the rows of `records[table]` whose columns take the listed values, one run per
    combination of values, value of each `ids` column (an id column the claim does not filter on, e.g. a partition
    it averages over) and seed (of the parameter named `seeds`). `may_diverge`: the claim is about these runs
    failing."""

    where: Mapping[str, Sequence[Any]]
    table: str = "runs"
    seeds: str = "seeds"
    may_diverge: bool = False
    ids: tuple[str, ...] = ()

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

    def by(self) -> list[str]:
        """The columns that name one run."""
        return [*self.where, *self.ids, "seed"]


@dataclass(frozen=True)
class Finding:
    """A rule's output: the measured value in words and the judgement."""

    measured: str
    judgement: Judgement


Rule = Callable[[B], Finding]


Cell = Mapping[str, Any]


# (the paper's bundle with healthy records and every computed field empty, the effect, the noise's generator, the
# noise's kind) -> that bundle with the fields the rule reads drawn at that effect
FieldNoise = Callable[[Any, int, np.random.Generator, str], Any]


@dataclass(frozen=True)
class Battery:
    """What the claims batteries (`fedlib.claims.noise`) need of a claim whose rule is not a `Contrast` or `AllOf`
    (those they read from the rule itself), for `effect` 0 (the edge of the rule's null), +1 (a clear effect in the
    claim's direction) and -1 (a clear effect the other way). One of:
    - `lift(effect)`, for a rule that reads the records alone: the final accuracy of each cell's runs above the
      others' as (cell, lift) pairs (a run takes the first cell it matches, 0 where none);
    - `bundle(base, effect, rng, kind)`, for a rule that reads values the notebook computes from the runs (the
      bundle's fields: a per-seed saving, a table's cells, a sweep): `base` is the paper's bundle from no runs (its
      `bundle_from_runs`: every computed field empty) with healthy records of the runs the claim reads and the
      battery's seeds in its parameters; the maker returns it with the fields the rule reads drawn per seed at
      `effect` (`dataclasses.replace`), its noise from `rng`. `kind` is the noise's (`fedlib.claims.noise.
      NOISE_KINDS`); a kind that means nothing to the fields (a plateau where the rule reads one value per seed) is
      drawn as the null's edge.
    `opposite`: why a clear effect the other way cannot read "not reproduced" ('' where it can)."""

    lift: Callable[[int], tuple[tuple[Cell, float], ...]] | None = None
    opposite: str = ""
    bundle: FieldNoise | None = None

    def __post_init__(self) -> None:
        if (self.lift is None) == (self.bundle is None):
            raise TypeError("a Battery declares exactly one of lift (a rule on the records) and bundle (a rule on "
                            "the bundle's fields)")


@dataclass(frozen=True)
class Claim(Generic[B]):
    """One row of a paper's claims table, declared: `rule(bundle)` judges it once the guards passed. `requires`: ids
    of earlier claims that must read "reproduced" for this one to have anything to test. `scale`, `paper_scale`: the
    claim's own (a secondary grid's) in place of its module's `scale(params)` and `PAPER_SCALE`; `ours`: a finding
    the paper did not make, so no paper scale applies; `erratum`: it checks a formula or derivation the paper prints
    (its "not reproduced" confirms an erratum of docs/<paper>.md), counted apart from the experimental verdicts.
    `min_seeds`: the fewest seeds with which the rule decides either way (below, the guard reads "not testable: too
    few seeds"); `test`: the test that decides it ("t", or "sign" where only the exact sign test can), for its
    smallest attainable p; `setting`: why a profile's parameters cannot test the claim at all ('' where they can:
    another scale or setting than the claim's), read before the guards as "not testable: claim made at another
    scale". `battery`: what the claims batteries need to feed the rule noise and clear effects (`Battery`; None for
    a `Contrast` or `AllOf`, which declare it themselves)."""

    id: str
    statement: str | Callable[[Any], str]  # the paper's words; a function of the params (a PaperParams) if they vary
    paper_value: str
    rule: Rule
    reads: tuple[Runs, ...] = ()
    min_seeds: int = report.DECIDING_SEEDS
    requires: tuple[str, ...] = ()
    scale: Callable[[Any], Scale] | None = None
    paper_scale: Scale | None = None
    ours: bool = False
    erratum: bool = False
    test: Literal["t", "sign"] = "t"
    setting: Callable[[Any], str] | None = None
    battery: Battery | None = None

    def elsewhere(self, params: Any) -> str:
        """Why `params` cannot test this claim ('' where they can)."""
        return self.setting(params) if self.setting is not None else ""

    def __post_init__(self) -> None:
        if isinstance(self.rule, DeclaresRuns):
            object.__setattr__(self, "reads", self.reads or self.rule.runs())


@runtime_checkable
class DeclaresRuns(Protocol):
    """A rule that names the runs it reads (`fedlib.claims.judge.Contrast`, `AllOf`): its claim reads them."""

    def runs(self) -> tuple[Runs, ...]: ...
