"""TACO glue: the paper's client groups, planted freeloaders, detection rates, timing, quadratic clients.

* `client_groups`: the "synthetic" three-group split (specs/taco.md 4.5): group A clients hold 10% of the
  labels, B 20%, C 50%; clients are assigned to groups at random; each class's samples are split equally
  among the clients holding it (fedlib.data.labels_per_client).
* `Freeloaders`: a `client_behavior` for run_federation. A freeloader trains nothing useful and uploads the
  previous global update w_{t-1} - w_t as its delta ("previous_update", the paper's definition), the
  global model itself ("global_model": delta 0) or the global model plus Gaussian noise ("noise").
* `detection_rates`, `offline_expulsion`: TPR/FPR of Eq. (10) from a run, or replayed from alpha traces.
* `time_per_100_updates`: Table I's unit (process CPU time on a CPU, synchronised wall time on a GPU);
  rounds and time to a target come from `fedlib.targets`.
* `quadratic_federation`: clients with f_i(w) = 1/2 (w - b_i)^T diag(h_i) (w - b_i) as a least-squares
  dataset, so run_federation itself runs the quadratic checks of theory/taco.py with exact gradients.
"""
from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd
import torch
from torch import nn

from fedlib import params as P
from fedlib.data import Dataset, labels_per_client
from fedlib.contracts import FederatedData, RoundContext, RoundInfo, RunResult
from fedlib.params import Params

GROUP_NAMES = ("A", "B", "C")


def client_groups(labels: np.ndarray, group_sizes: Sequence[int] = (7, 7, 6),
                  label_fractions: Sequence[float] = (0.1, 0.2, 0.5),
                  rng: np.random.Generator | int = 0) -> tuple[list[np.ndarray], np.ndarray]:
    """(client indices, group name per client) for TACO's three-group split."""
    if len(group_sizes) != len(label_fractions):
        raise ValueError("group_sizes and label_fractions need one entry per group")
    if min(group_sizes) < 0 or sum(group_sizes) < 1:
        raise ValueError(f"group sizes must be >= 0 with at least one client, got {list(group_sizes)}")
    num_classes = len(np.unique(labels))
    ks = [max(1, round(f * num_classes)) for f in label_fractions]
    rng = np.random.default_rng(rng)
    group_of = rng.permutation(np.repeat(np.arange(len(group_sizes)), group_sizes))
    parts = labels_per_client(labels, len(group_of), [ks[g] for g in group_of], rng)
    names = GROUP_NAMES if len(group_sizes) <= len(GROUP_NAMES) else tuple(str(g) for g in range(len(group_sizes)))
    return parts, np.array([names[g] for g in group_of])


def plant_freeloaders(num_clients: int, count: int, rng: np.random.Generator | int = 0) -> np.ndarray:
    """`count` distinct client ids drawn uniformly (specs/taco.md A8), sorted."""
    if not 0 <= count <= num_clients:
        raise ValueError(f"cannot plant {count} freeloaders among {num_clients} clients")
    return np.sort(np.random.default_rng(rng).choice(num_clients, size=count, replace=False))


class Freeloaders:
    """A `ClientBehavior`: the weights a freeloader uploads instead of what it trained.

    "previous_update" needs w_{t-1}: the behaviour keeps the model received in the previous round (it is
    called for every selected client of every round, and starts afresh at round 0, so no state crosses runs).
    """

    MODES = ("previous_update", "global_model", "noise")

    def __init__(self, clients: Sequence[int], mode: str = "previous_update", noise_std: float = 0.01) -> None:
        if mode not in self.MODES:
            raise ValueError(f"freeloader mode must be one of {self.MODES}, got {mode!r}")
        self.clients = {int(c) for c in clients}
        self.mode = mode
        self.noise_std = noise_std
        self._received: dict[int, Params] = {}  # round -> the global model clients received (last two rounds)

    def __call__(self, ctx: RoundContext, received: Params, trained: Params, gen: torch.Generator) -> Params:
        if ctx.round == 0:
            self._received.clear()
        if ctx.round not in self._received:
            self._received = {r: w for r, w in self._received.items() if r == ctx.round - 1}
            self._received[ctx.round] = P.clone(received)
        if ctx.client not in self.clients:
            return trained
        if self.mode == "global_model":
            return P.clone(received)
        if self.mode == "noise":
            return {k: v + self.noise_std * torch.randn(v.shape, generator=gen, dtype=v.dtype).to(v.device)
                    for k, v in received.items()}
        previous = self._received.get(ctx.round - 1)
        if previous is None:  # round 0: there is no previous global update, Delta = 0
            return P.clone(received)
        # upload weights u with received - u = w_{t-1} - w_t, i.e. u = 2 w_t - w_{t-1}
        return {k: 2.0 * received[k] - previous[k] for k in received}

    def state_dict(self) -> dict[int, Params]:
        """What a checkpoint keeps: the models received in the last two rounds."""
        return dict(self._received)

    def load_state_dict(self, state: dict[int, Params]) -> None:
        self._received = dict(state)


