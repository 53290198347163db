"""MUCSC paper glue: the compressors as the paper runs them, its bit accounting, lr schedule and time model.

The paper (Cui et al. 2021) compares seven ways of moving FedAvg's updates: NC, MUCSC, QSGD, SSGD (signSGD),
B-MUCSC, DGC, STC. `links(method)` builds the uplink and downlink of each; `message_bits` counts one
message the way the paper does (Eqs. 16-17 and the widths the spec recovers from Tables II-V);
`compression_rate` and `round_traffic_bits` are the two accountings the paper mixes (docs/mucsc.md, "The paper's arithmetic"):

* convention A (Table II): rate = 2 * 32 d / (K/N * up + down)  - the numerator is not weighted by K/N;
* convention B (Tables III-V): traffic per round = up + down (one upload, one download), in MiB.
"""
from __future__ import annotations

import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch

from fedlib.codecs.base import FLOAT_BITS, Identity
from fedlib.codecs.mucsc import LEVEL_METHODS, bmucsc_bits, id_bits, mucsc_bits
from fedlib.codecs.policies import PerClient
from fedlib.codecs.qsgd import qsgd_bits, sign_bits
from fedlib.codecs.sparse import stc_bits, topk_bits
from fedlib.core.contracts import SERVER, RunResult
from fedlib.core.seeding import Seeds
from fedlib.data import Dataset, by_group
from fedlib.engine.channel import Link
from fedlib.engine.federation import evaluate, run_federation
from fedlib.paper import Headline
from fedlib.paper_params import PaperParams, ParameterError, Threads, param
from fedlib.registry import CODEC_POLICIES, COLLECTORS, EXPERIMENTS, LR_SCHEDULES, SPLITS
from fedlib.runs import Component, Records, RunPlan, RunSpec, build_run
from fedlib.runs.build import make_link
from fedlib.targets import NEVER, rounds_to_target

METHODS = ("nc", "mucsc", "qsgd", "ssgd", "bmucsc", "dgc", "stc")
LABELS = {"nc": "NC", "mucsc": "MUCSC", "qsgd": "QSGD", "ssgd": "SSGD", "bmucsc": "B-MUCSC", "dgc": "DGC",
          "stc": "STC"}
D_CIFAR = 1_369_738  # ALL-CNN-C with biases; reproduces every CIFAR-10 traffic number (docs/mucsc.md, "The paper's arithmetic")
D_FEMNIST = 1_356_136  # implied by the FEMNIST NC traffic (±33)
MIB = 8 * 2**20  # bits per "MB" in the paper's tables (MiB)

# ---- the paper's numbers, typed in from the spec's verbatim tables (labelled paper_* wherever shown)
PAPER_TABLE2 = pd.DataFrame(
    {"mucsc": [14.54, 14.54], "qsgd": [1.98, 1.98], "ssgd": [58.18, 58.18], "bmucsc": [196.57, 196.53],
     "dgc": [1.99, 1.99], "stc": [88.15, 88.15]}, index=["cifar10", "femnist"])
PAPER_TRAFFIC = pd.DataFrame(
    [("cifar10_iid", m, t, mb, pct) for m, t, mb, pct in [
        ("nc", 1000, 2090.05, 100.0), ("mucsc", 2250, 587.88, 28.13), ("qsgd", 3000, 3527.0, 168.75),
        ("bmucsc", 3750, 72.49, 3.47), ("dgc", 3750, 3983.76, 190.61), ("stc", 3750, 161.65, 7.73)]]
    + [("cifar10_noniid", m, t, mb, pct) for m, t, mb, pct in [
        ("nc", 1500, 3135.08, 100.0), ("mucsc", 2250, 587.87, 18.75), ("qsgd", 2250, 2645.25, 84.37),
        ("bmucsc", 6000, 115.99, 3.69), ("dgc", 6250, 6639.59, 211.78), ("stc", 6250, 269.42, 8.59)]]
    + [("femnist", m, t, mb, pct) for m, t, mb, pct in [
        ("nc", 100, 206.93, 100.0), ("mucsc", 175, 45.27, 21.88), ("qsgd", 150, 149.65, 84.38),
        ("bmucsc", 300, 5.74, 2.78), ("dgc", 325, 341.83, 165.19), ("stc", 275, 11.73, 5.16)]],
    columns=["setting", "method", "T", "paper_MB", "paper_pct"])
PAPER_TIME = pd.DataFrame(
    [("cifar10_iid", m, t, a, b, pct) for m, t, a, b, pct in [
        ("nc", 1000, 244.1, 47.57, 100.0), ("mucsc", 2250, 63.45, 153.52, 74.39), ("qsgd", 3000, 441.1, 195.5, 218.26),
        ("bmucsc", 3750, 7.62, 234.88, 83.14), ("dgc", 3750, 460.76, 224.38, 234.90), ("stc", 3750, 17.88, 226.38, 83.74)]]
    + [("cifar10_noniid", m, t, a, b, pct) for m, t, a, b, pct in [
        ("nc", 1500, 366.15, 71.35, 100.0), ("mucsc", 2250, 63.45, 153.53, 49.59), ("qsgd", 2250, 330.83, 146.63, 109.13),
        ("bmucsc", 6000, 12.2, 375.8, 88.68), ("dgc", 6250, 767.92, 373.96, 261.00), ("stc", 6250, 29.81, 377.29, 93.05)]]
    + [("femnist", m, t, a, b, pct) for m, t, a, b, pct in [
        ("nc", 100, 22.28, 2.78, 100.0), ("mucsc", 175, 4.57, 8.62, 52.63), ("qsgd", 175, 22.88, 7.8, 122.43),
        ("bmucsc", 300, 0.63, 10.66, 45.05), ("dgc", 325, 37.15, 10.67, 190.82), ("stc", 275, 1.31, 10.15, 45.73)]],
    columns=["setting", "method", "T", "paper_comm_min", "paper_comp_min", "paper_total_pct"])
