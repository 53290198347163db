"""Which runs of a profile back each paper's headline claims, and the order a piece computes them in.

A paper declares its `headlines` (`fedlib.paper.Paper`): `Headline`s, most valued first, each naming the claims
it backs and the runs they read, as a selection over the runs' fields (the same rule as `--select`: seed,
experiment, dataset, algorithm, model, device, rounds, the spec's options and labels; values of one key OR, keys
AND, case ignored):

    headlines=(Headline("Q1", {"algorithm": ("SCAFFOLD", "FedAvg")}),
               Headline("Q2", {"algorithm": ("FedProx", "FedAvg")}))

`prioritized` orders a profile's runs: the first headline of every notebook (in the plan's notebook order), then
the second of every notebook, and so on, so that each paper's most valued claim gets its runs first; within a
headline, the parts it declares `first` in their order (a claim that reads a part is judged once that part is in),
then its other runs, each in the grid's own order. A run that several headlines read comes with the first; a run
shared between notebooks is listed once. Runs that back no headline follow, in the grid's order (rank `REST`).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from fedlib.paper import paper
from fedlib.runs.spec import RunSpec

REST = 10**6  # the rank of a run that backs no headline claim


@dataclass(frozen=True)
class Ranked:
    """One run of the plan in priority order: the notebook that reads it, the headline rank (`REST`: none) and the
    claims it backs ("" for none)."""

    notebook: str
    spec: RunSpec
    rank: int
    backs: str


def check_headlines(notebook: str, specs: Sequence[RunSpec], min_seeds: int = 3) -> None:
    """ValueError naming the headline if one of the notebook's headlines, or a part it orders `first`, selects no
    run of `specs`, or runs on fewer than `min_seeds` seeds (a headline claim is judged on >= 3 seeds)."""
    for headline in paper(notebook).headlines:
        ours = [s for s in specs if headline.matches(s)]
        for what, selected, declared in [("", ours, headline),
                                         *((f", its part {part.claims!r},", [s for s in ours if part.matches(s)], part)
                                           for part in headline.first)]:
            seeds = {s.seed for s in selected}
            if len(seeds) < min_seeds:
                raise ValueError(f"paper {notebook!r}, headlines: headline {headline.claims!r}{what} selects "
                                 f"{declared.describe_runs()} on {len(seeds)} seed(s) {sorted(seeds)} of this "
                                 f"profile; a headline needs its runs on >= {min_seeds} seeds: fix the selection or "
                                 "the profile")


def prioritized(grids: Mapping[str, Sequence[RunSpec]]) -> list[Ranked]:
    """Every run of the notebooks' `grids` (notebook -> its specs, in the plan's order), once, in priority order."""
    ranked: dict[RunSpec, Ranked] = {}
    order: dict[RunSpec, tuple[int, int, int, int]] = {}
    for n, (notebook, specs) in enumerate(grids.items()):
        declared = paper(notebook).headlines
        for i, spec in enumerate(specs):
            rank = next((r for r, h in enumerate(declared) if h.matches(spec)), REST)
            key = (rank, n, declared[rank].part(spec) if rank != REST else 0, i)
            if spec not in order or key < order[spec]:
                order[spec] = key
                ranked[spec] = Ranked(notebook, spec, rank, declared[rank].claims if rank != REST else "")
    return [ranked[spec] for spec in sorted(order, key=order.__getitem__)]
