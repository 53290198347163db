"""The scale a claim was judged at, and the paper's: dataset, model, clients per round, rounds, seeds.

Every paper declares its `paper_scale` (the setting of the paper's headline table) and `scale(params)` (the
setting its notebook ran under those parameters; `fedlib.paper.Paper`); a claim on a secondary grid declares its
own (`Claim.scale`, `Claim.paper_scale`). The judge writes the scale into every evidence cell of a claim that reads
runs, and a negative or open verdict on a claim the paper made at a larger scale reads "... at this scale": a
small-scale analogue that did not show the effect is not a refutation of the paper.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Scale:
    """A federated setting's size. `rounds`, `seeds` None: the paper does not say."""

    dataset: str
    model: str
    clients: int  # clients per round
    rounds: int | None
    seeds: int | None = None

    def __post_init__(self) -> None:
        if self.clients < 1 or any(v is not None and v < 1 for v in (self.rounds, self.seeds)):
            raise ValueError(f"a scale counts at least one client, round and seed, got {self!r}")

    def __str__(self) -> str:
        rounds = f", {self.rounds} rounds" if self.rounds is not None else ""
        seeds = f", {self.seeds} seed{'s' if self.seeds != 1 else ''}" if self.seeds is not None else ""
        return f"{self.dataset}, {self.model}, {self.clients} clients/round{rounds}{seeds}"

    def smaller_than(self, paper: Scale) -> bool:
        """Whether this setting is not the paper's: another dataset or model, or fewer clients per round or rounds."""
        fewer_rounds = self.rounds is not None and paper.rounds is not None and self.rounds < paper.rounds
        return (self.dataset.casefold() != paper.dataset.casefold() or self.model.casefold() != paper.model.casefold()
                or self.clients < paper.clients or fewer_rounds)
