"""Top-k sparsification (DGC's upload) and Sparse Ternary Compression, with index bits counted.

Both send k = ceil(frac * d) of the d entries, each with a ceil(log2 d)-bit position (the accounting
MUCSC's paper uses for its baselines; STC's own paper codes positions with Golomb codes instead).
The residual of the unsent entries (DGC's local accumulation, STC's error feedback) is not part of a
codec: use `fedlib.engine.channel.Link(error_feedback=True)`, which sends C(x + e) and keeps e <- x + e - sent.
"""
from __future__ import annotations

import math

import torch

from fedlib.codecs.base import FLOAT_BITS, Message, id_bits
from fedlib.registry import CODECS
from fedlib.validate import real


def kept_count(d: int, frac: float) -> int:
    """k = ceil(frac * d), at least 1 and at most d."""
    frac = real("frac", frac, low=0, low_inclusive=False, high=1, high_inclusive=True)
    return min(d, max(1, math.ceil(frac * d)))


def _top_indices(x: torch.Tensor, k: int) -> torch.Tensor:
    return torch.topk(x.abs(), k, sorted=False).indices


def _scatter(shape: torch.Size, index: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(math.prod(shape), dtype=values.dtype, device=values.device)
    out[index.long()] = values
    return out.reshape(shape)


def topk_bits(d: int, frac: float, value_bits: int = FLOAT_BITS) -> int:
    """k (value_bits + ceil(log2 d)): DGC's message (k float32 values with their positions)."""
    return kept_count(d, frac) * (value_bits + id_bits(d))


def stc_bits(d: int, frac: float) -> int:
    """k (1 + ceil(log2 d)) + 32: a sign and a position per kept entry, plus the common magnitude mu."""
    return kept_count(d, frac) * (1 + id_bits(d)) + FLOAT_BITS


@CODECS.register("topk", examples=({"frac": 0.1}, {"frac": 1.0}))
class TopK:
    """Keep the k largest |x| exactly (float32), zero the rest. DGC = TopK(0.01) + error feedback."""

    def __init__(self, frac: float = 0.01) -> None:
        kept_count(1, frac)
        self.frac = frac
        self.name = f"top{frac:g}"

    unbiased = False
    deterministic = True
    device_generic = True

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message:
        flat = x.detach().reshape(-1)
        index = _top_indices(flat, kept_count(flat.numel(), self.frac))
        return Message(payload=(index.to(torch.int32), flat[index].clone()), shape=x.shape,
                       payload_bits=topk_bits(flat.numel(), self.frac), info={"kept": float(index.numel())})

    def decode(self, msg: Message) -> torch.Tensor:
        index, values = msg.payload
        return _scatter(msg.shape, index, values)

    def __repr__(self) -> str:
        return f"TopK(frac={self.frac})"


@CODECS.register("stc", examples=({"frac": 0.1}, {}))
class STC:
    """Sparse Ternary Compression (Sattler et al.): top-k entries become mu * sign, mu = mean |top-k|."""

    def __init__(self, frac: float = 0.03) -> None:
        kept_count(1, frac)
        self.frac = frac
        self.name = f"stc{frac:g}"

    unbiased = False
    deterministic = True
    device_generic = True

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message:
        flat = x.detach().reshape(-1)
        index = _top_indices(flat, kept_count(flat.numel(), self.frac))
        values = flat[index]
        mu = values.abs().mean()
        return Message(payload=(index.to(torch.int32), values > 0, mu), shape=x.shape,
                       payload_bits=kept_count(flat.numel(), self.frac) * (1 + id_bits(flat.numel())),
                       side_bits=FLOAT_BITS, info={"kept": float(index.numel()), "mu": float(mu)})

    def decode(self, msg: Message) -> torch.Tensor:
        index, positive, mu = msg.payload
        return _scatter(msg.shape, index, torch.where(positive, mu, -mu))

    def __repr__(self) -> str:
        return f"STC(frac={self.frac})"
