"""Deterministic weight quantizers of FedShift (Seo et al., arXiv 2402.01070, section III-C).

Both act on one tensor (a layer) at a time and are deterministic (`gen` is used only by the random
and k-means++ initialisations of `KMeansQuantizer`).

* `UniformQuantizer` is the range-based asymmetric "ASYM" quantizer, Eqs. 5-6:
      Q(w) = round((w - w_min) / (w_max - w_min) * (2^N - 1)),   DeQ(q) = q * (w_max - w_min) / (2^N - 1) + w_min,
  i.e. 2^N evenly spaced levels from w_min to w_max inclusive; rounding is half-to-even (`torch.round`).
  Side information: w_min and w_max in fp32.
* `KMeansQuantizer` is Algorithm 1: 1-D K-means with k = 2^N centroids; Q(w) = index of a weight's
  centroid, the codebook (k fp32 values) is the side information. We run an exact 1-D Lloyd iteration
  on the sorted values (boundaries at centroid midpoints, cluster sums from prefix sums), so one
  iteration costs O(k log P) after one O(P log P) sort; 2M weights take well under a second.

Bits are counted as Table III counts the weight payload, N bits per value, plus the side information
at 32 bits per float: 2 floats per tensor for uniform, 2^N floats per tensor for K-means. Table III's
own "auxiliary data" sizes (0.25 KB, 6.19 KB, 88.82 KB) cannot be derived from the paper's text and
are not what we count (see notebooks/fedshift.py).
"""
from __future__ import annotations

import torch

from fedlib.codecs.base import FLOAT_BITS, Message

KMEANS_INITS = ("quantile", "random", "kmeans++")


def _check_bits(bits: int) -> int:
    if int(bits) != bits or not 1 <= bits <= 16:
        raise ValueError(f"bits must be an integer in [1, 16], got {bits!r}")
    return int(bits)


def _info(x: torch.Tensor, decoded: torch.Tensor, payload_bits: int, side_bits: int) -> dict[str, float]:
    err = decoded.double() - x.double()
    return {
        "payload_bits": float(payload_bits),
        "side_bits": float(side_bits),
        "mean_bias": float(err.mean()) if x.numel() else 0.0,
        "mse": float((err**2).mean()) if x.numel() else 0.0,
    }


class UniformQuantizer:
    """ASYM min-max quantizer (Eqs. 5-6) with `bits` bits per value; min/max sent as two fp32 values."""

    def __init__(self, bits: int) -> None:
        self.bits = _check_bits(bits)
        self.levels = 2**self.bits - 1
        self.name = f"uniform{self.bits}"

    def quantize(self, x: torch.Tensor) -> tuple[torch.Tensor, float, float]:
        """Eq. 5: integer indices in [0, 2^N - 1] plus (w_min, w_max)."""
        x64 = x.detach().reshape(-1).double()
        if x64.numel() == 0:
            return torch.zeros(0, dtype=torch.int64), 0.0, 0.0
        lo, hi = float(x64.min()), float(x64.max())
        if hi == lo:  # a constant tensor: every index 0 decodes to the constant
            return torch.zeros(x64.numel(), dtype=torch.int64), lo, hi
        q = torch.round((x64 - lo) / (hi - lo) * self.levels).to(torch.int64)
        return q, lo, hi

    def dequantize(self, q: torch.Tensor, lo: float, hi: float) -> torch.Tensor:
        """Eq. 6, in float64 so that index 0 gives w_min and index 2^N - 1 gives w_max exactly."""
        return (q.double() * ((hi - lo) / self.levels) + lo).float()

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message:
        q, lo, hi = self.quantize(x)
        payload_bits, side_bits = self.bits * x.numel(), 2 * FLOAT_BITS
        msg = Message(payload=(q, lo, hi), shape=x.shape, bits=payload_bits + side_bits)
        msg.info = _info(x.reshape(-1), self.dequantize(q, lo, hi), payload_bits, side_bits)
        return msg

    def decode(self, msg: Message) -> torch.Tensor:
        q, lo, hi = msg.payload
        return self.dequantize(q, lo, hi).view(msg.shape)

    def __repr__(self) -> str:
        return f"UniformQuantizer(bits={self.bits})"


