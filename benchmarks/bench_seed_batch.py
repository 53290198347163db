"""Client-steps/s of a cell's seeds trained alone (one run after another) vs in one batch (`fedlib.engine.seed_batch`),
at each profile's scales.

For each profile and notebook, the first run of each model the notebook's grid trains, with `--seeds` seeds (a
cell: runs that differ only by seed), built from the profile as `make reproduce` builds it: on the profile's data
where it is bundled, on fabricated files of the real shapes and sizes otherwise (`fedlib.data.fabricate.fabricate_for`:
Fashion-MNIST and the other file-based sets). Each cell runs `--rounds` rounds twice with `executor` "auto" (a run
that asks for the sequential loop is measured as the others): each seed alone with the executor it gets alone (the
sequential loop on a CPU, the batched or captured step on a GPU), then all its seeds in one batch. The rate is the
client-steps of the rounds after the first (a warm-up) over their training time (the records' `train_s`). Cells
the batched step cannot run (an algorithm or model it does not take, seeds with other learning rates) are left
out. `rule` says whether `fedlib.engine.seed_batch.batches_seeds` batches the cell as its grid specifies it.

    python benchmarks/bench_seed_batch.py [--profiles quick cpu gpu] [--only fedaq taco] [--rounds 3]
        [--device cpu|cuda] [--seeds 3]
`--smoke` runs the quick profile's quickstart cell for two rounds of two seeds: a check that the script runs, not a
measurement.
"""
from __future__ import annotations

import argparse
import os
import tempfile
from pathlib import Path

import torch

from fedlib.data.fabricate import fabricate_for
from fedlib.dryrun import datasets_of, notebook_names
from fedlib.engine.federation import open_federation, run_federation
from fedlib.engine.seed_batch import batches_seeds, run_seed_batch, what_differs
from fedlib.grids import notebook_parameters, notebook_specs
from fedlib.runs.build import build_run
from fedlib.runs.spec import RunSpec, freeze

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
HEADER = (f"{'profile':8} {'notebook':10} {'model':15} {'algorithm':10} {'seeds':>5} {'steps/round':>11} "
          f"{'alone':>9} {'batched':>9} {'ratio':>6}  rule    alone's executor")


def cells(notebook: str, profile: str, seeds: int) -> list[list[RunSpec]]:
    """The first run of each model in the notebook's grid, with `seeds` seeds from its own on (the quick profile
    runs one seed per cell: its scale is measured with the seeds the other profiles run)."""
    chosen: dict[str, RunSpec] = {}
    for spec in notebook_specs(notebook, notebook_parameters(notebook, profile)):
        chosen.setdefault(spec.model.name, spec)
    return [[spec.with_(seed=spec.seed + i) for i in range(seeds)] for spec in chosen.values()]


def rate(results: list, skip: int = 1) -> float:
    """Client-steps per second of training over the rounds after the first `skip`, summed over `results`."""
    steps = sum(int(r.clients.loc[r.clients["round"] > skip, "steps"].sum()) for r in results)
    seconds = sum(float(r.rounds.loc[r.rounds["round"] > skip, "train_s"].sum()) for r in results)
    return steps / seconds


def measure(cell: list[RunSpec], rounds: int, device: str, root: str | None) -> dict | None:
    """One cell's rates alone and batched, None where the batched step cannot run it."""
    rule_executor = cell[0].get("loop").get("executor", "auto")
    cell = [spec.with_(rounds=rounds, device=device, loop=freeze({**spec.get("loop"), "executor": "auto"}))
            for spec in cell]
    plans = [build_run(spec, root) for spec in cell]
    model, algorithm = plans[0].model_fn(), plans[0].algorithm
    if not batches_seeds(model, algorithm, plans[0].device, "vmap"):
        return None
    alone = [run_federation(p.model_fn, p.data, progress=False, **p.kwargs) for p in plans]
    feds = [open_federation(p.model_fn, p.data, **p.kwargs) for p in [build_run(spec, root) for spec in cell]]
    if what_differs(feds) is not None:
        return None
    batched = run_seed_batch(feds, [None] * len(feds), "auto")
    return {"alone": rate(alone), "batched": rate(batched), "executor": alone[0].config["executor"],
            "steps": int(alone[0].clients.loc[alone[0].clients["round"] == 1, "steps"].sum()),
            "rule": batches_seeds(model, algorithm, plans[0].device, rule_executor)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", nargs="+", default=["quick", "cpu", "gpu"])
    parser.add_argument("--only", nargs="+", help="notebooks (default: every notebook)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per run, the first a warm-up (>= 2)")
    parser.add_argument("--seeds", type=int, default=3, help="seeds per cell")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--smoke", action="store_true", help="the quick profile's quickstart, 2 rounds, 2 seeds")
    args = parser.parse_args()
    if args.smoke:
        args.profiles, args.only, args.rounds, args.seeds = ["quick"], ["quickstart"], 2, 2
    if args.rounds < 2:
        parser.error(f"--rounds must be at least 2 (the first is a warm-up), got {args.rounds}")
    names = args.only or list(notebook_names(NOTEBOOKS))
    device = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {os.cpu_count()} cores"
    print(f"device: {device}; torch {torch.__version__}; {args.rounds} rounds a run, the first a warm-up; "
          "client-steps/s", flush=True)
    print(HEADER, flush=True)
    with tempfile.TemporaryDirectory() as folder:
        for profile in args.profiles:
            bundled = profile in ("quick", "cpu")
            if not bundled:
                fabricate_for(datasets_of(names, profile, NOTEBOOKS), Path(folder))
            for name in names:
                for cell in cells(name, profile, args.seeds):
                    got = measure(cell, args.rounds, args.device, None if bundled else folder)
                    if got is None:
                        continue
                    print(f"{profile:8} {name:10} {cell[0].model.name:15} {cell[0].algorithm.name:10} "
                          f"{len(cell):>5} {got['steps']:>11,} {got['alone']:>9,.0f} {got['batched']:>9,.0f} "
                          f"{got['batched'] / got['alone']:>5.2f}x  {'batch' if got['rule'] else 'alone':7} "
                          f"{got['executor']}", flush=True)


if __name__ == "__main__":
    main()
