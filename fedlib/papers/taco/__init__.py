"""TACO as data: the notebook's runs as specs, and the paper's pieces the round loop plugs in.

* `experiments(params)`: every run of notebooks/taco.py (main grid, freeloaders, ablation, scalability,
  Fig. 6 plug-ins, gamma sweep, over-correction, Table I timing, the oscillation study) as `RunSpec`s
  labelled by `grid` and the columns each table groups by; `plan` (registered as experiment "taco") gives
  a spec its three-group split, its planted freeloaders and the extra record tables "alpha" (alpha_i per
  round), "expelled" (freeloader detection) and "output" (final accuracy of w_T and z_T).
* `client_groups`: the "synthetic" three-group split (docs/taco.md A8): group A clients hold 10% of the
  labels, B 20%, C 50%; clients are assigned to groups at random; each class's samples are split equally
  among the clients holding it (fedlib.data.labels_per_client).
* `Freeloaders`: a `client_behavior` for run_federation. A freeloader trains nothing useful and uploads the
  previous global update w_{t-1} - w_t as its delta ("previous_update", the paper's definition), the
  global model itself ("global_model": delta 0) or the global model plus Gaussian noise ("noise").
* `detection_rates`, `offline_expulsion`: TPR/FPR of Eq. (10) from a run, or replayed from alpha traces;
  `alpha_by_seed`, `live_detection`, `replayed_detection`: Tables II and VIII per seed of the freeloader grid.
* `time_per_100_updates`: Table I's unit from a run's record (its `train_s`); rounds and time to a
  target come from `fedlib.targets`. `oscillation`, `alpha_lag_correlation`: finding (a)'s measures.
* `step_norm_hook`: the global step's norm per round, for the divergence checks of theory/taco.py (on the
  quadratic clients of theory/quadratic.py).
"""
from __future__ import annotations

import math
import re
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from typing import Any

import numpy as np
import pandas as pd
import torch

from fedlib.algorithms.taco import Taco, TailoredAlpha, output_model
from fedlib.core import params as P
from fedlib.core.contracts import RoundContext, RoundInfo, RunResult
from fedlib.core.params import Params
from fedlib.core.seeding import Seeds
from fedlib.data import Dataset, labels_per_client
from fedlib.engine.federation import evaluate
from fedlib.paper import Headline
from fedlib.paper_params import Executor, PaperParams, ParameterError, Threads, param
from fedlib.registry import ALGORITHMS as ALGORITHM_CLASSES
from fedlib.registry import CLIENT_BEHAVIORS, COLLECTORS, EXPERIMENTS, SPLITS
from fedlib.runs import Records, RunPlan, RunSpec

GROUP_NAMES = ("A", "B", "C")
FREELOADER_GROUP = "Freeloaders"


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
    group_of = _group_of(group_sizes, rng)
    parts = labels_per_client(labels, len(group_of), [ks[g] for g in group_of], rng)
    return parts, _group_names(group_sizes, group_of)


def _group_of(group_sizes: Sequence[int], rng: np.random.Generator) -> np.ndarray:
    """Each client's group index: the first draw of the split's generator."""
    return rng.permutation(np.repeat(np.arange(len(group_sizes)), group_sizes))


def _group_names(group_sizes: Sequence[int], group_of: np.ndarray) -> np.ndarray:
    names = GROUP_NAMES if len(group_sizes) <= len(GROUP_NAMES) else tuple(str(g) for g in range(len(group_sizes)))
    return np.array([names[g] for g in group_of])


@SPLITS.register("groups")
def groups_split(dataset: Dataset, num_clients: int, seeds: Seeds, group_sizes: Sequence[int] = (7, 7, 6),
                 label_fractions: Sequence[float] = (0.1, 0.2, 0.5)) -> list[np.ndarray]:
    """TACO's three-group split, drawn from the run's partition stream."""
    if sum(group_sizes) != num_clients:
        raise ValueError(f"taco 'groups' split: group_sizes {list(group_sizes)} sum to {sum(group_sizes)}, "
                         f"not num_clients = {num_clients}")
    return client_groups(dataset.y_train.numpy(), group_sizes, label_fractions, rng=seeds.numpy("partition"))[0]


def plant_freeloaders(num_clients: int, count: int, rng: np.random.Generator | int = 0) -> np.ndarray:
    """`count` distinct client ids drawn uniformly (docs/taco.md A8), sorted."""
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


def offline_expulsion(alpha_history: Sequence[torch.Tensor] | np.ndarray, kappa: float, expel_after: int) -> np.ndarray:
    """Clients that Eq. (10) would expel, replayed on recorded alpha traces (rounds x clients: one row per round).

    An approximation for threshold grids: in a live run an expulsion changes every later alpha (the
    expelled client leaves the mean and the norm sum), which a replay cannot see.
    """
    if expel_after < 1:
        raise ValueError(f"expel_after must be >= 1, got {expel_after}")
    hits = (np.stack([np.asarray(a) for a in alpha_history]) >= kappa).sum(axis=0)
    return np.flatnonzero(hits >= expel_after)


def alpha_frame(result: RunResult, groups: Sequence[str], freeloaders: Sequence[int] = ()) -> pd.DataFrame:
    """Long table (round, client, group, alpha) from a run of a TACO-family algorithm; freeloaders form
    their own group. alpha at round r is alpha_i^{r} computed from that round's uploads (Eq. 7)."""
    history = torch.stack(result.server_state["alpha_history"]).numpy()
    labels = np.array(groups, dtype=object)
    labels[list(freeloaders)] = FREELOADER_GROUP
    rounds, clients = np.meshgrid(np.arange(1, len(history) + 1), np.arange(history.shape[1]), indexing="ij")
    return pd.DataFrame({"round": rounds.ravel(), "client": clients.ravel(), "group": labels[clients.ravel()],
                         "alpha": history.ravel()})


