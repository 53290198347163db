"""Encoding speed of MUCSC at the paper's model size: one encode of a 1,369,738-element update vs one torch.sort.

Target (issue 6): MUCSC's encode <= 5x one sort of the same vector. Measured here, never asserted in tests.
Run: `python benchmarks/bench_mucsc.py [--threads 1] [--repeats 5] [--size 1369738] [--smoke]`; `--smoke` encodes a
10,000-element vector once (a check that the script runs, not a measurement).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
import torch

from fedlib.codecs import BMUCSC, MUCSC, STC, TopK
from fedlib.papers.mucsc import D_CIFAR


def median_time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--size", type=int, default=D_CIFAR, help="the update's length (default: ALL-CNN-C's)")
    parser.add_argument("--smoke", action="store_true", help="one encode of a 10,000-element vector")
    args = parser.parse_args()
    if args.smoke:
        args.repeats, args.size = 1, 10_000
    if args.size < 1 or args.repeats < 1:
        parser.error("--size and --repeats must be positive")
    torch.set_num_threads(args.threads)
    # a heavy-tailed update (default: ALL-CNN-C's size, d = 1,369,738), magnitudes ~1e-3 like a round of SGD
    x = torch.from_numpy(np.random.default_rng(0).laplace(0.0, 1e-3, args.size)).float()
    gen = torch.Generator().manual_seed(0)
    sort_s = median_time(lambda: torch.sort(x), args.repeats)
    print(f"d = {args.size:,}, threads = {args.threads}, median of {args.repeats}")
    print(f"{'torch.sort':<28}{sort_s * 1e3:9.1f} ms   1.00x sort")
    for name, codec in [("MUCSC Z=16 (Alg. 1, 5 it.)", MUCSC(16)), ("MUCSC Z=4", MUCSC(4)),
                        ("B-MUCSC Z=256, 1%", BMUCSC(256, 0.01)), ("DGC top-1%", TopK(0.01)), ("STC 3%", STC(0.03))]:
        s = median_time(lambda: codec.encode(x, gen), args.repeats)
        target = "  (target <= 5x: " + ("met" if s <= 5 * sort_s else "MISSED") + ")" if name.startswith("MUCSC Z=16") else ""
        print(f"{name:<28}{s * 1e3:9.1f} ms {s / sort_s:6.2f}x sort{target}")


if __name__ == "__main__":
    main()
