"""reproduce's render phase: a notebook executed with papermill, the stamp beside its claims table, REPORT.md;
`--claims-only`: every notebook's claims judged again from the evidence its last rendering saved."""
from __future__ import annotations

import datetime
import json
import os
import platform
import sys
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from fedlib.app import notebooks
from fedlib.claims import evidence
from fedlib.claims.evidence import EvidenceError
from fedlib.ledger.entries import git_commit
from fedlib.paper import paper
from fedlib.report import collect_report, markdown_row
from fedlib.runs.entry import write_atomic

# The kernel logs one warning per start that it talks to papermill over local TCP without encryption; its own
# errors still show.
KERNEL_QUIET = ["--IPKernelApp.log_level=ERROR"]


def stamp(profile: str, overrides: Mapping[str, Any], selection: str | None) -> str:
    import torch

    commit, changed = git_commit()
    dirty = " (with uncommitted changes)" if changed else ""
    gpu = f", {torch.cuda.get_device_name(0)}" if torch.cuda.is_available() else ", no GPU"
    given = ", ".join(f"-p {k} {json.dumps(v)}" for k, v in overrides.items()) or "no -p overrides"
    chosen = f", --select {selection}" if selection else ""
    return (f"profile `{profile}`, commit `{commit[:7]}`{dirty}, "
            f"{datetime.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}, {platform.node() or 'this machine'} "
            f"({platform.machine()}, {os.cpu_count()} CPUs{gpu}), {given}{chosen}")


def failure(err: Exception) -> str:
    """The error and where: papermill's failing cell (execution count and first source line) when it is one."""
    import papermill

    if isinstance(err, papermill.PapermillExecutionError):
        first = next((line for line in err.source.splitlines() if line.strip() and not line.startswith("#")), "")
        return f"{err.ename}: {err.evalue} (cell [{err.exec_count}]: `{first.strip()[:80]}`)"
    return f"{type(err).__name__}: {err}"


def write_stamp(out_dir: Path, status: str, seconds: float, note: str, *, rendered: str | None = None,
                evidence_sha256: str | None = None) -> None:
    """out_dir/stamp.json: how the claims table beside it was made (REPORT.md reads it), written whole or not at
    all (a full disk leaves the earlier stamp). A rendering records its own note and the hash of the evidence it
    saved; a re-judge (`rendered`, `evidence_sha256` given) keeps the rendering's note and hash, so neither nests
    nor drifts."""
    out_dir.mkdir(parents=True, exist_ok=True)
    info = {"status": status, "seconds": round(seconds, 1), "stamp": note,
            "rendered": rendered if rendered is not None else note,
            "evidence_sha256": evidence_sha256 if rendered is not None else evidence.digest(out_dir)}
    write_atomic(out_dir / "stamp.json", json.dumps(info))


def read_stamp(path: Path) -> dict[str, Any] | None:
    """A stamp.json's fields, None if it is unreadable (an interrupted write before stamps were atomic)."""
    try:
        info = json.loads(path.read_text())
        if isinstance(info, dict) and {"status", "seconds", "stamp"} <= set(info):
            float(info["seconds"])
            return info
    except (OSError, ValueError, UnicodeDecodeError, TypeError):
        pass
    return None


def render(name: str, params: dict[str, Any], out_dir: Path, note: str) -> tuple[str, float]:
    """Execute notebook `name` into out_dir; write out_dir/stamp.json; return (status, seconds)."""
    import jupytext  # imported here: a piece (`--piece`) runs on a GPU machine without the notebook tools
    import nbformat
    import papermill

    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "claims.csv").unlink(missing_ok=True)  # a failed run must not leave an old table behind
    output = out_dir / f"{name}.ipynb"
    print(f"[{name}] rendering -> {output}", flush=True)
    start = time.perf_counter()
    try:  # executes the jupytext source (the source of truth), not the committed quick-profile copy
        folder = paper(name).notebooks
        nbformat.write(jupytext.read(folder / f"{name}.py"), output)
        papermill.execute_notebook(str(output), str(output), parameters=params, kernel_name="python3",
                                   cwd=str(folder), progress_bar=False, log_output=False,
                                   extra_arguments=KERNEL_QUIET)
        status = "ok"
    except Exception as err:  # report and go on: results of the other notebooks are kept
        status = f"FAILED: {failure(err)}"
    seconds = time.perf_counter() - start
    write_stamp(out_dir, status, seconds, note)
    print(f"[{name}] {status} in {seconds:.0f} s", flush=True)
    return status, seconds


