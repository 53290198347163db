"""The quadratic clients every theory module checks its bounds on: f_i(w) = 1/2 (w - b_i)^T diag(h_i) (w - b_i) as a
least-squares dataset, so `run_federation` itself runs the checks with exact gradients."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from fedlib.core.contracts import FederatedData
from fedlib.data import Dataset


def quadratic_federation(h: np.ndarray, b: np.ndarray) -> tuple[FederatedData, Callable[[], nn.Module]]:
    """Clients i with f_i(w) = 1/2 (w - b_i)^T diag(h_i) (w - b_i), h and b given as N x d arrays.

    Client i holds d samples x_j = sqrt(d h_ij) e_j with targets y_j = x_j^T b_i, so the mean of
    1/2 (x^T w - y)^2 over its samples is exactly f_i (use loss_fn=half_squared_error, batch_size=d:
    full-batch, exact gradients). The test set is the union, so test_loss = (1/N) sum_i f_i(w) = f(w).
    The model is a bias-free linear map initialised at w = 0.
    """
    h, b = np.asarray(h, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if h.shape != b.shape or h.ndim != 2:
        raise ValueError(f"h and b must both be N x d, got {h.shape} and {b.shape}")
    if np.any(h <= 0):
        raise ValueError("curvatures h must be > 0")
    n, d = h.shape
    x = np.concatenate([np.diag(np.sqrt(d * h[i])) for i in range(n)])
    y = np.einsum("ij,ij->i", x, np.repeat(b, d, axis=0))
    xt, yt = torch.tensor(x, dtype=torch.float32), torch.tensor(y, dtype=torch.float32)
    ds = Dataset("quadratic", xt, yt, xt, yt, num_classes=1)
    data = FederatedData(ds, [np.arange(i * d, (i + 1) * d) for i in range(n)])

    def model_fn() -> nn.Module:
        model = nn.Linear(d, 1, bias=False)
        nn.init.zeros_(model.weight)
        return model

    return data, model_fn