def alpha_by_seed(alphas: pd.DataFrame) -> pd.DataFrame:
    """Table II per seed: mean alpha per group (columns A, B, C, Freeloaders; NaN where a seed's draw left a
    group without clients) over rounds 2 on (round 1 holds alpha^0 and the freeloaders' zero upload), by seed."""
    late = alphas[alphas["round"] > 1]
    means = late.groupby(["seed", "group"])["alpha"].mean().unstack("group")
    return means.reindex(columns=[*GROUP_NAMES, FREELOADER_GROUP]).rename_axis(columns=None)


def live_detection(expelled: pd.DataFrame) -> pd.DataFrame:
    """Per seed of live expulsion runs' "expelled" tables (one row per client): the `Detection` (TPR, FPR and
    their counts), by seed."""
    rows = {seed: asdict(detection_rates(f.loc[f["expelled"].astype(bool), "client"].tolist(),
                                         f.loc[f["freeloader"].astype(bool), "client"].tolist(), len(f)))
            for seed, f in expelled.groupby("seed")}
    return pd.DataFrame.from_dict(rows, orient="index").rename_axis("seed")


def replayed_detection(alphas: pd.DataFrame, kappas: Sequence[float], lambdas: Mapping[str, int]) -> pd.DataFrame:
    """Table VIII per seed: Eq. (10) replayed (`offline_expulsion`) on each seed's alpha traces of a run without
    expulsion, at every kappa and lambda (label -> rounds); rows seed, kappa, lambda, TPR_%, FPR_%."""
    rows = []
    for seed, f in alphas.groupby("seed"):
        traces = f.pivot(index="round", columns="client", values="alpha").to_numpy()
        free = f.loc[f["group"] == FREELOADER_GROUP, "client"].unique()
        for kappa in kappas:
            for label, lam in lambdas.items():
                det = detection_rates(offline_expulsion(traces, kappa, lam), free, traces.shape[1])
                rows.append({"seed": seed, "kappa": kappa, "lambda": label, "TPR_%": 100 * det.tpr,
                             "FPR_%": 100 * det.fpr})
    return pd.DataFrame(rows, columns=["seed", "kappa", "lambda", "TPR_%", "FPR_%"])


def time_per_100_updates(rounds: pd.DataFrame, clients: pd.DataFrame) -> float:
    """Seconds of client training per 100 local updates (Table I's unit) from one run's record.

    Uses the record's `train_s` (the round loop's wall time of local training: evaluation, aggregation and the
    run store are outside it) over the steps the clients took.
    """
    steps = float(clients["steps"].sum())
    if steps <= 0:
        raise ValueError("the record holds no local steps: cannot time 100 updates")
    return 100.0 * float(rounds["train_s"].sum()) / steps


def oscillation(acc: Sequence[float]) -> dict[str, float]:
    """How much a curve zig-zags: mean |a_t - a_{t-1}| ("swing") and the share of consecutive differences that
    change sign ("alternation": 1 for a clean 2-cycle, about 2/3 for independent noise, lower for a trend)."""
    a = np.asarray(acc, dtype=float)
    if len(a) < 3:
        raise ValueError(f"need at least 3 values to measure an oscillation, got {len(a)}")
    d = np.diff(a)
    return {"swing": float(np.abs(d).mean()), "alternation": float((d[1:] * d[:-1] < 0).mean())}


def alpha_lag_correlation(alpha: pd.DataFrame) -> pd.DataFrame:
    """Per round r, the correlation across clients of alpha^r with alpha^{r-1} and with alpha^{r-2}.

    A 2-cycle of Eq. (9)'s weights shows as lag-2 correlation near 1 with lag-1 correlation low or negative.
    """
    wide = alpha.pivot(index="round", columns="client", values="alpha").to_numpy()
    rows = []
    for r in range(2, len(wide)):
        rows.append({"round": r + 1, "lag1": _corr(wide[r], wide[r - 1]), "lag2": _corr(wide[r], wide[r - 2])})
    return pd.DataFrame(rows)


def _corr(x: np.ndarray, y: np.ndarray) -> float:
    if x.std() == 0 or y.std() == 0:
        return float("nan")
    return float(np.corrcoef(x, y)[0, 1])

def step_norm_hook(w: Params, info: RoundInfo) -> tuple[Params, dict[str, float]]:
    """Post-aggregation hook logging |w_{t+1} - w_t| (the global step), for divergence-rate checks."""
    return w, {"step_norm": P.sq_norm(P.sub(w, info.before)) ** 0.5}


# ---------------------------------------------------------------------------------- the notebook's runs as data
ALGORITHMS = ("FedAvg", "FedProx", "FoolsGold", "Scaffold", "STEM", "FedACG", "TACO")
ABLATION = {"neither": {"correction": "none", "aggregation": "uniform"}, "agg only": {"correction": "none"},
            "corr only": {"aggregation": "uniform"}, "both": {}}
OVERCORRECTION = {"uniform γ(1-0)": {"correction": "uniform", "uniform_alpha": 0.0}, "TACO γ(1-α_i)": {}}
PLUGINS = {"FedProx": "taco_fedprox", "Scaffold": "taco_scaffold"}
UNIFORM_AGGREGATION = "TACO, uniform aggregation"
PREVIOUS_WEIGHTS = "TACO, previous round's α as weights"
OSCILLATION_VARIANTS = ("TACO", UNIFORM_AGGREGATION, PREVIOUS_WEIGHTS, "FoolsGold", "FedAvg")  # finding (a)'s runs
TABLE5_KEYS = {"dataset", "model", "model_kwargs", "partition", "rounds", "local_steps", "lr", "target_acc"}
PARTITION_HELP = "a partition is 'groups', 'natural' or 'dir<phi>' (Dirichlet(phi), e.g. 'dir0.5')"
DIRICHLET_PARTITION = re.compile(r"dir\d*\.?\d+")


def is_partition(name: str) -> bool:
    """'groups', 'natural' or 'dir<phi>' (see `split`)."""
    return name in ("groups", "natural") or DIRICHLET_PARTITION.fullmatch(name) is not None


