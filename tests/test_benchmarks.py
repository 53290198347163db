"""Every benchmark's smoke mode runs in a fresh process and prints its table's header, so that `make test` catches a
benchmark broken by a change in the library (`make bench` itself runs only when a user asks for it). Nothing is
timed or compared here: the figures a smoke run prints are not measurements."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Each benchmark, with what its smoke run must print: the header of its (first) table.
HEADERS = {
    "bench_round.py": r"variant +seconds +steps/s +x idiomatic +/ floor",
    "bench_cold.py": r"variant +train s +x tight loop +process s +x tight loop",
    "bench_mucsc.py": r"d = 10,000, threads = 1, median of 1",
    "bench_gpu.py": r"scale +steps/round +sequential +vmap +graph",
    "bench_profile.py": r"profile quick, \d+ CPU cores",
    "bench_seed_batch.py": r"profile +notebook +model +algorithm +seeds +steps/round +alone +batched +ratio",
}


def test_every_benchmark_has_a_smoke_run_here():
    assert {p.name for p in (ROOT / "benchmarks").glob("bench_*.py")} == set(HEADERS)


@pytest.mark.parametrize("script", sorted(HEADERS))
def test_the_benchmarks_smoke_run_prints_its_header(script):
    # the benchmarks import fedlib from this checkout, as `make bench` does from its editable install
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    done = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), "--smoke"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(HEADERS[script], done.stdout), done.stdout


def test_bench_gpus_gemm_convolution_equals_torchs_alone_and_under_vmap(monkeypatch):
    """The candidate the benchmark measures (`GemmConv2d`: a convolution as a matrix product of unfolded patches)
    against F.conv2d, its outputs and gradients, for one model and for per-client weights under torch.func.vmap
    (the batched step's use), on strides, paddings, dilations and a kernel that is not square."""
    import importlib.util

    import torch
    from torch.func import functional_call, grad, vmap
    from torch.nn import functional as F

    spec = importlib.util.spec_from_file_location("bench_gpu", ROOT / "benchmarks" / "bench_gpu.py")
    bench = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "bench_gpu", bench)  # its dataclasses look their module up there
    spec.loader.exec_module(bench)
    gen = torch.Generator().manual_seed(0)
    for kernel, stride, padding, dilation in (((5, 5), 1, 1, 1), ((3, 2), 2, 0, 1), ((3, 3), 1, 2, 2)):
        conv = torch.nn.Conv2d(3, 4, kernel, stride=stride, padding=padding, dilation=dilation, dtype=torch.float64)
        gemm = bench.with_gemm_convs(torch.nn.Sequential(torch.nn.Conv2d(3, 4, kernel, stride=stride,
                                                                         padding=padding, dilation=dilation,
                                                                         dtype=torch.float64)))[0]
        assert type(gemm) is bench.GemmConv2d
        x = torch.randn(2, 3, 11, 9, generator=gen, dtype=torch.float64)
        params = {k: torch.randn(5, *v.shape, generator=gen, dtype=torch.float64)
                  for k, v in conv.named_parameters()}  # five clients' weights

        def loss(module, p, xb):
            return functional_call(module, p, (xb,)).square().sum()

        for module in (conv, gemm):  # one client's output and gradient, then all five under vmap
            first = {k: v[0] for k, v in params.items()}
            assert torch.allclose(functional_call(module, first, (x,)),
                                  F.conv2d(x, first["weight"], first["bias"], stride, padding, dilation))
        want = vmap(grad(lambda p, xb: loss(conv, p, xb)), in_dims=(0, None))(params, x)
        got = vmap(grad(lambda p, xb: loss(gemm, p, xb)), in_dims=(0, None))(params, x)
        for k in want:
            assert torch.allclose(got[k], want[k], rtol=1e-10, atol=1e-10), k
