"""Links: how a parameter dict crosses the network through a codec, with exact bit counts.

A `Link` is one direction. Its codec is either a codec object or a policy `ctx -> codec`, which
gives per-client codecs (mixed precision) and per-round codecs (adaptive bits) with one mechanism.
`granularity="layer"` encodes each tensor separately (side information per layer);
`"model"` encodes the flattened model as one vector.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Union

import torch

from fedlib import params as P
from fedlib.codecs.base import Codec, Identity
from fedlib.params import Params


@dataclass(frozen=True)
class LinkContext:
    round: int
    client: int | None  # None on the downlink
    history: list[dict[str, Any]]  # record rows of the rounds so far (for loss-driven policies)


CodecPolicy = Callable[[LinkContext], Codec]


@dataclass
class Link:
    """One direction of the channel.

    payload: uplink "update" (trained - received) or "weights" (the trained weights themselves);
             downlink "weights" (the model itself, every round; the server keeps its full-precision
             copy) or "update" (the change since what clients hold, sent right after aggregation;
             without error feedback the server then adopts the clients' model, so that everyone,
             and the evaluation, holds the same weights).
    error_feedback: keep the compression residual (per client on the uplink) and add it to the
             next message.
    """

    codec: Union[Codec, CodecPolicy] = field(default_factory=Identity)
    granularity: str = "layer"
    payload: str = "update"
    error_feedback: bool = False

    def __post_init__(self) -> None:
        if self.granularity not in ("layer", "model"):
            raise ValueError(f"granularity must be 'layer' or 'model', got {self.granularity!r}")
        if self.payload not in ("update", "weights"):
            raise ValueError(f"payload must be 'update' or 'weights', got {self.payload!r}")

    def codec_for(self, ctx: LinkContext) -> Codec:
        codec = self.codec
        if hasattr(codec, "encode"):
            return codec  # type: ignore[return-value]
        return codec(ctx)  # type: ignore[operator]


@dataclass
class Transmission:
    decoded: Params
    bits: int
    codec: Codec
    info: dict[str, float]


def transmit(codec: Codec, x: Params, granularity: str, gen: torch.Generator | None) -> Transmission:
    """Encode and decode a parameter dict; bits are summed over the messages actually sent."""
    if granularity == "model":
        msg = codec.encode(P.flatten(x), gen)
        return Transmission(P.unflatten(codec.decode(msg), x), msg.bits, codec, dict(msg.info))
    decoded, bits, info = {}, 0, {}
    for name, t in x.items():
        msg = codec.encode(t.reshape(-1), gen)
        decoded[name] = codec.decode(msg).view_as(t)
        bits += msg.bits
        for key, value in msg.info.items():
            info[f"{key}/{name}"] = value
    return Transmission(decoded, bits, codec, info)