@dataclass(frozen=True)
class TacoParams(PaperParams):
    """notebooks/taco.py's parameters (defaults: its quick profile)."""

    seeds: tuple[int, ...] = param([0], "seeds of the main, freeloader and overcorrection grids")
    extra_seeds: tuple[int, ...] = param([0], "seeds of the scalability, Fig. 6 and gamma-sweep runs")
    ablation_seeds: tuple[int, ...] = param([0], "seeds of the Table VI ablation")
    dataset: str = param("digits", "dataset name (fedlib.data)")
    model: str = param("mlp", "model name (fedlib.models)")
    model_kwargs: Mapping[str, Any] = param({"hidden": [32]}, "the model's keyword arguments")
    num_clients: int = param(20, "clients of the main split")
    group_sizes: tuple[int, ...] = param([7, 7, 6], "relative sizes of the label groups A, B, C")
    label_fractions: tuple[float, ...] = param([0.1, 0.2, 0.5], "fraction of the labels each group holds")
    rounds: int = param(10, "communication rounds")
    local_steps: int = param(10, "local SGD steps per round (K)")
    batch_size: int = param(32, "local minibatch size")
    lr: float = param(0.05, "local SGD learning rate")
    target_acc: float = param(0.75, "target accuracy of the rounds-to-target tables")
    margin_pts: float = param(1.0, "accuracy differences below this many points count as ties in the verdicts")
    algorithms: tuple[str, ...] = param(list(ALGORITHMS), "methods of the main grid and Table I")
    table5_columns: Mapping[str, Mapping[str, Any]] = param(
        {}, "Table V's other columns: name -> {dataset, model, partition, rounds, local_steps, lr, target_acc}")
    fedprox_zeta: float = param(0.1, "FedProx's proximal weight (also TACO's FedProx plug-in)")
    scaffold_alpha: float = param(1.0, "SCAFFOLD's correction coefficient (1: plain SCAFFOLD)")
    stem_alpha: float = param(0.2, "STEM's momentum weight")
    fedacg_beta: float = param(0.001, "FedACG's regularizer weight")
    fedacg_lambda: float = param(0.85, "FedACG's server momentum")
    foolsgold_variant: typing.Literal["taco_paper", "original"] = param("taco_paper", "FoolsGold's variant")
    taco_gamma: float | typing.Literal["1/K"] = param("1/K", "TACO's maximum correction factor")
    taco_output: typing.Literal["w", "z"] = param("w", "TACO evaluated on w_t or on Eq. 15's z_t (docs/taco.md A5)")
    taco_weights: typing.Literal["current", "previous"] = param(
        "current", "Eq. 9's weights: this round's alpha^{t+1} or alpha^t")
    kappa: float = param(0.6, "freeloader expulsion threshold")
    lambda_frac: float = param(0.2, "expulsion starts after this fraction of the rounds")
    n_freeloaders: int = param(8, "planted freeloaders of Tables II and VIII")
    kappa_grid: tuple[float, ...] = param([0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0], "kappa values of Table VIII")
    lambda_fracs: tuple[float, ...] = param([0.1, 0.2, 0.5], "lambda fractions of Table VIII")
    ablation_partitions: tuple[str, ...] = param(["groups"], "partitions of Table VI (groups, natural, dir<phi>)")
    scal_clients: int = param(100, "clients of Table VII's scalability runs")
    scal_dirichlet: float = param(0.5, "Dirichlet concentration of Table VII's split")
    scal_rounds: int = param(5, "rounds of Table VII's runs")
    scal_steps: int = param(5, "local steps of Table VII's runs")
    scal_algorithms: tuple[str, ...] = param(["FedAvg", "Scaffold", "TACO"], "methods of Table VII")
    gamma_grid: tuple[float, ...] = param([0.0, 0.01, 0.1, 1.0], "TACO gammas of Fig. 7 (1/K is added)")
    gamma_steps: tuple[int, ...] = param([10], "local step counts K of Fig. 7")
    overcorrection_gamma: float = param(3.0, "the large gamma of the overcorrection runs")
    timing_dataset: str = param("mnist5k", "dataset of Table I's timing runs")
    timing_model: str = param("taco_cnn", "model of Table I's timing runs")
    timing_clients: int = param(4, "clients of Table I's timing runs")
    timing_rounds: int = param(2, "rounds of Table I's timing runs")
    timing_repeats: int = param(2, "repeats of Table I's timing runs (C4's noise margin needs 2)")
    theory_rounds: int = param(60, "rounds of the theory checks")
    oscillation_dataset: str = param("digits", "dataset of the oscillation study (finding a)")
    oscillation_model: str = param("mlp", "model of the oscillation study")
    oscillation_model_kwargs: Mapping[str, Any] = param({"hidden": [32]}, "the oscillation model's arguments")
    oscillation_steps: int = param(10, "local steps of the oscillation study")
    oscillation_rounds: int = param(10, "rounds of the oscillation study")
    oscillation_lr: float = param(0.05, "learning rate of the oscillation study")
    oscillation_batch_size: int = param(32, "minibatch size of the oscillation study")
    oscillation_seeds: tuple[int, ...] = param([0], "seeds of the oscillation study")
    oscillation_algorithms: tuple[str, ...] = param(
        ["TACO", "FoolsGold", "FedAvg", UNIFORM_AGGREGATION, PREVIOUS_WEIGHTS], "variants of the oscillation study")
    theorem1_rounds: int = param(40, "rounds of the Theorem 1 check")
    executor: Executor = param("sequential", "one executor for every algorithm, so wall-clock times compare them")
    threads: Threads = param(1, "torch threads per run")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_range(1, math.inf, "num_clients", "rounds", "local_steps", "batch_size", "group_sizes",
                           "scal_clients", "scal_rounds", "scal_steps", "gamma_steps", "timing_clients",
                           "timing_rounds", "timing_repeats", "oscillation_steps", "oscillation_rounds",
                           "oscillation_batch_size", "theory_rounds", "theorem1_rounds")
        self.require_positive("lr", "oscillation_lr", "scal_dirichlet")
        self.require_positive("label_fractions", "kappa_grid", "lambda_fracs", high=1)
        self.require_range(0, 1, "target_acc", "kappa", "lambda_frac", "stem_alpha", "fedacg_lambda")
        self.require_range(0, math.inf, "margin_pts", "fedprox_zeta", "scaffold_alpha", "fedacg_beta",
                           "overcorrection_gamma", "gamma_grid")
        self.require_range(0, self.num_clients - 1, "n_freeloaders")
        if len(self.group_sizes) != len(self.label_fractions):
            raise ParameterError(f"{type(self).__name__}: group_sizes {list(self.group_sizes)} and label_fractions "
                                 f"{list(self.label_fractions)} must have one entry per group")
        self.require_nonempty("seeds", "extra_seeds", "ablation_seeds", "oscillation_seeds", "algorithms")
        self.require_choice(ALGORITHMS, "algorithms", "scal_algorithms")
        self.require_choice(OSCILLATION_VARIANTS, "oscillation_algorithms")
        for partition in self.ablation_partitions:
            if not is_partition(partition):
                raise ParameterError(f"{type(self).__name__}.ablation_partitions: {PARTITION_HELP}, got {partition!r}")
        for column, c in self.table5_columns.items():
            unknown, missing = set(c) - TABLE5_KEYS, {"dataset", "model", "partition", "rounds", "local_steps"} - set(c)
            if unknown or missing:
                raise ParameterError(f"{type(self).__name__}.table5_columns[{column!r}]: unknown keys "
                                     f"{sorted(unknown)}, missing {sorted(missing)}; the keys are "
                                     f"{sorted(TABLE5_KEYS)}")
            if not is_partition(c["partition"]):
                raise ParameterError(f"{type(self).__name__}.table5_columns[{column!r}]: {PARTITION_HELP}, "
                                     f"got {c['partition']!r}")


