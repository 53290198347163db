"""`make bench`, part 2: what a user pays for a whole run, each variant in a fresh Python process.

The warmed per-round figures of bench_round.py hide one-time costs (imports, the batched path's first
call compiling/importing torch._dynamo, allocator warm-up). Here every repetition starts a new process
that imports torch and fedlib, loads the workload's data and trains once:
  fedlib default   run_federation with executor/threads "auto" (what a user gets)
  fedlib vmap      the batched executor, 1 thread (what "auto" picked on CPUs before this measurement)
  tight loop       a hand-written single-process loop: tensors in memory, a per-client permutation,
                   autograd.grad and an in-place SGD step, the model's own thread count
  floor            centralized SGD on the union of the clients' data, same steps and batch size
Printed: the median training time (inside the process, from model creation to the final evaluation)
and the median whole-process wall time, as ratios to the tight loop (MLP) and to the floor (CNN), all
from one run of this script with the variants interleaved.

    python benchmarks/bench_cold.py [--reps 5] [--workloads mlp cnn] [--smoke]
`--smoke` runs each variant once, in one fresh process each, for one round of the MLP workload (unless
--workloads names others): a check that the script runs, not a measurement.
"""
from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import time
from pathlib import Path

VARIANTS = ("fedlib default", "fedlib vmap", "tight loop", "floor")
REFERENCE = {"mlp": "tight loop", "cnn": "floor"}


def one_run(variant: str, workload: str, is_smoke: bool) -> dict[str, float]:
    """Runs in the child process: set up the workload, train once, report the training time."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    from bench_round import WORKLOADS, run_fedlib, run_floor, setup, smoke
    from fedlib.engine.federation import choose_threads, torch_threads

    w = next(x for x in WORKLOADS if x.name == workload)
    w = smoke(w) if is_smoke else w
    data, steps = setup(w)
    threads = choose_threads(w.model(data.dataset.input_shape))
    if variant == "fedlib default":
        return {"train_s": run_fedlib(w, data, "auto", "auto")}
    if variant == "fedlib vmap":
        return {"train_s": run_fedlib(w, data, "vmap", 1)}
    if variant == "floor":
        return {"train_s": run_floor(w, data, steps, threads)}
    ds = data.dataset
    torch.manual_seed(0)
    rng = np.random.default_rng(0)
    with torch_threads(threads):
        start = time.perf_counter()
        model = w.model(ds.input_shape)
        params = list(model.parameters())
        global_w = [p.detach().clone() for p in params]
        for _ in range(w.rounds):
            acc, total = [torch.zeros_like(g) for g in global_w], 0
            for idx in data.client_indices:
                with torch.no_grad():
                    for p, g in zip(params, global_w):
                        p.copy_(g)
                xs, ys = ds.x_train[idx], ds.y_train[idx]
                for _ in range(w.epochs):
                    perm = torch.from_numpy(rng.permutation(len(idx)))
                    for i in range(0, len(idx), w.batch_size):
                        b = perm[i:i + w.batch_size]
                        grads = torch.autograd.grad(F.cross_entropy(model(xs[b]), ys[b]), params)
                        with torch.no_grad():
                            torch._foreach_add_(params, grads, alpha=-w.lr)
                with torch.no_grad():
                    torch._foreach_add_(acc, [p.detach() for p in params], alpha=float(len(idx)))
                total += len(idx)
            global_w = [a / total for a in acc]
        with torch.inference_mode():
            model.eval()
            model(ds.x_test).argmax(1)
        return {"train_s": time.perf_counter() - start}


def fresh(variant: str, workload: str, is_smoke: bool) -> dict[str, float]:
    start = time.perf_counter()
    out = subprocess.run([sys.executable, __file__, "--one", variant, "--workloads", workload,
                          *(["--smoke"] if is_smoke else [])],
                         capture_output=True, text=True, check=True, cwd=Path(__file__).parent)
    return {**json.loads(out.stdout.strip().splitlines()[-1]), "process_s": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--workloads", nargs="*", default=None, help="default: mlp cnn (--smoke: mlp)")
    parser.add_argument("--smoke", action="store_true", help="one repetition of one round, the MLP workload only")
    parser.add_argument("--one", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.workloads is None:
        args.workloads = ["mlp"] if args.smoke else ["mlp", "cnn"]
    if args.smoke:
        args.reps = 1
    if args.one:
        sys.path.insert(0, str(Path(__file__).parent))
        print(json.dumps(one_run(args.one, args.workloads[0], args.smoke)))
        return
    print(f"whole runs in fresh processes, median of {args.reps} interleaved, shuffled repetitions\n")
    for workload in args.workloads:
        times: dict[str, list[dict[str, float]]] = {v: [] for v in VARIANTS}
        order = list(VARIANTS)
        for rep in range(args.reps):
            random.Random(rep).shuffle(order)
            for variant in order:
                times[variant].append(fresh(variant, workload, args.smoke))
        med = {v: {k: statistics.median(r[k] for r in runs) for k in ("train_s", "process_s")} for v, runs in times.items()}
        ref = REFERENCE[workload]
        print(f"== {workload}: ratios to the {ref}")
        print(f"{'variant':16s} {'train s':>8s} {'x ' + ref:>14s} {'process s':>10s} {'x ' + ref:>14s}")
        for v, m in med.items():
            print(f"{v:16s} {m['train_s']:8.2f} {m['train_s'] / med[ref]['train_s']:14.2f} {m['process_s']:10.2f} "
                  f"{m['process_s'] / med[ref]['process_s']:14.2f}")
        print()


if __name__ == "__main__":
    main()
