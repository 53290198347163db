"""`make reproduce`: execute every notebook with papermill under a profile, then write results/REPORT.md.

    python scripts/reproduce.py --profile cpu                    # the main job (default)
    python scripts/reproduce.py --profile gpu --only taco        # one notebook
    python scripts/reproduce.py --only quickstart -p rounds 60 -p seeds "[0, 1]"   # overrides (YAML values)
    python scripts/reproduce.py --profile full --executor ray --ray-address auto    # runs as Ray tasks
    python scripts/reproduce.py --profile full --only fedshift --select seed=0      # part of a grid

Each notebook runs with notebooks/profiles/<notebook>/<profile>.yaml ("quick" is the parameters cell
itself); its runs go through the run store `results/runs/` (a run already there is not recomputed, an
interrupted one resumes from its checkpoint), its executed copy and claims.csv go to
results/<profile>/<notebook>/, and REPORT.md is rebuilt from this profile's claims only. Every profile
key and `-p` name is checked against each notebook's parameters cell before anything starts.

`--select key=value,...` computes only the matching runs of each selected notebook's grid into the store
(keys: seed, algorithm, model, dataset, device or any spec label/option; values OR, keys AND) and executes
no notebook: run again without --select to build the tables and REPORT.md from the store.
"""
from __future__ import annotations

import argparse
import datetime
import importlib
import platform
import subprocess
import sys
import time
from pathlib import Path

import jupytext
import nbformat
import papermill
import yaml

from fedlib.notebook_params import UnknownParameterError, check_parameters, declared_parameters, parameter_defaults
from fedlib.report import collect_report
from fedlib.runs import RunSpec, RunStore, parse_selection, run_specs

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
PROFILES = ["quick", *sorted({p.stem for p in NOTEBOOKS.glob("profiles/*/*.yaml")})]


def profile_parameters(name: str, profile: str) -> dict:
    if profile == "quick":
        return {}
    path = NOTEBOOKS / "profiles" / name / f"{profile}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: every notebook needs a {profile!r} profile file")
    return yaml.safe_load(path.read_text()) or {}


def run_parameters(name: str, profile: str, overrides: dict, injected: dict) -> dict:
    """The parameters papermill gets for notebook `name`: profile, then overrides, then the runner's own.

    Raises `UnknownParameterError` (listing the valid names) if the profile file or an override
    names a parameter the notebook's parameters cell does not declare.
    """
    declared = declared_parameters(NOTEBOOKS / f"{name}.py")
    values = profile_parameters(name, profile)
    check_parameters(values, declared, f"notebook '{name}', {NOTEBOOKS / 'profiles' / name / f'{profile}.yaml'}")
    check_parameters(overrides, declared, f"notebook '{name}', -p option")
    return {**values, **overrides, **{k: v for k, v in injected.items() if k in declared}}


def failure(err: Exception) -> str:
    """The error and where: papermill's failing cell (execution count and first source line) when it is one."""
    if isinstance(err, papermill.PapermillExecutionError):
        first = next((line for line in err.source.splitlines() if line.strip() and not line.startswith("#")), "")
        return f"{err.ename}: {err.evalue} (cell [{err.exec_count}]: `{first.strip()[:80]}`)"
    return f"{type(err).__name__}: {err}"


def stamp(profile: str) -> str:
    def git(*args: str) -> str:
        try:
            return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True, check=True).stdout.strip()
        except (OSError, subprocess.CalledProcessError):
            return "unknown"

    dirty = " (with uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    return (f"Profile `{profile}`, commit `{git('rev-parse', '--short', 'HEAD')}`{dirty}, "
            f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, {platform.node() or 'this machine'} "
            f"({platform.machine()}, {__import__('os').cpu_count()} CPUs{gpu_name()}).")


def gpu_name() -> str:
    import torch

    return f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", no GPU"