def algorithm(name: str, p: TacoParams) -> tuple[str, dict[str, Any]]:
    """The registered algorithm and its arguments for one of the paper's method names."""
    table = {
        "FedAvg": ("fedavg", {}),
        "FedProx": ("fedprox", {"mu": p.fedprox_zeta}),
        "FoolsGold": ("foolsgold", {"variant": p.foolsgold_variant}),
        "Scaffold": ("scaffold", {}) if p.scaffold_alpha == 1.0 else
                    ("taco_scaffold", {"form": "fixed", "coefficient": p.scaffold_alpha}),
        "STEM": ("stem", {"alpha": p.stem_alpha}),
        "FedACG": ("fedacg", {"beta": p.fedacg_beta, "lam": p.fedacg_lambda}),
        "TACO": ("taco", taco_args(p)),
    }
    if name not in table:
        raise ValueError(f"unknown algorithm {name!r}; choose from {sorted(table)}")
    return table[name]


def taco_args(p: TacoParams, **changes: Any) -> dict[str, Any]:
    return {"gamma": p.taco_gamma, "kappa": p.kappa, "output": p.taco_output,
            "weights": p.taco_weights, **changes}


def split(p: TacoParams, num_clients: int, partition: str) -> tuple[str, dict[str, Any]]:
    """"groups" (TACO's three label groups, sizes scaled to `num_clients`), "dir<phi>" (Dirichlet(phi)) or
    "natural" (one client per writer / role, e.g. Shakespeare's LEAF roles: `num_clients` of them at random)."""
    if partition == "natural":
        return "natural", {"num_clients": num_clients}
    if partition == "groups":
        sizes = np.round(np.array(p.group_sizes) * num_clients / sum(p.group_sizes)).astype(int)
        sizes[-1] = num_clients - sizes[:-1].sum()
        return "groups", {"num_clients": num_clients, "group_sizes": sizes.tolist(),
                          "label_fractions": list(p.label_fractions)}
    if DIRICHLET_PARTITION.fullmatch(partition):
        return "dirichlet", {"num_clients": num_clients, "alpha": float(partition[3:]), "min_size": 5}
    raise ValueError(f"{PARTITION_HELP}, got {partition!r}")


def _spec(p: TacoParams, labels: Mapping[str, Any], algo: tuple[str, Mapping[str, Any]], seed: int, *,
          partition: str | tuple[str, Mapping[str, Any]] = "groups", num_clients: int | None = None, steps: int | None = None,
          rounds: int | None = None, dataset: str | None = None, model: tuple[str, Mapping[str, Any]] | None = None,
          loop: Mapping[str, Any] | None = None, freeloaders: int = 0) -> RunSpec:
    """One run on the notebook's setting; keywords override what the grid changes (`partition`: a name for
    `split`, or a split component as it is). The collectors follow from the algorithm and the freeloaders."""
    parts = partition if isinstance(partition, tuple) else split(p, num_clients or p.num_clients, partition)
    executor = p.executor
    if executor in ("vmap", "graph") and not ALGORITHM_CLASSES[algo[0]].vmap_compatible:
        executor = "sequential"  # STEM keeps per-step state the batched executor does not carry
    return RunSpec.make(
        "taco", dataset or p.dataset, parts,
        model or (p.model, p.model_kwargs), algo, rounds or p.rounds, seed,
        local={"lr": p.lr, "batch_size": p.batch_size, "steps": steps or p.local_steps},
        loop={"aggregation_weights": "uniform", "executor": executor, "threads": p.threads, **(loop or {})},
        labels=labels, device=p.device,
        client_behavior=("freeloaders", {"count": freeloaders}) if freeloaders else None,
        collectors=_collectors(algo[0], freeloaders))


