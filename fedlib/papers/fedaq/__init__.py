"""FedAQ's experiments as data, on top of the shared round loop (Qu, Song, Tsui; reading notes: docs/fedaq.md).

    specs = experiments(params)            # the notebook's grid: modes x schemes x seeds, plus the sweeps
    records = run_specs(specs, store=RunStore.at(runs_root))
    records["rounds"]   # one row per (run, round): energy and trend columns, labels mode/scheme/seed
    records["clients"]  # one row per (run, round, client)
    records["layers"]   # per-layer diagnostics, long (run, round, client, layer, key, value): ranges, bit-lengths
    records["layer_sizes"]  # one row per (run, layer): the layer's dimension

- `equal_shards`: the authors' IID split, floor(N / n) samples per client drawn without replacement (p_i = 1/n).
- `link_components(mode, scheme, ...)`: the paper's modes as the spec's uplink/downlink codecs. The uplink sends
  the update relative to the (quantized) model the client received, Eq. (6)-(7); the downlink sends the global
  weights and the server keeps its fp32 model, Eq. (8). Schemes: "fp32", "fixed<b>" (2/4/8/16 in the paper),
  "fedaq" (Eq. 26), "adaquantfl" (the uplink-only baseline: a loss-driven codec policy, the spec's
  uplink codec policy "adaquantfl").
- Registered components: the split "equal_shards", the codec policy "adaquantfl" and the collector
  "fedaq_energy_trends" (energy, only the mode's links count, and trend columns); full participation and
  every client receiving the broadcast are the spec's sampler and loop options.
- `trends`, `layer_ranges`, `target_table`: what the paper's figures and Tables II-IV are built from.
"""
from __future__ import annotations

import math
import typing
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from fedlib import report
from fedlib.codecs.policies import AdaQuantFL
from fedlib.codecs.uniform import MAX_BITS
from fedlib.core.augment import AUGMENTATIONS
from fedlib.core.contracts import MODEL, RunResult, link_rows
from fedlib.core.seeding import Seeds
from fedlib.data import Dataset
from fedlib.energy import add_energy, saving
from fedlib.engine.channel import Link
from fedlib.paper import Headline
from fedlib.paper_params import PaperParams, ParameterError, Threads, param
from fedlib.registry import CODEC_POLICIES, COLLECTORS, EXPERIMENTS, SPLITS
from fedlib.runs import RunPlan, RunSpec
from fedlib.runs.store import Records
from fedlib.targets import at_first_hit, cost_to_target, rounds_to_target

MODES = ("joint", "up", "down")
LINKS_OF_MODE = {"joint": ("up", "down"), "up": ("up",), "down": ("down",)}
BETA_RULES = ("paper", "kkt")
SPLIT = "equal_shards"
ROUNDING = "stochastic"  # Eq. (5)
CodecSpec = tuple[str, dict[str, Any]]


# The paper's numbers, typed in (Sec. V-A, Tables II-IV), for the notebook to show beside the measured ones.
PAPER_SETUP = {
    "dataset": "MNIST / Fashion-MNIST / CIFAR-10", "model": "LeNet-300-100, vanilla CNN, 7-layer CNN, ResNet-18",
    "clients": "10 (4 for ResNet-18), all every round", "rounds": "not stated (FedDQ code: 100, 25 for ResNet)",
    "local training": "SGD lr 0.01, momentum 0.5, batch 64, '5 local steps' (= 5 epochs in the code)",
    "alpha": "0.003-0.005", "beta (joint)": "alpha / sqrt(2n)", "energy per bit": "e1 = e2 = 1 pJ/b",
    "baselines": "fixed 2/4/8/16 bits (8 best); AdaQuantFL (uplink only)", "seeds": "not stated (code: seed 1, single run)",
}
PAPER_MODELS = {  # paper row -> (model, input shape, clients, Table II fixed-8 mJ, Table IV fixed-8 mJ)
    "LeNet-300-100 on MNIST": ("lenet_300_100", (1, 28, 28), 10, 0.90, 0.60),
    "Vanilla CNN on Fashion-MNIST": ("fedaq_cnn", (1, 28, 28), 10, 5.86, 2.10),
    "7-layer CNN on CIFAR-10": ("fedaq_cnn7", (3, 32, 32), 10, 90.0, 40.0),
    "ResNet-18 on CIFAR-10": ("resnet18_cifar", (3, 32, 32), 4, 9.3, 4.32),
}
PAPER_TABLES = {  # (target acc, baseline mJ, FedAQ mJ, saving %) — typed in from Tables II, III, IV
    "joint": {"LeNet-300-100 on MNIST": (0.970, 0.90, 0.67, 25.6), "Vanilla CNN on Fashion-MNIST": (0.913, 5.86, 2.80, 52.2),
              "7-layer CNN on CIFAR-10": (0.772, 90.0, 50.2, 44.2), "ResNet-18 on CIFAR-10": (0.860, 9.3, 3.1, 66.7)},
    "up": {"LeNet-300-100 on MNIST": (0.978, 0.43, 0.35, 18.6), "Vanilla CNN on Fashion-MNIST": (0.910, 2.0, 0.71, 64.5),
           "7-layer CNN on CIFAR-10": (0.770, 30.4, 23.0, 24.3), "ResNet-18 on CIFAR-10": (0.840, 3.4, 1.4, 58.8)},
    "down": {"LeNet-300-100 on MNIST": (0.975, 0.60, 0.52, 13.3), "Vanilla CNN on Fashion-MNIST": (0.910, 2.10, 1.73, 17.6),
             "7-layer CNN on CIFAR-10": (0.773, 40.0, 21.6, 46.0), "ResNet-18 on CIFAR-10": (0.860, 4.32, 1.47, 66.0)},
}
BASELINE = {"joint": "fixed8", "up": "adaquantfl", "down": "fixed8"}


