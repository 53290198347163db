"""QSGD (Alistarh et al. 2017) and scaled signSGD (Bernstein et al. 2018): a few values times a norm.

QSGD with s levels sends, per element, a sign and a level in {0..s} (1 + ceil(log2(s + 1)) bits: 4 for
s = 7, the width MUCSC's paper implies) and one float32 norm per bucket. signSGD sends one bit per
element and one float32 scale (the mean |x|; the paper does not say how signs are scaled).
"""
from __future__ import annotations

import math

import torch

from fedlib.codecs.base import FLOAT_BITS, Message, id_bits
from fedlib.registry import CODECS
from fedlib.validate import count


def qsgd_bits(d: int, levels: int, bucket: int | None) -> int:
    """d (1 + ceil(log2(s + 1))) + 32 per bucket norm."""
    buckets = 1 if bucket is None else math.ceil(d / bucket)
    return d * (1 + id_bits(levels + 1)) + FLOAT_BITS * buckets


def sign_bits(d: int) -> int:
    """d sign bits + one float32 scale."""
    return d + FLOAT_BITS


@CODECS.register("qsgd", examples=({"levels": 7}, {"levels": 1, "bucket": None}, {"levels": 3, "bucket": 5}))
class QSGD:
    """Unbiased stochastic quantization Q_s(v_i) = ||v||_2 sgn(v_i) xi_i / s per bucket (None: one bucket)."""

    def __init__(self, levels: int = 7, bucket: int | None = 512) -> None:
        levels = count("QSGD levels", levels)
        bucket = None if bucket is None else count("bucket (a size, or None for the whole vector)", bucket)
        self.levels, self.bucket = levels, bucket
        self.name = f"qsgd{levels}"

    unbiased = True
    deterministic = False
    device_generic = True

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message:
        flat = x.detach().reshape(-1)
        d = flat.numel()
        size = d if self.bucket is None else self.bucket
        rows = torch.nn.functional.pad(flat, (0, (-d) % size)).reshape(-1, size)
        norms = rows.norm(dim=1, keepdim=True)
        scaled = rows.abs() * self.levels / torch.where(norms > 0, norms, 1)
        low = scaled.floor()
        level = low + (torch.rand(scaled.shape, generator=gen, dtype=scaled.dtype, device=scaled.device) < scaled - low)
        signed = (torch.sign(rows) * level).to(torch.int8)
        return Message(payload=(signed, norms), shape=x.shape, payload_bits=d * (1 + id_bits(self.levels + 1)),
                       side_bits=FLOAT_BITS * rows.shape[0])

    def decode(self, msg: Message) -> torch.Tensor:
        signed, norms = msg.payload
        return (signed * norms / self.levels).reshape(-1)[: math.prod(msg.shape)].reshape(msg.shape)

    def __repr__(self) -> str:
        return f"QSGD(levels={self.levels}, bucket={self.bucket})"


@CODECS.register("sign")
class SignSGD:
    """x -> mean|x| * sign(x) (zeros map to +; one bit cannot say 0)."""

    name = "sign"
    unbiased = False
    deterministic = True
    device_generic = True

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message:
        flat = x.detach().reshape(-1)
        return Message(payload=(flat >= 0, flat.abs().mean()), shape=x.shape, payload_bits=flat.numel(),
                       side_bits=FLOAT_BITS)

    def decode(self, msg: Message) -> torch.Tensor:
        positive, scale = msg.payload
        return torch.where(positive, scale, -scale).reshape(msg.shape)

    def __repr__(self) -> str:
        return "SignSGD()"
