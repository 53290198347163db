"""Datasets (bundled, file-based, synthetic) and client partitioners.

Partitioners live in `fedlib.data.partition`; `split_clients(labels, n, scheme, rng, **kw)`
dispatches to them by name.
"""
from fedlib.data.datasets import Dataset, available_datasets, load_dataset
from fedlib.data.formats import (
    DatasetFileError,
    SafeCifarUnpickler,
    read_cifar_batch,
    read_csv_gz,
    read_idx,
    read_leaf_json,
    read_svhn_mat,
)
from fedlib.data.partition import (
    by_group,
    dirichlet,
    from_indices,
    iid,
    label_counts,
    labels_per_client,
    natural,
    shards,
    split_clients,
)
from fedlib.data.synthetic import SyntheticSplit, leaf_synthetic

__all__ = [
    "Dataset",
    "DatasetFileError",
    "SafeCifarUnpickler",
    "SyntheticSplit",
    "available_datasets",
    "by_group",
    "dirichlet",
    "from_indices",
    "iid",
    "label_counts",
    "labels_per_client",
    "leaf_synthetic",
    "load_dataset",
    "natural",
    "read_cifar_batch",
    "read_csv_gz",
    "read_idx",
    "read_leaf_json",
    "read_svhn_mat",
    "shards",
    "split_clients",
]