PAPER_D = {"cifar10_iid": D_CIFAR, "cifar10_noniid": D_CIFAR, "femnist": D_FEMNIST}


@dataclass(frozen=True)
class Setup:
    """The paper's compressor settings (Sec. VI-A); zu = 16 is what Tables II-V imply (docs/mucsc.md A4)."""

    zu: int = 16
    zd: int = 16
    bm_levels: int = 256
    bm_frac: float = 0.01
    stc_frac: float = 0.03
    dgc_frac: float = 0.01
    qsgd_levels: int = 7  # sign + 3-bit level = the 4 bits/element the paper's QSGD numbers imply
    qsgd_bucket: int | None = 512


def _check_method(method: str) -> None:
    if method not in METHODS:
        raise ValueError(f"unknown method {method!r}; choose from {METHODS}")


# ------------------------------------------------------------------------------ bit accounting
def message_bits(method: str, direction: str, d: int, setup: Setup = Setup(), *, accounting: str = "paper") -> float:
    """Bits of one message of `method` in `direction` for a d-element update.

    accounting="paper" counts as the paper's numbers do (they reproduce Tables II-V to the printed digits):
    sparse methods keep frac * d elements (not rounded), and no side floats are counted - signSGD's scale,
    QSGD's norms, STC's mu and B-MUCSC's super-cluster mean (Eq. 17's "+ h" is not in its tables).
    accounting="codec" is the exact size of what the codecs here send (their integer Message.bits).
    """
    _check_method(method)
    if direction not in ("up", "down"):
        raise ValueError(f"direction must be 'up' or 'down', got {direction!r}")
    if accounting not in ("paper", "codec"):
        raise ValueError(f"accounting must be 'paper' or 'codec', got {accounting!r}")
    up, paper = direction == "up", accounting == "paper"
    if method == "nc" or (method in ("qsgd", "dgc") and not up):  # QSGD and DGC only compress the uplink
        return FLOAT_BITS * d
    if method == "mucsc":
        return mucsc_bits(d, setup.zu if up else setup.zd)
    if method == "qsgd":
        return d * (1 + id_bits(setup.qsgd_levels + 1)) if paper else qsgd_bits(d, setup.qsgd_levels, setup.qsgd_bucket)
    if method == "ssgd":
        return d if paper else sign_bits(d)
    if method == "bmucsc":
        if not paper:
            return bmucsc_bits(d, setup.bm_levels, setup.bm_frac)
        return setup.bm_frac * d * (id_bits(setup.bm_levels) + id_bits(d)) + FLOAT_BITS * setup.bm_levels
    if method == "dgc":
        return setup.dgc_frac * d * (FLOAT_BITS + id_bits(d)) if paper else topk_bits(d, setup.dgc_frac)
    return setup.stc_frac * d * (1 + id_bits(d)) if paper else stc_bits(d, setup.stc_frac)


def compression_rate(method: str, d: int, k_over_n: float = 0.1, setup: Setup = Setup(), *,
                     accounting: str = "paper") -> float:
    """Convention A, Eqs. (16)-(17): 2 * 32 d / (K/N * bits_up + bits_down)."""
    up = message_bits(method, "up", d, setup, accounting=accounting)
    down = message_bits(method, "down", d, setup, accounting=accounting)
    return 2 * FLOAT_BITS * d / (k_over_n * up + down)


def round_traffic_bits(method: str, d: int, setup: Setup = Setup(), *, accounting: str = "paper") -> float:
    """Convention B (Tables III-V): one upload plus one download per round."""
    return sum(message_bits(method, k, d, setup, accounting=accounting) for k in ("up", "down"))


def table2(setup: Setup = Setup(), k_over_n: float = 0.1) -> pd.DataFrame:
    """Table II recomputed from d: the paper's rates next to convention A and the consistent ratio."""
    rows = []
    for name, d in (("cifar10", D_CIFAR), ("femnist", D_FEMNIST)):
        for method in PAPER_TABLE2.columns:
            up = message_bits(method, "up", d, setup)
            down = message_bits(method, "down", d, setup)
            rows.append({"dataset": name, "method": method, "d": d, "bits_up": up, "bits_down": down,
                         "paper_rate": PAPER_TABLE2.loc[name, method],
                         "rate_conventionA": compression_rate(method, d, k_over_n, setup),
                         "rate_codec_bits": compression_rate(method, d, k_over_n, setup, accounting="codec"),
                         "rate_weighted": (1 + k_over_n) * FLOAT_BITS * d / (k_over_n * up + down),
                         "rate_per_round_B": 2 * FLOAT_BITS * d / (up + down)})
    return pd.DataFrame(rows)


