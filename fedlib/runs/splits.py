"""Splits by name: how a spec's `split` component becomes each client's training indices.

A split is `split(dataset, num_clients, seeds, **args) -> list[np.ndarray]` (one index array per client),
registered with `@SPLITS.register(name)` (fedlib.registry). The fedlib.data schemes are registered here; a paper's
module registers its own split.
"""
from __future__ import annotations

from typing import Any, Protocol

import numpy as np

from fedlib.core.seeding import Seeds
from fedlib.data import Dataset, split_clients
from fedlib.registry import SPLITS


class Split(Protocol):
    def __call__(self, dataset: Dataset, num_clients: int, seeds: Seeds, **args: Any) -> list[np.ndarray]: ...


def _scheme(name: str) -> None:
    def split(dataset: Dataset, num_clients: int, seeds: Seeds, **args: Any) -> list[np.ndarray]:
        return split_clients(dataset.y_train.numpy(), num_clients, name, seeds.numpy("partition"), **args)

    split.__name__ = split.__qualname__ = f"{name}_split"
    split.__doc__ = f"fedlib.data's {name!r} scheme on the partition stream."
    SPLITS.register(name)(split)


for _name in ("dirichlet", "iid", "shards", "labels"):
    _scheme(_name)


@SPLITS.register("natural")
def natural_split(dataset: Dataset, num_clients: int, seeds: Seeds, **args: Any) -> list[np.ndarray]:
    """One client per natural group (`Dataset.groups`: FEMNIST writer, Shakespeare role), a random subset of the
    groups when there are fewer clients (fedlib.data's 'natural' scheme on the partition stream)."""
    return split_clients(dataset.y_train.numpy(), num_clients, "natural", seeds.numpy("partition"),
                         groups=dataset.groups, **args)
