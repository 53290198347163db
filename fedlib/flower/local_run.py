"""`flwr run <app> local` with an exit status that says whether the run completed, and nothing left running.

Flower's CLI exits with status 0 when a run it started fails (the run's own status, `flwr ls`, says
"finished:failed"), and the local SuperLink it starts detaches and outlives it, with the simulation's Ray processes
and client apps when a run fails. This command runs `flwr run <app> local ... --stream` in a Flower home of its own
(a temporary folder: its own local SuperLink, on free ports, with runtime dependency installation off so the app runs
in this environment), prints Flower's output, reads the run's final status from the SuperLink, then stops every
process the run started (found by a mark in their environment: fedlib.processes). Exit status 0 only for a
completed run; 1 for a run that failed, did not start or did not end within --timeout seconds (the Flower home is
then kept, its SuperLink log named); 2 for a mistake in the command.

    python -m fedlib.flower.local_run flower-app --federation-config "num-supernodes=5" \\
        --run-config 'out="/abs/path/records"' [--timeout 1800]

Everything after the app folder but --timeout goes to `flwr run` unchanged.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from fedlib.processes import MARK_VARIABLE, new_mark, require_proc, stop_marked

STARTED = re.compile(r"Successfully started run (\d+)")
COMPLETED = "finished:completed"
STATUS_WAIT_S = 30.0


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _flwr_environment(home: Path, mark: str) -> dict[str, str]:
    """This environment, with a Flower home and local SuperLink ports of the run's own and the run's mark."""
    bin_dir = str(Path(sys.executable).parent)  # Flower starts flower-superlink from PATH
    return {**os.environ, "FLWR_HOME": str(home), "FLWR_DISABLE_RUNTIME_DEPENDENCY_INSTALLATION": "1",
            "FLWR_LOCAL_SUPERLINK_HTTP_API_PORT": str(_free_port()),
            "FLWR_LOCAL_CONTROL_API_PORT": str(_free_port()),
            "PATH": os.pathsep.join([bin_dir, os.environ.get("PATH", "")]), MARK_VARIABLE: mark}


def _echo(stream, lines: list[str]) -> None:
    for line in stream:
        sys.stdout.write(line)
        sys.stdout.flush()
        lines.append(line)


def _run_status(run_id: str, env: dict[str, str]) -> tuple[str, str]:
    """The run's status and its details as the local SuperLink reports them (`flwr ls --run-id`) once it has
    finished, or "unknown" when the SuperLink does not say within STATUS_WAIT_S seconds."""
    flwr = str(Path(sys.executable).parent / "flwr")
    deadline, status = time.monotonic() + STATUS_WAIT_S, ("unknown", "the local SuperLink did not say")
    while time.monotonic() < deadline:
        try:
            done = subprocess.run([flwr, "ls", "local", "--run-id", run_id, "--format", "json"], env=env,
                                  capture_output=True, text=True, timeout=STATUS_WAIT_S)
        except subprocess.TimeoutExpired:
            break
        try:  # `--format json` prints only the JSON, on several lines
            runs = json.loads(done.stdout).get("runs", [])
        except ValueError:  # no answer yet
            runs = []
        if runs:
            status = (str(runs[0]["status"]), str(runs[0].get("status-details") or ""))
            if status[0].startswith("finished"):
                break
        time.sleep(1.0)
    return status


def _failure(returncode: int, output: list[str], env: dict[str, str]) -> str | None:
    """What went wrong with a `flwr run` that ended with `returncode` and printed `output`; None for a run that
    completed."""
    if returncode != 0:
        return f"`flwr run` exited with status {returncode}"
    started = next((m.group(1) for line in output if (m := STARTED.search(line))), None)
    if started is None:
        return "`flwr run` started no run"
    status, details = _run_status(started, env)
    return None if status == COMPLETED else f"run {started} ended {status!r} ({details}), not {COMPLETED!r}"


def run_local(app: Path, flwr_args: list[str], timeout_s: float) -> int:
    """Run `flwr run app local *flwr_args --stream`, stop what it started; 0 only for a completed run."""
    require_proc()
    home, mark = Path(tempfile.mkdtemp(prefix="fedlib-flwr-home-")), new_mark()
    env = _flwr_environment(home, mark)
    command = [str(Path(sys.executable).parent / "flwr"), "run", str(app), "local", *flwr_args, "--stream"]
    output: list[str] = []
    try:
        proc = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        reader = threading.Thread(target=_echo, args=(proc.stdout, output), daemon=True)
        reader.start()
        try:
            proc.wait(timeout=timeout_s)
            reader.join(timeout=5.0)
            failure = _failure(proc.returncode, output, env)
        except subprocess.TimeoutExpired:
            failure = f"the run did not end within {timeout_s:.0f} s (--timeout)"
    finally:
        stopped = stop_marked(mark)
    if failure is None:
        shutil.rmtree(home, ignore_errors=True)
        print(f"fedlib.flower.local_run: the run completed; stopped the {len(stopped)} processes it started")
        return 0
    print(f"fedlib.flower.local_run: FAILED: {failure} (Flower's output above; the local SuperLink's log: "
          f"{home / 'local-superlink' / 'superlink.log'}); stopped the {len(stopped)} processes it started",
          file=sys.stderr)
    return 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fedlib.flower.local_run", description=__doc__.splitlines()[0])
    parser.add_argument("app", type=Path, help="the Flower app's folder (with its pyproject.toml)")
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds before the run is stopped (1800)")
    args, flwr_args = parser.parse_known_args(argv)
    if not (args.app / "pyproject.toml").is_file():
        parser.error(f"app folder {str(args.app)!r}: no pyproject.toml there (give a Flower app's folder, e.g. "
                     "flower-app)")
    if args.timeout <= 0:
        parser.error(f"--timeout {args.timeout:g}: give a positive number of seconds")
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a terminated wrapper still stops the run's processes
    try:
        return run_local(args.app.resolve(), flwr_args, args.timeout)
    except OSError as err:
        print(f"fedlib.flower.local_run: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