class KMeansQuantizer:
    """Algorithm 1: per-tensor 1-D K-means with 2^bits centroids; the codebook is sent as 2^bits fp32 values.

    init: "quantile" (centroids at the (i + 1/2)/k quantiles; deterministic, the default), "random"
    (k distinct data points, as fast_pytorch_kmeans in the reference code) or "kmeans++" (O(P k); needs `gen`
    for reproducibility). Lloyd stops when the assignment no longer changes or after `max_iter`
    iterations. It always ends with an update step, so every centroid in use is the mean of its
    cluster: the decoded tensor has the same sum (hence mean) as the input, up to fp32 rounding of
    the codebook. At convergence each index is also the nearest centroid (Algorithm 1, line 3).
    """

    def __init__(self, bits: int, init: str = "quantile", max_iter: int = 300) -> None:
        self.bits = _check_bits(bits)
        if init not in KMEANS_INITS:
            raise ValueError(f"unknown K-means init {init!r}; choose from {KMEANS_INITS}")
        if int(max_iter) != max_iter or max_iter < 1:
            raise ValueError(f"max_iter must be a positive integer, got {max_iter!r}")
        self.k = 2**self.bits
        self.init = init
        self.max_iter = int(max_iter)
        self.name = f"kmeans{self.bits}"

    def _initial_centroids(self, xs: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
        n = xs.numel()
        if self.init == "quantile":
            pos = ((torch.arange(self.k, dtype=torch.float64) + 0.5) / self.k * n).long().clamp(max=n - 1)
            return xs[pos]
        if self.init == "random":
            pick = torch.randperm(n, generator=gen)[: self.k] if n >= self.k else torch.randint(n, (self.k,), generator=gen)
            return torch.sort(xs[pick]).values
        centroids = [xs[torch.randint(n, (1,), generator=gen)].item()]
        d2 = (xs - centroids[0]) ** 2
        for _ in range(self.k - 1):
            total = float(d2.sum())
            if total == 0.0:  # fewer distinct values than centroids: repeat the last one
                centroids.append(centroids[-1])
                continue
            c = xs[torch.multinomial(d2 / total, 1, generator=gen)].item()
            centroids.append(c)
            d2 = torch.minimum(d2, (xs - c) ** 2)
        return torch.sort(torch.tensor(centroids, dtype=torch.float64)).values

    def fit(self, x: torch.Tensor, gen: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Return (codebook float64 [k], indices int64 [P] in the input order, Lloyd iterations run)."""
        flat = x.detach().reshape(-1).double()
        if flat.numel() == 0:
            return torch.zeros(self.k, dtype=torch.float64), torch.zeros(0, dtype=torch.int64), 0
        xs, order = torch.sort(flat)
        prefix = torch.cat([torch.zeros(1, dtype=torch.float64), torch.cumsum(xs, 0)])
        centroids = self._initial_centroids(xs, gen)
        cuts = None
        iters = 0
        for iters in range(1, self.max_iter + 1):
            # cluster j holds sorted positions [cuts[j], cuts[j+1]); ties at a midpoint go to the upper cluster
            new_cuts = torch.cat([
                torch.zeros(1, dtype=torch.long),
                torch.searchsorted(xs, (centroids[1:] + centroids[:-1]) / 2, right=False),
                torch.full((1,), xs.numel(), dtype=torch.long),
            ])
            counts = new_cuts[1:] - new_cuts[:-1]
            sums = prefix[new_cuts[1:]] - prefix[new_cuts[:-1]]
            centroids = torch.where(counts > 0, sums / counts.clamp(min=1), centroids)  # empty: keep
            if cuts is not None and torch.equal(new_cuts, cuts):
                break
            cuts = new_cuts
        sorted_idx = torch.repeat_interleave(torch.arange(self.k), cuts[1:] - cuts[:-1])
        indices = torch.empty_like(sorted_idx)
        indices[order] = sorted_idx
        return centroids, indices, iters

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message:
        centroids, indices, iters = self.fit(x, gen)
        codebook = centroids.float()
        payload_bits, side_bits = self.bits * x.numel(), self.k * FLOAT_BITS
        msg = Message(payload=(indices, codebook), shape=x.shape, bits=payload_bits + side_bits)
        msg.info = _info(x.reshape(-1), codebook[indices], payload_bits, side_bits) | {"lloyd_iters": float(iters)}
        return msg

    def decode(self, msg: Message) -> torch.Tensor:
        indices, codebook = msg.payload
        return codebook[indices].view(msg.shape)

    def __repr__(self) -> str:
        return f"KMeansQuantizer(bits={self.bits}, init={self.init!r}, max_iter={self.max_iter})"


def weight_quantizer(kind: str, bits: int, **kwargs: object) -> UniformQuantizer | KMeansQuantizer:
    """"uniform" (Eqs. 5-6) or "kmeans" (Algorithm 1) with `bits` bits per value."""
    if kind == "uniform":
        if kwargs:
            raise ValueError(f"the uniform quantizer takes no options, got {sorted(kwargs)}")
        return UniformQuantizer(bits)
    if kind == "kmeans":
        return KMeansQuantizer(bits, **kwargs)  # type: ignore[arg-type]
    raise ValueError(f"unknown weight quantizer {kind!r}; choose 'uniform' or 'kmeans'")