def equal_shards(n_train: int, num_clients: int, rng: np.random.Generator) -> list[np.ndarray]:
    """floor(N / n) distinct indices per client, drawn without replacement (the FedDQ code's IID split)."""
    if not 1 <= num_clients <= n_train:
        raise ValueError(f"need 1 <= num_clients <= {n_train}, got {num_clients}")
    per = n_train // num_clients
    perm = np.random.default_rng(rng).permutation(n_train)[: per * num_clients]
    return [np.sort(part) for part in perm.reshape(num_clients, per)]


def downlink_resolution(alpha: float, num_clients: int, rule: str = "paper", e_up: float = 1.0,
                        e_down: float = 1.0) -> float:
    """beta: Eq. (22) alpha / sqrt(2n) ("paper"), or the KKT optimum alpha sqrt(e2 / (2 n e1)) ("kkt")."""
    if rule not in BETA_RULES:
        raise ValueError(f"beta rule must be one of {BETA_RULES}, got {rule!r}")
    if rule == "paper":
        return alpha / math.sqrt(2 * num_clients)
    return alpha * math.sqrt(e_down / (2 * num_clients * e_up))


def _fixed_bits(scheme: str) -> int | None:
    if not scheme.startswith("fixed"):
        return None
    suffix = scheme[len("fixed"):]
    bits = int(suffix) if suffix.isdigit() else 0
    if not 1 <= bits <= MAX_BITS:
        raise ValueError(f"fixed-bit schemes are 'fixed<b>' with b in 1..{MAX_BITS}, got {scheme!r}")
    return bits


def link_components(mode: str, scheme: str, *, alpha: float, beta: float, granularity: str = "layer",
                    b_min: int = 1) -> tuple[CodecSpec, CodecSpec]:
    """(uplink, downlink) as registered codec names with their Link options; the link a single-link mode
    leaves alone is fp32. AdaQuantFL's uplink is a codec policy (`run_spec` names it): here it is fp32."""
    if mode not in MODES:
        raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
    bits = _fixed_bits(scheme)
    fp32: CodecSpec = ("fp32", {})
    if scheme in ("fp32", "adaquantfl"):
        if scheme == "adaquantfl" and mode != "up":
            raise ValueError("AdaQuantFL is the paper's uplink-only baseline; use mode='up'")
        up, down = fp32, fp32
    elif bits is not None:
        up = down = ("uniform", {"bits": bits, "rounding": ROUNDING})
    elif scheme == "fedaq":
        up = ("fedaq", {"resolution": alpha, "b_min": b_min, "rounding": ROUNDING})
        down = ("fedaq", {"resolution": beta, "b_min": b_min, "rounding": ROUNDING})
    else:
        raise ValueError(f"unknown scheme {scheme!r}; use 'fp32', 'fixed<b>', 'fedaq' or 'adaquantfl'")
    up, down = (up if mode != "down" else fp32), (down if mode != "up" else fp32)
    return ((up[0], {**up[1], "granularity": granularity, "payload": "update"}),
            (down[0], {**down[1], "granularity": granularity, "payload": "weights"}))


