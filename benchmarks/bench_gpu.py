"""`make bench-gpu`: client-steps/s at the four papers' gpu-profile scales, per executor and per worker count.

Scales (the gpu profiles in notebooks/profiles/<paper>/gpu.yaml; random data of Fashion-MNIST's shape, so that no
file is needed; FedAvg with fp32 links unless named):
  fedshift   CNN2 (32 channels, 512 hidden), 100 clients of 600, 10 a round, 10 epochs, batch 50   (1,200 steps/round)
  fedaq      vanilla CNN, 10 clients of 6,000, all a round, 5 epochs, batch 64                     (4,700)
  taco       TACO CNN, 20 clients of 3,000, all a round, K = 100 steps, batch 64                   (2,000)
  taco+corr  the same with TACO's corrected local direction                                        (2,000)
  mucsc      FEMNIST CNN, 100 clients of 600, 10 a round, 5 steps, batch 8                         (50)
For each scale: client-steps/s of the `--executors` (sequential, batched (vmap) and captured batched (graph)) in
this process (the median round after a warm-up round) and, for each count N of `--seeds`, of N runs of it that differ
only by seed trained as one batch (`fedlib.engine.seed_batch`, with the executor the scale's gpu profile asks for, as
a ledger piece trains a cell's seeds: their client-steps together; an N above 3 measures what a batch of several
cells' runs would reach, since they share the step), and the TFLOP/s the fastest column computes (the FLOPs of one
client-step, forward and backward, counted by torch's FlopCounterMode). `--modes` then measures the first count's
batch under each setting named (`MODES`: no TF32 at all, TF32 matrix products, cuDNN autotuning, bf16 autocast, and
`gemm-conv`: the models' convolutions as matrix products of unfolded patches, `GemmConv2d`, a candidate for the
batched step, where a convolution vmapped over per-client weights runs as one grouped convolution) against torch's
defaults, which the header prints; no run of the profiles uses them. Then 1, 2 and 4 worker processes sharing the GPU
(`--workers`; none: no such table), each running the scale with `executor="auto"` (what a piece runs): the
client-steps all workers did in their timed rounds over the wall time from the first worker's start to the last
one's end (a barrier starts them together, after each has done a warm-up round). Ratios come from one run of this
script, printed with the device's name.

    python benchmarks/bench_gpu.py [--rounds 2] [--scales fedaq taco] [--executors vmap graph] [--seeds 3 12]
        [--modes no-tf32 autotune] [--workers 1 2 4] [--device cuda] [--shrink 1]
`--device cpu --shrink 50` runs the same code on a CPU at 1/50 of the clients' data and steps. `--smoke` runs it on a
CPU at two clients of one local step each, one worker (a check that the script runs, not a measurement).
"""
from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, replace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.utils.flop_counter import FlopCounterMode

from fedlib.algorithms import make_algorithm
from fedlib.core.contracts import FederatedData, LocalTraining
from fedlib.data import Dataset
from fedlib.engine.federation import open_federation, run_federation
from fedlib.engine.seed_batch import run_seed_batch
from fedlib.models import build_model
from fedlib.runs.fingerprint import numerics

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
    executor: str = "auto"  # the executor the scale's gpu profile asks for (TACO's: graph)


SCALES = [
    Scale("fedshift", "fedshift_cnn2", 100, 10, 600, 50, epochs=10, lr=0.005, momentum=0.9,
          model_kwargs=(("channels", 32), ("hidden", 512))),
    Scale("fedaq", "fedaq_cnn", 10, 10, 6000, 64, epochs=5, momentum=0.5),
    Scale("taco", "taco_cnn", 20, 20, 3000, 64, steps=100, executor="graph"),
    Scale("taco+corr", "taco_cnn", 20, 20, 3000, 64, steps=100, algorithm="taco", executor="graph"),
    Scale("mucsc", "femnist_cnn", 100, 10, 600, 8, steps=5, lr=0.1),
]


# The backend switches a numeric mode sets: (module, attribute).
SWITCHES = {"cudnn TF32": (torch.backends.cudnn, "allow_tf32"),
            "matmul TF32": (torch.backends.cuda.matmul, "allow_tf32"),
            "cudnn autotune": (torch.backends.cudnn, "benchmark")}


@contextmanager
def switched(**values: bool) -> Iterator[None]:
    """torch's backend switches set to `values` (keys: SWITCHES' names, spaces as underscores), restored after."""
    named = {name.replace("_", " "): value for name, value in values.items()}
    saved = {name: getattr(*SWITCHES[name]) for name in named}
    try:
        for name, value in named.items():
            setattr(*SWITCHES[name], value)
        yield
    finally:
        for name, value in saved.items():
            setattr(*SWITCHES[name], value)


