"""The round's contracts: the typed values the round loop, the executors, the algorithms and the hooks exchange.

    LocalTraining   how clients train (SGD settings; exactly one of epochs/steps)
    FederatedData   a dataset and the training-set indices each client holds
    RoundContext    where in the run a call happens: round, number of clients, client id where one applies
    ClientJob       one client's work in a round (its batches, its persistent state)
    ClientOutcome   what local training returns (trained parameters, buffers, loss)
    LocalRun        facts about that training the algorithm may need (steps, sum of step sizes, ...)
    ClientResult    what the server holds from a client after the uplink
    RoundInfo       what a post-aggregation hook sees
    Hook, ClientBehavior   the two plug-in protocols of the loop
    Checkpoint      where a run saves and finds its state
    LayerDiagnostics, layer_table, link_rows   per-layer diagnostics, the long table they are recorded in, a link's rows
    RunResult       the tidy record of a run
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Union

import numpy as np
import pandas as pd
import torch

from fedlib.core.augment import AUGMENTATIONS
from fedlib.core.params import Params
from fedlib.data import Dataset
from fedlib.validate import count, instance, int_array, real

FLOAT32_MAX = float(torch.finfo(torch.float32).max)  # training runs in float32: a larger step or decay overflows
LearningRate = Union[float, Callable[[int, int], float]]  # a constant, or lr(round, local_step)


@dataclass
class LocalTraining:
    """Client-side SGD. `epochs` or `steps` sets the amount of local work (one epoch if neither is given)."""

    lr: LearningRate = 0.05
    batch_size: int = 32
    epochs: float | None = None
    steps: int | None = None
    momentum: float = 0.0  # heavy ball, as torch.optim.SGD (dampening 0); reset every round
    weight_decay: float = 0.0
    augment: str | None = None  # a train-time augmentation of fedlib.core.augment ("crop_flip", "flip_gray")

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Check (and normalise) every field; a ValueError names the first wrong one. Run at construction and again
        when a run opens (`fedlib.engine.federation.open_federation`), so a field set after construction (`local.lr =
        nan`) is refused too, once per run."""
        if self.epochs is not None and self.steps is not None:
            raise ValueError(f"LocalTraining takes epochs or steps, not both (got epochs={self.epochs!r}, "
                             f"steps={self.steps!r})")
        if self.steps is None:
            self.epochs = 1.0 if self.epochs is None else real("epochs", self.epochs, low=0, low_inclusive=False)
        else:
            self.steps = count("steps", self.steps)
        self.batch_size = count("batch_size", self.batch_size)
        if not callable(self.lr):
            self.lr = real("lr", self.lr, low=0, low_inclusive=False,
                           high=FLOAT32_MAX, high_inclusive=True)
        self.momentum = real("momentum", self.momentum, low=0, low_inclusive=True, high=1)
        self.weight_decay = real("weight_decay", self.weight_decay, low=0, low_inclusive=True, high=FLOAT32_MAX,
                                 high_inclusive=True)
        if self.augment is not None and self.augment not in AUGMENTATIONS:
            raise ValueError(f"augment must be None or one of {sorted(AUGMENTATIONS)}, got {self.augment!r}")

    def lr_at(self, round_: int, step: int) -> float:
        if not callable(self.lr):
            return self.lr
        value = float(self.lr(round_, step))
        if not (math.isfinite(value) and 0 < value <= FLOAT32_MAX):
            raise ValueError(f"the learning-rate schedule returned {value!r} at round {round_}, step {step}; a step "
                             f"size is a number in (0, {FLOAT32_MAX:g}]")
        return value

    def schedule(self, n: int, rng: np.random.Generator) -> list[np.ndarray]:
        """The mini-batch index lists of one client for one round (reshuffled every epoch)."""
        per_epoch = math.ceil(n / self.batch_size)
        if self.steps is not None:
            total, epochs = self.steps, math.ceil(self.steps / per_epoch)
        else:
            assert self.epochs is not None
            total, epochs = max(1, round(self.epochs * per_epoch)), math.ceil(self.epochs)
        batches: list[np.ndarray] = []
        for _ in range(epochs):
            perm = rng.permutation(n)
            batches += [perm[i : i + self.batch_size] for i in range(0, n, self.batch_size)]
        return batches[:total]

    def epochs_of(self, steps: int, n_samples: int) -> float:
        """Passes over a client's data that `steps` local steps make."""
        return steps * self.batch_size / n_samples if self.steps is not None else float(self.epochs or 0.0)


@dataclass
class FederatedData:
    """A dataset and the training-set indices each client holds."""

    dataset: Dataset
    client_indices: list[np.ndarray]

    def __post_init__(self) -> None:
        instance("FederatedData dataset", self.dataset, Dataset, "load one with fedlib.data.load_dataset(name)")
        parts = self.client_indices
        if not isinstance(parts, Sequence) and not (isinstance(parts, np.ndarray) and parts.ndim == 2):
            raise ValueError(f"FederatedData client_indices must be a list with one index array per client (what "
                             f"a fedlib.data.partition splitter returns), got {type(parts).__name__}"
                             f"{f' of shape {parts.shape}' if isinstance(parts, np.ndarray) else ''}")
        if len(parts) == 0:
            raise ValueError("FederatedData needs at least one client")
        n = len(self.dataset.y_train)
        self.client_indices = [int_array(f"client_indices[{i}]", idx) for i, idx in enumerate(parts)]
        for i, idx in enumerate(self.client_indices):
            if len(idx) == 0:
                raise ValueError(f"client {i} holds no samples; use a partitioner with min_size >= 1")
            if np.min(idx) < 0 or np.max(idx) >= n:
                raise ValueError(f"client {i} has indices outside the training set (size {n})")

    @property
    def num_clients(self) -> int:
        return len(self.client_indices)

    @property
    def sizes(self) -> np.ndarray:
        return np.array([len(idx) for idx in self.client_indices])


