"""A profile's compute time estimated from one timed run per kind of run, without running the whole profile.

A notebook's runs are grouped by what sets their cost per local SGD step: dataset, model, algorithm, codecs
(`fedlib.grids.combination`), hooks and loop options. The first run of each group is executed in this process into
a temporary run store, exactly as `make reproduce` executes it (`fedlib.runs.execute`), and prints its wall and CPU
seconds; the group's time is its local SGD steps at that run's seconds per step. The first timed run also pays the
process's one-time costs (imports, keying), as `make reproduce` does once.
The load average is printed beside every run: on a shared machine the wall time follows the other jobs, and a
run that leaves torch two threads (a convolutional model with threads "auto") can slow several-fold while another
process holds a core (OpenMP threads spin waiting for each other; `OMP_WAIT_POLICY=PASSIVE` in the environment
makes them sleep instead: compare both).

    python benchmarks/bench_profile.py [--profile cpu] [--only fedaq taco] [--smoke]
`--smoke` times one round of the first run of the quick profile's quickstart notebook (or of each notebook --only
names): a check that the script runs, not an estimate.
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
from collections.abc import Hashable
from pathlib import Path

from fedlib.dryrun import notebook_names
from fedlib.grids import client_steps, combination, notebook_parameters, notebook_specs
from fedlib.runs.build import build_run
from fedlib.runs.execute import execute
from fedlib.runs.spec import RunSpec
from fedlib.runs.fingerprint import Keys
from fedlib.runs.store import RunStore

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"


def cost_group(spec: RunSpec) -> Hashable:
    """What sets a run's cost per local SGD step: its combination, hooks and loop options."""
    return combination(spec), tuple(hook.name for hook in spec.hooks), spec.loop


def groups(specs: list[RunSpec]) -> dict[Hashable, list[int]]:
    """The indices of `specs` by cost group, groups in the order of their first run."""
    out: dict[Hashable, list[int]] = {}
    for i, spec in enumerate(specs):
        out.setdefault(cost_group(spec), []).append(i)
    return out


def load() -> str:
    return Path("/proc/loadavg").read_text().split()[0] if Path("/proc/loadavg").is_file() else "?"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu")
    parser.add_argument("--only", nargs="+", action="extend",
                        help="notebooks: --only a b, or --only a --only b (default: every notebook)")
    parser.add_argument("--smoke", action="store_true", help="one round of one run of the quick profile's quickstart")
    args = parser.parse_args()
    if args.smoke:
        args.profile, args.only = "quick", args.only or ["quickstart"]
    names = list(dict.fromkeys(args.only)) if args.only else notebook_names(NOTEBOOKS)
    print(f"profile {args.profile}, {os.cpu_count()} CPU cores, OMP_WAIT_POLICY="
          f"{os.environ.get('OMP_WAIT_POLICY', '(unset)')}", flush=True)
    runs, timed, total_wall, total_cpu = 0, 0, 0.0, 0.0
    with tempfile.TemporaryDirectory() as folder:
        store, keys = RunStore(folder), Keys()
        for name in names:
            specs = notebook_specs(name, notebook_parameters(name, args.profile))
            specs = [specs[0].with_(rounds=1)] if args.smoke else specs
            steps = [client_steps(spec, build_run(spec)) for spec in specs]
            by_cost, wall_total, cpu_total = groups(specs), 0.0, 0.0
            for members in by_cost.values():
                spec, at = specs[members[0]], load()
                wall, cpu = time.perf_counter(), time.process_time()
                execute(keys(spec), store)  # keyed inside the timing, as execute keyed it before
                wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
                scale = sum(steps[i] for i in members) / steps[members[0]]
                wall_total, cpu_total = wall_total + wall * scale, cpu_total + cpu * scale
                print(f"  {name} run {members[0]}: {spec.dataset}/{spec.model.name} {spec.algorithm.name} "
                      f"{spec.uplink.name}/{spec.downlink.name}, {spec.rounds} rounds, {steps[members[0]]:,} steps: "
                      f"{wall:.2f} s wall, {cpu:.2f} s CPU (load {at}); its group: {len(members)} runs, "
                      f"{scale * wall / 60:.2f} min", flush=True)
            runs, timed = runs + len(specs), timed + len(by_cost)
            total_wall, total_cpu = total_wall + wall_total, total_cpu + cpu_total
            print(f"{name}: {len(specs)} runs, {sum(steps):,} local SGD steps, {len(by_cost)} timed: estimated "
                  f"{wall_total / 60:.1f} min wall ({cpu_total / 60:.1f} min CPU)", flush=True)
    print(f"all: {runs} runs, {timed} timed: estimated {total_wall / 60:.1f} min wall ({total_cpu / 60:.1f} min CPU), "
          "compute only (no installation, no rendering)")


if __name__ == "__main__":
    main()
