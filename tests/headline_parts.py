"""The check that a paper's headlines, and the parts each orders `first`, select exactly the runs their claims read
(`fedlib.paper.Headline`): the judge decides, on whatever records a test has for the runs (fabricated ones, or the
committed ledger's)."""
from __future__ import annotations

from collections.abc import Callable, Sequence

from fedlib import report
from fedlib.paper import Headline
from fedlib.runs.spec import RunSpec, run_name

# The runs held -> the verdicts of the claims under test (in any order)
Verdicts = Callable[[Sequence[RunSpec]], Sequence[str]]


def headlines_and_parts(headlines: Sequence[Headline]) -> list[tuple[int, Headline]]:
    """(rank, headline) for each headline, then (rank, part) for each part it orders first."""
    return [(rank, part) for rank, h in enumerate(headlines) for part in (h, *h.first)]


def runs_of_part(headlines: Sequence[Headline], rank: int, part: Headline, grid: Sequence[RunSpec]
                 ) -> tuple[list[RunSpec], list[RunSpec]]:
    """(the runs of `grid` that the part at `rank` and the headlines before it select, those of them that only the
    part adds)."""
    earlier = headlines[:rank]
    held = [spec for spec in grid if (headlines[rank].matches(spec) and part.matches(spec))
            or any(h.matches(spec) for h in earlier)]
    return held, [spec for spec in held if not any(h.matches(spec) for h in earlier)]


def assert_selects_exactly(headlines: Sequence[Headline], rank: int, part: Headline, grid: Sequence[RunSpec],
                           verdicts: Verdicts) -> None:
    """With the runs of the part at `rank` (a headline or one of its parts) and of the earlier headlines, none of
    the part's claims is "not testable: runs not computed yet"; without any one run the part adds, one of them is
    (the part selects no run its claims do not read)."""
    held, added = runs_of_part(headlines, rank, part, grid)
    assert added, f"{part.claims}: selects no run of the grid"
    assert report.NOT_COMPUTED not in verdicts(held), part.claims
    for spec in added:
        assert report.NOT_COMPUTED in verdicts([s for s in held if s != spec]), (part.claims, run_name(spec))
