"""MUCSC paper glue: the compressors as the paper runs them, its bit accounting, lr schedule and time model.

The paper (Cui et al. 2021) compares seven ways of moving FedAvg's updates: NC, MUCSC, QSGD, SSGD (signSGD),
B-MUCSC, DGC, STC. `links(method)` builds the uplink and downlink of each; `message_bits` counts one
message the way the paper does (Eqs. 16-17 and the widths the spec recovers from Tables II-V);
`compression_rate` and `round_traffic_bits` are the two accountings the paper mixes (spec §6.3):

* convention A (Table II): rate = 2 * 32 d / (K/N * up + down)  - the numerator is not weighted by K/N;
* convention B (Tables III-V): traffic per round = up + down (one upload, one download), in MiB.
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fedlib.channel import Link, LinkContext
from fedlib.codecs.base import FLOAT_BITS, Codec, Identity
from fedlib.targets import NEVER, rounds_to_target
from fedlib.codecs.mucsc import BMUCSC, MUCSC, bmucsc_bits, id_bits, mucsc_bits
from fedlib.codecs.qsgd import QSGD, SignSGD, qsgd_bits, sign_bits
from fedlib.codecs.sparse import STC, TopK, stc_bits, topk_bits
from fedlib.seeding import Seeds

METHODS = ("nc", "mucsc", "qsgd", "ssgd", "bmucsc", "dgc", "stc")
LABELS = {"nc": "NC", "mucsc": "MUCSC", "qsgd": "QSGD", "ssgd": "SSGD", "bmucsc": "B-MUCSC", "dgc": "DGC",
          "stc": "STC"}
D_CIFAR = 1_369_738  # ALL-CNN-C with biases; reproduces every CIFAR-10 traffic number (spec §6.3)
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
    """The paper's compressor settings (Sec. VI-A); zu = 16 is what Tables II-V imply (spec A4)."""

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


# ------------------------------------------------------------------------------ the round loop's pieces
@dataclass(frozen=True)
class PaperLR:
    """lr(round, step) = max{lr0 / (1 + t / decay), floor} with t = round * steps_per_round + step (Sec. VI-A3).

    The paper's "iteration index" t counts E = 5 local iterations per round (its tables' T = 5 x rounds);
    steps_per_round sets that unit (spec A2).
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


class LevelSplit:
    """Per-client Z_U: clients split at random into equal sets, one set per choice (Sec. VI-A3: 4, 8, 16)."""

    def __init__(self, num_clients: int, choices: Sequence[int] = (4, 8, 16), seed: int = 0, **mucsc_kwargs: object):
        if num_clients < len(choices):
            raise ValueError(f"cannot split {num_clients} clients into {len(choices)} sets")
        order = Seeds(seed).numpy("zu_split").permutation(num_clients)
        self.levels = np.empty(num_clients, dtype=np.int64)
        for part, z in zip(np.array_split(order, len(choices)), choices):
            self.levels[part] = z
        self.codecs = {z: MUCSC(int(z), **mucsc_kwargs) for z in choices}  # type: ignore[arg-type]
        self.choices = tuple(choices)

    def __call__(self, ctx: LinkContext) -> Codec:
        if ctx.client is None:
            raise ValueError("LevelSplit is an uplink policy (per client); the downlink has no client")
        return self.codecs[int(self.levels[ctx.client])]

    def mean_id_bits(self) -> float:
        return float(np.mean([id_bits(int(z)) for z in self.levels]))

    def __repr__(self) -> str:
        return f"LevelSplit(choices={self.choices})"


def links(method: str, setup: Setup = Setup(), *, zu_split: LevelSplit | None = None,
          granularity: str = "model", mucsc_kwargs: dict | None = None) -> tuple[Link, Link]:
    """(uplink, downlink) for one method, as the paper runs it.

    MUCSC, B-MUCSC, SSGD: the server compresses the aggregate and adopts what it sends (Eq. 11):
    downlink payload "update" without error feedback. STC: both directions with residuals (uplink per
    client, downlink the server's: it keeps its model, so the next message carries what was not sent).
    DGC: uplink top-1% with residual accumulation, fp32 downlink. QSGD: uplink only.
    """
    _check_method(method)
    kw = mucsc_kwargs or {}
    fp32 = Link(Identity(), granularity=granularity, payload="update")
    if method == "nc":
        return Link(Identity(), granularity=granularity), fp32
    if method == "mucsc":
        up_codec = zu_split if zu_split is not None else MUCSC(setup.zu, **kw)
        return (Link(up_codec, granularity=granularity),
                Link(MUCSC(setup.zd, **kw), granularity=granularity, payload="update"))
    if method == "bmucsc":
        codec = BMUCSC(setup.bm_levels, setup.bm_frac, **kw)
        return Link(codec, granularity=granularity), Link(codec, granularity=granularity, payload="update")
    if method == "qsgd":
        return Link(QSGD(setup.qsgd_levels, setup.qsgd_bucket), granularity=granularity), fp32
    if method == "ssgd":
        return Link(SignSGD(), granularity=granularity), Link(SignSGD(), granularity=granularity, payload="update")
    if method == "dgc":
        return Link(TopK(setup.dgc_frac), granularity=granularity, error_feedback=True), fp32
    codec = STC(setup.stc_frac)
    return (Link(codec, granularity=granularity, error_feedback=True),
            Link(codec, granularity=granularity, payload="update", error_feedback=True))


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