def traffic_tables(setup: Setup = Setup(), local_iters: int = 5) -> pd.DataFrame:
    """Tables III-V recomputed: rounds = T / E, traffic = rounds * (up + down) in MiB (convention B)."""
    df = PAPER_TRAFFIC.copy()
    df["rounds"] = df["T"] // local_iters
    df["MB"] = [r * round_traffic_bits(m, PAPER_D[s], setup) / MIB for s, m, r in zip(df.setting, df.method, df.rounds)]
    nc = df[df.method == "nc"].set_index("setting")["MB"]
    df["pct"] = 100 * df["MB"] / df["setting"].map(nc)
    return df


def time_tables() -> pd.DataFrame:
    """Tables VI-VIII: each "reduced to" percentage recomputed as (comm + comp) / NC's (comm + comp)."""
    t = PAPER_TIME.copy()
    total = t["paper_comm_min"] + t["paper_comp_min"]
    t["total_pct_recomputed"] = 100 * total / t["setting"].map(total[t.method == "nc"].set_axis(t.setting[t.method == "nc"]))
    t["comm_s_per_round"] = 60 * t["paper_comm_min"] / (t["T"] / 5)
    return t


# ------------------------------------------------------------------------------ the round loop's pieces
@dataclass(frozen=True)
class PaperLR:
    """lr(round, step) = max{lr0 / (1 + t / decay), floor} with t = round * steps_per_round + step (Sec. VI-A3).

    The paper's "iteration index" t counts E = 5 local iterations per round (its tables' T = 5 x rounds);
    steps_per_round sets that unit (docs/mucsc.md A2).
    """

    lr0: float = 0.5
    decay: float = 400.0
    floor: float = 0.01
    steps_per_round: int = 5

    def __post_init__(self) -> None:
        if self.lr0 <= 0 or self.decay <= 0 or self.floor < 0 or self.steps_per_round < 1:
            raise ValueError(f"PaperLR needs lr0 > 0, decay > 0, floor >= 0, steps_per_round >= 1; got {self}")

    def __call__(self, round_: int, step: int) -> float:
        t = round_ * self.steps_per_round + step
        return max(self.lr0 / (1 + t / self.decay), self.floor)


def zu_split(num_clients: int, choices: Sequence[int], seed: int) -> np.ndarray:
    """Each client's Z_U: clients split at random (keyed stream "zu_split") into equal sets, one set per choice
    (Sec. VI-A3: 4, 8, 16)."""
    if not 1 <= len(choices) <= num_clients:
        raise ValueError(f"cannot split {num_clients} clients into {len(choices)} sets (one per Z_U choice)")
    order = Seeds(seed).numpy("zu_split").permutation(num_clients)
    zu = np.empty(num_clients, dtype=np.int64)
    for part, z in zip(np.array_split(order, len(choices)), choices):
        zu[part] = z
    return zu


def level_split(zu: np.ndarray, **mucsc_kwargs: Any) -> PerClient:
    """The uplink policy of a Z_U split: client i sends with MUCSC at zu[i] levels (one codec per Z_U)."""
    return PerClient(len(zu), [(("mucsc", {"num_levels": int(z), **mucsc_kwargs}), np.flatnonzero(zu == z))
                               for z in np.unique(zu)])


def mean_id_bits(zu: np.ndarray) -> float:
    """ceil(log2 Z_U) averaged over the clients: the index bits per element of the mean upload."""
    return float(np.mean([id_bits(int(z)) for z in zu]))


LinkArgs = tuple[str, dict[str, Any]]  # a registered codec name and its arguments + Link options


def link_components(method: str, setup: Setup = Setup(), *, levels: str = "descent") -> tuple[LinkArgs, LinkArgs]:
    """(uplink, downlink) of one method as codec names and arguments (what a RunSpec holds), as the paper runs it.

    MUCSC, B-MUCSC, SSGD: the server compresses the aggregate and adopts what it sends (Eq. 11):
    downlink payload "update" without error feedback. STC: both directions with residuals (uplink per
    client, downlink the server's: it keeps its model, so the next message carries what was not sent).
    DGC: uplink top-1% with residual accumulation, fp32 downlink. QSGD: uplink only. `levels` is MUCSC's
    level search (fedlib.codecs.mucsc: "descent", "paper", "uniform").
    """
    _check_method(method)
    fp32_down = ("fp32", {"payload": "update"})
    if method == "nc":
        return ("fp32", {}), fp32_down
    if method == "mucsc":
        return (("mucsc", {"num_levels": setup.zu, "levels": levels}),
                ("mucsc", {"num_levels": setup.zd, "levels": levels, "payload": "update"}))
    if method == "bmucsc":
        codec = {"num_levels": setup.bm_levels, "frac": setup.bm_frac, "levels": levels}
        return ("bmucsc", codec), ("bmucsc", {**codec, "payload": "update"})
    if method == "qsgd":
        return ("qsgd", {"levels": setup.qsgd_levels, "bucket": setup.qsgd_bucket}), fp32_down
    if method == "ssgd":
        return ("sign", {}), ("sign", {"payload": "update"})
    if method == "dgc":
        return ("topk", {"frac": setup.dgc_frac, "error_feedback": True}), fp32_down
    stc = {"frac": setup.stc_frac, "error_feedback": True}
    return ("stc", stc), ("stc", {**stc, "payload": "update"})