# Settings measured against torch's defaults (`--modes`): none is used by a run of the profiles.
MODES: dict[str, Callable[[str], AbstractContextManager]] = {
    "no-tf32": lambda device: switched(cudnn_TF32=False, matmul_TF32=False),  # fp32 arithmetic in every product
    "tf32": lambda device: switched(cudnn_TF32=True, matmul_TF32=True),
    "autotune": lambda device: switched(cudnn_autotune=True),
    # the cast weights are not cached: a captured step must cast them inside its graph every replay
    "bf16": lambda device: torch.autocast(torch.device(device).type, dtype=torch.bfloat16, cache_enabled=False),
    "gemm-conv": lambda device: gemm_convs(),
}


class GemmConv2d(nn.Conv2d):
    """A Conv2d (one group, zero padding) computed as a matrix product of its weight with the input's unfolded
    patches: under `torch.func.vmap` over per-client weights a batched matrix product, where `F.conv2d` becomes a
    grouped convolution. The same parameters, so `functional_call` and a state dict treat it as the Conv2d."""

    def _conv_forward(self, input: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        n, _, h, w = input.shape
        kh, kw = self.kernel_size
        cols = F.unfold(input, self.kernel_size, self.dilation, self.padding, self.stride)  # (n, c*kh*kw, L)
        out = weight.reshape(weight.shape[0], -1) @ cols  # (n, out, L)
        oh = (h + 2 * self.padding[0] - self.dilation[0] * (kh - 1) - 1) // self.stride[0] + 1
        ow = (w + 2 * self.padding[1] - self.dilation[1] * (kw - 1) - 1) // self.stride[1] + 1
        out = out.reshape(n, -1, oh, ow)
        return out if bias is None else out + bias.reshape(1, -1, 1, 1)


def with_gemm_convs(model: nn.Module) -> nn.Module:
    """`model` with each of its Conv2d modules (one group, zero padding) turned into a `GemmConv2d`, in place."""
    for m in model.modules():
        if type(m) is nn.Conv2d and m.groups == 1 and m.padding_mode == "zeros" and isinstance(m.padding, tuple):
            m.__class__ = GemmConv2d
    return model


@contextmanager
def gemm_convs() -> Iterator[None]:
    """Every model `options` builds meanwhile gets `GemmConv2d` convolutions."""
    global BUILD
    BUILD = lambda *args, **kwargs: with_gemm_convs(build_model(*args, **kwargs))  # noqa: E731
    try:
        yield
    finally:
        BUILD = build_model


BUILD = build_model  # how `options` builds a scale's model (`gemm_convs` swaps it)


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
    return dict(model_fn=lambda: BUILD(s.model, SHAPE, 10, **dict(s.model_kwargs)),
                algorithm=make_algorithm(s.algorithm), rounds=rounds, local=local, sampler=s.per_round,
                eval_every=rounds, executor=executor, device=device, seed=seed)


def run(s: Scale, data: FederatedData, executor: str, rounds: int, device: str):
    return run_federation(data=data, progress=False, **options(s, executor, rounds, device))


def run_seeds(s: Scale, data: FederatedData, seeds: int, rounds: int, device: str):
    """`seeds` runs of the scale that differ only by seed, trained as one batch (`fedlib.engine.seed_batch`, as a piece
    trains a cell's seeds, with the scale's executor: "auto" is captured on a GPU but for a corrected direction)."""
    feds = [open_federation(data=data, **options(s, s.executor, rounds, device, seed)) for seed in range(seeds)]
    return run_seed_batch(feds, [None] * seeds, s.executor)


def rate(*results) -> float:
    """Client-steps/s of the median round after the first (the warm-up), over the runs `results` trained together
    (each run's `train_s` is its share of their round)."""
    steps = sum(r.clients.groupby("round")["steps"].sum() for r in results)
    train = sum(r.rounds.set_index("round")["train_s"] for r in results)
    return statistics.median((steps / train).iloc[1:])


def steps_per_round(s: Scale) -> int:
    return s.per_round * (s.steps or int(s.epochs * -(-s.samples // s.batch_size)))


def flops_per_step(s: Scale) -> int:
    """FLOPs of one client-step of the scale's model on a batch, forward and backward (torch's FlopCounterMode)."""
    model = build_model(s.model, SHAPE, 10, **dict(s.model_kwargs))
    x, y = torch.randn(s.batch_size, *SHAPE), torch.randint(0, 10, (s.batch_size,))
    with FlopCounterMode(display=False) as counted:
        F.cross_entropy(model(x), y).backward()
    return counted.get_total_flops()


def measure(s: Scale, name: str, results: Callable[[], list]) -> float | None:
    """The rate of the runs `results()` trains; None (and why, printed) if they fail: a benchmark reports a failing
    executor or setting and measures the others."""
    try:
        return rate(*results())
    except Exception as err:
        print(f"{s.name} {name}: {type(err).__name__}: {err}", flush=True)
        return None


def cell(value: float | None, width: int) -> str:
    return f"{'failed':>{width}s}" if value is None else f"{value:{width},.0f}"


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
    parser.add_argument("--executors", nargs="*", default=["sequential", "vmap", "graph"],
                        choices=["sequential", "vmap", "graph"], help="the executors measured on one run alone")
    parser.add_argument("--seeds", type=int, nargs="*", default=[3],
                        help="runs in one batch: a column per count (none: no such column)")
    parser.add_argument("--modes", nargs="*", default=[], choices=sorted(MODES),
                        help="settings measured on the first --seeds count's batch (none: no such table)")
    parser.add_argument("--workers", nargs="*", type=int, default=[1, 2, 4], help="worker counts (none: no table)")
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shrink", type=int, default=1)
    parser.add_argument("--smoke", action="store_true", help="on a CPU, two clients of one step, one worker")
    args = parser.parse_args()
    if args.smoke:
        args.device, args.workers, args.modes = "cpu", [1], args.modes or ["bf16"]
    if args.modes and not args.seeds:
        parser.error("--modes measures the first --seeds count's batch: name a count in --seeds")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: nothing measured (run on a GPU machine, or --smoke on a CPU as a check that it "
              "runs)")
        return
    name = torch.cuda.get_device_name(0) if args.device == "cuda" else "CPU"
    sizes = "two clients of one local step (--smoke)" if args.smoke else f"client data and steps / {args.shrink}"
    print(f"device {name}, torch {torch.__version__}; client-steps/s, the median of {args.rounds - 1} timed "
          f"round(s) after a warm-up; {sizes}\n", flush=True)
    scales = [tiny(s) if args.smoke else shrunk(s, args.shrink) for s in SCALES if s.name in args.scales]
    columns = [(executor, max(8, len(executor))) for executor in args.executors]
    columns += [(f"{n} seeds", 9) for n in args.seeds]
    print(f"{'scale':10s} {'steps/round':>11s} " + " ".join(f"{name:>{width}s}" for name, width in columns)
          + "  GFLOP/step  TFLOP/s (fastest)", flush=True)
    batched: dict[str, float | None] = {}  # scale -> its first --seeds count's rate, the modes table's default
    for s in scales:
        data = federation(s)
        measured = [lambda executor=executor: [run(s, data, executor, args.rounds, args.device)]
                    for executor in args.executors]
        measured += [lambda n=n: run_seeds(s, data, n, args.rounds, args.device) for n in args.seeds]
        rates = [measure(s, name, results) for (name, _), results in zip(columns, measured)]
        batched[s.name] = rates[len(args.executors)] if args.seeds else None
        flops, fastest = flops_per_step(s), max((r for r in rates if r is not None), default=0.0)
        print(f"{s.name:10s} {steps_per_round(s):11,d} "
              + " ".join(cell(r, width) for r, (_, width) in zip(rates, columns))
              + f"  {flops / 1e9:10.3f}  {fastest * flops / 1e12:17.2f}", flush=True)
    if args.modes:
        n = args.seeds[0]
        print(f"\n{n} seeds in one batch under other settings (the defaults here: "
              f"{numerics(torch.device(args.device).type) or 'no switches on a CPU'})", flush=True)
        print(f"{'scale':10s} {'default':>9s} " + " ".join(f"{mode:>9s}" for mode in args.modes), flush=True)
        for s in scales:
            data = federation(s)
            rates = [batched[s.name]]
            for mode in args.modes:
                def measured(mode=mode):
                    with MODES[mode](args.device):
                        return run_seeds(s, data, n, args.rounds, args.device)
                rates.append(measure(s, mode, measured))
            print(f"{s.name:10s} " + " ".join(cell(r, 9) for r in rates), flush=True)
    if not args.workers:
        return
    print(f"\n{'scale':10s}" + "".join(f" {f'{n} worker(s)':>12s}" for n in args.workers) + "  auto", flush=True)
    shared = {n: workers_rates(scales, n, args.rounds, args.device) for n in args.workers}
    for s in scales:
        print(f"{s.name:10s}" + "".join(f" {shared[n][s.name][0]:12,.0f}" for n in args.workers)
              + f"  {shared[args.workers[0]][s.name][1]}", flush=True)

if __name__ == "__main__":
    main()
