"""The base of every paper's claims bundle: what the judge's guards read."""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pandas as pd

from fedlib.paper_params import PaperParams


@dataclass(frozen=True)
class Bundle:
    """What every paper's claims read: the notebook's parameters, its per-round run tables by name (id columns,
    `seed`, `round`, `test_acc`, `train_loss`, ...) and the task's class count. Papers subclass it with typed
    fields for the values their notebooks compute (theory results enter here as values)."""

    params: PaperParams
    records: Mapping[str, pd.DataFrame]
    num_classes: int

    def __post_init__(self) -> None:
        if not isinstance(self.params, PaperParams):
            raise TypeError(f"{type(self).__name__}.params must be the notebook's parameters dataclass "
                            f"(fedlib.paper_params.PaperParams), got {type(self.params).__name__}")
