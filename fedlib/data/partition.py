"""Split a training set across clients.

Every partitioner returns a list with one sorted int64 index array per client and is
deterministic given its random generator (`rng` may be a `np.random.Generator` or an int seed).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

from fedlib.validate import count, int_array, real
from fedlib.validate import rng as as_rng

Rng = np.random.Generator | int


def _check_clients(num_clients: int, n: int) -> None:
    if isinstance(num_clients, bool) or not isinstance(num_clients, (int, np.integer)) or num_clients < 1:
        raise ValueError(f"num_clients must be a positive integer, got {num_clients!r}")
    if num_clients > n:
        raise ValueError(f"cannot split {n} samples across {num_clients} clients")


def _labels(labels: np.ndarray) -> np.ndarray:
    labels = np.asarray(labels)
    if labels.ndim != 1 or len(labels) == 0:
        raise ValueError(f"labels must be a non-empty 1-D array, got shape {labels.shape}")
    return labels


def _sorted(parts: Sequence[np.ndarray]) -> list[np.ndarray]:
    return [np.sort(np.asarray(p, dtype=np.int64)) for p in parts]


def iid(labels: np.ndarray, num_clients: int, rng: Rng) -> list[np.ndarray]:
    """Shuffle all indices and cut them into `num_clients` near-equal parts (sizes differ by <= 1)."""
    labels = _labels(labels)
    _check_clients(num_clients, len(labels))
    perm = as_rng("rng", rng).permutation(len(labels))
    return _sorted(np.array_split(perm, num_clients))


def dirichlet(labels: np.ndarray, num_clients: int, alpha: float, rng: Rng, min_size: int = 10,
              max_tries: int = 1000) -> list[np.ndarray]:
    """Label skew by Dirichlet(alpha): NIID-Bench `noniid-labeldir` (also FedLab `hetero-dir`).

    For each class, shuffle its indices, draw client shares p ~ Dir(alpha), zero the share of
    every client already holding >= N / num_clients samples, renormalize and split by the
    cumulative shares. Redraw everything until every client has >= `min_size` samples.
    """
    labels = _labels(labels)
    n = len(labels)
    _check_clients(num_clients, n)
    alpha = real("dirichlet alpha (the concentration)", alpha, low=0, low_inclusive=False)
    min_size, max_tries = count("min_size", min_size, low=0), count("max_tries", max_tries)
    if min_size * num_clients > n:
        raise ValueError(f"min_size={min_size} per client is impossible with {n} samples "
                         f"and {num_clients} clients")
    rng = as_rng("rng", rng)
    classes = [np.flatnonzero(labels == c) for c in np.unique(labels)]
    for _ in range(max_tries):
        parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
        sizes = np.zeros(num_clients, dtype=np.int64)
        for idx in classes:
            idx = rng.permutation(idx)
            below_average = sizes < n / num_clients
            shares = rng.dirichlet(np.full(num_clients, float(alpha))) * below_average
            total = shares.sum()
            shares = shares / total if total > 0 else below_average / below_average.sum()
            cuts = (np.cumsum(shares) * len(idx)).astype(int)[:-1]
            for j, piece in enumerate(np.split(idx, cuts)):
                parts[j].append(piece)
                sizes[j] += len(piece)
        if sizes.min() >= min_size:
            return _sorted([np.concatenate(p) for p in parts])
    raise ValueError(f"no Dirichlet(alpha={alpha}) draw gave every one of {num_clients} clients "
                     f">= {min_size} samples in {max_tries} tries; raise alpha or lower min_size")


def shards(labels: np.ndarray, num_clients: int, shards_per_client: int, rng: Rng) -> list[np.ndarray]:
    """McMahan et al. (2017) shards: sort indices by label, cut into num_clients * shards_per_client
    contiguous shards (sizes differ by <= 1), give each client `shards_per_client` random shards.
    """
    labels = _labels(labels)
    _check_clients(num_clients, len(labels))
    shards_per_client = count("shards_per_client", shards_per_client)
    num_shards = num_clients * shards_per_client
    if num_shards > len(labels):
        raise ValueError(f"shards_per_client={shards_per_client}: num_clients * shards_per_client must be "
                         f"<= {len(labels)} samples")
    rng = as_rng("rng", rng)
    perm = rng.permutation(len(labels))  # random order within each label
    by_label = perm[np.argsort(labels[perm], kind="stable")]
    pieces = np.array_split(by_label, num_shards)
    owner = rng.permutation(num_shards).reshape(num_clients, shards_per_client)
    return _sorted([np.concatenate([pieces[s] for s in row]) for row in owner])


def labels_per_client(labels: np.ndarray, num_clients: int, k: int | Sequence[int], rng: Rng,
                      max_tries: int = 1000) -> list[np.ndarray]:
    """Each client holds exactly k[i] distinct labels (an int k applies to all clients).

    Label sets are drawn uniformly without replacement and redrawn until every class has a
    holder; each class's samples are shuffled and split equally among its holders. With
    k = [1]*a + [2]*b + [5]*c this is TACO's three-group "synthetic" split on 10 classes.
    """
    labels = _labels(labels)
    _check_clients(num_clients, len(labels))
    classes, counts = np.unique(labels, return_counts=True)
    ks = (np.full(num_clients, count("k (labels per client)", k), dtype=np.int64) if np.ndim(k) == 0
          else int_array("k (labels per client)", k))
    max_tries = count("max_tries", max_tries)
    if ks.shape != (num_clients,):
        raise ValueError(f"k must be an int or a sequence of {num_clients} ints, got {len(ks)} values")
    if ks.min() < 1 or ks.max() > len(classes):
        raise ValueError(f"every k must be in [1, {len(classes)}] (the number of classes), got {ks.tolist()}")
    if ks.sum() < len(classes):
        raise ValueError(f"{ks.sum()} label slots cannot cover {len(classes)} classes")
    rng = as_rng("rng", rng)
    for _ in range(max_tries):
        sets = [rng.choice(len(classes), size=kj, replace=False) for kj in ks]
        if len(np.unique(np.concatenate(sets))) == len(classes):
            break
    else:
        raise ValueError(f"no draw of label sets covered all {len(classes)} classes in {max_tries} tries")
    holders = [[j for j, s in enumerate(sets) if c in s] for c in range(len(classes))]
    short = [classes[c] for c in range(len(classes)) if counts[c] < len(holders[c])]
    if short:
        raise ValueError(f"classes {short} have fewer samples than clients holding them")
    parts: list[list[np.ndarray]] = [[] for _ in range(num_clients)]
    for c, owners in enumerate(holders):
        idx = rng.permutation(np.flatnonzero(labels == classes[c]))
        for j, piece in zip(owners, np.array_split(idx, len(owners))):
            parts[j].append(piece)
    return _sorted([np.concatenate(p) for p in parts])


def by_group(groups: np.ndarray) -> list[np.ndarray]:
    """Natural partition: one client per distinct group id (in sorted id order)."""
    groups = _labels(groups)
    _, inverse = np.unique(groups, return_inverse=True)
    order = np.argsort(inverse, kind="stable")
    return _sorted(np.split(order, np.cumsum(np.bincount(inverse))[:-1]))


def from_indices(parts: Sequence[Sequence[int]], n: int, allow_overlap: bool = False) -> list[np.ndarray]:
    """Validate a paper's own split of `n` samples: non-empty, in range, and disjoint.

    `allow_overlap=True` accepts a sample on several clients (FedShift's shard split gives each
    shard to two clients); repeats within one client are always an error.
    """
    out = _sorted([int_array(f"parts[{j}] (client {j}'s sample indices)", p) for j, p in enumerate(parts)])
    if not out:
        raise ValueError("need at least one client")
    for j, p in enumerate(out):
        if len(p) == 0:
            raise ValueError(f"client {j} has no samples")
        if p[0] < 0 or p[-1] >= n:
            raise ValueError(f"client {j} has indices outside [0, {n})")
        if np.any(np.diff(p) == 0):
            raise ValueError(f"client {j} lists a sample twice")
    if not allow_overlap:
        seen = np.bincount(np.concatenate(out), minlength=n)
        if seen.max() > 1:
            raise ValueError(f"clients overlap on {int(np.sum(seen > 1))} samples "
                             "(pass allow_overlap=True if intended)")
    return out


def natural(labels: np.ndarray, num_clients: int, rng: Rng, groups: np.ndarray | None) -> list[np.ndarray]:
    """The natural partition: one client per group id (`Dataset.groups`: FEMNIST writer, Shakespeare role,
    synthetic device); with fewer clients than groups, a random subset of the groups (LEAF-style)."""
    if groups is None:
        raise ValueError("the natural split needs the dataset's groups (Dataset.groups), and this dataset has "
                         "none: use femnist, shakespeare or synthetic, or another split")
    groups = np.asarray(groups)
    if len(groups) != len(np.asarray(labels)):
        raise ValueError(f"groups has {len(groups)} entries for {len(labels)} labels")
    parts = by_group(groups)
    if count("num_clients", num_clients) > len(parts):
        raise ValueError(f"num_clients must be in [1, {len(parts)}] (the number of groups), "
                         f"got {num_clients}")
    if num_clients == len(parts):
        return parts
    chosen = np.sort(as_rng("rng", rng).choice(len(parts), size=num_clients, replace=False))
    return [parts[g] for g in chosen]


SCHEMES: dict[str, Callable[..., list[np.ndarray]]] = {
    "iid": iid,
    "dirichlet": dirichlet,
    "shards": shards,
    "labels": labels_per_client,
    "groups": natural,
    "natural": natural,
}


def split_clients(labels: np.ndarray, num_clients: int, scheme: str, rng: Rng,
              **kwargs: object) -> list[np.ndarray]:
    """Dispatch by scheme name: "iid"; "dirichlet" (alpha, min_size); "shards"
    (shards_per_client); "labels" (k); "natural" or "groups" (groups, e.g. `Dataset.groups`)."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown partition scheme '{scheme}'; available: {', '.join(SCHEMES)}")
    return SCHEMES[scheme](labels, num_clients, rng=rng, **kwargs)


def label_counts(parts: Sequence[np.ndarray], labels: np.ndarray, num_classes: int) -> pd.DataFrame:
    """Clients x classes table of sample counts (rows "client", columns class ids)."""
    labels = np.asarray(labels)
    if len(labels) and (labels.min() < 0 or labels.max() >= num_classes):
        raise ValueError(f"labels must lie in [0, {num_classes})")
    table = np.stack([np.bincount(labels[p], minlength=num_classes) for p in parts])
    return pd.DataFrame(table, index=pd.RangeIndex(len(parts), name="client"),
                        columns=pd.RangeIndex(num_classes, name="class"))
