"""The positive rate of every verdict rule on pure noise: how often "reproduced" or "partly" is read when there is
nothing to find, with its Monte Carlo standard error and the bound alpha + 3 SE that the claims battery
(tests/test_claims_battery.py) enforces with fewer draws.

    python scripts/noise_battery.py                                  # 2000 draws per row
    python scripts/noise_battery.py --claim-draws 1000 --workers 2   # fewer on the declared claims, two processes

Rows: each rule of `fedlib.report` at the edge of its null at 2, 3, 5 and 8 seeds, FedAQ's energy-to-target rule at
FedAQ's profiles' seed counts, and every declared claim fed noise (`fedlib.claims.noise.noise_cases`) at each of its
paper's profiles' seed counts. A row above the bound is marked ABOVE, and the script exits with status 1. Below a
claim's `min_seeds` the judge's seed guard decides before any rule whatever the noise: such a row is one draw, checked
to read "not testable", and says so.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from concurrent.futures import ProcessPoolExecutor

import numpy as np

from fedlib import report
from fedlib.claims import noise

Row = tuple[str, str, int]  # (kind, name, seeds)


def rows() -> list[Row]:
    """Every (kind, rule or claim, seed count) the table reports."""
    found: list[Row] = [("rule", name, n) for name in noise.NULL_EDGE for n in noise.RULE_SEEDS]
    found += [("rule", noise.FEDAQ_ENERGY, n) for n in noise.profile_seed_counts("fedaq", "seeds")]
    found += [("claim", f"{paper}:{claim.id}", n) for paper, claim in noise.noise_cases()
              for n in noise.profile_seed_counts(paper, claim.reads[0].seeds)]
    return found


def rate(row: Row, draws: int, seed: int) -> tuple[float, int, bool]:
    """The row's positive rate, the draws it was computed from, and whether the seed guard decided it (one draw,
    below a claim's `min_seeds`)."""
    kind, name, n = row
    if kind == "rule":
        rule = noise.NULL_EDGE.get(name) or noise.fedaq_energy
        return noise.positive_rate(lambda rng: rule(rng, n).verdict, draws, seed), draws, False
    paper, claim = next((p, c) for p, c in noise.noise_cases() if f"{p}:{c.id}" == name)
    if n < claim.min_seeds:
        found = noise.declared_verdict(paper, claim, np.random.default_rng(seed), list(range(n)))
        if found != report.NOT_TESTABLE:
            raise RuntimeError(f"{name} at {n} seeds, below its min_seeds {claim.min_seeds}, read {found!r}")
        return 0.0, 1, True
    judged = noise.positive_rate(lambda rng: noise.declared_verdict(paper, claim, rng, list(range(n))), draws, seed)
    return judged, draws, False


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--draws", type=int, default=2000, help="noise draws per row (default 2000)")
    parser.add_argument("--claim-draws", type=int, default=None,
                        help="noise draws per declared-claim row (default: --draws; a judgement there takes ~50 ms)")
    parser.add_argument("--seed", type=int, default=1, help="seed of every row's noise generator (the battery's is 0)")
    parser.add_argument("--workers", type=int, default=1, help="processes computing rows at once (default 1)")
    args = parser.parse_args(argv)
    claim_draws = args.draws if args.claim_draws is None else args.claim_draws
    if min(args.draws, claim_draws, args.workers) < 1:
        parser.error("--draws, --claim-draws and --workers must be >= 1")
    table = rows()
    start = time.perf_counter()
    print(f"$ python scripts/noise_battery.py {' '.join(sys.argv[1:] if argv is None else argv)}".rstrip())
    print(f"machine: {platform.node()}, {platform.machine()}, {os.cpu_count()} CPUs, {platform.python_implementation()} "
          f"{platform.python_version()}; {len(table)} rows, {args.draws} draws per rule row and {claim_draws} per "
          f"declared-claim row, alpha = {noise.ALPHA:g}, noise seed {args.seed}\n")
    print(f"| {'kind':5} | {'rule or claim':36} | seeds | draws | positive rate | MC SE  | alpha + 3 SE | |")
    print("|-------|" + "-" * 38 + "|-------|-------|---------------|--------|--------------|---|")
    above = 0
    with ProcessPoolExecutor(args.workers) as pool:
        draws = [args.draws if kind == "rule" else claim_draws for kind, _, _ in table]
        for (kind, name, n), (r, used, guarded) in zip(table, pool.map(rate, table, draws, [args.seed] * len(table))):
            limit = noise.bound(used)
            note = "seed guard" if guarded else "ABOVE" if r > limit else ""
            above += note == "ABOVE"
            print(f"| {kind:5} | {name:36} | {n:5d} | {used:5d} | {r:13.4f} | {noise.standard_error(r, used):.4f} | "
                  f"{'-' if guarded else f'{limit:.4f}':>12} | {note} |", flush=True)
    print(f"\n{above} of {len(table)} rows above alpha + 3 SE; wall time {time.perf_counter() - start:.0f} s")
    return 1 if above else 0


if __name__ == "__main__":
    sys.exit(main())
