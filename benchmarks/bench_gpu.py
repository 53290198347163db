"""`make bench-gpu`: client-steps/s at the four papers' gpu-profile scales, per executor and per worker count.

Scales (the gpu profiles in notebooks/profiles/<paper>/gpu.yaml; random data of Fashion-MNIST's shape, so that no
file is needed; FedAvg with fp32 links unless named):
  fedshift   CNN2 (32 channels, 512 hidden), 100 clients of 600, 10 a round, 10 epochs, batch 50   (1,200 steps/round)
  fedaq      vanilla CNN, 10 clients of 6,000, all a round, 5 epochs, batch 64                     (4,700)
  taco       TACO CNN, 20 clients of 3,000, all a round, K = 100 steps, batch 64                   (2,000)
  taco+corr  the same with TACO's corrected local direction                                        (2,000)
  mucsc      FEMNIST CNN, 100 clients of 600, 10 a round, 5 steps, batch 8                         (50)
For each scale: client-steps/s of the sequential, batched (vmap) and captured batched (graph) executors in this
process (the median round after a warm-up round) and of `--seeds` runs of it that differ only by seed trained as one
batch (`fedlib.engine.seed_batch`, executor "auto", as a ledger piece trains a cell's seeds: their client-steps
together), then of 1, 2 and 4 worker processes sharing the GPU (`--workers`; none: no such table), each running
the scale with `executor="auto"` (what a piece runs): the client-steps all workers did in their timed rounds over
the wall time from the first worker's start to the last one's end (a barrier starts them together, after each has
done a warm-up round). Ratios come from one run of this script, printed with the device's name.

    python benchmarks/bench_gpu.py [--rounds 2] [--scales fedaq taco] [--seeds 3] [--workers 1 2 4] [--device cuda]
        [--shrink 1]
`--device cpu --shrink 50` runs the same code on a CPU at 1/50 of the clients' data and steps. `--smoke` runs it on a
CPU at two clients of one local step each, one worker (a check that the script runs, not a measurement).
"""
from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from dataclasses import dataclass, replace

import numpy as np
import torch

from fedlib.algorithms import make_algorithm
from fedlib.core.contracts import FederatedData, LocalTraining
from fedlib.data import Dataset
from fedlib.engine.federation import open_federation, run_federation
from fedlib.engine.seed_batch import run_seed_batch
from fedlib.models import build_model

SHAPE = (1, 28, 28)


@dataclass(frozen=True)
class Scale:
    name: str
    model: str
    clients: int
    per_round: int
    samples: int  # per client
    batch_size: int
    epochs: float | None = None
    steps: int | None = None
    lr: float = 0.01
    momentum: float = 0.0
    algorithm: str = "fedavg"
    model_kwargs: tuple[tuple[str, int], ...] = ()


SCALES = [
    Scale("fedshift", "fedshift_cnn2", 100, 10, 600, 50, epochs=10, lr=0.005, momentum=0.9,
          model_kwargs=(("channels", 32), ("hidden", 512))),
    Scale("fedaq", "fedaq_cnn", 10, 10, 6000, 64, epochs=5, momentum=0.5),
    Scale("taco", "taco_cnn", 20, 20, 3000, 64, steps=100),
    Scale("taco+corr", "taco_cnn", 20, 20, 3000, 64, steps=100, algorithm="taco"),
    Scale("mucsc", "femnist_cnn", 100, 10, 600, 8, steps=5, lr=0.1),
]


