"""FedAQ's experimental setup on top of the shared round loop (Qu, Song, Tsui; spec: specs/fedaq.md).

- `equal_shards`: the authors' IID split, floor(N / n) samples per client drawn without replacement (p_i = 1/n).
- `make_links(mode, scheme, ...)`: the paper's modes as Link pairs. The uplink sends the update relative to
  the (quantized) model the client received, Eq. (6)-(7); the downlink sends the global weights and the
  server keeps its fp32 model, Eq. (8): exactly `Link(payload="update")` and `Link(payload="weights")`.
  Schemes: "fp32", "fixed<b>" (2/4/8/16 in the paper), "fedaq" (Eq. 26), "adaquantfl" (uplink-only baseline).
- `run_scheme`: full participation, the paper's SGD (batch 64, momentum 0.5 reset every round, 5 local
  epochs), energy columns for the mode's links, and per-round bit/range summaries.
- `trends`, `layer_ranges`, `target_table`: what the paper's figures and Tables II-IV are built from.
"""
from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd
from torch import nn

from fedlib.algorithms import FedAvg
from fedlib.channel import Link
from fedlib.codecs.base import Codec, Identity
from fedlib.codecs.uniform import MAX_BITS, AdaQuantFL, FedAQQuantizer, UniformQuantizer
from fedlib.energy import add_energy, saving
from fedlib.targets import cost_to_target, rounds_to_target
from fedlib.federation import FederatedData, LocalTraining, RunResult, run_federation

MODES = ("joint", "up", "down")
LINKS_OF_MODE = {"joint": ("up", "down"), "up": ("up",), "down": ("down",)}
BETA_RULES = ("paper", "kkt")


