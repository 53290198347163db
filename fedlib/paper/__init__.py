"""A paper as one declared object: its parameters, grid, headline runs, claims and scale, registered in `PAPERS`.

Every layer that serves papers (parameters, grids, priority, ledger, judge, batteries, reproduce, the dry run) reads
`paper(name)` or `papers()`, never a module by a paper's name. A paper declares itself once, where its claims are:

    PAPER = declare(Paper(name="quickstart", params=QuickstartParams, experiments=experiments, ...))

Every field is keyword-only and required (a missing or misspelled one is a TypeError at import); a paper without
something says so (`bundle_from_runs=None`, `claims=()`). fedlib's papers are declared by importing `fedlib.papers`;
a user's paper by importing its module, which the user allows as a spec's imports are (`fedlib.trust`):
`papers()` imports both.

What a paper declares besides lives in this package, below the judge (`fedlib.claims`) that reads `PAPERS`: its
claims (`fedlib.paper.claim`), their bundle (`fedlib.paper.bundle`) and its scale (`fedlib.paper.scale`).
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fedlib.paper_params import PaperParams, ParameterError
from fedlib.registry import Registry, load_components
from fedlib.runs.spec import RunSpec
from fedlib.trust import allowed_imports

if TYPE_CHECKING:
    import numpy as np

    from fedlib.paper.bundle import Bundle
    from fedlib.paper.claim import Claim
    from fedlib.paper.scale import Scale
    from fedlib.report import Claims, Judgement


Selection = Mapping[str, Sequence[str]]


@dataclass(frozen=True)
class Headline:
    """Claims a reader values (their ids, e.g. "C2, C3") and the runs they read: a `--select`-style selection, or a
    tuple of them (a run that any selects), and `without` the fields those runs do not have (a grid's extra label,
    e.g. the timing runs' `repeat`).

    `first`: claims of this headline that read only part of its runs, each as a `Headline` selecting that part, in
    the order a piece computes the parts (`fedlib.ledger.priority`): such a claim is judged as soon as its part is
    in, not after the headline's last run."""

    claims: str
    runs: Selection | tuple[Selection, ...]
    without: tuple[str, ...] = ()
    first: tuple[Headline, ...] = ()

    def __post_init__(self) -> None:
        for part in self.first:
            if not part.claim_ids() <= self.claim_ids():
                raise ValueError(f"headline {self.claims!r}: its part {part.claims!r} names claims the headline does "
                                 "not; a part orders some of the headline's own claims first")

    def claim_ids(self) -> set[str]:
        return {name.strip() for name in self.claims.split(",")}

    def selections(self) -> tuple[Selection, ...]:
        return self.runs if isinstance(self.runs, tuple) else (self.runs,)

    def matches(self, spec: RunSpec) -> bool:
        fields = spec.fields_for_selection()
        return (any(spec.matches({k: [str(v) for v in values] for k, values in selection.items()})
                    for selection in self.selections())
                and not any(name in fields for name in self.without))

    def describe_runs(self) -> str:
        """The selection in words: "{'mode': ('up',), ...} or {...}"."""
        return " or ".join(str(dict(selection)) for selection in self.selections())

    def part(self, spec: RunSpec) -> int:
        """The index of the first part in `first` that selects `spec`, a run of this headline (len(first): none)."""
        return next((i for i, part in enumerate(self.first) if part.matches(spec)), len(self.first))


@dataclass(frozen=True, kw_only=True)
class Paper:
    """One paper: what its notebook `name` (`notebooks`/<name>.py, its profiles in `notebooks`/profiles/<name>/)
    runs and claims.

    `headlines`: the runs behind its most valued claims, most valued first (`fedlib.ledger.priority`); `judge`:
    its claims table from a bundle (`claims(bundle)`), None where it declares no claims; `bundle_from_runs(params,
    records, num_classes)`: its bundle from runs alone (`reproduce --from-ledger`), None where it has none;
    `on_profile(claim, params)`: a claim on the profile's cells, None where claims read their declared cells;
    `scale(params)` and `paper_scale`: the setting its notebook ran and the paper's (`fedlib.paper.scale`);
    `noise_rules`: its own statistical rules the noise battery feeds (name -> rule(rng, seeds)); `notes`: its reading
    notes (docs/<name>.md); `theory`: its theory module (theory/<name>.py); None where it has none."""

    name: str
    notebooks: Path
    params: type[PaperParams]
    experiments: Callable[[Any], Sequence[RunSpec]]
    headlines: tuple[Headline, ...]
    claims: tuple[Claim, ...]
    judge: Callable[[Bundle], Claims] | None
    bundle_from_runs: Callable[..., Bundle] | None
    on_profile: Callable[[Claim, Any], Claim] | None
    scale: Callable[[Any], Scale] | None
    paper_scale: Scale | None
    noise_rules: Mapping[str, Callable[[np.random.Generator, int], Judgement]]
    notes: str | None
    theory: str | None

    def on(self, claim: Claim, params: Any) -> Claim:
        """`claim` on the profile `params`'s cells (itself where the paper has no `on_profile`)."""
        return self.on_profile(claim, params) if self.on_profile is not None else claim

    def headline_claims(self) -> list[Claim]:
        """The declared claims the headlines name, with those they require, in declaration order."""
        wanted = {name for h in self.headlines for name in h.claim_ids()}
        by_id = {c.id: c for c in self.claims}
        todo = list(wanted)
        while todo:
            for required in by_id[todo.pop()].requires:
                if required not in wanted:
                    wanted.add(required)
                    todo.append(required)
        return [c for c in self.claims if c.id in wanted]


PAPERS: Registry[Paper] = Registry("paper")


def declare(declared: Paper) -> Paper:
    """Register `declared` in `PAPERS` under its name (a name declared twice: the registry's ValueError)."""
    return PAPERS.register(declared.name)(declared)


def papers() -> list[Paper]:
    """Every declared paper: fedlib's (`fedlib.papers`) and those of the modules the user allowed."""
    load_components(allowed_imports(), f"the allowed imports ({', '.join(allowed_imports())})")
    return [PAPERS[name] for name in sorted(PAPERS)]


def declared() -> dict[str, tuple[Claim, ...]]:
    """Every paper's declared claims, by its name, for the papers that declare some (the claims batteries run over
    them: a paper falls in by being declared)."""
    return {p.name: p.claims for p in papers() if p.claims}


def paper(name: str) -> Paper:
    """The paper declared as `name`; an unknown name: a KeyError listing the declared ones."""
    papers()
    return PAPERS[name]


def params_class(notebook: str) -> type[PaperParams]:
    """The parameters class of the paper declared as `notebook`; an unknown name: a `ParameterError` listing the
    declared ones."""
    try:
        return paper(notebook).params
    except KeyError as err:
        raise ParameterError(f"notebook {notebook!r} is no declared paper: {err.args[0]}") from None


def notebooks_of(name: str, given: Path | None = None) -> Path:
    """The folder of notebook `name` and its profiles: `given`, else its paper's `notebooks`."""
    return given if given is not None else paper(name).notebooks