def _collectors(algorithm_name: str, freeloaders: int) -> list[tuple[str, dict[str, Any]]]:
    cls = ALGORITHM_CLASSES[algorithm_name]
    return ([("taco_alpha", {})] if issubclass(cls, TailoredAlpha) else []) \
        + ([("taco_expelled", {})] if freeloaders else []) + ([("taco_output", {})] if issubclass(cls, Taco) else [])


def main_grid(p: TacoParams) -> list[RunSpec]:
    """Tables III and V: every algorithm on the three-group split, every seed."""
    return [_spec(p, {"algorithm": a}, algorithm(a, p), s) for s in p.seeds for a in p.algorithms]


def table5_grid(p: TacoParams) -> list[RunSpec]:
    """Table V's other columns: for each entry of `table5_columns` (column name -> dataset, model, model_kwargs,
    partition, rounds, local_steps, lr and the column's target_acc, read by the tables, not the runs), every
    algorithm on every seed, as the main grid."""
    specs = []
    for column, c in p.table5_columns.items():
        q = replace(p, lr=c.get("lr", p.lr))
        specs += [_spec(q, {"column": column, "algorithm": a}, algorithm(a, q), s, partition=c["partition"],
                        steps=c["local_steps"], rounds=c["rounds"], dataset=c["dataset"],
                        model=(c["model"], c.get("model_kwargs", {})))
                  for s in p.seeds for a in p.algorithms]
    return specs


def freeloader_grid(p: TacoParams) -> list[RunSpec]:
    """Tables II and VIII: TACO with `n_freeloaders` planted freeloaders (drawn per seed) on every seed, once
    without expulsion (alpha observed all along; the kappa x lambda grid is replayed on its traces) and once live."""
    count = p.n_freeloaders
    return [spec for seed in p.seeds for spec in (
        _spec(p, {"algorithm": "TACO", "expulsion": "off"}, ("taco", taco_args(p)), seed, freeloaders=count),
        _spec(p, {"algorithm": "TACO", "expulsion": "live"}, ("taco", taco_args(p, expel_after=expel_after(p))),
              seed, freeloaders=count))]


def expel_after(p: TacoParams) -> int:
    """lambda of Eq. (10) at the notebook's default fraction of T."""
    return max(1, round(p.lambda_frac * p.rounds))


def ablation_grid(p: TacoParams) -> list[RunSpec]:
    """Table VI: tailored correction x tailored aggregation, on each ablation partition."""
    return [_spec(p, {"partition": part, "variant": v}, ("taco", taco_args(p, **kw)), s, partition=part)
            for part in p.ablation_partitions for s in p.ablation_seeds for v, kw in ABLATION.items()]


def scalability_grid(p: TacoParams) -> list[RunSpec]:
    """Table VII: `scal_clients` clients on a Dirichlet split."""
    return [_spec(p, {"algorithm": a}, algorithm(a, p), s, partition=f"dir{p.scal_dirichlet}",
                  num_clients=p.scal_clients, steps=p.scal_steps, rounds=p.scal_rounds)
            for s in p.extra_seeds for a in p.scal_algorithms]


def plugin_grid(p: TacoParams) -> list[RunSpec]:
    """Fig. 6: alpha plugged into FedProx and SCAFFOLD in both readings; form "original" is the main grid's run."""
    specs = []
    for s in p.extra_seeds:
        for base, key in PLUGINS.items():
            specs.append(_spec(p, {"algorithm": base}, algorithm(base, p), s))
            for form in ("literal", "factor"):
                kw = {"form": form, "zeta": p.fedprox_zeta} if key == "taco_fedprox" else {"form": form}
                specs.append(_spec(p, {"algorithm": base, "form": form}, (key, kw), s))
    return specs


def gamma_grid(p: TacoParams) -> list[RunSpec]:
    """Fig. 7: TACO's gamma over the grid and 1/K, at each K of `gamma_steps`."""
    return [_spec(p, {"K": K, "gamma": g}, ("taco", taco_args(p, gamma=g)), s, steps=K)
            for K in p.gamma_steps for g in [*p.gamma_grid, 1.0 / K] for s in p.extra_seeds]


def overcorrection_grid(p: TacoParams) -> list[RunSpec]:
    """A uniform correction vs TACO's tailored one at the same large gamma (evaluated on w_t), on every seed."""
    return [_spec(p, {"correction": label}, ("taco", taco_args(p, gamma=p.overcorrection_gamma, output="w", **kw)), s)
            for s in p.seeds for label, kw in OVERCORRECTION.items()]


def timing_grid(p: TacoParams) -> list[RunSpec]:
    """Table I: short runs of each algorithm's real local step on the paper's CNN (`timing_clients` clients
    holding half the labels each), `timing_repeats` times (distinct entries via the `repeat` label),
    evaluated only at the end, all on the sequential executor (so the times compare the algorithms)."""
    clients = ("groups", {"num_clients": p.timing_clients, "group_sizes": [p.timing_clients],
                          "label_fractions": [0.5]})
    return [_spec(p, {"algorithm": a, "repeat": rep}, algorithm(a, p), 0, partition=clients,
                  rounds=p.timing_rounds, dataset=p.timing_dataset, model=(p.timing_model, {}),
                  loop={"eval_every": p.timing_rounds, "executor": "sequential"})
            for rep in range(p.timing_repeats) for a in p.algorithms]


def oscillation_grid(p: TacoParams) -> list[RunSpec]:
    """Finding (a): TACO (Eq. 9 as printed), the same with uniform aggregation, with the previous round's alpha
    as weights, FoolsGold (TACO's rendition) and FedAvg (those of them in `oscillation_algorithms`) on the
    `oscillation_*` setting, evaluated on w_t. With that setting equal to the main one, TACO, FoolsGold and
    FedAvg are the main grid's runs."""
    q = replace(p, taco_output="w", lr=p.oscillation_lr, batch_size=p.oscillation_batch_size)
    setting = {"dataset": p.oscillation_dataset, "model": (p.oscillation_model, p.oscillation_model_kwargs),
               "steps": p.oscillation_steps, "rounds": p.oscillation_rounds}
    variants = {"TACO": algorithm("TACO", q), "FoolsGold": algorithm("FoolsGold", q), "FedAvg": algorithm("FedAvg", q),
                UNIFORM_AGGREGATION: ("taco", taco_args(q, aggregation="uniform")),
                PREVIOUS_WEIGHTS: ("taco", taco_args(q, weights="previous"))}
    return [_spec(q, {"algorithm": label}, variants[label], s, **setting)
            for s in p.oscillation_seeds for label in p.oscillation_algorithms]


