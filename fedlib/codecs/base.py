"""The codec contract: every compressor/quantizer is `encode(x, gen) -> Message` and `decode(msg) -> x`.

A codec works on one flat-or-shaped tensor; `fedlib.engine.channel.Link` applies it per layer or to the
whole model and sums the bits. A `Message` carries its exact size in two typed parts, counted the way
the paper being reproduced counts them: `payload_bits` (the per-element data: indices, signs, kept
values with their positions) and `side_bits` (per-message side information: min/max, codebooks, norms).

Codecs register themselves with `@CODECS.register(name, examples=...)` (fedlib.registry): `make_codec(name, **kwargs)`
builds one by name (so `Link(codec="stc")` works) and the conformance battery (tests/test_conformance.py)
runs every registered codec on its example configurations. A codec class states what it promises:
`unbiased` (E[decode(encode(x))] = x over the codec's randomness), `deterministic`, and `device_generic`
(it runs on the tensors' device with a generator of that device, so a GPU run encodes on the GPU).
"""
from __future__ import annotations

import inspect
import math
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch

from fedlib.registry import CODECS

FLOAT_BITS = 32


def id_bits(count: int) -> int:
    """ceil(log2 count): bits of an index into `count` things (at least 1)."""
    if count < 1:
        raise ValueError(f"need at least one thing to index, got {count}")
    return max(1, math.ceil(math.log2(count)))


@dataclass
class Message:
    """What one encode produces: an opaque payload, the tensor shape, and its exact size in bits."""

    payload: Any
    shape: torch.Size
    payload_bits: int
    side_bits: int = 0
    info: dict[str, float] = field(default_factory=dict)  # diagnostics only, e.g. {"mse": ...}

    @property
    def bits(self) -> int:
        return self.payload_bits + self.side_bits


@runtime_checkable
class Codec(Protocol):
    name: str

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message: ...

    def decode(self, msg: Message) -> torch.Tensor: ...


def make_codec(name: str, **kwargs: Any) -> Codec:
    """Build a registered codec by name; says which names exist and which arguments a codec needs."""
    if name not in CODECS:
        raise ValueError(f"unknown codec {name!r}; registered codecs: {', '.join(sorted(CODECS))}")
    factory = CODECS[name]
    try:
        inspect.signature(factory).bind(**kwargs)
    except TypeError as err:
        raise ValueError(f"codec {name!r} ({factory.__name__}{inspect.signature(factory)}): {err}; pass "
                         f"make_codec({name!r}, ...) or a {factory.__name__}(...) object") from None
    return factory(**kwargs)


@CODECS.register("fp32")
class Identity:
    """Full precision: 32 bits per value, no side information."""

    name = "fp32"
    unbiased = True
    deterministic = True
    device_generic = True

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message:
        return Message(payload=x.detach().clone(), shape=x.shape, payload_bits=FLOAT_BITS * x.numel())

    def decode(self, msg: Message) -> torch.Tensor:
        return msg.payload

    def __repr__(self) -> str:
        return "Identity()"


def roundtrip(codec: Codec, x: torch.Tensor, gen: torch.Generator | None = None) -> tuple[torch.Tensor, Message]:
    """Encode then decode; returns the reconstruction and the message (for its bit count)."""
    msg = codec.encode(x, gen)
    return codec.decode(msg), msg
