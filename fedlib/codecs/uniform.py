"""The uniform min-max quantizer, shared by FedShift (nearest rounding) and FedAQ (stochastic rounding).

With b bits the range [x_min, x_max] is cut into s = 2^b - 1 bins of width step = R / s (2^b evenly
spaced levels from x_min to x_max inclusive):
- rounding="nearest": FedShift's ASYM quantizer, Eqs. 5-6: Q(x) = round((x - x_min) / step) (half to even).
- rounding="stochastic": FedAQ Sec. II-B, Eq. (5): a value in the bin [h', h''] becomes h' with probability
  (h'' - x) / step and h'' otherwise, so E[Q(x)] = x and Var[Q(x_j)] = (h'' - x_j)(x_j - h') <= step^2 / 4.

Ways of choosing b, all sharing this one quantizer:
- `UniformQuantizer(bits)`: a fixed bit-length (FedShift's uniform uploads; FedAQ's fixed 2/4/8/16 bits).
- `FedAQQuantizer(resolution)`: Eq. (26), b = ceil(log2(R / resolution)) from the range of the tensor
  being sent, recomputed at every encode (uplink resolution alpha, downlink beta = alpha / sqrt(2n)).
- `fedlib.codecs.policies.AdaQuantFL(s0)`: a per-round codec policy, s_k = ceil(sqrt(F_0 / F_k) * s0) bins from
  the training losses (Jhunjhunwala et al., ICASSP 2021), used as `Link(codec=AdaQuantFL())`.

Bits are exact: payload b index bits per value; side information x_min and x_max as fp32 (64 bits), and
for the adaptive codec the bit-length itself (5 bits, b in 1..32). A constant tensor (R = 0) is sent as
its side information only (the receiver sees x_min = x_max and needs no index). FedAQ's energy model
counts only the payload bits (`Message.payload_bits`).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch

from fedlib.codecs.base import FLOAT_BITS, Message
from fedlib.registry import CODECS
from fedlib.validate import count, real

ROUNDINGS = ("stochastic", "nearest")
RANGE_BITS = 2 * FLOAT_BITS  # x_min and x_max, fp32
BITLENGTH_BITS = 5  # the adaptive codec sends b (1..32) with every message
MAX_BITS = 32


@dataclass(frozen=True)
class QuantizedTensor:
    """Bin indices in 0..2^b-1 and what the receiver needs to map them back."""

    indices: torch.Tensor  # int64
    x_min: float
    step: float
    dtype: torch.dtype


def check_bits(bits: int, name: str = "bits") -> int:
    bits = count(name, bits)
    if not 1 <= bits <= MAX_BITS:
        raise ValueError(f"{name} must be an integer in 1..{MAX_BITS}, got {bits!r}")
    return bits


def check_rounding(rounding: str) -> str:
    if rounding not in ROUNDINGS:
        raise ValueError(f"rounding must be one of {ROUNDINGS}, got {rounding!r}")
    return rounding


def value_range(x: torch.Tensor) -> float:
    """R(x) = max(x) - min(x), computed from the fp32 values that are sent as side information."""
    return float(x.max()) - float(x.min())


def quantize(x: torch.Tensor, bits: int, rounding: str = "stochastic",
             gen: torch.Generator | None = None) -> QuantizedTensor:
    """Quantize a flat tensor to 2^bits levels spanning [min(x), max(x)] (Eq. 5)."""
    bits = check_bits(bits)
    check_rounding(rounding)
    if x.numel() == 0:
        raise ValueError("cannot quantize an empty tensor")
    lo, hi = float(x.min()), float(x.max())
    bins = 2**bits - 1
    step = (hi - lo) / bins
    if step == 0.0:
        return QuantizedTensor(torch.zeros(x.shape, dtype=torch.int64, device=x.device), lo, 0.0, x.dtype)
    u = (x.detach().to(torch.float64) - lo) / step  # position in bins, in [0, bins]
    if rounding == "nearest":
        k = torch.round(u)
    else:
        below = torch.floor(u)
        k = below + (torch.rand(u.shape, generator=gen, dtype=torch.float64, device=u.device) < (u - below)).to(torch.float64)
    return QuantizedTensor(k.clamp_(0, bins).to(torch.int64), lo, step, x.dtype)


def dequantize(q: QuantizedTensor) -> torch.Tensor:
    return (q.x_min + q.indices.to(torch.float64) * q.step).to(q.dtype)


def _message(x: torch.Tensor, bits: int, rounding: str, gen: torch.Generator | None, side_bits: int,
             info: dict[str, float]) -> Message:
    q = quantize(x, bits, rounding, gen)
    payload_bits = 0 if q.step == 0.0 else bits * x.numel()
    err = dequantize(q).double() - x.detach().double()
    info = {"bits_per_value": float(bits if payload_bits else 0), "range": value_range(x),
            "mean_bias": float(err.mean()), "mse": float((err**2).mean()), **info}
    return Message(payload=q, shape=x.shape, payload_bits=payload_bits, side_bits=side_bits, info=info)


def _decode(msg: Message) -> torch.Tensor:
    return dequantize(msg.payload).view(msg.shape)


@CODECS.register("uniform", examples=({"bits": 2}, {"bits": 4, "rounding": "stochastic"}, {"bits": 8}))
class UniformQuantizer:
    """Fixed-bit min-max quantizer: 2^bits - 1 bins, bits*d + 64 bits per message (see the module doc)."""

    device_generic = True

    def __init__(self, bits: int, rounding: str = "nearest") -> None:
        self.bits = check_bits(bits)
        self.rounding = check_rounding(rounding)
        self.unbiased, self.deterministic = rounding == "stochastic", rounding == "nearest"
        self.name = f"{'uniform' if rounding == 'nearest' else 'sq'}{self.bits}"

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message:
        return _message(x, self.bits, self.rounding, gen, RANGE_BITS, {})

    decode = staticmethod(_decode)

    def __repr__(self) -> str:
        return f"UniformQuantizer(bits={self.bits}, rounding={self.rounding!r})"


def fedaq_bits(r: float, resolution: float, b_min: int = 1, b_max: int = MAX_BITS) -> tuple[int, bool]:
    """Eq. (26): b = ceil(log2(R / resolution)), clamped to [b_min, b_max]; returns (b, clamped)."""
    if not resolution > 0:
        raise ValueError(f"resolution must be > 0, got {resolution!r}")
    if not math.isfinite(r):
        return b_max, True  # a diverged update (NaN/inf range): the widest code, flagged clamped; the run's loss records the divergence
    if r <= 0:
        return b_min, False  # a constant tensor costs no index bits at any b
    raw = math.ceil(math.log2(r / resolution))
    b = min(max(raw, b_min), b_max)
    return b, b != raw


@CODECS.register("fedaq", examples=({"resolution": 1e-2}, {"resolution": 1e-3, "b_max": 4}))
class FedAQQuantizer:
    """Adaptive-bit quantizer: the bit-length follows the range of the tensor being encoded (Eq. 26).

    resolution is alpha on the uplink and beta = alpha / sqrt(2n) on the downlink; the step actually
    used is R / (2^b - 1), within a factor R / (R - resolution) of the resolution when no clamp binds.
    """

    device_generic = True

    def __init__(self, resolution: float, b_min: int = 1, b_max: int = MAX_BITS, rounding: str = "stochastic") -> None:
        self.resolution = real("resolution", resolution, low=0, low_inclusive=False)
        self.b_min = check_bits(b_min, "b_min")
        self.b_max = check_bits(b_max, "b_max")
        if self.b_min > self.b_max:
            raise ValueError(f"b_min ({b_min}) must not exceed b_max ({b_max})")
        self.rounding = check_rounding(rounding)
        self.unbiased, self.deterministic = rounding == "stochastic", rounding == "nearest"
        self.name = "fedaq"

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message:
        bits, clamped = fedaq_bits(value_range(x), self.resolution, self.b_min, self.b_max)
        return _message(x, bits, self.rounding, gen, RANGE_BITS + BITLENGTH_BITS, {"clamped": float(clamped)})

    decode = staticmethod(_decode)

    def __repr__(self) -> str:
        return (f"FedAQQuantizer(resolution={self.resolution!r}, b_min={self.b_min}, b_max={self.b_max}, "
                f"rounding={self.rounding!r})")