GRIDS = {"main": main_grid, "table5": table5_grid, "freeloaders": freeloader_grid, "ablation": ablation_grid,
         "scalability": scalability_grid, "plugin": plugin_grid, "gamma": gamma_grid,
         "overcorrection": overcorrection_grid, "timing": timing_grid, "oscillation": oscillation_grid}



# The runs that back the headline claims (fedlib/papers/taco/claims.py), most valued first: a piece of the gpu
# profile computes them in this order (fedlib.ledger.priority), each on every seed of the profile. Table V's main
# grid backs C1-C3; C3 reads TACO and FedAvg, C1 FedAvg, FedProx and SCAFFOLD, so those come first.
HEADLINE_RUNS = (
    Headline("C2, C3, C1", {"algorithm": ("TACO", "FedAvg", "FedProx", "Scaffold", "FoolsGold", "STEM", "FedACG"),
                            "rounds": ("100",)}, without=("expulsion", "form", "repeat", "variant", "gamma", "correction"),
             first=(Headline("C3", {"algorithm": ("TACO", "FedAvg")}),
                    Headline("C1", {"algorithm": ("FedAvg", "FedProx", "Scaffold")}))),
    Headline("C6, C5", {"expulsion": ("off", "live")}),
    Headline("C7", {"variant": ("neither", "agg only", "corr only", "both")}),
)

def experiments(p: TacoParams) -> list[RunSpec]:
    """Every run the notebook reads, from its parameters (a run two grids share, e.g. Fig. 6's originals, once)."""
    return list(dict.fromkeys(spec for grid in GRIDS.values() for spec in grid(p)))


# The record tables of TACO's runs and the columns each always has (a grid none of whose runs is held gets them
# empty, so every table below is computed, empty, rather than failing)
RECORD_COLUMNS: dict[str, tuple[str, ...]] = {
    "rounds": ("round", "test_acc", "test_loss", "train_loss", "train_s", "alpha_mean"),
    "clients": ("round", "client", "steps"), "alpha": ("round", "client", "group", "alpha"),
    "expelled": ("client", "freeloader", "expelled", "expelled_round"), "output": ("output", "test_acc")}


def grid_tables(tables: Records, specs: Sequence[RunSpec]) -> Records:
    """A grid's record tables (`tables`: the rows of the held runs of `specs`, as `NotebookRecords.select` gives
    them) with every table of `RECORD_COLUMNS`, each with the grid's label columns and its own (NaN where a table
    lacks one; empty where no run of the grid is held)."""
    labels = sorted({k for s in specs for k in s.get("labels")})
    return {table: _with_columns(tables.get(table), [*labels, "seed", "run", *columns])
            for table, columns in {**{t: () for t in tables}, **RECORD_COLUMNS}.items()}


def grids_of_runs(p: TacoParams, records: Records) -> dict[str, Records]:
    """Each grid's record tables (`GRIDS`, as `grid_tables` has them) from tidy records of the plan's runs whatever
    their store keys (the ledger's, computed on another machine): a run belongs to the grids of the one spec of the
    plan with its labels and seed, its recorded number of rounds, of clients and local steps (several grids label
    their runs alike: the main, scalability and oscillation runs by algorithm alone). A run whose signature two
    distinct specs of the plan share is in no grid: the claims that read it name it missing."""
    grids = {name: grid(p) for name, grid in GRIDS.items()}
    names = sorted({k for specs in grids.values() for s in specs for k in s.get("labels")})
    specs_of: dict[tuple, set[RunSpec]] = {}
    for spec in (s for specs in grids.values() for s in specs):
        specs_of.setdefault(_spec_signature(spec, names), set()).add(spec)
    spec_of_run = {run: next(iter(specs_of[sig])) for run, sig in _run_signatures(records, names).items()
                   if len(specs_of.get(sig, ())) == 1}
    out = {}
    for name, specs in grids.items():
        members = set(specs)
        keys = {run for run, spec in spec_of_run.items() if spec in members}
        out[name] = grid_tables({table: frame[frame["run"].isin(keys)] for table, frame in records.items()}, specs)
    return out


def _with_columns(frame: pd.DataFrame | None, columns: Sequence[str]) -> pd.DataFrame:
    """`frame` with every one of `columns` (NaN where it lacks one; None: an empty frame)."""
    frame = pd.DataFrame(columns=["run"]) if frame is None else frame
    absent = [c for c in columns if c not in frame]
    return frame.assign(**{c: np.nan for c in absent}) if absent else frame


def _label_value(value: Any) -> Any:
    """A label as both a spec and a record read back from CSV hold it (an int label may come back a float)."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    if isinstance(value, (int, float, np.integer, np.floating)):
        return float(f"{float(value):.12g}")
    return str(value)


def _spec_signature(spec: RunSpec, names: Sequence[str]) -> tuple:
    labels = spec.get("labels")
    return (tuple(_label_value(labels.get(n)) for n in names), spec.seed, spec.rounds,
            spec.split.args.get("num_clients"), spec.get("local").get("steps"))


def _run_signatures(records: Records, names: Sequence[str]) -> dict[str, tuple]:
    """Per run of `records`: its labels, seed, rounds, clients and local steps as `_spec_signature` has them."""
    if "rounds" not in records or "clients" not in records:
        return {}
    rounds, clients = records["rounds"], records["clients"]
    first = rounds.groupby("run", sort=False).first()
    length = rounds.groupby("run")["round"].max()
    count, steps = clients.groupby("run")["client"].nunique(), clients.groupby("run")["steps"].max()
    return {run: (tuple(_label_value(row.get(n)) for n in names), int(row["seed"]), _count(length.get(run)),
                  _count(count.get(run)), _count(steps.get(run)))
            for run, row in first.iterrows()}


def _count(value: Any) -> int | None:
    return None if value is None or pd.isna(value) else int(value)


@CLIENT_BEHAVIORS.register("freeloaders")
def freeloaders(run: RunPlan, count: int, mode: str = "previous_update") -> Freeloaders:
    """`count` planted freeloaders, drawn from the run's "freeloaders" stream."""
    return Freeloaders(plant_freeloaders(run.num_clients, count, rng=Seeds(run.spec.seed).numpy("freeloaders")),
                       mode=mode)