def render_all(jobs: Sequence[tuple[str, dict[str, Any], Path]], note: str) -> list[str]:
    """`render(name, params, out_dir, note)` of every job, as many at a time as the machine has cores (each notebook
    executes in a kernel process of its own, mostly on one core); the statuses in the jobs' order."""
    with ThreadPoolExecutor(max(1, min(len(jobs), os.cpu_count() or 1))) as pool:
        return [status for status, _ in pool.map(lambda job: render(*job, note), jobs)]


def write_report(results: Path, profile_dir: Path, header: str, rendered: Sequence[str],
                 imported: Sequence[str] = (), tail: str = "") -> Path:
    """REPORT.md: every notebook of this profile with claims, marked rendered now or with its own earlier stamp;
    `imported`: lines saying which notebooks' runs were imported from another machine (`imported_runs`); `tail`:
    markdown after the claims."""
    lines = ["| notebook | status | minutes | rendered |", "|---|---|---|---|"]
    for path in sorted(profile_dir.glob("*/stamp.json")):
        info = read_stamp(path)
        if info is None:
            print(f"reproduce: warning: {path} is not a readable stamp (empty or not JSON: an interrupted write?); "
                  f"its notebook is listed as unknown: render {path.parent.name} again", file=sys.stderr)
            info = {"status": f"unknown: unreadable {path}", "seconds": None, "stamp": "unknown"}
        when = "by this invocation" if path.parent.name in rendered else f"earlier: {info['stamp']}"
        minutes = "-" if info["seconds"] is None else f"{float(info['seconds']) / 60:.1f}"
        cells = [path.parent.name, info["status"], minutes, when]
        lines.append(markdown_row(cells))
    try:
        claims = collect_report(profile_dir)
    except FileNotFoundError as err:
        claims = f"(no claims tables: {err})"
    origins = "".join(f"\n\n{line}" for line in imported)
    report = results / "REPORT.md"
    write_atomic(report, f"# Reproduction report\n\nThis invocation: {header}.{origins}\n\n## Notebooks\n\n"
                 + "\n".join(lines) + "\n\n" + claims + "\n" + tail)
    return report


def judge_again(name: str, out_dir: Path, note: str) -> str:
    """Judge notebook `name`'s claims again from the evidence saved in out_dir; rewrite claims.csv and stamp.json,
    saying whether the evidence still hashes as it did when the notebook rendered it. A stamp.json missing, emptied
    or without the evidence's hash fails the notebook, naming the file (claims.csv is left as it was): the evidence
    cannot be checked against its rendering, and the stamp written then keeps failing until it is rendered again."""
    start = time.perf_counter()
    stamp_file = out_dir / "stamp.json"
    earlier = read_stamp(stamp_file)
    unproven = (f"{stamp_file} is missing" if not stamp_file.exists() else
                f"{stamp_file} is unreadable (empty or not a stamp)" if earlier is None else
                f"{stamp_file} records no hash of the evidence" if earlier.get("evidence_sha256") is None else None)
    earlier = earlier or {}
    rendered, saved = earlier.get("rendered", earlier.get("stamp", "unknown")), earlier.get("evidence_sha256")
    found = evidence.digest(out_dir)
    drift = "; THE EVIDENCE CHANGED since it was rendered (its hash differs)" if saved not in (None, found) else ""
    try:
        module, bundle = evidence.load(out_dir)
        if module != name or not notebooks.with_claims([name]):
            raise EvidenceError(f"{out_dir / evidence.FOLDER}: evidence of {module!r}, not {name!r}; "
                                f"render {name} again")
        if unproven is None:
            notebooks.judge_claims(module, bundle, out_dir)
        status = "ok" if unproven is None else (f"FAILED: {unproven}: the evidence cannot be checked against its "
                                                f"rendering; render {name} again")
    except EvidenceError as err:
        status = f"FAILED: {err}"
    write_stamp(out_dir, status, time.perf_counter() - start,
                f"claims judged again ({note}) from the evidence rendered {rendered}{drift}", rendered=rendered,
                evidence_sha256=saved)
    print(f"[{name}] claims only: {status}{drift}", flush=True)
    return status


def claims_only(names: Sequence[str], results: Path, profile: str) -> int:
    """`--claims-only`: every selected notebook's claims judged again; REPORT.md rewritten."""
    header = stamp(profile, {}, None) + ", --claims-only"
    print(f"== claims only: {len(names)} notebook(s), from results/{profile}/<notebook>/{evidence.FOLDER}/", flush=True)
    statuses = [judge_again(name, results / profile / name, header) for name in names]
    print(f"wrote {write_report(results, results / profile, header, names)}")
    return 1 if any(s != "ok" for s in statuses) else 0

