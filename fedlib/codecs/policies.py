"""Codec policies: `ctx -> codec` functions a `fedlib.engine.channel.Link` calls once per message, so that the codec can
depend on the client (mixed precision, per-client levels) or on the round (adaptive bits).

- `PerClient(num_clients, groups, default)`: each client's codec from an assignment of clients to codecs; clients
  left out get the default. An uplink policy: the downlink has no client, and asking for its codec is an error.
  FedShift's mixed precision (a quantizer for the inferior clients, fp32 for the rest) and MUCSC's per-client
  Z_U split (clients split at random into equal sets, one MUCSC codec per set) are two assignments.
- `AdaQuantFL(s0)`: a per-round policy, s_k = ceil(sqrt(F_0 / F_k) * s0) bins from the training losses in
  `LinkContext.history` (Jhunjhunwala et al., ICASSP 2021), one min-max quantizer for every client.

A codec in an assignment is a codec object, a registered codec name, or (name, arguments) as a run spec holds it;
each group's codec is built once and shared by the group's clients.
"""
from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, Union

from fedlib.codecs.base import Codec, make_codec
from fedlib.codecs.uniform import MAX_BITS, UniformQuantizer, check_bits, check_rounding
from fedlib.validate import count

CodecChoice = Union[Codec, str, tuple[str, Mapping[str, Any]]]


class LinkContextLike(Protocol):
    """What a codec policy reads of `fedlib.engine.channel.LinkContext` (codecs do not import the channel)."""

    client: int | None
    history: Sequence[dict[str, Any]]


def build_codec(choice: CodecChoice, where: str) -> Codec:
    """A codec object as it is, a registered name or (name, arguments) built by `make_codec`."""
    if isinstance(choice, str):
        return make_codec(choice)
    if isinstance(choice, tuple) and len(choice) == 2 and isinstance(choice[0], str) and isinstance(choice[1], Mapping):
        return make_codec(choice[0], **choice[1])
    if hasattr(choice, "encode") and hasattr(choice, "decode"):
        return choice
    raise ValueError(f"{where}: a codec is a codec object, a registered codec name or (name, arguments), "
                     f"got {choice!r}")


class PerClient:
    """Uplink codec policy: the codec of each client's group, `default` for clients in no group.

    groups: (codec, clients) pairs; a client in two groups, or outside 0..num_clients-1, is an error.
    """

    def __init__(self, num_clients: int, groups: Iterable[tuple[CodecChoice, Iterable[int]]],
                 default: CodecChoice = "fp32") -> None:
        self.num_clients = count("num_clients", num_clients)
        self.default = build_codec(default, "PerClient default")
        self.assigned: dict[int, Codec] = {}
        for i, group in enumerate(groups):
            if not (isinstance(group, tuple) and len(group) == 2 and isinstance(group[1], Iterable)
                    and not isinstance(group[1], str)):
                raise ValueError(f"PerClient group {i}: a group is (codec, client ids), got {group!r}")
            choice, clients = group
            codec = build_codec(choice, f"PerClient group {i}")
            for client in clients:
                client = self._check(client, f"group {i}")
                if client in self.assigned:
                    raise ValueError(f"PerClient: client {client} is in group {i} and in an earlier group "
                                     f"({self.assigned[client]!r}); give each client one codec")
                self.assigned[client] = codec

    def _check(self, client: object, where: str) -> int:
        if isinstance(client, bool) or not isinstance(client, numbers.Integral):
            raise ValueError(f"PerClient {where}: a client is an integer id, got {client!r} ({type(client).__name__})")
        if not 0 <= int(client) < self.num_clients:
            raise ValueError(f"PerClient {where}: client {client} is outside 0..{self.num_clients - 1} (the policy "
                             f"was built for {self.num_clients} clients; build it with the run's client count)")
        return int(client)

    def codec_of(self, client: int) -> Codec:
        return self.assigned.get(self._check(client, "codec_of"), self.default)

    def __call__(self, ctx: LinkContextLike) -> Codec:
        if ctx.client is None:
            raise ValueError("PerClient is an uplink policy (a codec per client); the downlink has no client: "
                             "give the downlink its own codec")
        return self.codec_of(ctx.client)

    def __repr__(self) -> str:
        return f"PerClient({self.num_clients} clients, {len(self.assigned)} assigned, default={self.default!r})"


class AdaQuantFL:
    """AdaQuantFL's loss-driven schedule as a codec policy (the min-max quantizer, b from s_k).

    s_k = ceil(sqrt(F_0 / F_k) * s0) bins, b_k = ceil(log2(s_k + 1)), clamped to [b_min, b_max]. F_k is
    the latest `loss_key` value in the history (the clients' mean local training loss of round k-1)
    and F_0 the first; with no history yet, s = s0. Falling losses raise the bit-length.
    """

    def __init__(self, s0: int = 3, b_min: int = 1, b_max: int = MAX_BITS, loss_key: str = "train_loss",
                 rounding: str = "stochastic") -> None:
        count("s0", s0)
        if int(s0) != s0 or s0 < 1:
            raise ValueError(f"s0 must be a positive integer number of bins, got {s0!r}")
        self.s0 = int(s0)
        self.b_min = check_bits(b_min, "b_min")
        self.b_max = check_bits(b_max, "b_max")
        self.loss_key = loss_key
        self.rounding = check_rounding(rounding)
        self._codecs: dict[int, UniformQuantizer] = {}

    def levels(self, history: Sequence[dict[str, Any]]) -> int:
        """s_k, the number of bins for the coming round."""
        if not history:
            return self.s0
        if self.loss_key not in history[0]:
            raise ValueError(f"AdaQuantFL needs {self.loss_key!r} in the round records; got {sorted(history[0])}")
        f0, fk = float(history[0][self.loss_key]), float(history[-1][self.loss_key])
        if not (math.isfinite(f0) and math.isfinite(fk)):
            return 2**self.b_max - 1  # a diverged run (NaN/inf loss): the widest code; the run's loss records the divergence
        if not (f0 > 0 and fk > 0):
            raise ValueError(f"AdaQuantFL needs positive losses, got F_0={f0}, F_k={fk}")
        return math.ceil(math.sqrt(f0 / fk) * self.s0)

    def bits(self, history: Sequence[dict[str, Any]]) -> int:
        return min(max(math.ceil(math.log2(self.levels(history) + 1)), self.b_min), self.b_max)

    def __call__(self, ctx: LinkContextLike) -> UniformQuantizer:
        b = self.bits(ctx.history)
        if b not in self._codecs:
            self._codecs[b] = UniformQuantizer(b, self.rounding)
        return self._codecs[b]

    def __repr__(self) -> str:
        return f"AdaQuantFL(s0={self.s0}, b_min={self.b_min}, b_max={self.b_max}, loss_key={self.loss_key!r})"
