"""MUCSC and B-MUCSC (Cui, Su, Zhou, Pan 2021): unbiased soft clustering of a model update.

MUCSC keeps Z levels r_1 < ... < r_Z with r_1 = min U and r_Z = max U; every element is rounded at
random to one of the two levels around it so that E[U~_m] = U_m (Eq. 6). The expected squared error
is J = sum_m (r_{z+1} - U_m)(U_m - r_z) (Eqs. 7-8); Algorithm 1 tunes the Z - 2 inner levels by
gradient steps on J (Eq. 9) alternated with re-assignment of elements to intervals. A message is Z
float32 levels plus ceil(log2 Z) bits per element (Sec. V-E).

Level search (`levels=`): "descent" (the default) is exact coordinate descent on J, our reading of
Algorithm 1's aim (min J): with its neighbours fixed, J(r_z) is convex and piecewise linear, and its
minimiser is an order statistic of the elements between the neighbours, found in O(1) from prefix sums
of the sorted vector; sweeps repeat until no level moves. J never rises above the uniform start's.
"paper" is Algorithm 1 as printed (5 steps of Eq. 9 with alpha = 1e-3, divided by 10 when a level would
leave the range): since Eq. 9's gradient is a sum over up to d elements, at the paper's d every step
leaves the range until alpha is tiny, and the levels stay where they started (issue 13 finding c).

B-MUCSC clusters only the d0 = ceil(frac * d) largest-magnitude elements (Z = 256 in the paper) and
replaces all others by their mean, one float (the "super cluster"); every kept element also carries
its ceil(log2 d)-bit index (Eq. 17). It is biased per coordinate, unbiased for the sum.

Everything below works on float64 internally; the levels that are sent are float32. Both codecs run on the
tensor's device (levels, rounding, ids), with a generator on that device.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from fedlib.codecs.base import FLOAT_BITS, Message, id_bits
from fedlib.registry import CODECS
from fedlib.validate import count, real

LEVEL_METHODS = ("descent", "paper", "uniform", "optimal")


# ------------------------------------------------------------------------------ the error J and its gradient
def interval_index(levels: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """phi(U_m) - 1: the 0-based interval z with levels[z] <= x <= levels[z+1] (batched over leading dims)."""
    z = torch.searchsorted(levels.contiguous(), x.contiguous(), right=True) - 1
    return z.clamp_(0, levels.shape[-1] - 2)


def element_error(levels: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """J_m = (r_{z+1} - U_m)(U_m - r_z), Eq. (7): the variance of the stochastic rounding of each element."""
    z = interval_index(levels, x)
    lo, hi = levels.gather(-1, z), levels.gather(-1, z + 1)
    return (hi - x) * (x - lo)


def compression_error(levels: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """J = E||U~ - U||^2, Eq. (8), summed over the last dimension."""
    return element_error(levels.double(), x.double()).sum(-1)


def _interval_sums(levels: torch.Tensor, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """|L_z| and sum_{m in L_z} U_m for the Z - 1 intervals (1-D, float64)."""
    z = interval_index(levels, x)
    n = torch.bincount(z, minlength=levels.numel() - 1).double()
    s = torch.bincount(z, weights=x, minlength=levels.numel() - 1)
    return n, s


def _error_from_sums(levels: torch.Tensor, n: torch.Tensor, s: torch.Tensor, sq: float) -> float:
    """J = sum_z [(r_z + r_{z+1}) S_z - n_z r_z r_{z+1}] - sum_m U_m^2 (the expanded Eq. 8)."""
    lo, hi = levels[:-1], levels[1:]
    return float(((lo + hi) * s - n * lo * hi).sum()) - sq


def error_gradient(levels: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """dJ/dr_z for the inner levels z = 2..Z-1 with the partition held fixed, Eq. (9)."""
    n, s = _interval_sums(levels.double(), x.double())
    return _gradient_from_sums(levels.double(), n, s)


def _gradient_from_sums(levels: torch.Tensor, n: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    above = s - n * levels[:-1]  # A_z = sum_{L_z} (U_m - r_z)
    below = n * levels[1:] - s  # B_z = sum_{L_z} (r_{z+1} - U_m)
    return above[:-1] - below[1:]


# ------------------------------------------------------------------------------ choosing the levels
def uniform_levels(x: torch.Tensor, num_levels: int) -> torch.Tensor:
    """Z equally spaced levels from min to max (the initialisation bound (32) assumes)."""
    x = x.double()
    return torch.linspace(float(x.min()), float(x.max()), num_levels, dtype=torch.float64, device=x.device)


def paper_levels(
    x: torch.Tensor,
    num_levels: int,
    *,
    iters: int = 5,
    alpha: float = 1e-3,
    init: str = "uniform",
    sweep: str = "jacobi",
    keep_best: bool = True,
    gen: torch.Generator | None = None,
) -> tuple[torch.Tensor, dict[str, float]]:
    """Algorithm 1: `iters` gradient steps (Eq. 9) on the inner levels, each followed by re-assignment.

    alpha is divided by 10 whenever a new inner level would leave [min U, max U] (Sec. VI-A3); we retry
    the step with the smaller alpha. init="random" is the algorithm's text, "uniform" its appendix
    (needed for bound (32)). sweep="jacobi" takes all gradients at the old levels, "gauss_seidel" uses
    the already-updated lower neighbour. keep_best returns the iterate with the smallest J seen (the
    init included), so J never exceeds the init's; keep_best=False returns the last iterate.
    Returns float64 levels and {"J_init", "J", "alpha"}.
    """
    if init not in ("uniform", "random"):
        raise ValueError(f"init must be 'uniform' or 'random', got {init!r}")
    if sweep not in ("jacobi", "gauss_seidel"):
        raise ValueError(f"sweep must be 'jacobi' or 'gauss_seidel', got {sweep!r}")
    x = x.double()
    levels = uniform_levels(x, num_levels)
    lo, hi = float(levels[0]), float(levels[-1])
    if init == "random" and num_levels > 2:
        inner = lo + (hi - lo) * torch.rand(num_levels - 2, generator=gen, dtype=torch.float64, device=x.device)
        levels[1:-1] = inner.sort().values
    sq = float((x * x).sum())
    n, s = _interval_sums(levels, x)
    j_init = _error_from_sums(levels, n, s, sq)
    best, best_j, j = levels, j_init, j_init
    for _ in range(iters if num_levels > 2 and hi > lo else 0):
        for _retry in range(64):
            new = _gradient_step(levels, n, s, alpha, sweep)
            if bool(((new[1:-1] >= lo) & (new[1:-1] <= hi)).all()):
                break
            alpha /= 10
        else:  # the gradient is so large that even alpha * 1e-64 leaves the range: stop moving
            break
        levels = new.sort().values
        n, s = _interval_sums(levels, x)
        j = _error_from_sums(levels, n, s, sq)
        if j < best_j:
            best, best_j = levels, j
    if not keep_best:
        best, best_j = levels, j
    return best, {"J_init": j_init, "J": best_j, "alpha": alpha}


def _gradient_step(levels: torch.Tensor, n: torch.Tensor, s: torch.Tensor, alpha: float, sweep: str) -> torch.Tensor:
    new = levels.clone()
    if sweep == "jacobi":
        new[1:-1] -= alpha * _gradient_from_sums(levels, n, s)
        return new
    for z in range(1, levels.numel() - 1):  # r_z - alpha * (A_{z-1}(new r_{z-1}) - B_z(r_{z+1}))
        grad = (s[z - 1] - n[z - 1] * new[z - 1]) - (n[z] * levels[z + 1] - s[z])
        new[z] = levels[z] - alpha * grad
    return new


def descent_levels(x: torch.Tensor, num_levels: int, *, sweeps: int = 100) -> tuple[torch.Tensor, dict[str, float]]:
    """Exact coordinate descent on J from uniform levels, each inner level moved to its exact minimiser.

    With r_{z-1} = a and r_{z+1} = b fixed, the slope of J(r_z) just right of the k-th sorted element v_k
    strictly inside (a, b) is S - (b - a) * #{elements inside above v_k}, S = sum_inside (v - a): it rises by
    b - a per element, so the minimiser is v_k with m = floor(S / (b - a)) elements above it. A sweep updates
    z = 2..Z-1 in order (Gauss-Seidel); sweeps stop when no level moves (or after `sweeps`). Every update
    lowers J or keeps it, so J <= J(uniform). Returns float64 levels and {"J_init", "J", "sweeps"}.
    The sort runs on x's device; the sequential search over the Z levels runs on the host (one copy of the
    sorted vector: a few hundred scalar steps would each synchronise with a GPU).
    """
    v = x.double().reshape(-1).sort().values.cpu().numpy()
    prefix = np.concatenate([[0.0], np.cumsum(v)])
    levels = uniform_levels(x, num_levels).cpu().numpy()
    j_init = _sorted_error(levels, v, prefix)
    done = 0
    while done < sweeps and num_levels > 2 and levels[-1] > levels[0]:
        done += 1
        moved = False
        for z in range(1, num_levels - 1):
            a, b = levels[z - 1], levels[z + 1]
            lo, hi = int(np.searchsorted(v, a, "right")), int(np.searchsorted(v, b, "left"))
            if hi <= lo:  # no element strictly between the neighbours: J does not depend on r_z
                continue
            inside = (prefix[hi] - prefix[lo]) - a * (hi - lo)
            above = min(int(inside // (b - a)), hi - lo - 1)
            best = v[hi - 1 - above]
            moved |= bool(best != levels[z])
            levels[z] = best
        if not moved:
            break
    j = _sorted_error(levels, v, prefix)
    return torch.from_numpy(levels).to(x.device), {"J_init": j_init, "J": j, "sweeps": done}


def _sorted_error(levels: np.ndarray, v: np.ndarray, prefix: np.ndarray) -> float:
    """J (Eq. 8) from the sorted vector's prefix sums: sum over intervals of (r_z + r_{z+1}) S_z - n_z r_z r_{z+1} - sum U^2
    (elements on a level contribute 0 to either interval they may be counted in)."""
    cut = np.searchsorted(v, levels, "left")
    cut[-1] = v.size
    n, s = np.diff(cut).astype(np.float64), np.diff(prefix[cut])
    sq = np.diff(np.concatenate([[0.0], np.cumsum(v * v)])[cut])
    lo, hi = levels[:-1], levels[1:]
    return float(((lo + hi) * s - n * lo * hi - sq).sum())


def optimal_levels(x: torch.Tensor, num_levels: int, max_distinct: int = 5000) -> tuple[torch.Tensor, float]:
    """The exact minimiser of J with r_1 = min, r_Z = max: a dynamic programme over the sorted values.

    A global optimum has every level at a data value (spec F7), so with the distinct values v_1 < ... < v_n
    (multiplicities c_k), best_z(j) = min_{i<j} best_{z-1}(i) + cost(i, j) with
    cost(i, j) = sum_{i<k<j} c_k (v_j - v_k)(v_k - v_i) from prefix sums. O(Z n^2) time, O(n^2) memory:
    a reference for small vectors only. Returns float64 levels and the optimal J.
    """
    values, counts = np.unique(x.double().cpu().numpy(), return_counts=True)
    n = values.size
    if n > max_distinct:
        raise ValueError(f"optimal_levels is O(Z n^2): {n} distinct values > max_distinct={max_distinct}; "
                         "subsample the vector or raise max_distinct")
    if n <= num_levels:  # every value can be a level: J = 0
        padded = np.concatenate([values, np.full(num_levels - n, values[-1])])
        return torch.from_numpy(padded).to(x.device), 0.0
    lo, scale = values[0], values[-1] - values[0]
    v = (values - lo) / scale  # J is invariant to shifts and scales by scale^2; [0, 1] keeps the sums tame
    s0, s1, s2 = (np.concatenate([[0.0], np.cumsum(counts * v**p)]) for p in (0, 1, 2))
    i, j = np.arange(n)[:, None], np.arange(n)[None, :]
    jm = np.maximum(j, i + 1)  # prefix index of v_{j-1}: sum over i < k < j is S[j] - S[i+1]
    inner = lambda s: s[jm] - s[i + 1]  # noqa: E731
    cost = -inner(s2) + (v[:, None] + v[None, :]) * inner(s1) - inner(s0) * v[:, None] * v[None, :]
    cost = np.where(j > i, np.maximum(cost, 0.0), np.inf)
    best = np.full(n, np.inf)
    best[0] = 0.0
    parents = []
    for _ in range(num_levels - 1):
        total = best[:, None] + cost
        parents.append(total.argmin(axis=0))
        best = total.min(axis=0)
    path = [n - 1]
    for parent in reversed(parents):
        path.append(int(parent[path[-1]]))
    levels = torch.from_numpy(values[path[::-1]].copy()).to(x.device)
    return levels, float(best[-1]) * scale**2


# ------------------------------------------------------------------------------ stochastic assignment
def stochastic_round(levels: torch.Tensor, x: torch.Tensor, gen: torch.Generator | None = None) -> torch.Tensor:
    """Eq. (6): the index of the level each element is rounded to (lower or upper, unbiased).

    Batched over leading dimensions; an element exactly on a level, or in a zero-width interval, is
    rounded deterministically.
    """
    z = interval_index(levels, x)
    lo, hi = levels.gather(-1, z), levels.gather(-1, z + 1)
    width = hi - lo
    p_up = torch.where(width > 0, (x - lo) / torch.where(width > 0, width, 1), 0)
    u = torch.rand(x.shape, generator=gen, dtype=p_up.dtype, device=x.device)
    return z + (u < p_up)


def _id_dtype(num_levels: int) -> torch.dtype:
    return torch.uint8 if num_levels <= 256 else torch.int32


def pack_ids(ids: torch.Tensor, bits: int) -> np.ndarray:
    """Bit-pack integer ids at `bits` bits each (little-endian bit order); ceil(bits * d / 8) bytes."""
    values = ids.to(torch.int64).cpu().numpy()
    matrix = ((values[:, None] >> np.arange(bits)) & 1).astype(np.uint8)
    return np.packbits(matrix.reshape(-1), bitorder="little")


def unpack_ids(packed: np.ndarray, bits: int, count: int) -> torch.Tensor:
    """Inverse of pack_ids."""
    matrix = np.unpackbits(packed, count=count * bits, bitorder="little").reshape(count, bits).astype(np.int64)
    return torch.from_numpy((matrix << np.arange(bits)).sum(axis=1))


# ------------------------------------------------------------------------------ codecs
def mucsc_bits(d: int, num_levels: int) -> int:
    """Bits of one MUCSC message: Z float32 levels + ceil(log2 Z) bits per element (Sec. V-E, h = 4)."""
    return FLOAT_BITS * num_levels + id_bits(num_levels) * d


def bmucsc_kept(d: int, frac: float) -> int:
    """d0 = ceil(frac * d) (the paper says 0.01 d; the rounding is ours), at least 1 and at most d."""
    return min(d, max(1, math.ceil(frac * d)))


def bmucsc_bits(d: int, num_levels: int, frac: float) -> int:
    """Eq. (17) in bits: d0 (ceil(log2 Z) + ceil(log2 d)) + Z float32 levels + 1 float32 super-cluster mean."""
    return bmucsc_kept(d, frac) * (id_bits(num_levels) + id_bits(d)) + FLOAT_BITS * (num_levels + 1)


@CODECS.register("mucsc", examples=({"num_levels": 4}, {"num_levels": 16}, {"num_levels": 8, "levels": "uniform"},
                                   {"num_levels": 8, "levels": "paper"}))
class MUCSC:
    """The MUCSC codec. levels: "descent" (exact coordinate descent on J), "paper" (Algorithm 1 as printed),
    "uniform" (no tuning) or "optimal" (exact DP, small d)."""

    def __init__(self, num_levels: int = 16, *, levels: str = "descent", iters: int = 5, alpha: float = 1e-3,
                 init: str = "uniform", sweep: str = "jacobi", keep_best: bool = True) -> None:
        num_levels = count("MUCSC num_levels (at least 2: min and max)", num_levels, low=2)
        if levels not in LEVEL_METHODS:
            raise ValueError(f"levels must be one of {LEVEL_METHODS}, got {levels!r}")
        iters, alpha = count("iters", iters, low=0), real("alpha", alpha, low=0, low_inclusive=False)
        self.num_levels, self.levels, self.iters, self.alpha = num_levels, levels, iters, alpha
        self.init, self.sweep, self.keep_best = init, sweep, keep_best
        self.name = f"mucsc{num_levels}" + ("" if levels == "descent" else f"-{levels}")

    unbiased = True
    deterministic = False
    device_generic = True

    def fit_levels(self, x: torch.Tensor, gen: torch.Generator | None = None) -> tuple[torch.Tensor, dict[str, float]]:
        """The Z levels this codec sends for x (float32) and diagnostics (J of the float64 levels)."""
        if self.levels == "descent":
            levels, info = descent_levels(x, self.num_levels)
        elif self.levels == "paper":
            levels, info = paper_levels(x, self.num_levels, iters=self.iters, alpha=self.alpha, init=self.init,
                                        sweep=self.sweep, keep_best=self.keep_best, gen=gen)
        elif self.levels == "uniform":
            levels = uniform_levels(x, self.num_levels)
            j = float(compression_error(levels, x))
            info = {"J_init": j, "J": j}
        else:
            levels, j = optimal_levels(x, self.num_levels)
            info = {"J_init": float(compression_error(uniform_levels(x, self.num_levels), x)), "J": j}
        return levels.to(x.dtype), info

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message:
        flat = x.detach().reshape(-1)
        levels, info = self.fit_levels(flat, gen)
        ids = stochastic_round(levels, flat, gen).to(_id_dtype(self.num_levels))
        return Message(payload=(levels, ids), shape=x.shape, payload_bits=id_bits(self.num_levels) * flat.numel(),
                       side_bits=FLOAT_BITS * self.num_levels, info={**info, "bits_per_value": id_bits(self.num_levels)})

    def decode(self, msg: Message) -> torch.Tensor:
        levels, ids = msg.payload
        return levels[ids.long()].reshape(msg.shape)

    def pack(self, msg: Message) -> bytes:
        """The message as bytes: Z float32 levels, then the bit-packed ids (its size is msg.bits, rounded up)."""
        levels, ids = msg.payload
        return levels.float().cpu().numpy().tobytes() + pack_ids(ids, id_bits(self.num_levels)).tobytes()

    def __repr__(self) -> str:
        return f"MUCSC({self.num_levels}, levels={self.levels!r}, iters={self.iters}, init={self.init!r})"


@CODECS.register("bmucsc", examples=({"num_levels": 16, "frac": 0.1}, {}))
class BMUCSC:
    """B-MUCSC: MUCSC (Z levels) on the top `frac` of |U|, the rest sent as their mean (one float)."""

    def __init__(self, num_levels: int = 256, frac: float = 0.01, **mucsc_kwargs: object) -> None:
        frac = real("frac", frac, low=0, low_inclusive=False, high=1, high_inclusive=True)
        self.inner = MUCSC(num_levels, **mucsc_kwargs)  # type: ignore[arg-type]
        self.num_levels, self.frac = num_levels, frac
        self.name = f"bmucsc{num_levels}"

    unbiased = False  # per coordinate; the sum is unbiased
    deterministic = False
    device_generic = True

    def encode(self, x: torch.Tensor, gen: torch.Generator | None = None) -> Message:
        flat = x.detach().reshape(-1)
        d = flat.numel()
        kept = bmucsc_kept(d, self.frac)
        index = torch.topk(flat.abs(), kept, sorted=False).indices
        values = flat[index]
        rest = d - kept
        mean_rest = (float(flat.double().sum()) - float(values.double().sum())) / rest if rest else 0.0
        levels, info = self.inner.fit_levels(values, gen)
        ids = stochastic_round(levels, values, gen).to(_id_dtype(self.num_levels))
        payload = (index.to(torch.int32), levels, ids, torch.tensor(mean_rest, dtype=x.dtype, device=x.device))
        return Message(payload=payload, shape=x.shape, payload_bits=kept * (id_bits(self.num_levels) + id_bits(d)),
                       side_bits=FLOAT_BITS * (self.num_levels + 1), info={**info, "kept": kept, "mean_rest": mean_rest})

    def decode(self, msg: Message) -> torch.Tensor:
        index, levels, ids, mean_rest = msg.payload
        out = mean_rest.expand(math.prod(msg.shape)).clone()
        out[index.long()] = levels[ids.long()]
        return out.reshape(msg.shape)

    def __repr__(self) -> str:
        return f"BMUCSC({self.num_levels}, frac={self.frac})"
