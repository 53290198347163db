"""FedAvg, FedProx and SCAFFOLD on quadratic clients, against fixed points computed in closed form.

Client i holds least-squares data (X_i, y_i), so f_i(w) = |X_i w - y_i|^2 / (2 n) = 1/2 (w - b_i)' A_i (w - b_i) + const
with A_i = X_i'X_i / n. Full participation, full-batch local steps (exact gradients), K steps of size eta.
The simulation runs through the real round loop; the expected points come from numpy linear algebra.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn

from fedlib.algorithms import FedAvg, FedProx, Scaffold
from fedlib.core.seeding import Seeds
from fedlib.data import Dataset
from fedlib.engine.executors import half_squared_error
from fedlib.engine.federation import FederatedData, LocalTraining, run_federation

N_CLIENTS, N_PER, DIM, K, ETA = 3, 20, 3, 5, 0.1


def _quadratic_problem(seed: int = 0):
    rng = np.random.default_rng(seed)
    xs, ys, a_mats, b_vecs = [], [], [], []
    for i in range(N_CLIENTS):
        x = rng.normal(size=(N_PER, DIM)) * (1 + i)  # different curvature per client
        w_i = rng.normal(size=DIM) * 3  # different optimum per client
        y = x @ w_i + 0.1 * rng.normal(size=N_PER)
        a = x.T @ x / N_PER
        xs.append(x)
        ys.append(y)
        a_mats.append(a)
        b_vecs.append(np.linalg.solve(a, x.T @ y / N_PER))
    x_all, y_all = np.concatenate(xs), np.concatenate(ys)
    ds = Dataset(
        name="quadratic",
        x_train=torch.tensor(x_all, dtype=torch.float32), y_train=torch.tensor(y_all, dtype=torch.float32),
        x_test=torch.tensor(x_all, dtype=torch.float32), y_test=torch.tensor(y_all, dtype=torch.float32),
        num_classes=1,
    )
    parts = [np.arange(i * N_PER, (i + 1) * N_PER) for i in range(N_CLIENTS)]
    return FederatedData(ds, parts), a_mats, b_vecs


def _run(algorithm, rounds: int):
    data, _, _ = _quadratic_problem()

    def model_fn() -> nn.Module:
        return nn.Linear(DIM, 1, bias=False)

    res = run_federation(
        model_fn, data, algorithm, rounds,
        local=LocalTraining(lr=ETA, batch_size=N_PER, epochs=None, steps=K),
        sampler=1.0, loss_fn=half_squared_error, progress=False, seed=3,
    )
    return res.params["weight"].double().numpy().ravel(), res


def _local_affine_map(a: np.ndarray, b: np.ndarray, mu: float):
    """K steps of w <- w - eta (A (w - b) + mu (w - w_t)) from w_t, as w_K = L w_t + c."""
    g = np.eye(DIM) - ETA * (a + mu * np.eye(DIM))
    powers = [np.linalg.matrix_power(g, j) for j in range(K)]
    lin = np.linalg.matrix_power(g, K) + ETA * mu * sum(powers)
    const = sum(powers) @ (ETA * a @ b)
    return lin, const


def _averaged_fixed_point(a_mats, b_vecs, mu: float) -> np.ndarray:
    maps = [_local_affine_map(a, b, mu) for a, b in zip(a_mats, b_vecs)]
    lin = sum(m[0] for m in maps) / N_CLIENTS
    const = sum(m[1] for m in maps) / N_CLIENTS
    return np.linalg.solve(np.eye(DIM) - lin, const)


def _global_optimum(a_mats, b_vecs) -> np.ndarray:
    return np.linalg.solve(sum(a_mats), sum(a @ b for a, b in zip(a_mats, b_vecs)))


def test_fedavg_stalls_at_the_computable_biased_point():
    _, a_mats, b_vecs = _quadratic_problem()
    w, _ = _run(FedAvg(), rounds=300)
    expected = _averaged_fixed_point(a_mats, b_vecs, mu=0.0)
    optimum = _global_optimum(a_mats, b_vecs)
    np.testing.assert_allclose(w, expected, atol=1e-4)
    assert np.linalg.norm(expected - optimum) > 0.1  # the bias is real, not rounding


def test_fedprox_reaches_its_own_fixed_point():
    _, a_mats, b_vecs = _quadratic_problem()
    mu = 0.5
    w, _ = _run(FedProx(mu=mu), rounds=400)
    expected = _averaged_fixed_point(a_mats, b_vecs, mu=mu)
    np.testing.assert_allclose(w, expected, atol=1e-4)
    # the proximal term pulls the fixed point towards, but not onto, the optimum
    optimum = _global_optimum(a_mats, b_vecs)
    fedavg_point = _averaged_fixed_point(a_mats, b_vecs, mu=0.0)
    assert 1e-3 < np.linalg.norm(expected - optimum) < np.linalg.norm(fedavg_point - optimum)


def test_scaffold_reaches_the_global_optimum():
    _, a_mats, b_vecs = _quadratic_problem()
    w, res = _run(Scaffold(), rounds=300)
    np.testing.assert_allclose(w, _global_optimum(a_mats, b_vecs), atol=1e-4)
    # at the optimum the server control variate is the mean client gradient there: zero
    c = res.server_state["c"]["weight"].double().numpy().ravel()
    np.testing.assert_allclose(c, 0.0, atol=1e-4)


def test_scaffold_control_variates_match_option_two_by_hand():
    """One round by hand: c_i+ = c_i - c + (x - y_i) / (K eta) with c = c_i = 0, then c = mean(c_i+)."""
    _, a_mats, b_vecs = _quadratic_problem()
    _, res = _run(Scaffold(), rounds=1)
    torch.manual_seed(Seeds(3).int("init"))  # the round loop's initialisation stream for seed=3
    x0 = nn.Linear(DIM, 1, bias=False).weight.detach().double().numpy().ravel()
    y = [lin @ x0 + const for lin, const in (_local_affine_map(a, b, 0.0) for a, b in zip(a_mats, b_vecs))]
    c_expected = np.mean([(x0 - y_i) / (K * ETA) for y_i in y], axis=0)
    c = res.server_state["c"]["weight"].double().numpy().ravel()
    np.testing.assert_allclose(c, c_expected, rtol=1e-5, atol=1e-6)