@dataclass(frozen=True)
class RoundContext:
    """Where a call happens: `round` counts from 0 (record rows are numbered round + 1); `client` is set for
    per-client calls (start/finish of local training, client behaviours) and None for server-side ones;
    `device` is where the run trains (resolved: never "auto")."""

    round: int
    num_clients: int
    client: int | None = None
    device: torch.device = torch.device("cpu")

    def for_client(self, client: int) -> RoundContext:
        return RoundContext(self.round, self.num_clients, client, self.device)


@dataclass
class ClientJob:
    client: int
    indices: np.ndarray  # the client's training-set indices
    batches: list[np.ndarray]  # positions into `indices`, one array per local step
    state: dict[str, Any]  # the algorithm's persistent client state
    augment_gen: torch.Generator | None = None  # the client's augmentation stream this round


@dataclass
class ClientOutcome:
    params: Params
    buffers: Params
    loss: float  # mean mini-batch loss over the round
    lr_sum: float


@dataclass(frozen=True)
class LocalRun:
    """Facts about one client's local training in one round."""

    steps: int  # local SGD steps taken (K in SCAFFOLD)
    lr_sum: float  # sum of the step sizes used (K * lr for a constant rate)
    n_samples: int  # the client's training-set size
    epochs: float  # passes over the local data


@dataclass
class ClientResult:
    """What the server holds from one client after the uplink."""

    client: int
    n_samples: int
    steps: int
    update: Params  # decoded (sent weights - received weights), as the server reconstructs it
    loss: float  # mean local training loss over the round's steps
    extras: dict[str, Any] = field(default_factory=dict)  # algorithm uploads sent at full precision


@dataclass(frozen=True)
class RoundInfo:
    """What a post-aggregation hook sees."""

    ctx: RoundContext
    before: Params  # the global model at the start of the round
    results: list[ClientResult]
    weights: torch.Tensor  # the round loop's aggregation weights of `results`
    client_codecs: list[Any]  # the uplink codec each result went through
    aggregated: Params  # the algorithm's aggregate, before any hook


Diagnostics = Mapping[str, Union[float, Mapping[str, float]]]  # key -> a number, or key -> {layer: number}


class Hook(Protocol):
    """Post-aggregation hook: transforms the new global model, returns diagnostics. A number is a column of the
    round's record row; a mapping {layer: number} gives rows of the run's layer table (`RunResult.layers`,
    client `SERVER`; layer `MODEL` for a whole-model quantity)."""

    def __call__(self, params: Params, info: RoundInfo) -> tuple[Params, Diagnostics]: ...


class ClientBehavior(Protocol):
    """Replaces what a client uploads (freeloaders, attackers): returns the weights it sends instead of `trained`."""

    def __call__(self, ctx: RoundContext, received: Params, trained: Params, gen: torch.Generator) -> Params: ...


class Checkpoint(Protocol):
    """Where a run saves its state and finds it again (`fedlib.runs.store` gives one).

    The state is a dict of tensors, dicts, lists and strings (no arbitrary objects), so loading it needs
    no code execution (`torch.load(..., weights_only=True)`)."""

    every: int

    def load(self) -> dict[str, Any] | None: ...

    def save(self, state: dict[str, Any]) -> None: ...


LayerDiagnostics = dict[str, dict[str, float]]  # key -> {layer: value}: a codec message's or a hook's per-layer info
MODEL = "model"  # the layer of a model-granularity message or a whole-model quantity
SERVER = -1  # the client of a layer-table row that no client sent: a downlink message or a server-side hook
LAYER_COLUMNS = {"round": "int64", "client": "int64", "layer": "str", "key": "str", "value": "float64"}


def layer_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    """The long per-layer record (`RunResult.layers`) from rows with the `LAYER_COLUMNS` keys (none: empty)."""
    return pd.DataFrame(rows, columns=list(LAYER_COLUMNS)).astype(LAYER_COLUMNS)


def link_rows(layers: pd.DataFrame, link: str, key: str) -> pd.DataFrame:
    """The rows of diagnostic `key` (e.g. "range") in a layer table: the clients' messages on the "up" link, the
    server's (key "down/<key>") on the "down" link."""
    if link not in ("up", "down"):
        raise ValueError(f"link must be 'up' or 'down', got {link!r}")
    up = layers["client"] != SERVER
    return layers[up & (layers["key"] == key)] if link == "up" else layers[~up & (layers["key"] == f"down/{key}")]


@dataclass
class RunResult:
    """The tidy record of a run.

    rounds   one row per round: accuracy, losses, bits, times, algorithm and hook scalar diagnostics
    clients  one row per (round, selected client): samples, steps, loss, bits, codec, algorithm scalar extras
    layers   per-layer diagnostics, long: (round, client, layer, key, value). Uplink codec info has the sending
             client's id; downlink codec info (key "down/<info key>") and hooks' per-layer diagnostics have
             client `SERVER` (-1). `layer` is the tensor's name, or `MODEL` ("model") for a model-granularity
             link or a whole-model hook quantity. Empty (same columns and dtypes) when nothing is per layer.
    """

    rounds: pd.DataFrame
    clients: pd.DataFrame
    params: Params
    server_state: dict[str, Any]
    config: dict[str, Any] = field(default_factory=dict)
    layers: pd.DataFrame = field(default_factory=lambda: layer_table([]))

    @property
    def final_accuracy(self) -> float:
        return float(self.rounds["test_acc"].dropna().iloc[-1])

    @property
    def diverged(self) -> bool:
        return bool(self.rounds["diverged"].any()) if "diverged" in self.rounds else False