def _planted(run: RunPlan) -> np.ndarray:
    behavior = run.client_behavior
    return np.array(sorted(behavior.clients) if isinstance(behavior, Freeloaders) else [], dtype=int)


def _split_groups(run: RunPlan) -> np.ndarray:
    """Each client's group name on TACO's "groups" split ("-" on any other split)."""
    if run.spec.split.name != "groups":
        return np.array(["-"] * run.num_clients)
    sizes = run.spec.split.args["group_sizes"]
    return _group_names(sizes, _group_of(sizes, Seeds(run.spec.seed).numpy("partition")))


@COLLECTORS.register("taco_alpha")
def alpha_table(run: RunPlan) -> Callable[[RunResult], Records]:
    """The "alpha" table of a TACO-family run (freeloaders as their own group)."""
    groups, free = _split_groups(run), _planted(run)
    return lambda res: {"alpha": alpha_frame(res, groups, free)}


@COLLECTORS.register("taco_expelled")
def expelled_table(run: RunPlan) -> Callable[[RunResult], Records]:
    """The "expelled" table: which planted freeloaders were expelled, and when."""
    free = _planted(run)
    return lambda res: {"expelled": expelled_frame(res, free)}


@COLLECTORS.register("taco_output")
def output_table(run: RunPlan) -> Callable[[RunResult], Records]:
    """The "output" table: test accuracy of w_T and of TACO's output model z_T."""
    return lambda res: {"output": output_frame(res, run)}


@EXPERIMENTS.register("taco")
def plan(spec: RunSpec, run: RunPlan) -> RunPlan:
    """Everything is named in the spec (split "groups", client behaviour "freeloaders", taco_* collectors)."""
    return run


def expelled_frame(result: RunResult, freeloaders: Sequence[int]) -> pd.DataFrame:
    """Per client: planted freeloader or not, expelled or not, and the round of expulsion (NaN: never)."""
    expelled = result.server_state["expelled"].numpy()
    when = result.server_state["expelled_round"]
    return pd.DataFrame({"client": np.arange(len(expelled)), "freeloader": np.isin(np.arange(len(expelled)), freeloaders),
                         "expelled": expelled, "expelled_round": [when.get(c, np.nan) for c in range(len(expelled))]})


def output_frame(result: RunResult, run: RunPlan) -> pd.DataFrame:
    """Final test accuracy of TACO's w_T and of its output model z_T (Eq. 15), whatever the run evaluated."""
    algo: Taco = run.algorithm
    model = run.model_fn()
    rows = []
    for name, params in (("w", result.params), ("z", output_model(result.params, result.server_state["prev"],
                                                                  algo.mean_alpha(result.server_state)))):
        params = {k: v.detach().cpu() for k, v in params.items()}
        acc, _ = evaluate(model, params, {}, run.dataset.x_test, run.dataset.y_test)
        rows.append({"output": name, "test_acc": acc})
    return pd.DataFrame(rows)


def final_rows(rounds: pd.DataFrame, by: Sequence[str]) -> pd.DataFrame:
    """Per run (by + seed): final accuracy in %, and diverged = final test loss non-finite or > 10x the first."""
    g = rounds.sort_values("round").groupby([*by, "seed"], sort=False)
    out = g.agg(final_acc=("test_acc", _at_end), first_loss=("test_loss", "first"), last_loss=("test_loss", _at_end))
    out["final_acc"] *= 100
    out["diverged"] = ~np.isfinite(out["last_loss"]) | (out["last_loss"] > 10 * out["first_loss"])
    return out.drop(columns=["first_loss", "last_loss"]).reset_index()


def _at_end(values: pd.Series) -> float:
    """The last round's value, NaN included (pandas' "last" would skip a non-finite final loss)."""
    return values.iloc[-1]


# ---------------------------------------------------------------------------------- the notebook's run tables
def output_accuracy(outputs: pd.DataFrame) -> pd.DataFrame:
    """TACO's final accuracy (%) of w_T and of z_T (Eq. 15) per seed (columns "w", "z"), from "output" tables."""
    if not len(outputs):
        return pd.DataFrame(columns=["w", "z"], dtype=float)
    return outputs.pivot_table(index="seed", columns="output", values="test_acc") * 100


def timing_table(timed: Records) -> pd.DataFrame:
    """Table I measured, per algorithm of the timing grid's records: the fastest repeat's seconds per 100 local
    updates (`time_per_100_updates`), the spread between repeats ("noise_%"), the overhead over FedAvg's and the
    number of repeats it is measured on."""
    clients = timed["clients"]
    timing = pd.DataFrame([{"algorithm": key[0], "s_per_100_updates": time_per_100_updates(
        r, clients[clients["run"] == key[1]])} for key, r in timed["rounds"].groupby(["algorithm", "run"], sort=False)],
        columns=["algorithm", "s_per_100_updates"])
    repeats = timing.groupby("algorithm", sort=False)["s_per_100_updates"]
    table = repeats.min().to_frame()
    table["noise_%"] = 100 * (repeats.max() / repeats.min() - 1)  # the margin C4's gaps must exceed
    table["vs_fedavg_%"] = 100 * (table["s_per_100_updates"] / table["s_per_100_updates"].get("FedAvg", np.nan) - 1)
    table["repeats"] = repeats.size()
    return table


