"""`make reproduce`: execute every notebook with papermill under a profile, then write results/REPORT.md.

    python scripts/reproduce.py --profile cpu            # the main job (default)
    python scripts/reproduce.py --profile full --only fedshift
    python scripts/reproduce.py --only quickstart -p rounds 60 -p seeds "[0, 1]"   # overrides (YAML values)

Each notebook runs with the parameters in notebooks/profiles/<notebook>/<profile>.yaml ("quick" uses the
notebook's own parameters cell); the executed copy goes to results/<notebook>/<notebook>.<profile>.ipynb
and the notebook itself writes results/<notebook>/claims.csv. Every profile key and `-p` name is
checked against each notebook's parameters cell before any notebook starts: an unknown name stops
the script, listing the valid ones. A failing notebook does not stop the others; the script exits
non-zero at the end if any failed.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import papermill
import yaml

from fedlib.notebook_params import UnknownParameterError, check_parameters, declared_parameters
from fedlib.report import collect_report

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def profile_parameters(name: str, profile: str) -> dict:
    if profile == "quick":
        return {}
    path = NOTEBOOKS / "profiles" / name / f"{profile}.yaml"
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: every notebook needs a {profile!r} profile file")
    return yaml.safe_load(path.read_text()) or {}


def run_parameters(name: str, profile: str, overrides: dict, results: Path) -> dict:
    """The parameters papermill gets for notebook `name`: profile, then overrides, then results_root.

    Raises `UnknownParameterError` (listing the valid names) if the profile file or an override
    names a parameter the notebook's parameters cell does not declare.
    """
    declared = declared_parameters(NOTEBOOKS / f"{name}.ipynb")
    values = profile_parameters(name, profile)
    check_parameters(values, declared, f"notebook '{name}', {NOTEBOOKS / 'profiles' / name / f'{profile}.yaml'}")
    check_parameters(overrides, declared, f"notebook '{name}', -p option")
    return {**values, **overrides, "results_root": str(results)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profile", default="cpu", choices=["quick", "cpu", "full"])
    parser.add_argument("--only", nargs="*", help="notebook names (default: all in notebooks/)")
    parser.add_argument("--results", type=Path, default=ROOT / "results")
    parser.add_argument("-p", "--parameter", nargs=2, action="append", default=[], metavar=("NAME", "VALUE"),
                        help="override a parameter in every selected notebook (VALUE is read as YAML)")
    args = parser.parse_args(argv)

    available = sorted(p.stem for p in NOTEBOOKS.glob("*.ipynb"))
    names = args.only or available
    unknown = sorted(set(names) - set(available))
    if unknown:
        parser.error(f"unknown notebook(s) {unknown}; available: {available}")
    overrides = {key: yaml.safe_load(value) for key, value in args.parameter}
    try:  # every notebook's parameters are checked before the first one starts
        parameters = {name: run_parameters(name, args.profile, overrides, args.results) for name in names}
    except UnknownParameterError as err:
        parser.error(str(err))

    timings, failed = [], []
    for name in names:
        out_dir = args.results / name
        out_dir.mkdir(parents=True, exist_ok=True)
        output = out_dir / f"{name}.{args.profile}.ipynb"
        print(f"[{name}] profile={args.profile} -> {output.relative_to(ROOT) if output.is_relative_to(ROOT) else output}",
              flush=True)
        start = time.perf_counter()
        try:
            papermill.execute_notebook(
                str(NOTEBOOKS / f"{name}.ipynb"), str(output),
                parameters=parameters[name],
                kernel_name="python3", cwd=str(NOTEBOOKS), progress_bar=False,
            )
            status = "ok"
        except Exception as err:  # report and go on: results of the other notebooks are kept
            status = f"FAILED: {type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}"
            failed.append(name)
        seconds = time.perf_counter() - start
        timings.append((name, status, seconds))
        print(f"[{name}] {status} in {seconds:.0f} s", flush=True)

    lines = [f"Profile `{args.profile}`.", "", "| notebook | status | seconds |", "|---|---|---|"]
    lines += [f"| {n} | {s} | {t:.0f} |" for n, s, t in timings]
    try:
        claims = collect_report(args.results)
    except FileNotFoundError as err:
        claims = f"(no claims tables: {err})"
    report = args.results / "REPORT.md"
    report.write_text(claims + "\n\n## Runs\n\n" + "\n".join(lines) + "\n")
    print(f"wrote {report}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