def beta_label(mult: float) -> str:
    """The scheme label of downlink-only FedAQ at `mult` x alpha/sqrt(2n): "fedaq" at 1, else "fedaq β×<mult>"."""
    return "fedaq" if mult == 1 else f"fedaq β×{mult:g}"


@dataclass(frozen=True)
class FedAQParams(PaperParams):
    """notebooks/fedaq.py's parameters (defaults: its quick profile)."""

    seeds: tuple[int, ...] = param([1], "seeds; every cell of the grid runs on each")
    dataset: str = param("digits", "dataset name (fedlib.data)")
    model: str = param("lenet_300_100", "model name (fedlib.models)")
    paper_row: str = param("LeNet-300-100 on MNIST", "the paper's Table II-IV row this experiment stands in for")
    num_clients: int = param(10, "clients of the equal-shards split, all every round")
    rounds: int = param(10, "communication rounds")
    local_epochs: float = param(5.0, "local epochs per round")
    batch_size: int = param(64, "local minibatch size")
    lr: float = param(0.05, "local SGD learning rate")
    momentum: float = param(0.5, "local SGD momentum")
    augment: str | None = param(None, "local augmentation (fedlib.core.augment; flip_gray for CIFAR-10, docs/fedaq.md, reading 14)")
    alpha: float = param(0.005, "FedAQ's uplink resolution")
    alpha_sweep: tuple[float, ...] = param([], "FedAQ resolutions tried besides alpha (joint mode)")
    fixed_bits: tuple[int, ...] = param([2, 4, 8], "bit widths of the fixed-bit baselines")
    beta_down_mult: tuple[float, ...] = param([1.0, 4.0], "downlink-only resolutions, in multiples of alpha/sqrt(2n)")
    adaquant_s0: int = param(3, "AdaQuantFL's initial number of bins")
    adaquant_s0_sweep: tuple[int, ...] = param([1, 7], "AdaQuantFL initial bins tried besides adaquant_s0 (uplink)")
    granularity: typing.Literal["layer", "model"] = param("layer", "quantization ranges per layer or per model")
    b_min: int = param(1, "fewest bits FedAQ and AdaQuantFL use")
    e_up_pj: float = param(1.0, "uplink energy per bit (pJ)")
    e_down_pj: float = param(1.0, "downlink energy per bit (pJ)")
    target_fracs: tuple[float, ...] = param([0.90, 0.95, 0.99], "targets as fractions of the best accuracy")
    paper_targets: Mapping[str, float] | None = param(
        None, "{joint: acc, up: acc, down: acc}: the paper's absolute targets (None: target_fracs)")
    toy_rounds: int = param(15, "rounds of the quadratic toys for Theorems 1-3")
    toy_seeds: tuple[int, ...] = param([0], "seeds of the quadratic toys")
    mc_draws: int = param(200, "Monte Carlo draws of the quantizer checks")
    threads: Threads = param(1, "torch threads per run")

    def __post_init__(self) -> None:
        super().__post_init__()
        self.require_range(1, math.inf, "num_clients", "rounds", "batch_size", "adaquant_s0", "adaquant_s0_sweep",
                           "b_min", "toy_rounds", "mc_draws")
        self.require_positive("local_epochs", "lr", "alpha", "alpha_sweep", "beta_down_mult")
        self.require_positive("target_fracs", high=1)
        self.require_range(0, 1, "momentum")
        self.require_range(0, math.inf, "e_up_pj", "e_down_pj")
        self.require_range(1, MAX_BITS, "fixed_bits")
        self.require_nonempty("seeds", "toy_seeds")
        self.require_choice(PAPER_MODELS, "paper_row")
        self.require_choice(AUGMENTATIONS, "augment")
        if self.paper_targets is not None and set(self.paper_targets) != set(MODES):
            raise ParameterError(f"{type(self).__name__}.paper_targets: give one target per mode {MODES}, got "
                                 f"{dict(self.paper_targets)}")


@dataclass(frozen=True)
class Cell:
    """One run of the grid, before the seed: mode, scheme, the label the notebook shows, and what it varies."""

    mode: str
    scheme: str
    label: str = ""
    alpha: float | None = None  # None: the notebook's alpha
    beta_mult: float = 1.0  # downlink resolution = beta_mult * alpha / sqrt(2n)
    s0: int | None = None  # AdaQuantFL's initial number of bins
    extra_labels: dict[str, Any] = field(default_factory=dict)