def observed_alphas(freeloading: Records) -> pd.DataFrame:
    """The "alpha" rows of the freeloader runs without expulsion (α observed all along: Tables II and VIII)."""
    alpha = freeloading["alpha"]
    return alpha[alpha["expulsion"] == "off"]


def live_expelled(freeloading: Records) -> pd.DataFrame:
    """The "expelled" rows of the freeloader runs with live expulsion."""
    expelled = freeloading["expelled"]
    return expelled[expelled["expulsion"] == "live"]


def alpha_by_group(alphas: pd.DataFrame) -> pd.DataFrame:
    """Table II pooled over seeds: mean and std of α per group (A, B, C, Freeloaders) over rounds 2 on."""
    late = alphas[alphas["round"] > 1]
    return late.groupby("group")["alpha"].agg(["mean", "std"]).reindex(pd.Index([*GROUP_NAMES, FREELOADER_GROUP]))


def replay_lambdas(p: TacoParams) -> dict[str, int]:
    """Table VIII's λ values: label "T*<fraction>" -> rounds."""
    return {f"T*{frac}": max(1, round(frac * p.rounds)) for frac in p.lambda_fracs}


def ablation_table(rounds: pd.DataFrame) -> pd.DataFrame:
    """Table VI: final accuracy (%, mean over seeds) per ablation variant (rows, `ABLATION`'s order) and
    partition."""
    finals = final_rows(rounds, ["variant", "partition"])
    if finals.empty:
        return pd.DataFrame(index=pd.Index(list(ABLATION), name="variant"), dtype=float)
    return finals.pivot_table(index="variant", columns="partition", values="final_acc").reindex(list(ABLATION))


def scalability_table(rounds: pd.DataFrame) -> pd.DataFrame:
    """Table VII: final accuracy (%) per algorithm, mean and std over seeds."""
    return final_rows(rounds, ["algorithm"]).groupby("algorithm", sort=False)["final_acc"].agg(["mean", "std"])


def with_original_form(rounds: pd.DataFrame) -> pd.DataFrame:
    """Fig. 6's runs with form "original" for the unplugged methods (the main grid's runs carry no form)."""
    return rounds.assign(form=rounds["form"].fillna("original") if "form" in rounds else "original")


def plugin_table(rounds: pd.DataFrame) -> pd.DataFrame:
    """Fig. 6: final accuracy (%, mean over seeds) per method (rows) and form (original, literal, factor)."""
    finals = final_rows(with_original_form(rounds), ["algorithm", "form"])
    forms = ["original", "literal", "factor"]
    if finals.empty:
        return pd.DataFrame(columns=forms, dtype=float)
    return finals.pivot_table(index="algorithm", columns="form", values="final_acc").reindex(columns=forms)


def gamma_table(rounds: pd.DataFrame) -> pd.DataFrame:
    """Fig. 7: per K and γ, the final accuracy (%, mean over seeds), whether any seed diverged, and whether γ is
    1/K."""
    sweep = final_rows(rounds, ["K", "gamma"])
    table = sweep.groupby(["K", "gamma"]).agg(final_acc=("final_acc", "mean"),
                                              diverged=("diverged", "any")).reset_index()
    table["is_1_over_K"] = np.isclose(table["gamma"].astype(float), 1 / table["K"].astype(float))
    return table


def overcorrection_table(rounds: pd.DataFrame) -> pd.DataFrame:
    """Per correction and seed of the over-correction runs: `final_rows`, the first and the final test loss (NaN
    where the run ended on one) and the last mean α."""
    summary = final_rows(rounds, ["correction"]).set_index(["correction", "seed"])
    runs = rounds.sort_values("round").groupby(["correction", "seed"])
    summary["first_test_loss"] = runs["test_loss"].first()
    summary["final_test_loss"] = runs["test_loss"].agg(_at_end)
    summary["mean_alpha_last"] = runs["alpha_mean"].last()
    return summary.reset_index()


def oscillation_rows(records: Records, rounds: int) -> pd.DataFrame:
    """Per (algorithm, seed) of the oscillation grid, over its last max(3, rounds // 2) rounds: final, mean and
    peak accuracy (%), `oscillation` of the accuracy (points), mean count of zero-weight clients, and the mean
    lag-1 / lag-2 correlation of the alpha vector (`alpha_lag_correlation`) where the run has alphas."""
    curves = records["rounds"]
    late = curves[curves["round"] > rounds - max(3, rounds // 2)]
    alphas = records.get("alpha", pd.DataFrame(columns=["algorithm", "seed"]))
    rows = []
    for (name, seed), f in late.groupby(["algorithm", "seed"], sort=False):
        acc = 100 * f["test_acc"].to_numpy()
        row = {"algorithm": name, "seed": seed, "first_round": int(f["round"].min()), "final_acc": acc[-1],
               "late_mean_acc": acc.mean(), "late_peak_acc": acc.max(), **oscillation(acc),
               "zero_weight_clients": f["zero_weight_clients"].mean() if "zero_weight_clients" in f else np.nan}
        alpha = alphas[(alphas["algorithm"] == name) & (alphas["seed"] == seed)]
        if len(alpha):
            lags = alpha_lag_correlation(alpha)
            row.update(lags[lags["round"].isin(f["round"])][["lag1", "lag2"]].mean().add_prefix("alpha_").to_dict())
        rows.append(row)
    return pd.DataFrame(rows)


def missing(needed: Sequence[str], have: Sequence[str]) -> str:
    """Why a claim cannot be judged when the parameters left out what it compares ('' when nothing is missing)."""
    gone = [n for n in needed if n not in set(have)]
    return f"needs {', '.join(gone)} in this notebook's runs (parameters select {sorted(set(have))})" if gone else ""