def links(method: str, setup: Setup = Setup(), *, levels: str = "descent") -> tuple[Link, Link]:
    """(uplink, downlink) Links of one method (see `link_components`), whole-model granularity."""
    up, down = (make_link(Component.of(name, {**args, "granularity": "model"}))
                for name, args in link_components(method, setup, levels=levels))
    return up, down


# ------------------------------------------------------------------------------ time model and targets
def communication_time(rounds: pd.DataFrame, clients: pd.DataFrame, num_clients: int, *, mean_bps: float = 1.4e6,
                       std_frac: float = 0.1, download_max_over: str = "all", seed: int = 0) -> pd.DataFrame:
    """Seconds per round under Sec. VI-A5's model: link speeds theta_n ~ N(1.4 Mb/s, (10%)^2), redrawn every
    round (truncated at 1% of the mean); upload time = max over the selected clients of bits_i / theta_i,
    download time = max over the receivers of bits_down / theta_n ("all" N clients, as the paper says,
    or the "selected"). Mb = 10^6 bits (our reading; the paper does not say)."""
    if download_max_over not in ("all", "selected"):
        raise ValueError(f"download_max_over must be 'all' or 'selected', got {download_max_over!r}")
    if mean_bps <= 0 or std_frac < 0:
        raise ValueError(f"need mean_bps > 0 and std_frac >= 0, got {mean_bps}, {std_frac}")
    seeds, out = Seeds(seed), []
    for row in rounds.itertuples():
        theta = seeds.numpy("bandwidth", int(row.round)).normal(mean_bps, std_frac * mean_bps, num_clients)
        theta = np.maximum(theta, 0.01 * mean_bps)
        sel = clients[clients["round"] == row.round]
        ids = sel["client"].to_numpy()
        up = float(np.max(sel["bits_up"].to_numpy() / theta[ids]))
        receivers = theta if download_max_over == "all" else theta[ids]
        down = float(row.bits_down / receivers.min())
        out.append({"round": int(row.round), "up_s": up, "down_s": down, "comm_s": up + down})
    return pd.DataFrame(out)


def target_summary(rounds: pd.DataFrame, clients: pd.DataFrame, target: float, comm: pd.DataFrame) -> dict[str, float]:
    """Traffic (convention B: mean upload + download per round, MiB) and time to reach `target`; every
    entry is `fedlib.targets.NEVER` if the run never reaches it."""
    r = rounds_to_target(rounds, target)
    if r == NEVER:
        return {"rounds": NEVER, "traffic_MB": NEVER, "comm_s": NEVER, "comp_s": NEVER}
    up = clients[clients["round"] <= r].groupby("round")["bits_up"].mean()
    down = rounds.loc[rounds["round"] <= r, "bits_down"]
    return {"rounds": r, "traffic_MB": float(up.sum() + down.sum()) / MIB,
            "comm_s": float(comm.loc[comm["round"] <= r, "comm_s"].sum()),
            "comp_s": float(rounds.loc[rounds["round"] <= r, "wall_s"].sum())}


# ------------------------------------------------------------------------------ the notebook's runs as data
PARTITION_SCHEMES = {"iid": "iid", "noniid": "labels", "writers": "writers"}  # notebook partition -> split scheme