def grid(p: FedAQParams) -> list[Cell]:
    """The notebook's runs per seed: joint (fp32, fixed bits, FedAQ), uplink-only (FedAQ, AdaQuantFL, fixed 8),
    downlink-only (FedAQ at multiples of beta, fixed 8), then the alpha and AdaQuantFL s0 sweeps (a sweep value
    equal to the main setting reuses the main run)."""
    cells = [Cell("joint", "fp32"), *[Cell("joint", f"fixed{b}") for b in p.fixed_bits],
             Cell("joint", "fedaq", extra_labels={"alpha": p.alpha}),
             Cell("up", "fedaq"), Cell("up", "adaquantfl", s0=p.adaquant_s0, extra_labels={"s0": p.adaquant_s0}),
             Cell("up", "fixed8"),
             *[Cell("down", "fedaq", beta_label(m), beta_mult=m) for m in p.beta_down_mult],
             Cell("down", "fixed8")]
    cells += [Cell("joint", "fedaq", f"fedaq α={a:g}", alpha=a, extra_labels={"alpha": a})
              for a in p.alpha_sweep if a != p.alpha]
    cells += [Cell("up", "adaquantfl", f"adaquantfl s0={s}", s0=s, extra_labels={"s0": s})
              for s in p.adaquant_s0_sweep if s != p.adaquant_s0]
    return cells


def run_spec(p: FedAQParams, cell: Cell, seed: int) -> RunSpec:
    """The spec of one cell and seed from the notebook's parameters `p`."""
    alpha = p.alpha if cell.alpha is None else cell.alpha
    beta = cell.beta_mult * downlink_resolution(alpha, p.num_clients)
    up, down = link_components(cell.mode, cell.scheme, alpha=alpha, beta=beta, granularity=p.granularity,
                               b_min=p.b_min)
    options: dict[str, Any] = {"mode": cell.mode, "scheme": cell.scheme}
    if cell.scheme == "adaquantfl":
        up = ("adaquantfl", {"s0": cell.s0, "b_min": p.b_min, "granularity": p.granularity})
    return RunSpec.make(
        "fedaq", p.dataset, (SPLIT, {"num_clients": p.num_clients}), (p.model, {}), ("fedavg", {}),
        p.rounds, seed, uplink=up, downlink=down, options=options, device=p.device,
        local={"lr": p.lr, "batch_size": p.batch_size, "epochs": p.local_epochs, "momentum": p.momentum,
               **({"augment": p.augment} if p.augment else {})},  # no key without one: stored runs keep theirs
        sampler=("uniform", {"clients": 1.0}), loop={"downlink_receivers": "all", "threads": p.threads},
        labels={"mode": cell.mode, "scheme": cell.label or cell.scheme, **cell.extra_labels},
        collectors=[("fedaq_energy_trends", {"mode": cell.mode, "e_up_pj": p.e_up_pj, "e_down_pj": p.e_down_pj})])



# The runs that back the headline claims (fedlib/papers/fedaq/claims.py), most valued first: a piece of the gpu
# profile computes them in this order (fedlib.ledger.priority), each on every seed of the profile.
UPLINK_C5 = {"mode": ("up",), "scheme": ("fedaq", "adaquantfl")}  # C5: uplink-only FedAQ against AdaQuantFL
DOWNLINK_C6 = {"mode": ("down",), "scheme": ("fedaq", "fixed8")}  # C6: downlink-only FedAQ against fixed 8-bit
HEADLINE_RUNS = (
    Headline("C1, C2, C3", {"mode": ("joint",), "scheme": ("fedaq", "fixed8")}),
    Headline("C5, C6", (UPLINK_C5, DOWNLINK_C6),
             first=(Headline("C5", UPLINK_C5), Headline("C6", DOWNLINK_C6))),  # each judged once its 6 runs are in
    Headline("C7, C7b", {"mode": ("joint",), "scheme": ("fixed2", "fixed4", "fixed16")}),
)

def experiments(p: FedAQParams) -> list[RunSpec]:
    """Every run the notebook reads, one per (seed, cell of `grid`); `p` are the notebook's parameters."""
    return [run_spec(p, cell, int(seed)) for seed in p.seeds for cell in grid(p)]


