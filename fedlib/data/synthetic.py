"""Synthetic(alpha, beta): the LEAF / FedProx synthetic federated classification task.

Follows FedProx's `data/synthetic_*/generate_niid.py` (Li et al., MLSys 2020; also shipped with
LEAF): client k draws a softmax-regression model W_k ~ N(u_k, 1), b_k ~ N(u_k, 1) with
u_k ~ N(0, alpha), and features x ~ N(v_k, Sigma) with v_k ~ N(B_k, 1), B_k ~ N(0, beta) and
Sigma = diag(j^-1.2); the label is argmax(softmax(W_k^T x + b_k)). alpha controls how much the
local models differ, beta how much the local feature distributions differ. Client sizes are
lognormal(4, 2) + 50, and each client keeps the first 90% of its samples for training.
With iid=True all clients share one model and v_k = 0 (FedProx's Synthetic-IID).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SyntheticSplit:
    """Generated arrays; `*_groups` is the client id of every sample."""

    x_train: np.ndarray
    y_train: np.ndarray
    train_groups: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    test_groups: np.ndarray


def leaf_synthetic(alpha: float = 1.0, beta: float = 1.0, num_clients: int = 30, dim: int = 60,
                   classes: int = 10, seed: int = 0, iid: bool = False,
                   train_fraction: float = 0.9) -> SyntheticSplit:
    """Generate Synthetic(alpha, beta) with `num_clients` clients (see module docstring)."""
    if alpha < 0 or beta < 0:
        raise ValueError(f"alpha and beta must be >= 0, got alpha={alpha}, beta={beta}")
    if num_clients < 1 or dim < 1 or classes < 2:
        raise ValueError(f"need num_clients >= 1, dim >= 1, classes >= 2; "
                         f"got {num_clients}, {dim}, {classes}")
    if not 0.0 < train_fraction < 1.0:
        raise ValueError(f"train_fraction must be in (0, 1), got {train_fraction}")
    rng = np.random.default_rng(seed)
    sizes = rng.lognormal(4, 2, num_clients).astype(int) + 50
    mean_w = rng.normal(0, alpha, num_clients)
    feature_shift = rng.normal(0, beta, num_clients)
    scale = np.arange(1, dim + 1, dtype=np.float64) ** -0.6  # sqrt of Sigma's diagonal j^-1.2
    if iid:
        w_global = rng.normal(0, 1, (dim, classes))
        b_global = rng.normal(0, 1, classes)
    parts: dict[str, list[np.ndarray]] = {k: [] for k in ("xtr", "ytr", "gtr", "xte", "yte", "gte")}
    for k in range(num_clients):
        if iid:
            w, b, mean_x = w_global, b_global, np.zeros(dim)
        else:
            w = rng.normal(mean_w[k], 1, (dim, classes))
            b = rng.normal(mean_w[k], 1, classes)
            mean_x = rng.normal(feature_shift[k], 1, dim)
        x = mean_x + rng.standard_normal((sizes[k], dim)) * scale
        y = np.argmax(x @ w + b, axis=1)
        n_train = int(train_fraction * sizes[k])
        for key, arr in (("xtr", x[:n_train]), ("ytr", y[:n_train]), ("xte", x[n_train:]),
                         ("yte", y[n_train:])):
            parts[key].append(arr)
        parts["gtr"].append(np.full(n_train, k))
        parts["gte"].append(np.full(sizes[k] - n_train, k))
    cat = {key: np.concatenate(v) for key, v in parts.items()}
    return SyntheticSplit(
        x_train=cat["xtr"].astype(np.float32), y_train=cat["ytr"].astype(np.int64),
        train_groups=cat["gtr"].astype(np.int64), x_test=cat["xte"].astype(np.float32),
        y_test=cat["yte"].astype(np.int64), test_groups=cat["gte"].astype(np.int64))