@dataclass(frozen=True)
class MucscParams(PaperParams):
    """notebooks/mucsc.py's parameters (defaults: its quick profile)."""

    seeds: tuple[int, ...] = param([0], "seeds of every grid")
    dataset: str = param("digits", "dataset name (fedlib.data)")
    model: str = param("mlp", "model name (fedlib.models)")
    model_kwargs: Mapping[str, Any] = param({"hidden": [256]}, "the model's keyword arguments")
    num_clients: int = param(20, "clients of the split")
    clients_per_round: int = param(5, "clients sampled each round")
    partitions: tuple[str, ...] = param(["iid", "noniid"], "partitions of the main grid (the first: the sweeps')")
    classes_per_client: int = param(5, "labels each client holds on the noniid partition")
    rounds: int = param(15, "communication rounds")
    local_steps: int | None = param(10, "local SGD steps per round (None: local_epochs)")
    local_epochs: float | None = param(None, "local epochs per round, when local_steps is None")
    batch_size: int = param(8, "local minibatch size")
    lr0: float = param(0.1, "initial learning rate (the paper's 0.5 diverges on these small MLPs)")
    lr_decay: float = param(400.0, "the paper's learning-rate decay")
    lr_floor: float = param(0.01, "the paper's learning-rate floor")
    lr_t_per_round: int = param(10, "the lr's iteration index t is round * lr_t_per_round + local step (A2)")
    methods: tuple[str, ...] = param(list(METHODS), "methods of the main grid")
    zu: int = param(16, "MUCSC uplink levels Z_U")
    zd: int = param(16, "MUCSC downlink levels Z_D")
    level_search: str = param("descent", "MUCSC's level search: descent (exact on J) or paper (Algorithm 1)")
    level_searches: tuple[str, ...] = param(["descent", "uniform", "paper"], "level searches compared (finding c)")
    z_sweep: tuple[int, ...] = param([4, 8, 16], "levels Z on both links of Fig. 5's sweep")
    zu_thirds: tuple[int, ...] = param([4, 8, 16], "Z_U of each third of the clients (Fig. 5, with Z_D 16)")
    bm_levels: int = param(256, "B-MUCSC levels")
    bm_frac: float = param(0.01, "B-MUCSC's fraction of elements sent")
    target_frac: float = param(0.97, "target accuracy: target_frac x final accuracy of NC, per partition")
    download_max_over: typing.Literal["all", "selected"] = param("all", "downlink traffic maximum over these clients")
    eval_every: int = param(1, "evaluate every this many rounds")
    mc_draws: int = param(1000, "Monte Carlo draws of the rounding checks")
    dp_elements: int = param(1500, "elements of the level-search checks")
    toy_steps: int = param(2000, "steps of the theory toys")
    toy_seeds: int = param(10, "seeds of the theory toys")
    partial_rounds: int = param(200, "rounds of the partial-participation toy (Theorems 3-4)")
    threads: Threads = param(1, "torch threads per run")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_range(1, math.inf, "num_clients", "classes_per_client", "rounds", "local_steps", "batch_size",
                           "lr_t_per_round", "zu", "zd", "z_sweep", "zu_thirds", "bm_levels", "eval_every", "mc_draws",
                           "dp_elements", "toy_steps", "toy_seeds", "partial_rounds")
        self.require_range(1, self.num_clients, "clients_per_round")
        self.require_positive("local_epochs", "lr0", "lr_decay", "lr_floor")
        self.require_positive("bm_frac", "target_frac", high=1)
        if (self.local_steps is None) == (self.local_epochs is None):
            raise ParameterError(f"{type(self).__name__}: give exactly one of local_steps ({self.local_steps}) and "
                                 f"local_epochs ({self.local_epochs}); set the other to None")
        self.require_nonempty("seeds", "partitions", "methods")
        self.require_choice(PARTITION_SCHEMES, "partitions")
        self.require_choice(METHODS, "methods")
        self.require_choice(LEVEL_METHODS, "level_search", "level_searches")


LABEL_COLUMNS = ("method", "partition", "setting")  # every run's labels (`_spec`): with its seed, they name it


def setting_label(zu: int | str, zd: int, levels: str) -> str:
    """The `setting` label of a MUCSC run: its levels on each link and its level search."""
    return f"Z_U={zu}, Z_D={zd}, {levels}"


def _spec(p: MucscParams, method: str, partition: str, seed: int, *, setup: Setup, levels: str,
          setting: str, zu_split: Sequence[int] | None = None) -> RunSpec:
    if partition not in PARTITION_SCHEMES:
        raise ValueError(f"unknown partition {partition!r}; choose from {sorted(PARTITION_SCHEMES)}")
    split_args: dict[str, Any] = {"num_clients": p.num_clients}
    if partition == "noniid":
        split_args["k"] = p.classes_per_client
    work = {"steps": p.local_steps} if p.local_steps else {"epochs": p.local_epochs}
    up, down = ((name, {**args, "granularity": "model"}) for name, args in link_components(method, setup, levels=levels))
    if zu_split:  # the per-client Z_U split: a codec policy on the uplink
        up = ("level_split", {"choices": list(zu_split), "levels": up[1].get("levels", "descent")})
    return RunSpec.make(
        "mucsc", p.dataset, (PARTITION_SCHEMES[partition], split_args), (p.model, p.model_kwargs), ("fedavg", {}),
        p.rounds, seed, local={"batch_size": p.batch_size, **work}, uplink=up, downlink=down,
        sampler=("uniform", {"clients": p.clients_per_round}),
        loop={"downlink_receivers": "all", "eval_every": p.eval_every, "threads": p.threads},
        labels=dict(zip(LABEL_COLUMNS, (method, partition, setting))), device=p.device,
        lr_schedule=("mucsc_paper_lr", {"lr0": p.lr0, "decay": p.lr_decay, "floor": p.lr_floor,
                                        "steps_per_round": p.lr_t_per_round}),
        collectors=[("mucsc_comm", {"download_max_over": p.download_max_over}), ("mucsc_server", {})])


def _setup(p: MucscParams, zu: int | None = None, zd: int | None = None) -> Setup:
    return Setup(zu=zu or p.zu, zd=zd or p.zd, bm_levels=p.bm_levels, bm_frac=p.bm_frac)


def main_setting(method: str, p: MucscParams) -> str:
    """The `setting` label of a method's run in the main grid."""
    return setting_label(p.zu, p.zd, p.level_search) if method == "mucsc" else "paper"


def main_grid(p: MucscParams) -> list[RunSpec]:
    """Every method on every partition and seed (Figs. 2-4, Tables II-VIII analogues)."""
    return [_spec(p, m, part, seed, setup=_setup(p), levels=p.level_search, setting=main_setting(m, p))
            for part in p.partitions for seed in p.seeds for m in p.methods]