def cell_specs(specs: Sequence[RunSpec], mode: str, *schemes: str, sweeps: bool = False) -> list[RunSpec]:
    """Those of `specs` (`experiments`) in `mode` whose scheme label is one of `schemes` ("fixed8", "fedaq β×4",
    "adaquantfl s0=1"), every seed of each: the runs a table or figure over those cells reads. `sweeps`: whose
    scheme is one of `schemes`, at every setting its sweep tries ("fedaq" at every alpha and beta, "adaquantfl" at
    every s0)."""
    part = "options" if sweeps else "labels"
    return [s for s in specs if s.get(part)["mode"] == mode and s.get(part)["scheme"] in schemes]


# ------------------------------------------------------------------------------------------ the plan
@CODEC_POLICIES.register("adaquantfl", examples=({"s0": 3}, {"s0": 1, "b_min": 2, "granularity": "model"}))
def adaquantfl_uplink(run: RunPlan, s0: int, b_min: int = 1, granularity: str = "layer") -> Link:
    """AdaQuantFL's loss-driven bit schedule on the uplink, sending the update."""
    return Link(codec=AdaQuantFL(s0, b_min, rounding=ROUNDING), granularity=granularity, payload="update")


@COLLECTORS.register("fedaq_energy_trends")
def energy_and_trends(run: RunPlan, mode: str, e_up_pj: float, e_down_pj: float) -> Callable[[RunResult], Records]:
    """Record tables: rounds with energy (only the mode's links) and trend columns; the layers' sizes."""
    if mode not in LINKS_OF_MODE:
        raise ValueError(f"fedaq_energy_trends: mode must be one of {sorted(LINKS_OF_MODE)}, got {mode!r}")

    def collect(result: RunResult) -> Records:
        dims = {k: v.numel() for k, v in result.params.items()}
        rounds = add_energy(result.rounds, e_up_pj, e_down_pj, LINKS_OF_MODE[mode])
        return {"rounds": rounds.merge(trends(result.rounds, result.layers, dims), on="round"),
                "layer_sizes": pd.DataFrame({"layer": list(dims), "dim": list(dims.values())})}

    return collect


@SPLITS.register(SPLIT)
def equal_shards_split(dataset: Dataset, num_clients: int, seeds: Seeds) -> list[np.ndarray]:
    """The authors' IID split: equal shards of a permutation drawn on the partition stream."""
    return equal_shards(len(dataset.y_train), num_clients, seeds.numpy("partition"))


@EXPERIMENTS.register("fedaq")
def plan(spec: RunSpec, run: RunPlan) -> RunPlan:
    """Everything is named in the spec; the paper's runs use the authors' equal-shard split."""
    if spec.split.name != SPLIT:
        raise ValueError(f"fedaq spec: split must be {SPLIT!r} (the authors' IID split), got {spec.split.name!r}")
    return run


# ---------------------------------------------------------------------------------- reading records
RunFrames = Mapping[tuple[str, str, int], pd.DataFrame]
TREND_QUANTITIES = ("up_bits", "down_bits", "up_range", "down_range")


def run_frames(record: pd.DataFrame) -> dict[tuple[str, str, int], pd.DataFrame]:
    """(mode, scheme, seed) -> that run's rows of the per-round `record`, in round order."""
    return {(str(m), str(s), int(sd)): frame.sort_values("round").reset_index(drop=True)
            for (m, s, sd), frame in record.groupby(["mode", "scheme", "seed"])}


def trend_table(run: pd.DataFrame) -> pd.DataFrame:
    """Spearman rho of each `TREND_QUANTITIES` column against the round in one run's rounds frame, with its first
    and last value (Figs. 2-3: uplink bits and ranges fall, downlink ones rise)."""
    from scipy.stats import spearmanr  # here: the run path (a piece on a GPU machine) needs no scipy

    return pd.DataFrame([{"quantity": q, "spearman rho vs round": spearmanr(run["round"], run[q]).statistic,
                          "first": run[q].iloc[0], "last": run[q].iloc[-1]} for q in TREND_QUANTITIES])


def message_sizes(layer: pd.Series, dims: Mapping[str, int]) -> pd.Series:
    """The number of values each layer-table row's message encodes: its layer's size, the whole model's for
    `MODEL` (a model-granularity link)."""
    sizes = {MODEL: sum(dims.values()), **dims}
    unknown = sorted(set(layer) - set(sizes))
    if unknown:
        raise ValueError(f"layer table rows name layers {unknown} that are not in the model's {sorted(dims)}")
    return layer.map(sizes).astype(float)


