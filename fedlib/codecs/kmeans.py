"""FedShift's weight quantizers (Seo et al., arXiv 2402.01070, section III-C): K-means, and the uniform one.

* The range-based asymmetric "ASYM" quantizer of Eqs. 5-6 is `fedlib.codecs.uniform.UniformQuantizer`
  with nearest rounding (2^N evenly spaced levels from w_min to w_max; w_min, w_max sent in fp32).
* `KMeansQuantizer` is Algorithm 1: 1-D K-means with k = 2^N centroids; Q(w) = index of a weight's
  centroid, the codebook (k fp32 values) is the side information. We run an exact 1-D Lloyd iteration
  on the sorted values (boundaries at centroid midpoints, cluster sums from prefix sums), so one
  iteration costs O(k log P) after one O(P log P) sort; 2M weights take well under a second.

Bits are counted as Table III counts the weight payload, N bits per value, plus the side information
at 32 bits per float: 2 floats per tensor for uniform, 2^N floats per tensor for K-means. Table III's
own "auxiliary data" sizes (0.25 KB, 6.19 KB, 88.82 KB) cannot be derived from the paper's text and
are not what we count (see notebooks/fedshift.py). K-means is deterministic (`gen` is used only by the
random initialisations).

Two settings (issue 13 g): "converged" (the default: Lloyd until the assignment no longer changes) and the
authors' code, `REFERENCE_CODE`: fast_pytorch_kmeans with its defaults, i.e. k points drawn with replacement
as the initial centroids, an empty cluster's centroid set to 0, and a stop as soon as the summed squared
centroid movement of one update is <= tol = 1e-4. On weights of scale ~0.05 that absolute tolerance stops
after a few Lloyd iterations, well before convergence.
"""
from __future__ import annotations

import torch

from fedlib.codecs.base import FLOAT_BITS, Message
from fedlib.codecs.uniform import UniformQuantizer
from fedlib.registry import CODECS
from fedlib.validate import count, real

KMEANS_INITS = ("quantile", "random", "replacement", "kmeans++")
# the authors' code: fast_pytorch_kmeans.KMeans(n_clusters=2**bits, max_iter=300) with its default tol
REFERENCE_CODE = {"init": "replacement", "max_iter": 300, "tol": 1e-4}


def _check_bits(bits: int) -> int:
    bits = count("K-means bits", bits)
    if not 1 <= bits <= 16:
        raise ValueError(f"K-means bits must be an integer in [1, 16] (2^bits centroids), got {bits!r}")
    return int(bits)


@CODECS.register("kmeans", examples=({"bits": 2}, {"bits": 4}, {"bits": 3, "init": "kmeans++"},
                                    {"bits": 4, **REFERENCE_CODE}))
