"""Both batteries' tables. The noise battery: the positive rate of every verdict rule on pure noise, how often
"reproduced" or "partly" is read when there is nothing to find, with its Monte Carlo standard error and the bound
alpha + 3 SE that the claims battery (tests/test_claims_battery.py) enforces with fewer draws. The decidability
battery: each declared claim fed evidence, at each judging profile's seeds, on a clear effect each way
(tests/test_decidability_battery.py); the claims the batteries cannot feed yet are listed.

    python scripts/noise_battery.py                                  # 2000 draws per row
    python scripts/noise_battery.py --claim-draws 1000 --workers 2   # fewer on the declared claims, two processes

Rows: each rule of `fedlib.report` at the edge of its null at 2, 3, 5 and 8 seeds, each rule a paper declares for
the battery (`Paper.noise_rules`: FedAQ's energy-to-target rule) at its profiles' seed counts, and every declared
claim fed noise (`fedlib.claims.noise.noise_cases`) at each of its paper's profiles' seed counts, on each kind of
noise (`noise.NOISE_KINDS`: the null's edge, targets rarely reached, a noisier arm on a plateau). A row above the bound is marked ABOVE, and the script exits with status 1. Below a
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
    found += [("rule", name, n) for name, (paper, _) in noise.paper_rules().items()
              for n in noise.profile_seed_counts(paper, "seeds")]
    found += [("claim", f"{paper}:{claim.id} {kind}", n) for paper, claim in noise.noise_cases()
              for kind in noise.NOISE_KINDS for n in noise.profile_seed_counts(paper, claim.reads[0].seeds)]
    return found


def rate(row: Row, draws: int, seed: int) -> tuple[float, int, bool]:
    """The row's positive rate, the draws it was computed from, and whether the seed guard decided it (one draw,
    below a claim's `min_seeds`)."""
    kind, name, n = row
    if kind == "rule":
        rule = noise.NULL_EDGE.get(name) or noise.paper_rules()[name][1]
        return noise.positive_rate(lambda rng: rule(rng, n).verdict, draws, seed), draws, False
    paper, claim, kind = next((p, c, k) for p, c in noise.noise_cases() for k in noise.NOISE_KINDS
                              if f"{p}:{c.id} {k}" == name)
    if n < claim.min_seeds:
        found = noise.declared_verdict(paper, claim, np.random.default_rng(seed), list(range(n)), kind)
        if found not in report.NOT_TESTABLE:
            raise RuntimeError(f"{name} at {n} seeds, below its min_seeds {claim.min_seeds}, read {found!r}")
        return 0.0, 1, True
    judged = noise.positive_rate(lambda rng: noise.declared_verdict(paper, claim, rng, list(range(n)), kind), draws,
                                 seed)
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
    print(f"| {'kind':5} | {'rule or claim (noise)':52} | seeds | draws | positive rate | MC SE  | alpha + 3 SE | |")
    print("|-------|" + "-" * 54 + "|-------|-------|---------------|--------|--------------|---|")
    above = 0
    with ProcessPoolExecutor(args.workers) as pool:
        draws = [args.draws if kind == "rule" else claim_draws for kind, _, _ in table]
        for (kind, name, n), (r, used, guarded) in zip(table, pool.map(rate, table, draws, [args.seed] * len(table))):
            limit = noise.bound(used)
            note = "seed guard" if guarded else "ABOVE" if r > limit else ""
            above += note == "ABOVE"
            print(f"| {kind:5} | {name:52} | {n:5d} | {used:5d} | {r:13.4f} | {noise.standard_error(r, used):.4f} | "
                  f"{'-' if guarded else f'{limit:.4f}':>12} | {note} |", flush=True)
    print(f"\n{above} of {len(table)} rows above alpha + 3 SE; wall time {time.perf_counter() - start:.0f} s\n")
    wrong = print_decidability()
    return 1 if above or wrong else 0


def print_decidability() -> int:
    """The decidability battery's table (a clear effect each way, per claim and judging profile); the number of rows
    whose verdict is not the expected one."""
    print(f"Decidability: a clear effect each way at each judging profile's seeds ({QUICK_NOTE})\n")
    print(f"| {'claim':22} | {'profile':7} | seeds | clear effect | clear opposite effect | |")
    print("|" + "-" * 24 + "|---------|-------|--------------|-----------------------|---|")
    wrong = 0
    for paper, claim in noise.noise_cases():
        for profile, n in noise.judging_seed_counts(paper, claim.reads[0].seeds).items():
            found = {e: noise.effect_verdict(paper, claim, e, list(range(n))) for e in (1, -1)}
            want = {e: report.TOO_FEW_SEEDS if n < claim.min_seeds else noise.expected(claim, e) for e in (1, -1)}
            ok = all(found[e] == want[e] or (want[e] == "not positive" and found[e] not in report.POSITIVE)
                     for e in (1, -1))
            wrong += not ok
            print(f"| {paper + ':' + claim.id:22} | {profile:7} | {n:5d} | {found[1]:12} | {found[-1]:21} | "
                  f"{'' if ok else 'WRONG'} |")
    missing = [f"{p}:{c.id}" for p, c in noise.reading() if not noise.fed(c)]
    print(f"\n{wrong} rows not as expected. Not fed by the batteries yet ({len(missing)} of {len(noise.reading())} "
          f"run-reading claims; their rules read tables their notebooks compute): {', '.join(missing)}")
    return wrong


QUICK_NOTE = "not quick: " + noise.QUICK_EXCLUDED


if __name__ == "__main__":
    sys.exit(main())