def shrunk(s: Scale, shrink: int) -> Scale:
    """The scale at 1/`shrink` of its data and local steps (a cheaper run on a CPU)."""
    return replace(s, samples=max(s.batch_size, s.samples // shrink),
                   steps=None if s.steps is None else max(1, s.steps // shrink))


def tiny(s: Scale) -> Scale:
    """The scale at two clients, both in every round, of one batch and one local step each (`--smoke`)."""
    return replace(s, clients=2, per_round=2, samples=s.batch_size, epochs=None if s.epochs is None else 1,
                   steps=None if s.steps is None else 1)


def federation(s: Scale) -> FederatedData:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(s.clients * s.samples, *SHAPE, generator=gen)
    y = torch.randint(0, 10, (s.clients * s.samples,), generator=gen)
    ds = Dataset("random(1, 28, 28)", x, y, x[:2000], y[:2000], num_classes=10)
    return FederatedData(ds, [np.arange(i * s.samples, (i + 1) * s.samples) for i in range(s.clients)])


def options(s: Scale, executor: str, rounds: int, device: str, seed: int = 0) -> dict:
    local = LocalTraining(lr=s.lr, batch_size=s.batch_size, epochs=s.epochs, steps=s.steps, momentum=s.momentum)
    return dict(model_fn=lambda: build_model(s.model, SHAPE, 10, **dict(s.model_kwargs)),
                algorithm=make_algorithm(s.algorithm), rounds=rounds, local=local, sampler=s.per_round,
                eval_every=rounds, executor=executor, device=device, seed=seed)


def run(s: Scale, data: FederatedData, executor: str, rounds: int, device: str):
    return run_federation(data=data, progress=False, **options(s, executor, rounds, device))


def run_seeds(s: Scale, data: FederatedData, seeds: int, rounds: int, device: str):
    """`seeds` runs of the scale that differ only by seed, trained as one batch (`fedlib.engine.seed_batch`, as a piece
    trains a cell's seeds; "auto": captured on a GPU)."""
    feds = [open_federation(data=data, **options(s, "auto", rounds, device, seed)) for seed in range(seeds)]
    return run_seed_batch(feds, [None] * seeds, "auto")


def rate(*results) -> float:
    """Client-steps/s of the median round after the first (the warm-up), over the runs `results` trained together
    (each run's `train_s` is its share of their round)."""
    steps = sum(r.clients.groupby("round")["steps"].sum() for r in results)
    train = sum(r.rounds.set_index("round")["train_s"] for r in results)
    return statistics.median((steps / train).iloc[1:])


def worker(scales: list[Scale], rounds: int, device: str, barrier, results) -> None:
    """One worker process: for each scale, a warm-up round, then (all workers together) a timed run."""
    for s in scales:
        data = federation(s)
        run(s, data, "auto", 1, device)  # warm-up: CUDA context, kernels, the executor's first round
        barrier.wait()
        start = time.time()
        result = run(s, data, "auto", rounds, device)
        results.put((s.name, int(result.clients["steps"].sum()), start, time.time(), result.config["executor"]))


def workers_rates(scales: list[Scale], n: int, rounds: int, device: str) -> dict[str, tuple[float, str]]:
    """Per scale: client-steps/s of `n` spawned processes running it at once, and the executor "auto" chose."""
    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=worker, args=(scales, rounds, device, barrier, results)) for _ in range(n)]
    for p in procs:
        p.start()
    done = [results.get() for _ in range(n * len(scales))]
    for p in procs:
        p.join()
    out = {}
    for s in scales:
        mine = [d for d in done if d[0] == s.name]
        out[s.name] = (sum(d[1] for d in mine) / (max(d[3] for d in mine) - min(d[2] for d in mine)), mine[0][4])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds per measurement, the first a warm-up")
    parser.add_argument("--scales", nargs="*", default=[s.name for s in SCALES])
    parser.add_argument("--seeds", type=int, default=3, help="seeds in one batch for the last column (0: none)")
    parser.add_argument("--workers", nargs="*", type=int, default=[1, 2, 4], help="worker counts (none: no table)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shrink", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="on a CPU, two clients of one step, one worker")
    args = parser.parse_args()
    if args.smoke:
        args.device, args.workers = "cpu", [1]
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: nothing measured (run on a GPU machine, or --smoke on a CPU as a check that it "
              "runs)")
        return
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU"
    sizes = "two clients of one local step (--smoke)" if args.smoke else f"client data and steps / {args.shrink}"
    print(f"device {name}, torch {torch.__version__}; client-steps/s, the median of {args.rounds - 1} timed "
          f"round(s) after a warm-up; {sizes}\n", flush=True)
    scales = [tiny(s) if args.smoke else shrunk(s, args.shrink) for s in SCALES if s.name in args.scales]
    seeds = f"{args.seeds} seeds" if args.seeds else ""
    print(f"{'scale':10s} {'steps/round':>11s} {'sequential':>10s} {'vmap':>8s} {'graph':>8s} {seeds:>8s}",
          flush=True)
    for s in scales:
        data = federation(s)
        cells, steps = [], s.per_round * (s.steps or int(s.epochs * -(-s.samples // s.batch_size)))
        measured = [(executor, width, lambda executor=executor: [run(s, data, executor, args.rounds, args.device)])
                    for executor, width in (("sequential", 10), ("vmap", 8), ("graph", 8))]
        if args.seeds:
            measured.append((seeds, 8, lambda: run_seeds(s, data, args.seeds, args.rounds, args.device)))
        for executor, width, results in measured:
            try:
                cells.append(f"{rate(*results()):{width},.0f}")
            except Exception as err:  # a benchmark reports a failing executor and measures the others
                cells.append(f"{'failed':>{width}s}")
                print(f"{s.name} {executor}: {type(err).__name__}: {err}", flush=True)
        print(f"{s.name:10s} {steps:11,d} " + " ".join(cells), flush=True)
    if not args.workers:
        return
    print(f"\n{'scale':10s}" + "".join(f" {f'{n} worker(s)':>12s}" for n in args.workers) + "  auto", flush=True)
    shared = {n: workers_rates(scales, n, args.rounds, args.device) for n in args.workers}
    for s in scales:
        print(f"{s.name:10s}" + "".join(f" {shared[n][s.name][0]:12,.0f}" for n in args.workers)
              + f"  {shared[args.workers[0]][s.name][1]}", flush=True)

if __name__ == "__main__":
    main()