def trends(rounds: pd.DataFrame, layers: pd.DataFrame, dims: dict[str, int]) -> pd.DataFrame:
    """Per round of one run: size-weighted mean bits per value on each link (32 for fp32, which records none),
    mean ranges over layers (clients averaged on the uplink) and the share of clamped bit-lengths, from the run's
    layer table; dims maps layer -> size. Works for either link granularity (a model-granularity link has one
    layer, `MODEL`: the whole model)."""
    out = pd.DataFrame({"round": rounds["round"]})
    total = float(sum(dims.values()))
    for link in ("up", "down"):
        bits = link_rows(layers, link, "bits_per_value")
        if bits.empty:
            out[f"{link}_bits"] = 32.0
            continue
        per_message = (bits["value"] * message_sizes(bits["layer"], dims)).groupby([bits["round"], bits["client"]]).sum()
        out[f"{link}_bits"] = out["round"].map(per_message.groupby(level="round").mean() / total)
        for key in ("range", "clamped"):
            rows = link_rows(layers, link, key)
            if not rows.empty:
                per_layer = rows.groupby(["round", "layer"])["value"].mean()
                out[f"{link}_{key}"] = out["round"].map(per_layer.groupby(level="round").mean())
    return out


def layer_ranges(layers: pd.DataFrame) -> pd.DataFrame:
    """Long frame (round, layer, range, link) for Fig. 2 from one run's layer table: uplink ranges averaged over
    clients, downlink ranges."""
    up = link_rows(layers, "up", "range").groupby(["round", "layer"], sort=False)["value"].mean().reset_index()
    down = link_rows(layers, "down", "range")[["round", "layer", "value"]]
    parts = [part.assign(link=name) for part, name in ((up, "uplink update"), (down, "downlink weights"))
             if not part.empty]
    if not parts:
        raise ValueError("no quantizer range info in this run (both links fp32)")
    return pd.concat(parts, ignore_index=True).rename(columns={"value": "range"})


def target_table(runs: dict[str, pd.DataFrame], baseline: str, proposed: str, targets: list[float]) -> pd.DataFrame:
    """Energy (mJ) and round at which each scheme first reaches each target accuracy, and the saving."""
    rows = []
    for t in targets:
        eb, rb = cost_to_target(runs[baseline], t, "cum_energy_mJ", cumulative=True), rounds_to_target(runs[baseline], t)
        ep, rp = cost_to_target(runs[proposed], t, "cum_energy_mJ", cumulative=True), rounds_to_target(runs[proposed], t)
        rows.append({"target_acc": t, f"{baseline}_mJ": eb, f"{proposed}_mJ": ep, f"{baseline}_round": rb,
                     f"{proposed}_round": rp, "saving_%": 100 * saving(eb, ep)})
    return pd.DataFrame(rows)


def energy_to_targets(runs: RunFrames, mode: str, schemes: list[str],
                      seeds: list[int], targets: list[float]) -> pd.DataFrame:
    """One row per (scheme, seed, target): energy (mJ) and round at the first round reaching the target
    (`fedlib.targets.NEVER` = inf where never), with the run's final accuracy and mean bits per value.
    `runs` maps (mode, scheme, seed) to one run's rounds frame."""
    rows = []
    for scheme in schemes:
        for seed in seeds:
            df = runs[(mode, scheme, seed)]
            if not targets:  # no row: a run's columns are read only for a target
                continue
            acc, energy, rounds = (df[c].to_numpy() for c in ("test_acc", "cum_energy_mJ", "round"))
            run = {"run": df["run"].iloc[0] if "run" in df else "", "final_acc": float(acc[-1]),
                   "mean_up_bits": float(df["up_bits"].mean()), "mean_down_bits": float(df["down_bits"].mean())}
            rows.extend({"scheme": scheme, "seed": seed, "target_acc": t, "energy_mJ": at_first_hit(acc, energy, t),
                         "round": at_first_hit(acc, rounds, t), **run} for t in targets)
    return pd.DataFrame(rows, columns=["scheme", "seed", "target_acc", "run", "energy_mJ", "round", "final_acc",
                                       "mean_up_bits", "mean_down_bits"])


