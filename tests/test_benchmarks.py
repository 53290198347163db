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