@dataclass(frozen=True)
class Detection:
    tpr: float
    fpr: float
    caught: int
    freeloaders: int
    misjudged: int
    normal: int


def detection_rates(expelled: Sequence[int] | np.ndarray | torch.Tensor, freeloaders: Sequence[int],
                    num_clients: int) -> Detection:
    """TPR = caught / freeloaders, FPR = misjudged / normal clients (TPR is NaN with no freeloaders)."""
    expelled_set = {int(c) for c in (torch.as_tensor(expelled).nonzero().flatten().tolist()
                                     if torch.as_tensor(expelled).dtype == torch.bool else expelled)}
    free = {int(c) for c in freeloaders}
    caught, misjudged = len(expelled_set & free), len(expelled_set - free)
    normal = num_clients - len(free)
    return Detection(tpr=caught / len(free) if free else float("nan"),
                     fpr=misjudged / normal if normal else float("nan"),
                     caught=caught, freeloaders=len(free), misjudged=misjudged, normal=normal)


def offline_expulsion(alpha_history: Sequence[torch.Tensor], kappa: float, expel_after: int) -> np.ndarray:
    """Clients that Eq. (10) would expel, replayed on recorded alpha traces (rounds x clients).

    An approximation for threshold grids: in a live run an expulsion changes every later alpha (the
    expelled client leaves the mean and the norm sum), which a replay cannot see.
    """
    if expel_after < 1:
        raise ValueError(f"expel_after must be >= 1, got {expel_after}")
    hits = (torch.stack(list(alpha_history)) >= kappa).sum(dim=0)
    return np.flatnonzero((hits >= expel_after).numpy())


def alpha_table(result: RunResult, groups: np.ndarray, freeloaders: Sequence[int] = ()) -> pd.DataFrame:
    """Long table (round, client, group, alpha) from a TACO run; freeloaders form their own group."""
    history = torch.stack(result.server_state["alpha_history"]).numpy()
    labels = np.array(groups, dtype=object)
    labels[list(freeloaders)] = "Freeloaders"
    rounds, clients = np.meshgrid(np.arange(1, len(history) + 1), np.arange(history.shape[1]), indexing="ij")
    return pd.DataFrame({"round": rounds.ravel(), "client": clients.ravel(), "group": labels[clients.ravel()],
                         "alpha": history.ravel()})


def time_per_100_updates(run: Callable[[], RunResult], clock: str = "process") -> float:
    """Seconds per 100 local updates (Table I's unit) over one call of `run`.

    clock="process": this process's CPU time, for CPU runs: on a shared machine the wall clock of a
    single-threaded run swings with other processes' load, its CPU time much less. clock="wall": elapsed
    time with CUDA synchronised before and after, for GPU runs. The run should do little besides local
    training (few clients, evaluate only at the end); its server work and one evaluation are included.
    """
    if clock not in ("process", "wall"):
        raise ValueError(f"clock must be 'process' (CPU runs) or 'wall' (GPU runs), got {clock!r}")
    timer = time.process_time if clock == "process" else time.perf_counter
    sync = torch.cuda.synchronize if clock == "wall" and torch.cuda.is_available() else (lambda: None)
    sync()
    start = timer()
    result = run()
    sync()
    return 100.0 * (timer() - start) / float(result.clients["steps"].sum())


# ---------------------------------------------------------------------------------- quadratic clients
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


def step_norm_hook(w: Params, info: RoundInfo) -> tuple[Params, dict[str, float]]:
    """Post-aggregation hook logging |w_{t+1} - w_t| (the global step), for divergence-rate checks."""
    return w, {"step_norm": P.sq_norm(P.sub(w, info.before)) ** 0.5}
