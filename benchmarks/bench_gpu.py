"""`make bench-gpu`: per-round training time at the four papers' scales, sequential vs batched vs the floor.

Scales (issue 11's table; FedAvg, fp32 links, the papers' local settings, random data of the datasets'
shapes so that no download is needed):
  fedshift  CNN2 on 3x32x32, 100 clients, 10 per round, 10 epochs, batch 50     (1,000 client-steps/round)
  fedaq     vanilla CNN on 1x28x28, 10 clients, all per round, 5 epochs, batch 64 (4,700)
  taco      TACO CNN on 1x28x28, 20 clients, all per round, K = 100, batch 64      (2,000)
  mucsc     ALL-CNN-C on 3x32x32, 100 clients, 10 per round, 5 epochs, batch 8     (3,150)
Per round: the median `train_s` of the record's rounds after the first (warm-up), for the sequential and
the batched executor, and the floor: centralized SGD over the same number of steps and batch size on one
model (CUDA synchronised), i.e. the GPU time the round's arithmetic needs without federation. Ratios come
from one run of this script, printed with the device's name.

    python benchmarks/bench_gpu.py [--rounds 3] [--scales fedshift taco] [--device cuda] [--shrink 1]
`--device cpu --shrink 20` runs the same code on a CPU at 1/20 of the clients' data (a smoke test only).
"""
from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from fedlib.algorithms import FedAvg
from fedlib.contracts import FederatedData, LocalTraining
from fedlib.data import Dataset
from fedlib.federation import resolve_device, run_federation
from fedlib.models import build_model


@dataclass(frozen=True)
class Scale:
    name: str
    model: str
    shape: tuple[int, int, int]
    clients: int
    per_round: int
    samples: int  # per client
    batch_size: int
    epochs: float | None = None
    steps: int | None = None
    lr: float = 0.01


SCALES = [
    Scale("fedshift", "fedshift_cnn2", (3, 32, 32), 100, 10, 500, 50, epochs=10, lr=0.005),
    Scale("fedaq", "fedaq_cnn", (1, 28, 28), 10, 10, 6000, 64, epochs=5),
    Scale("taco", "taco_cnn", (1, 28, 28), 20, 20, 3000, 64, steps=100),
    Scale("mucsc", "allcnn_c", (3, 32, 32), 100, 10, 500, 8, epochs=5, lr=0.05),
]


def federation(s: Scale, shrink: int) -> FederatedData:
    n = max(s.batch_size, s.samples // shrink)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(s.clients * n, *s.shape, generator=gen)
    y = torch.randint(0, 10, (s.clients * n,), generator=gen)
    ds = Dataset(f"random{s.shape}", x, y, x[:1000], y[:1000], num_classes=10)
    return FederatedData(ds, [np.arange(i * n, (i + 1) * n) for i in range(s.clients)])


def per_round(s: Scale, data: FederatedData, executor: str, rounds: int, device: str) -> tuple[float, int]:
    local = LocalTraining(lr=s.lr, batch_size=s.batch_size, epochs=s.epochs, steps=s.steps)
    res = run_federation(lambda: build_model(s.model, s.shape, 10), data, FedAvg(), rounds, local=local,
                         sampler=s.per_round, eval_every=rounds, executor=executor, device=device, progress=False)
    steps = int(res.clients[res.clients["round"] == 1]["steps"].sum())
    return statistics.median(res.rounds["train_s"].iloc[1:]), steps


def floor(s: Scale, data: FederatedData, steps: int, device: torch.device) -> float:
    ds = data.dataset
    x, y = ds.x_train.to(device), ds.y_train.to(device)
    model = build_model(s.model, s.shape, 10).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=s.lr)
    idx = torch.randint(0, len(y), (steps, s.batch_size), device=device)
    for warm in (True, False):
        if device.type == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        for k in range(min(steps, 20) if warm else steps):
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x[idx[k]]), y[idx[k]]).backward()
            opt.step()
        if device.type == "cuda":
            torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--scales", nargs="*", default=[s.name for s in SCALES])
    parser.add_argument("--device", default="cuda")
    parser.add_argument("--shrink", type=int, default=1)
    args = parser.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device here: nothing measured (run on a GPU machine, or --device cpu --shrink 20 as a smoke test)")
        return
    device = resolve_device(args.device)
    name = torch.cuda.get_device_name(0) if device.type == "cuda" else "CPU"
    print(f"device {name}, torch {torch.__version__}, {args.rounds} rounds per variant (first is warm-up), "
          f"client data / {args.shrink}\n")
    print(f"{'scale':9s} {'steps/round':>11s} {'sequential s':>13s} {'batched s':>10s} {'floor s':>8s} "
          f"{'seq/batched':>12s} {'batched/floor':>14s}")
    for s in (s for s in SCALES if s.name in args.scales):
        data = federation(s, args.shrink)
        seq, steps = per_round(s, data, "sequential", args.rounds, args.device)
        bat, _ = per_round(s, data, "vmap", args.rounds, args.device)
        flo = floor(s, data, steps, device)
        print(f"{s.name:9s} {steps:11d} {seq:13.3f} {bat:10.3f} {flo:8.3f} {seq / bat:12.2f} {bat / flo:14.2f}")


if __name__ == "__main__":
    main()
