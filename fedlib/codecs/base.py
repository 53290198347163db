"""The codec contract: every compressor/quantizer is `encode(x, gen) -> Message` and `decode(msg) -> x`.

A codec works on one flat-or-shaped tensor; `fedlib.channel.Link` applies it per layer or to the
whole model and sums the bits. `Message.bits` is the exact size of what crosses the link, counted the
way the paper being reproduced counts it (payload plus side information such as min/max or centroids).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

FLOAT_BITS = 32


@dataclass
class Message:
    """What one encode produces: an opaque payload, the tensor shape, and its exact size in bits."""

    payload: Any
    shape: torch.Size
    bits: int
    info: dict[str, float] = field(default_factory=dict)  # diagnostics, e.g. {"bits_per_value": 4}


@runtime_checkable
class Codec(Protocol):
    name: str

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message: ...

    def decode(self, msg: Message) -> torch.Tensor: ...


class Identity:
    """Full precision: 32 bits per value, no side information."""

    name = "fp32"

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message:
        return Message(payload=x.detach().clone(), shape=x.shape, bits=FLOAT_BITS * x.numel())

    def decode(self, msg: Message) -> torch.Tensor:
        return msg.payload


def roundtrip(codec: Codec, x: torch.Tensor, gen: torch.Generator | None = None) -> tuple[torch.Tensor, Message]:
    """Encode then decode; returns the reconstruction and the message (for its bit count)."""
    msg = codec.encode(x, gen)
    return codec.decode(msg), msg