def grid(name: str, parameters: dict) -> list[RunSpec]:
    """The run specs notebook `name` reads under these parameters (its paper module's `experiments`)."""
    params = {**parameter_defaults(NOTEBOOKS / f"{name}.py"), **parameters}
    return list(dict.fromkeys(importlib.import_module(f"fedlib.papers.{name}").experiments(params)))


def compute_selection(names: list[str], parameters: dict[str, dict], selection: dict, store: RunStore,
                      executor: str, ray_address: str | None) -> int:
    for name in names:
        specs = [s for s in grid(name, parameters[name]) if s.matches(selection)]
        print(f"[{name}] {len(specs)} runs match {selection}", flush=True)
        run_specs(specs, store=store, executor=executor, ray_address=ray_address)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu", choices=PROFILES)
    parser.add_argument("--only", nargs="*", help="notebook names (default: all in notebooks/)")
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("--executor", default="local", choices=["local", "ray"], help="how runs execute")
    parser.add_argument("--ray-address", default=None, help="an existing Ray cluster (default: a local Ray)")
    parser.add_argument("--select", default=None, help="compute only these runs, e.g. algorithm=fedavg,seed=0")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="override a parameter in every selected notebook (VALUE is read as YAML)")
    args = parser.parse_args(argv)

    available = sorted(p.stem for p in NOTEBOOKS.glob("*.py"))
    names = args.only or available
    unknown = sorted(set(names) - set(available))
    if unknown:
        parser.error(f"unknown notebook(s) {unknown}; available: {available}")
    try:
        selection = parse_selection(args.select)
    except ValueError as err:
        parser.error(str(err))
    overrides = {key: yaml.safe_load(value) for key, value in args.parameter}
    results, store = args.results / args.profile, RunStore(args.results / "runs")
    injected = {"results_root": str(results), "runs_root": str(store.root), "runner": args.executor,
                "ray_address": args.ray_address}
    try:  # every notebook's parameters are checked before the first one starts
        parameters = {name: run_parameters(name, args.profile, overrides, injected) for name in names}
    except UnknownParameterError as err:
        parser.error(str(err))
    if selection:
        return compute_selection(names, parameters, selection, store, args.executor, args.ray_address)

    timings, failed = [], []
    for name in names:
        out_dir = results / name
        out_dir.mkdir(parents=True, exist_ok=True)
        (out_dir / "claims.csv").unlink(missing_ok=True)  # a failed run must not leave an old table behind
        output = out_dir / f"{name}.ipynb"
        print(f"[{name}] profile={args.profile} -> {output.relative_to(ROOT) if output.is_relative_to(ROOT) else output}",
              flush=True)
        specs = grid(name, parameters[name])
        stored = sum(store.has(spec) for spec in specs)
        print(f"[{name}] {len(specs)} runs: {stored} from the store, {len(specs) - stored} to compute", flush=True)
        start = time.perf_counter()
        try:  # executes the jupytext source (the source of truth), not the committed quick-profile copy
            nbformat.write(jupytext.read(NOTEBOOKS / f"{name}.py"), output)
            papermill.execute_notebook(str(output), str(output), parameters=parameters[name],
                                       kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=False)
            status = "ok"
        except Exception as err:  # report and go on: results of the other notebooks are kept
            status = f"FAILED: {failure(err)}"
            failed.append(name)
        seconds = time.perf_counter() - start
        timings.append((name, status, seconds))
        print(f"[{name}] {status} in {seconds:.0f} s", flush=True)

    lines = ["| notebook | status | minutes |", "|---|---|---|"]
    lines += [f"| {n} | {s.replace('|', chr(92) + '|')} | {t / 60:.1f} |" for n, s, t in timings]
    try:
        claims = collect_report(results)
    except FileNotFoundError as err:
        claims = f"(no claims tables: {err})"
    report = args.results / "REPORT.md"
    report.write_text(f"# Reproduction report\n\n{stamp(args.profile)}\n\n## Notebooks\n\n" + "\n".join(lines)
                      + "\n\n" + claims + "\n")
    print(f"wrote {report}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