def best_by_energy(per_seed: pd.DataFrame, candidates: list[str]) -> str | None:
    """The candidate scheme that fewest seeds fail to bring to the target, then with the lowest median energy
    (`per_seed`: rows of `energy_to_targets` at one target); None when no candidate has rows."""
    rows = per_seed[per_seed["scheme"].isin(candidates)]
    if rows.empty:
        return None
    score = rows.groupby("scheme")["energy_mJ"].agg(never=lambda e: int(np.isinf(e).sum()), median="median")
    return str(score.sort_values(["never", "median"]).index[0])


def relative_targets(runs: RunFrames, mode: str, schemes: list[str],
                     seeds: list[int], fracs: list[float]) -> list[float]:
    """Fractions of the accuracy every scheme reaches: fracs x the lowest of their seed-mean best accuracies."""
    best = min(float(np.mean([runs[(mode, s, sd)]["test_acc"].max() for sd in seeds])) for s in schemes)
    return [round(float(f * best), 4) for f in fracs]


def saving_table(runs: RunFrames, mode: str, baseline: str, proposed: str,
                 seeds: list[int], targets: list[float]) -> pd.DataFrame:
    """Seed-mean energy (mJ) and rounds to each target (inf when a seed never reaches it), the saving computed
    from the mean energies (nan when either is inf), and how many seeds the proposed scheme brings there."""
    per_seed = pd.concat([target_table({s: runs[(mode, s, sd)] for s in (baseline, proposed)}, baseline, proposed, targets)
                          for sd in seeds])
    out = per_seed.groupby("target_acc", as_index=False).mean(numeric_only=True)
    out["saving_%"] = [100 * saving(b, p) for b, p in zip(out[f"{baseline}_mJ"], out[f"{proposed}_mJ"])]
    reached = per_seed.groupby("target_acc")[f"{proposed}_mJ"].apply(lambda e: int(np.isfinite(e).sum()))
    out["reached (seeds)"] = out["target_acc"].map(reached)
    return out


def to_target_per_seed(runs: RunFrames, mode: str, scheme: str, seeds: list[int],
                       target: float, cost: str | None = None) -> list[float]:
    """Per seed: rounds (cost=None) or a cumulative cost column (e.g. "cum_energy_mJ") at the first round
    reaching `target`; `fedlib.targets.NEVER` (inf) where never reached."""
    return [rounds_to_target(runs[(mode, scheme, sd)], target) if cost is None else
            cost_to_target(runs[(mode, scheme, sd)], target, cost, cumulative=True) for sd in seeds]


def energy_to_target_judgement(runs: RunFrames, mode: str,
                               baselines: Mapping[float, str | None], proposed: str, seeds: list[int],
                               evidence: str = "", *, floor: float) -> report.Judgement:
    """`fedlib.report.reaches_sooner` on energy summed over the targets, one pair per seed (a seed's targets are not
    independent pairs; never reaching one target makes the sum inf, censored at the energy the run spent by its end:
    the sum's lower bound, the `horizon`); `baselines` maps each target to the scheme compared there (None: skip
    that target). `proposed` must spend less than (1 - `floor`) x the baseline's energy: the claim's effect floor, a
    fraction of the baseline's energy."""
    ts = [t for t, b in baselines.items() if b is not None]

    def summed(scheme_at: Callable[[float], str]) -> tuple[np.ndarray, np.ndarray]:
        per_target = np.asarray([to_target_per_seed(runs, mode, scheme_at(t), seeds, t, "cum_energy_mJ") for t in ts],
                                dtype=float).reshape(len(ts), len(seeds))
        spent = np.asarray([[runs[(mode, scheme_at(t), sd)]["cum_energy_mJ"].iloc[-1] for sd in seeds] for t in ts],
                           dtype=float).reshape(len(ts), len(seeds))
        return per_target.sum(axis=0), np.where(np.isfinite(per_target), per_target, spent).sum(axis=0)

    (prop, prop_end), (base, base_end) = summed(lambda t: proposed), summed(lambda t: str(baselines[t]))
    names = "/".join(sorted({str(baselines[t]) for t in ts}))
    return report.reaches_sooner(prop, base, names=(proposed, names), margin=floor,
                                 quantity=f"energy (mJ) summed over the targets {ts}", horizon=(prop_end, base_end),
                                 evidence=", ".join(e for e in (f"{mode} mode, {len(seeds)} seed(s) x {len(ts)} targets",
                                                                evidence) if e))
