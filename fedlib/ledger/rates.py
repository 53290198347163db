"""The client-steps/s a ledger's entries measured, per scale and machine: what a piece's whole runs took (evaluation
and codecs included) from each entry's provenance (`client_steps`, `wall_s`), so that a reader can tell what the
rest of a plan would take on a machine like one that already computed some of it."""
from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from fedlib.ledger.entries import LedgerEntry


@dataclass(frozen=True)
class ScaleRate:
    experiment: str
    dataset: str
    model: str
    device_name: str
    rates: tuple[float, ...]  # client-steps/s of each entry, ascending
    client_steps: int
    wall_s: float

    @property
    def line(self) -> str:
        low, median, high = self.rates[0], statistics.median(self.rates), self.rates[-1]
        return (f"{self.experiment:<10} {self.dataset:<14} {self.model:<14} {self.device_name:<24} "
                f"{len(self.rates):>7} {self.client_steps:>12,} {self.wall_s / 3600:>7.2f} "
                f"{low:>9,.1f} {median:>9,.1f} {high:>9,.1f}")


HEADER = (f"{'experiment':<10} {'dataset':<14} {'model':<14} {'device':<24} {'entries':>7} {'client-steps':>12} "
          f"{'hours':>7} {'min/s':>9} {'median/s':>9} {'max/s':>9}")


def scale_rates(entries: Sequence[LedgerEntry]) -> list[ScaleRate]:
    """One row per (experiment, dataset, model, device name) of the entries that record a positive wall time."""
    groups: dict[tuple[str, str, str, str], list[LedgerEntry]] = defaultdict(list)
    for entry in entries:
        if float(entry.provenance.get("wall_s", 0)) > 0:
            spec = entry.spec
            groups[(spec.experiment, spec.dataset, spec.model.name, str(entry.provenance["device_name"]))].append(entry)
    return [ScaleRate(*scale, rates=tuple(sorted(int(e.provenance["client_steps"]) / float(e.provenance["wall_s"])
                                                 for e in held)),
                      client_steps=sum(int(e.provenance["client_steps"]) for e in held),
                      wall_s=sum(float(e.provenance["wall_s"]) for e in held))
            for scale, held in sorted(groups.items())]