def equal_shards(n_train: int, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """floor(N / n) distinct indices per client, drawn without replacement (the FedDQ code's IID split)."""
    if not 1 <= num_clients <= n_train:
        raise ValueError(f"need 1 <= num_clients <= {n_train}, got {num_clients}")
    per = n_train // num_clients
    perm = np.random.default_rng(rng).permutation(n_train)[: per * num_clients]
    return [np.sort(part) for part in perm.reshape(num_clients, per)]


def paper_local_training(lr: float = 0.01, epochs: float = 5.0, batch_size: int = 64, momentum: float = 0.5) -> LocalTraining:
    """§V-A: SGD, batch 64, momentum 0.5, lr 0.01, "5 local steps" = 5 local epochs in the authors' code."""
    return LocalTraining(lr=lr, batch_size=batch_size, epochs=epochs, momentum=momentum)


def downlink_resolution(alpha: float, num_clients: int, rule: str = "paper", e_up: float = 1.0,
                        e_down: float = 1.0) -> float:
    """beta: Eq. (22) alpha / sqrt(2n) ("paper"), or the KKT optimum alpha sqrt(e2 / (2 n e1)) ("kkt")."""
    if rule not in BETA_RULES:
        raise ValueError(f"beta rule must be one of {BETA_RULES}, got {rule!r}")
    if rule == "paper":
        return alpha / math.sqrt(2 * num_clients)
    return alpha * math.sqrt(e_down / (2 * num_clients * e_up))


def _fixed_bits(scheme: str) -> int | None:
    if scheme.startswith("fixed"):
        try:
            bits = int(scheme[len("fixed"):])
        except ValueError:
            bits = 0
        if not 1 <= bits <= MAX_BITS:
            raise ValueError(f"fixed-bit schemes are 'fixed<b>' with b in 1..{MAX_BITS}, got {scheme!r}")
        return bits
    return None


def make_links(mode: str, scheme: str, num_clients: int, *, alpha: float = 0.005, beta: float | None = None,
               beta_rule: str = "paper", e_up: float = 1.0, e_down: float = 1.0, granularity: str = "layer",
               rounding: str = "stochastic", b_min: int = 1, b_max: int = MAX_BITS, s0: int = 3) -> tuple[Link, Link]:
    """(uplink, downlink) for a mode ("joint", "up", "down") and a scheme; the other link of a single-link
    mode is fp32. beta overrides the downlink resolution (the paper gives none for downlink-only runs)."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    bits = _fixed_bits(scheme)
    up_codec: Codec | Callable = Identity()
    down_codec: Codec = Identity()
    if scheme == "fp32":
        pass
    elif bits is not None:
        up_codec = down_codec = UniformQuantizer(bits, rounding)
    elif scheme == "fedaq":
        beta = beta if beta is not None else downlink_resolution(alpha, num_clients, beta_rule, e_up, e_down)
        up_codec = FedAQQuantizer(alpha, b_min, b_max, rounding)
        down_codec = FedAQQuantizer(beta, b_min, b_max, rounding)
    elif scheme == "adaquantfl":
        if mode != "up":
            raise ValueError("AdaQuantFL is the paper's uplink-only baseline; use mode='up'")
        up_codec = AdaQuantFL(s0, b_min, b_max, rounding=rounding)
    else:
        raise ValueError(f"unknown scheme {scheme!r}; use 'fp32', 'fixed<b>', 'fedaq' or 'adaquantfl'")
    if mode == "down":
        up_codec = Identity()
    if mode == "up":
        down_codec = Identity()
    return (Link(codec=up_codec, granularity=granularity, payload="update"),
            Link(codec=down_codec, granularity=granularity, payload="weights"))


def run_scheme(model_fn: Callable[[], nn.Module], data: FederatedData, mode: str, scheme: str, rounds: int, *,
               local: LocalTraining | None = None, seed: int = 0, e_up: float = 1.0, e_down: float = 1.0,
               threads: int = 1, device: str = "cpu", progress: bool = False, **link_kwargs: object) -> RunResult:
    """One FedAQ experiment: FedAvg with full participation over the mode's links; the rounds frame gains
    energy columns (only the mode's links count) and the `trends` columns."""
    uplink, downlink = make_links(mode, scheme, data.num_clients, e_up=e_up, e_down=e_down, **link_kwargs)
    result = run_federation(model_fn, data, FedAvg(), rounds, local=local or paper_local_training(), sampler=1.0,
                            uplink=uplink, downlink=downlink, downlink_receivers="all", seed=seed,
                            threads=threads, device=device, progress=progress)
    rounds_df = add_energy(result.rounds, e_up, e_down, LINKS_OF_MODE[mode])
    dims = {k: v.numel() for k, v in result.params.items()}
    result.rounds = rounds_df.merge(trends(result.rounds, result.clients, dims), on="round")
    result.config.update(mode=mode, scheme=scheme, e_up_pj=e_up, e_down_pj=e_down,
                         **{k: v for k, v in link_kwargs.items()})
    return result


def _layer_columns(frame: pd.DataFrame, prefix: str) -> list[str]:
    return [c for c in frame.columns if c.startswith(prefix)]


def trends(rounds: pd.DataFrame, clients: pd.DataFrame, dims: dict[str, int]) -> pd.DataFrame:
    """Per round: size-weighted mean bits per value on each link (32 for fp32), mean ranges over layers
    (clients averaged on the uplink) and the share of clamped bit-lengths; dims maps layer -> size."""
    out = pd.DataFrame({"round": rounds["round"]})
    total = float(sum(dims.values()))
    if all(f"bits_per_value/{k}" in clients for k in dims):
        per_client = sum(clients[f"bits_per_value/{k}"] * dims[k] for k in dims) / total
        by_round = clients.assign(_bits=per_client).groupby("round")
        out["up_bits"] = out["round"].map(by_round["_bits"].mean())
        out["up_range"] = out["round"].map(by_round[[f"range/{k}" for k in dims]].mean().mean(axis=1))
        if all(f"clamped/{k}" in clients for k in dims):
            out["up_clamped"] = out["round"].map(by_round[[f"clamped/{k}" for k in dims]].mean().mean(axis=1))
    else:
        out["up_bits"] = 32.0
    if all(f"down/bits_per_value/{k}" in rounds for k in dims):
        out["down_bits"] = sum(rounds[f"down/bits_per_value/{k}"] * dims[k] for k in dims).to_numpy() / total
        out["down_range"] = rounds[[f"down/range/{k}" for k in dims]].mean(axis=1).to_numpy()
        if all(f"down/clamped/{k}" in rounds for k in dims):
            out["down_clamped"] = rounds[[f"down/clamped/{k}" for k in dims]].mean(axis=1).to_numpy()
    else:
        out["down_bits"] = 32.0
    return out


def layer_ranges(result: RunResult) -> pd.DataFrame:
    """Long frame (round, link, layer, range) for Fig. 2: uplink ranges averaged over clients, downlink ranges."""
    parts = []
    up = _layer_columns(result.clients, "range/")
    if up:
        m = result.clients.groupby("round")[up].mean().reset_index().melt("round", var_name="layer", value_name="range")
        parts.append(m.assign(link="uplink update"))
    down = _layer_columns(result.rounds, "down/range/")
    if down:
        m = result.rounds[["round", *down]].melt("round", var_name="layer", value_name="range")
        parts.append(m.assign(link="downlink weights"))
    if not parts:
        raise ValueError("no quantizer range info in this run (both links fp32)")
    out = pd.concat(parts, ignore_index=True)
    out["layer"] = out["layer"].str.split("range/").str[-1]
    return out


def target_table(runs: dict[str, pd.DataFrame], baseline: str, proposed: str, targets: list[float]) -> pd.DataFrame:
    """Energy (mJ) and round at which each scheme first reaches each target accuracy, and the saving."""
    rows = []
    for t in targets:
        eb, rb = cost_to_target(runs[baseline], t, "cum_energy_mJ", cumulative=True), rounds_to_target(runs[baseline], t)
        ep, rp = cost_to_target(runs[proposed], t, "cum_energy_mJ", cumulative=True), rounds_to_target(runs[proposed], t)
        rows.append({"target_acc": t, f"{baseline}_mJ": eb, f"{proposed}_mJ": ep, f"{baseline}_round": rb,
                     f"{proposed}_round": rp, "saving_%": 100 * saving(eb, ep)})
    return pd.DataFrame(rows)
