"""Prepare what a bare GPU machine needs to run a piece of the gpu profile, in `.gpu-carry/`, and print the command.

    python scripts/prepare_gpu_carry.py [--python-version 3.12]

The machine is assumed to have Python with torch, numpy, pandas, sympy, seaborn and scipy (and what they depend on), and
nothing of this project's other dependencies, and no network. The folder gets

* `wheels/` and `requirements.txt`: every distribution the piece's code imports (measured: the modules a fresh
  interpreter holds after importing the application (`python -m fedlib piece`), loading every component and the run executor) that those
  six and their dependencies do not provide, with the dependencies of those; downloaded with pip from its
  configured index (the local mirror here) for the machine's Python (`--python-version`, default 3.12: the
  lent machines' Python);
* `data/fashion_mnist/`: Fashion-MNIST's four .gz files, from where this machine has them (Debian's
  dataset-fashion-mnist package, or data/fashion_mnist/); if they are not here they are named as missing, and the
  command is not printed (the gpu profile reads them).

The folder and the repository's tracked files must fit the 64 MiB that travel to the machine: the sizes are
printed and the script exits 1 when they do not fit (or a wheel or the data is missing).
"""
from __future__ import annotations

import argparse
import importlib.metadata as md
import json
import shutil
import subprocess
import sys
from pathlib import Path

from packaging.requirements import Requirement

from fedlib.ledger.entries import git_commit

ROOT = Path(__file__).resolve().parents[1]
CARRY = ROOT / ".gpu-carry"
# What the lent GPU machines' image holds, of what a piece imports (their package list; scipy alone is 35 MiB of
# wheels, more than the data leaves of the 64 MiB that travel).
DEVICE_HAS = ("torch", "numpy", "pandas", "sympy", "seaborn", "scipy")
LIMIT_BYTES = 64 * 2**20

# What a piece imports, measured in a fresh interpreter: printed as JSON, one distribution name per module found.
IMPORTS = """
import importlib.metadata as md, json, runpy, sys
sys.argv = ["fedlib", "piece", "--help"]
try:
    runpy.run_module("fedlib", run_name="__main__")
except SystemExit:
    pass
import fedlib.runs.execute
from fedlib.registry import load_components
load_components()
found = md.packages_distributions()
tops = {m.split(".")[0] for m in list(sys.modules)} - set(sys.stdlib_module_names) - {"fedlib"}  # fedlib travels as source
print(json.dumps(sorted({d for top in tops for d in found.get(top, [])})))
"""


def normal(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def requirements_of(name: str) -> list[str]:
    """The distributions `name` needs (its unconditional requirements and those whose markers hold here)."""
    needed = []
    for text in md.requires(name) or []:
        req = Requirement(text)
        if req.marker is None or req.marker.evaluate({"extra": ""}):
            needed.append(req.name)
    return needed


def closure(names: list[str]) -> set[str]:
    """`names` and everything they need, as installed here (a name not installed here is kept, not followed)."""
    seen: set[str] = set()
    todo = list(names)
    while todo:
        name = normal(todo.pop())
        if name in seen:
            continue
        seen.add(name)
        try:
            todo += requirements_of(name)
        except md.PackageNotFoundError:
            pass
    return seen


def imported_distributions() -> set[str]:
    out = subprocess.run([sys.executable, "-c", IMPORTS], cwd=ROOT, capture_output=True, text=True, check=True)
    return {normal(d) for d in json.loads(out.stdout.strip().splitlines()[-1])}


def tracked_bytes() -> int:
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout.split(b"\0")
    return sum((ROOT / f.decode()).stat().st_size for f in files if f and (ROOT / f.decode()).is_file())


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def download(names: list[str], into: Path, python_version: str) -> list[str]:
    """Download each installed version's wheel (no dependencies: they are listed too); return the names that failed."""
    failed = []
    for name in names:
        pin = f"{name}=={md.version(name)}"
        run = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
                              "--python-version", python_version, "-d", str(into), pin], capture_output=True, text=True)
        if run.returncode != 0:
            failed.append(f"{pin}: {(run.stderr.strip().splitlines() or ['pip failed'])[-1]}")
    return failed


def copy_fashion_mnist(into: Path) -> list[str]:
    """Copy the four Fashion-MNIST files the loader reads into `into`; return what is missing (empty when copied)."""
    from fedlib.data.datasets import dataset_files

    try:
        files = dataset_files("fashion_mnist", None)
    except FileNotFoundError as err:
        return [str(err)]
    into.mkdir(parents=True, exist_ok=True)
    for path in files:
        shutil.copyfile(path, into / path.name)
    return []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python-version", default="3.12",
                        help="the GPU machine's Python (wheels are downloaded for it)")
    args = parser.parse_args(argv)
    shutil.rmtree(CARRY, ignore_errors=True)
    wheels = CARRY / "wheels"
    wheels.mkdir(parents=True)
    present = closure(list(DEVICE_HAS))
    missing = sorted(closure(sorted(imported_distributions() - present)) - present)
    print(f"the piece imports, beyond {', '.join(DEVICE_HAS)} and their dependencies: {', '.join(missing) or 'nothing'}")
    problems = download(missing, wheels, args.python_version)
    (CARRY / "requirements.txt").write_text("".join(f"{name}\n" for name in missing))
    problems += [f"Fashion-MNIST: {m}" for m in copy_fashion_mnist(CARRY / "data" / "fashion_mnist")]
    carried, tree = folder_bytes(CARRY), tracked_bytes()
    print(f"{CARRY.relative_to(ROOT)}: {carried / 2**20:.1f} MiB (wheels {folder_bytes(wheels) / 2**20:.1f} MiB, "
          f"data {folder_bytes(CARRY / 'data') / 2**20:.1f} MiB); tracked files {tree / 2**20:.1f} MiB; "
          f"together {(carried + tree) / 2**20:.1f} MiB of {LIMIT_BYTES / 2**20:.0f} MiB")
    if carried + tree > LIMIT_BYTES:
        problems.append(f"{(carried + tree) / 2**20:.1f} MiB is over the {LIMIT_BYTES / 2**20:.0f} MiB that travel")
    commit, changed = git_commit()  # the commit every entry of the piece will name (FEDLIB_COMMIT there)
    if commit == "unknown":
        problems.append("no git commit found for this checkout: the entries could not name their code")
    if problems:
        print("not ready:\n" + "\n".join(f"  {p}" for p in problems), file=sys.stderr)
        return 1
    if changed:
        print(f"note: tracked files differ from {commit[:10]}, which every entry will name: commit first",
              file=sys.stderr)
    print("device command (run tool: carry [\".gpu-carry\"], timeout_s 600; it ends itself 20 s inside its limit):\n"
          f"bash scripts/gpu_lease.sh 580 {commit}\n"
          "then here: tar xzf <files_at>/ledger.tar.gz -C evidence && "
          ".venv/bin/python -m fedlib from-ledger --profile gpu --write-expected")
    return 0


if __name__ == "__main__":
    sys.exit(main())