def z_sweep(p: MucscParams) -> list[RunSpec]:
    """MUCSC with Z in `z_sweep` on both links, and the stated Z_U thirds with Z_D = 16, on the first partition
    (Fig. 5). The entry with Z = (zu, zd) is the main grid's MUCSC run (the same spec, computed once)."""
    part, search = p.partitions[0], p.level_search
    specs = [_spec(p, "mucsc", part, seed, setup=_setup(p, z, z), levels=search, setting=setting_label(z, z, search))
             for z in p.z_sweep for seed in p.seeds]
    thirds = setting_label("/".join(map(str, p.zu_thirds)) + " thirds", 16, search)
    return specs + [_spec(p, "mucsc", part, seed, setup=_setup(p, zd=16), levels=search, setting=thirds,
                          zu_split=p.zu_thirds) for seed in p.seeds]


def level_grid(p: MucscParams) -> list[RunSpec]:
    """MUCSC at (zu, zd) with each level search in `level_searches`, and QSGD, on the first partition
    (finding c: adapted vs uniform levels vs QSGD at the same bits per element)."""
    part = p.partitions[0]
    specs = [_spec(p, "mucsc", part, seed, setup=_setup(p), levels=s, setting=setting_label(p.zu, p.zd, s))
             for s in p.level_searches for seed in p.seeds]
    return specs + [_spec(p, "qsgd", part, seed, setup=_setup(p), levels=p.level_search, setting="paper")
                    for seed in p.seeds]



def _main_headline(partition: str) -> Headline:
    """C5, C7, C9 and C10 on one partition of the main grid: the baselines (setting "paper") and MUCSC at Z_U = Z_D =
    16 (a run the level grid shares). C5 reads NC, MUCSC and B-MUCSC, C10 NC and DGC, so those come first."""
    return Headline(", ".join(f"C{n} {partition}" for n in (5, 7, 9, 10)),
                    {"setting": ("paper", "Z_U=16, Z_D=16, descent"), "partition": (partition,)},
                    first=(Headline(f"C5 {partition}", {"method": ("nc", "mucsc", "bmucsc")}),
                           Headline(f"C10 {partition}", {"method": ("nc", "dgc")})))


# The runs that back the headline claims (fedlib/papers/mucsc/claims.py), most valued first: a piece of the gpu
# profile computes them in this order (fedlib.ledger.priority), each on every seed of the profile.
HEADLINE_RUNS = (
    _main_headline("iid"),
    _main_headline("noniid"),
    Headline("C3b, C3c", {"setting": ("Z_U=16, Z_D=16, descent", "Z_U=16, Z_D=16, uniform")}),
    Headline("C8", {"setting": ("Z_U=4, Z_D=4, descent", "Z_U=8, Z_D=8, descent")}),
)

def experiments(p: MucscParams) -> list[RunSpec]:
    """Every run the notebook reads, from its parameters (duplicates across grids appear once)."""
    return list(dict.fromkeys(main_grid(p) + z_sweep(p) + level_grid(p)))


@SPLITS.register("writers")
def writers_split(dataset: Dataset, num_clients: int, seeds: Seeds) -> list[np.ndarray]:
    """One client per writer (FEMNIST's natural split); num_clients must be the number of writers."""
    parts = by_group(dataset.groups)
    if len(parts) != num_clients:
        raise ValueError(f"{dataset.name} has {len(parts)} writers; set num_clients = {len(parts)} for 'writers'")
    return parts


@LR_SCHEDULES.register("mucsc_paper_lr")
def paper_lr(run: RunPlan, lr0: float, decay: float, floor: float, steps_per_round: int) -> PaperLR:
    """The paper's decaying lr from `lr0` (Sec. VI-A3)."""
    return PaperLR(lr0, decay, floor, steps_per_round)


@CODEC_POLICIES.register("level_split", examples=({"choices": [4, 8, 16]}, {"choices": [2, 4], "levels": "uniform"}))
def level_split_uplink(run: RunPlan, choices: Sequence[int], levels: str = "descent") -> Link:
    """The per-client Z_U split on the uplink (one MUCSC codec per set of clients)."""
    return Link(level_split(zu_split(run.num_clients, choices, run.spec.seed), levels=levels), granularity="model")


@COLLECTORS.register("mucsc_comm")
def comm_table(run: RunPlan, download_max_over: str = "all") -> Callable[[RunResult], Records]:
    """The "comm" table: per round communication time over the simulated channels."""
    num_clients, seed = run.num_clients, run.spec.seed
    return lambda result: {"comm": communication_time(result.rounds, result.clients, num_clients,
                                                      download_max_over=download_max_over, seed=seed)}


@COLLECTORS.register("mucsc_server")
def server_table(run: RunPlan) -> Callable[[RunResult], Records]:
    """The "server" table: the server's own final model on the test set (STC's downlink keeps it apart)."""
    def server(result: RunResult) -> Records:
        model = run.model_fn()
        params = {k: v.detach().cpu() for k, v in result.params.items()}
        acc, loss = evaluate(model, params, dict(model.named_buffers()), run.dataset.x_test, run.dataset.y_test)
        return {"server": pd.DataFrame([{"round": run.spec.rounds, "server_test_acc": acc,
                                         "server_test_loss": loss}])}

    return server


