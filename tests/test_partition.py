"""Partitioners: cover, determinism, the skew each scheme promises, and input validation."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.data.partition import (by_group, dirichlet, from_indices, iid, label_counts, labels_per_client, shards,
                                   split_clients)

# 10 classes of unequal size (60..150), shuffled: 1050 samples
LABELS = np.random.default_rng(123).permutation(np.repeat(np.arange(10), np.arange(60, 160, 10)))

SCHEMES = {
    "iid": {},
    "dirichlet": {"alpha": 0.3},
    "shards": {"shards_per_client": 2},
    "labels": {"k": 3},
}


def assert_disjoint_cover(parts, n):
    allidx = np.concatenate(parts)
    assert len(allidx) == n
    np.testing.assert_array_equal(np.sort(allidx), np.arange(n))
    for p in parts:
        assert p.dtype == np.int64 and np.all(np.diff(p) > 0)  # sorted, no repeats


def mean_label_entropy(parts, labels, num_classes=10):
    counts = label_counts(parts, labels, num_classes).to_numpy().astype(float)
    probs = counts / counts.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        ent = -np.nansum(np.where(probs > 0, probs * np.log(probs), 0.0), axis=1)
    return ent.mean()


@pytest.mark.parametrize("scheme", list(SCHEMES))
def test_disjoint_cover_and_determinism(scheme):
    parts = split_clients(LABELS, 10, scheme, np.random.default_rng(7), **SCHEMES[scheme])
    assert len(parts) == 10
    assert_disjoint_cover(parts, len(LABELS))
    same = split_clients(LABELS, 10, scheme, np.random.default_rng(7), **SCHEMES[scheme])
    assert all(np.array_equal(a, b) for a, b in zip(parts, same))
    from_int_seed = split_clients(LABELS, 10, scheme, 7, **SCHEMES[scheme])
    assert all(np.array_equal(a, b) for a, b in zip(parts, from_int_seed))
    other = split_clients(LABELS, 10, scheme, np.random.default_rng(8), **SCHEMES[scheme])
    assert not all(np.array_equal(a, b) for a, b in zip(parts, other))


def test_dispatch_matches_direct_call():
    a = split_clients(LABELS, 5, "dirichlet", np.random.default_rng(1), alpha=0.5, min_size=20)
    b = dirichlet(LABELS, 5, 0.5, np.random.default_rng(1), min_size=20)
    assert all(np.array_equal(x, y) for x, y in zip(a, b))


def test_iid_sizes_and_balance():
    parts = iid(LABELS, 7, np.random.default_rng(0))
    sizes = [len(p) for p in parts]
    assert max(sizes) - min(sizes) <= 1
    assert mean_label_entropy(parts, LABELS) > 0.95 * np.log(10)


def test_dirichlet_min_size_respected():
    for seed in range(5):
        parts = dirichlet(LABELS, 10, 0.1, np.random.default_rng(seed), min_size=40)
        assert min(len(p) for p in parts) >= 40
        assert_disjoint_cover(parts, len(LABELS))


def test_dirichlet_self_balancing_caps_client_size():
    """A client stops receiving once it holds >= N/n, so it can overshoot by at most one class."""
    n_clients = 10
    for seed in range(5):
        parts = dirichlet(LABELS, n_clients, 0.05, np.random.default_rng(seed), min_size=1)
        cap = len(LABELS) / n_clients + np.bincount(LABELS).max()
        assert max(len(p) for p in parts) < cap


def test_dirichlet_small_alpha_is_more_skewed():
    low = np.mean([mean_label_entropy(dirichlet(LABELS, 10, 0.1, s), LABELS) for s in range(5)])
    high = np.mean([mean_label_entropy(dirichlet(LABELS, 10, 100.0, s), LABELS) for s in range(5)])
    assert low < 1.2 < 2.1 < high  # log(10) = 2.30 is uniform


def test_dirichlet_impossible_requests_raise():
    with pytest.raises(ValueError, match="impossible"):
        dirichlet(LABELS, 20, 0.5, 0, min_size=60)  # 20 * 60 > 1050
    with pytest.raises(ValueError, match="tries"):
        dirichlet(LABELS, 20, 0.01, 0, min_size=50, max_tries=3)
    with pytest.raises(ValueError, match="alpha"):
        dirichlet(LABELS, 5, 0.0, 0)


def test_shards_sizes_and_label_purity():
    labels = np.repeat(np.arange(10), 100)  # 10 clients x 2 shards of 50: every shard one label
    parts = shards(labels, 10, 2, np.random.default_rng(0))
    assert_disjoint_cover(parts, 1000)
    assert all(len(p) == 100 for p in parts)
    assert all(len(np.unique(labels[p])) <= 2 for p in parts)
    with pytest.raises(ValueError, match="shards_per_client"):
        shards(labels, 20, 60, 0)  # 1200 shards > 1000 samples


@pytest.mark.parametrize("k", [1, 2, 5])
def test_labels_per_client_exact_k(k):
    parts = labels_per_client(LABELS, 12, k, np.random.default_rng(k))
    assert [len(np.unique(LABELS[p])) for p in parts] == [k] * 12
    assert_disjoint_cover(parts, len(LABELS))


def test_labels_per_client_taco_groups_and_equal_split():
    ks = [1] * 7 + [2] * 7 + [5] * 6  # TACO's three groups on 10 classes
    parts = labels_per_client(LABELS, 20, ks, np.random.default_rng(3))
    assert [len(np.unique(LABELS[p])) for p in parts] == ks
    counts = label_counts(parts, LABELS, 10).to_numpy()
    for c in range(10):
        held = counts[:, c][counts[:, c] > 0]
        assert held.sum() == np.sum(LABELS == c) and held.max() - held.min() <= 1


def test_labels_per_client_validation():
    with pytest.raises(ValueError, match="number of classes"):
        labels_per_client(LABELS, 4, 11, 0)
    with pytest.raises(ValueError, match="cover"):
        labels_per_client(LABELS, 4, 2, 0)  # 8 slots < 10 classes
    with pytest.raises(ValueError, match="sequence of 3"):
        labels_per_client(LABELS, 3, [1, 2], 0)


def test_by_group_matches_groups():
    groups = np.array(["w3", "w1", "w3", "w2", "w1", "w3"])
    parts = by_group(groups)
    assert [p.tolist() for p in parts] == [[1, 4], [3], [0, 2, 5]]
    rng = np.random.default_rng(0)
    g = rng.integers(0, 25, 400)
    parts = by_group(g)
    assert_disjoint_cover(parts, 400)
    assert all(len(np.unique(g[p])) == 1 for p in parts)
    assert len({int(g[p[0]]) for p in parts}) == len(parts) == len(np.unique(g))


def test_groups_scheme_subsamples_writers():
    g = np.repeat(np.arange(8), 5)
    labels = np.zeros(40, dtype=int)
    assert len(split_clients(labels, 8, "groups", 0, groups=g)) == 8
    parts = split_clients(labels, 3, "groups", np.random.default_rng(0), groups=g)
    assert len(parts) == 3 and all(len(np.unique(g[p])) == 1 and len(p) == 5 for p in parts)
    with pytest.raises(ValueError, match="number of groups"):
        split_clients(labels, 9, "groups", 0, groups=g)


def test_from_indices_validation():
    parts = from_indices([[3, 1], [0, 2]], 4)
    assert [p.tolist() for p in parts] == [[1, 3], [0, 2]]
    with pytest.raises(ValueError, match="outside"):
        from_indices([[0, 4]], 4)
    with pytest.raises(ValueError, match="overlap"):
        from_indices([[0, 1], [1, 2]], 4)
    assert len(from_indices([[0, 1], [1, 2]], 4, allow_overlap=True)) == 2
    with pytest.raises(ValueError, match="twice"):
        from_indices([[0, 0]], 4)
    with pytest.raises(ValueError, match="no samples"):
        from_indices([[0], []], 4)


def test_fedshift_parity_split_via_from_indices():
    """FedShift's shard split (docs/fedshift.md, setups): each client holds two same-parity labels, shards shared twice."""
    labels = np.repeat(np.arange(10), 20)
    order = np.argsort(labels, kind="stable")
    shard = np.array_split(order, 100)
    parts = from_indices([np.concatenate([shard[j], shard[(j + 20) % 100]]) for j in range(100)],
                         len(labels), allow_overlap=True)
    assert all(len(set(labels[p] % 2)) == 1 and len(np.unique(labels[p])) == 2 for p in parts)


def test_label_counts_table():
    parts = [np.array([0, 1, 2]), np.array([3])]
    table = label_counts(parts, np.array([0, 0, 2, 1]), 4)
    assert table.shape == (2, 4) and table.index.name == "client"
    assert table.to_numpy().tolist() == [[2, 0, 1, 0], [0, 1, 0, 0]]
    with pytest.raises(ValueError):
        label_counts(parts, np.array([0, 0, 5, 1]), 4)


def test_general_validation():
    with pytest.raises(ValueError, match="unknown partition scheme.*iid.*dirichlet"):
        split_clients(LABELS, 3, "pathological", 0)
    with pytest.raises(ValueError, match="num_clients"):
        iid(LABELS, 0, 0)
    with pytest.raises(ValueError, match="cannot split"):
        iid(np.zeros(3, dtype=int), 4, 0)