class KMeansQuantizer:
    """Algorithm 1: per-tensor 1-D K-means with 2^bits centroids; the codebook is sent as 2^bits fp32 values.

    init: "quantile" (centroids at the (i + 1/2)/k quantiles; deterministic, the default), "random"
    (k distinct data points), "replacement" (k data points drawn with replacement, as fast_pytorch_kmeans
    in the reference code) or "kmeans++" (O(P k)); the random ones need `gen` for reproducibility.

    tol=None (converged): Lloyd stops when the assignment no longer changes or after `max_iter` iterations;
    an empty cluster keeps its centroid. tol=float (the reference code's rule): Lloyd stops once one update
    moves the codebook by a summed squared distance <= tol, and an empty cluster's centroid becomes 0.
    It always ends with an update step, so every centroid in use is the mean of its cluster: the decoded
    tensor has the same sum (hence mean) as the input, up to fp32 rounding of the codebook. Only at
    convergence is each index also the nearest centroid (Algorithm 1, line 3); an early stop leaves the
    indices of the last assignment, made with the centroids before the last update.
    """

    unbiased = False
    deterministic = True  # for the default quantile init
    device_generic = True

    def __init__(self, bits: int, init: str = "quantile", max_iter: int = 300, tol: float | None = None) -> None:
        self.bits = _check_bits(bits)
        if init not in KMEANS_INITS:
            raise ValueError(f"unknown K-means init {init!r}; choose from {KMEANS_INITS}")
        max_iter = count("max_iter", max_iter)
        self.tol = None if tol is None else real("tol (None runs to convergence)", tol, low=0)
        self.k = 2**self.bits
        self.init = init
        self.max_iter = int(max_iter)
        self.deterministic = init == "quantile"
        self.name = f"kmeans{self.bits}"

    def _initial_centroids(self, xs: torch.Tensor, gen: torch.Generator | None) -> torch.Tensor:
        n = xs.numel()
        if self.init == "quantile":
            pos = ((torch.arange(self.k, dtype=torch.float64, device=xs.device) + 0.5) / self.k * n).long().clamp(max=n - 1)
            return xs[pos]
        if self.init == "random":
            pick = torch.randperm(n, generator=gen, device=xs.device)[: self.k] if n >= self.k else torch.randint(
                n, (self.k,), generator=gen, device=xs.device)
            return torch.sort(xs[pick]).values
        if self.init == "replacement":
            return torch.sort(xs[torch.randint(n, (self.k,), generator=gen, device=xs.device)]).values
        centroids = [xs[torch.randint(n, (1,), generator=gen, device=xs.device)].item()]
        d2 = (xs - centroids[0]) ** 2
        for _ in range(self.k - 1):
            total = float(d2.sum())
            if total == 0.0:  # fewer distinct values than centroids: repeat the last one
                centroids.append(centroids[-1])
                continue
            c = xs[torch.multinomial(d2 / total, 1, generator=gen)].item()
            centroids.append(c)
            d2 = torch.minimum(d2, (xs - c) ** 2)
        return torch.sort(torch.tensor(centroids, dtype=torch.float64, device=xs.device)).values

    def fit(self, x: torch.Tensor, gen: torch.Generator | None = None) -> tuple[torch.Tensor, torch.Tensor, int]:
        """Return (codebook float64 [k], indices int64 [P] in the input order, Lloyd iterations run)."""
        flat = x.detach().reshape(-1).double()
        if flat.numel() == 0:
            return (torch.zeros(self.k, dtype=torch.float64, device=flat.device),
                    torch.zeros(0, dtype=torch.int64, device=flat.device), 0)
        xs, order = torch.sort(flat)
        prefix = torch.cat([torch.zeros(1, dtype=torch.float64, device=xs.device), torch.cumsum(xs, 0)])
        centroids = self._initial_centroids(xs, gen)
        cuts = None
        iters = 0
        for iters in range(1, self.max_iter + 1):
            # cluster j holds sorted positions [cuts[j], cuts[j+1]); ties at a midpoint go to the upper cluster
            new_cuts = torch.cat([
                torch.zeros(1, dtype=torch.long, device=xs.device),
                torch.searchsorted(xs, (centroids[1:] + centroids[:-1]) / 2, right=False),
                torch.full((1,), xs.numel(), dtype=torch.long, device=xs.device),
            ])
            counts = new_cuts[1:] - new_cuts[:-1]
            sums = prefix[new_cuts[1:]] - prefix[new_cuts[:-1]]
            empty = centroids if self.tol is None else torch.zeros_like(centroids)
            updated = torch.where(counts > 0, sums / counts.clamp(min=1), empty)
            if self.tol is None:
                done = cuts is not None and torch.equal(new_cuts, cuts)
            else:
                done = float(((updated - centroids) ** 2).sum()) <= self.tol
            cuts, centroids = new_cuts, updated
            if done or iters == self.max_iter:
                break
            centroids = torch.sort(centroids).values  # the midpoints need sorted centroids (an empty one's 0 may not be)
        sorted_idx = torch.repeat_interleave(torch.arange(self.k, device=xs.device), cuts[1:] - cuts[:-1])
        indices = torch.empty_like(sorted_idx)
        indices[order] = sorted_idx
        return centroids, indices, iters

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message:
        centroids, indices, iters = self.fit(x, gen)
        codebook = centroids.float()
        err = codebook[indices].double() - x.detach().reshape(-1).double()
        info = {"mean_bias": float(err.mean()) if x.numel() else 0.0,
                "mse": float((err**2).mean()) if x.numel() else 0.0, "lloyd_iters": float(iters)}
        return Message(payload=(indices, codebook), shape=x.shape, payload_bits=self.bits * x.numel(),
                       side_bits=self.k * FLOAT_BITS, info=info)

    def decode(self, msg: Message) -> torch.Tensor:
        indices, codebook = msg.payload
        return codebook[indices].view(msg.shape)

    def __repr__(self) -> str:
        tol = "" if self.tol is None else f", tol={self.tol:g}"
        return f"KMeansQuantizer(bits={self.bits}, init={self.init!r}, max_iter={self.max_iter}{tol})"


def weight_quantizer(kind: str, bits: int, **kwargs: object) -> UniformQuantizer | KMeansQuantizer:
    """"uniform" (Eqs. 5-6) or "kmeans" (Algorithm 1) with `bits` bits per value."""
    if kind == "uniform":
        if kwargs:
            raise ValueError(f"the uniform quantizer takes no options, got {sorted(kwargs)}")
        return UniformQuantizer(bits, rounding="nearest")
    if kind == "kmeans":
        return KMeansQuantizer(bits, **kwargs)  # type: ignore[arg-type]
    raise ValueError(f"unknown weight quantizer {kind!r}; choose 'uniform' or 'kmeans'")