@EXPERIMENTS.register("mucsc")
def plan(spec: RunSpec, run: RunPlan) -> RunPlan:
    """Everything is named in the spec (lr schedule, split, Z_U policy, collectors)."""
    return run


# The record tables of MUCSC's runs and the columns (with their dtypes) that the tables below read: a table no run
# of the records has (none held) is there empty with these, so every table is derived, empty, rather than failing.
RECORD_COLUMNS: dict[str, dict[str, str]] = {
    "rounds": {"round": "int64", "test_acc": "float64", "test_loss": "float64", "train_loss": "float64",
               "diverged": "bool", "bits_down": "int64", "wall_s": "float64"},
    "clients": {"round": "int64", "client": "int64", "bits_up": "int64"},
    "comm": {"round": "int64", "up_s": "float64", "down_s": "float64", "comm_s": "float64"},
    "layers": {"round": "int64", "client": "int64", "layer": "str", "key": "str", "value": "float64"},
    "server": {"round": "int64", "server_test_acc": "float64"}}


def grid_records(records: Records, specs: Sequence[RunSpec]) -> Records:
    """The rows of `records` (tidy tables: each run's labels and seed as columns) that belong to `specs`, matched on
    labels and seed, which name one run of the notebook's plan (`experiments`). Not on the store key: the ledger's
    runs carry the keys of the machine that computed them. Every table of `RECORD_COLUMNS` is there, empty where
    `records` lack it (they hold no run)."""
    ids = ["seed", *LABEL_COLUMNS]
    columns = {"seed": "int64", **dict.fromkeys(LABEL_COLUMNS, "str"), "run": "str"}
    empty = {name: pd.DataFrame({c: pd.Series(dtype=t) for c, t in {**columns, **cols}.items()})
             for name, cols in RECORD_COLUMNS.items()}
    wanted = list({(s.seed, *(s.get("labels")[c] for c in LABEL_COLUMNS)) for s in specs})
    return {name: frame[pd.MultiIndex.from_frame(frame[ids]).isin(wanted)].reset_index(drop=True)
            for name, frame in {**empty, **records}.items()}


@dataclass(frozen=True)
class RunTables:
    """What the notebook derives from its runs: the main grid's records (`main`) and rows (`runs`, `run_rounds` with
    the method's `label`), the Z sweep's rows (`sweep`), the level-search grid's rows and clients' J ratios
    (`level_runs`, `level_clients`: `level_variants`) and the main grid's traffic and time to target (`to_target`,
    `target_table`; no rows, columns partition and method, when NC ran on no partition: NC's accuracy sets the
    targets)."""

    main: Records
    runs: pd.DataFrame
    sweep: pd.DataFrame
    level_runs: pd.DataFrame
    level_clients: pd.DataFrame
    to_target: pd.DataFrame


def run_tables(p: MucscParams, records: Records) -> RunTables:
    """The tables of `RunTables` from `records` (tidy tables of any subset of `experiments(p)`'s runs, none included,
    every table of a run present: what `run_specs` or the ledger gives); a grid none of whose runs is held gives
    empty tables."""
    main = grid_records(records, main_grid(p))
    runs = run_rounds(main)
    runs["label"] = runs["method"].map(LABELS)
    level_runs, level_clients = level_variants(grid_records(records, level_grid(p)))
    targets = (target_table(to_target(main, p.target_frac)) if (main["rounds"]["method"] == "nc").any()
               else pd.DataFrame(columns=["partition", "method"]))
    return RunTables(main, runs, run_rounds(grid_records(records, z_sweep(p))), level_runs, level_clients, targets)


def run_rounds(records: Records) -> pd.DataFrame:
    """One row per (run, round): the round record with the communication time, the mean upload per client,
    and cumulative traffic (convention B, MiB) and time (communication model + measured wall time)."""
    up = records["clients"].groupby(["run", "round"], as_index=False)["bits_up"].mean().rename(
        columns={"bits_up": "up_mean_bits"})
    comm = records["comm"][["run", "round", "up_s", "down_s", "comm_s"]]
    r = records["rounds"].merge(comm, on=["run", "round"]).merge(up, on=["run", "round"]).sort_values(["run", "round"])
    r["traffic_MB"] = (r["up_mean_bits"] + r["bits_down"]).groupby(r["run"]).cumsum() / MIB
    r["time_s"] = (r["comm_s"] + r["wall_s"]).groupby(r["run"]).cumsum()
    return r.reset_index(drop=True)


def final_accuracy(rounds: pd.DataFrame, last: int = 3) -> pd.Series:
    """Per run: the mean of its last `last` evaluations."""
    return rounds.dropna(subset=["test_acc"]).sort_values("round").groupby("run")["test_acc"].apply(
        lambda a: float(a.tail(last).mean()))


def to_target(records: Records, target_frac: float) -> pd.DataFrame:
    """Per (partition, method, seed): rounds, traffic and time to target_frac x NC's final accuracy (the mean of
    its last three evaluations, averaged over seeds, per partition). NEVER (inf) where a run never reaches it. A
    partition where NC did not run has no target: its runs are left out."""
    rounds = records["rounds"]
    nc = rounds[rounds["method"] == "nc"]
    if nc.empty:
        raise ValueError("the targets are set by NC's accuracy: the runs hold no 'nc' method")
    nc_final = final_accuracy(nc)
    targets = {part: target_frac * float(nc_final[frame["run"].unique()].mean()) for part, frame in nc.groupby("partition")}
    rows = []
    for (part, method, seed, run), r in rounds.groupby(["partition", "method", "seed", "run"], sort=False):
        if part not in targets:
            continue
        c = records["clients"][records["clients"]["run"] == run]
        comm = records["comm"][records["comm"]["run"] == run]
        rows.append({"partition": part, "method": method, "seed": seed, "target": targets[part],
                     **target_summary(r, c, targets[part], comm)})
    return pd.DataFrame(rows)


def target_table(per_seed: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per (partition, method), with the seeds that reached the target and shares of NC's
    traffic, communication and total time (inf where some seed never reached it: counted, not dropped)."""
    cells = per_seed.groupby(["partition", "method"], sort=False)  # grouped once: most of the cost is the grouping
    t = cells.mean(numeric_only=True).drop(columns="seed").reset_index()
    t["seeds_reached"] = cells["rounds"].agg(lambda v: int(np.isfinite(v).sum())).to_numpy()
    t["seeds"] = cells["rounds"].size().to_numpy()
    t["total_s"] = t["comm_s"] + t["comp_s"]
    nc = t[t["method"] == "nc"].set_index("partition")
    for col, name in (("traffic_MB", "traffic_pct_of_NC"), ("comm_s", "comm_pct_of_NC"), ("total_s", "total_pct_of_NC")):
        t[name] = 100 * t[col] / t["partition"].map(nc[col])
    setting = t["partition"].map({"iid": "cifar10_iid", "noniid": "cifar10_noniid", "writers": "femnist"})
    t["paper_traffic_pct"] = [_PAPER_TRAFFIC_PCT.get((s, m), np.nan) for s, m in zip(setting, t["method"])]
    t["paper_total_pct"] = [_PAPER_TOTAL_PCT.get((s, m), np.nan) for s, m in zip(setting, t["method"])]
    return t


# (setting, method) -> the paper's traffic and total time to the target, in % of NC's (`target_table`)
_PAPER_TRAFFIC_PCT = dict(zip(zip(PAPER_TRAFFIC["setting"], PAPER_TRAFFIC["method"]), PAPER_TRAFFIC["paper_pct"]))
_PAPER_TOTAL_PCT = dict(zip(zip(PAPER_TIME["setting"], PAPER_TIME["method"]), PAPER_TIME["paper_total_pct"]))


class _Capture(Identity):
    """fp32 codec that keeps the last vector it was asked to send."""

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None):  # type: ignore[no-untyped-def]
        self.last = x.detach().cpu().clone()
        return super().encode(x, gen)


def client_update(spec: RunSpec, root: str | None = None) -> torch.Tensor:
    """One client's whole-model update after one round of `spec`'s local training (captured at the uplink)."""
    run = build_run(spec.with_(rounds=1), root)
    capture = _Capture()
    run.kwargs.update(uplink=Link(capture, granularity="model"), sampler=1, rounds=1)
    run_federation(run.model_fn, run.data, progress=False, **run.kwargs)
    return capture.last


def measured_rates(runs: pd.DataFrame, d: int, k_over_n: float) -> pd.DataFrame:
    """Table II analogue from run rows (`run_rounds`): mean bits per message and the rates of both conventions."""
    r = runs.groupby("method", sort=False)[["up_mean_bits", "bits_down"]].mean().reset_index()
    up, down = r["up_mean_bits"], r["bits_down"]
    return r.assign(rate_conventionA=2 * FLOAT_BITS * d / (k_over_n * up + down),
                    rate_conventionA_paperKN=2 * FLOAT_BITS * d / (0.1 * up + down),
                    rate_per_round_B=2 * FLOAT_BITS * d / (up + down),
                    paper_rate_cifar10=r["method"].map(PAPER_TABLE2.loc["cifar10"]))


def level_variants(records: Records) -> tuple[pd.DataFrame, pd.DataFrame]:
    """The level-search grid's run rows with a `variant` column ("MUCSC <search>" or "QSGD"), and its clients'
    uplink J(levels used) / J(uniform levels) per message (run, round, client, layer), from the layer table."""
    runs = run_rounds(records)
    runs["variant"] = np.where(runs["method"] == "qsgd", "QSGD", "MUCSC " + runs["setting"].str.split(", ").str[-1])
    layers = records["layers"]
    j = layers[(layers["client"] != SERVER) & layers["key"].isin(["J", "J_init"])]
    j = j.pivot(index=["run", "round", "client", "layer"], columns="key", values="value").reindex(
        columns=pd.Index(["J", "J_init"], name="key")).reset_index()  # both columns even where no run is MUCSC
    clients = j.merge(runs[["run", "variant"]].drop_duplicates(), on="run")
    clients = clients[clients["J"].notna()].assign(ratio=lambda c: c["J"] / c["J_init"])
    return runs, clients
