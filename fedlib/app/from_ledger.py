"""`reproduce --from-ledger`: the ledger's entries against the profile's plan, per headline claim, beside the cpu
profile's verdicts; stale entries named; the notebooks rendered from the ledger; computes no run."""
from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from fedlib.app import notebooks
from fedlib.app.plan import fabricated_if_missing, missing_datasets, plan_runs, run_parameters, unloadable
from fedlib.app.render import read_stamp, render_all, stamp, write_report
from fedlib.grids import notebook_parameters, notebook_specs
from fedlib.ledger.cpu_record import (TO_BE_REBUILT, CpuRecordError, CpuVerdicts, read_cpu_results, read_current,
                                      write_record)
from fedlib.ledger.entries import Ledger, LedgerEntry, LedgerError
from fedlib.ledger.results import headline_results, results_pages, scales
from fedlib.ledger.status import expected_results, headline_status, held_devices, stale_lines, stale_notes
from fedlib.claims.ledger_verdicts import ledger_verdicts, verdicts_markdown
from fedlib.paper_params import PaperParams
from fedlib.report import collect_report
from fedlib.runs.entry import write_atomic

LEDGER_DIGEST_LABEL = "Ledger digest (sha256 of its archives):"
RESULTS_PROFILE = "gpu"  # the ledger whose verdicts stand beside the cpu record's in the results table


class Refused(Exception):
    """What stops --from-ledger before it writes anything: the text to print."""


def shown(path: Path) -> Path:
    """`path` as the committed files name it: from the repository's root where it lies inside."""
    return path.relative_to(notebooks.ROOT) if path.is_relative_to(notebooks.ROOT) else path


def read_inputs(ledger_root: Path, to_render: Sequence[str], params: Mapping[str, PaperParams], cpu_record: Path,
                cpu_results: Path | None) -> tuple[list[LedgerEntry], CpuVerdicts]:
    """The ledger's entries (every archive read and verified once) and the cpu record (first written from
    `cpu_results` where given), once the notebooks `to_render` are known to be renderable here; Refused else."""
    try:
        entries = Ledger(ledger_root).entries()
    except LedgerError as err:
        raise Refused(f"reproduce: error: damaged ledger entry, refused: {err}") from None
    without = sorted(set(to_render) - set(notebooks.with_claims(to_render)))
    if without:
        raise Refused(f"reproduce: error: {', '.join(without)} declares no claims and runs its own loops: no ledger "
                      "serves it; leave it out of --only")
    missing = missing_datasets(plan_runs(to_render, params, {})) if to_render else {}
    if missing:
        raise Refused("reproduce: the notebooks read datasets this machine does not have; nothing was rendered:\n"
                      + "\n".join(missing.values()) + "\nGet them (docs/datasets.md), or judge the headline claims "
                      "alone with --headlines-only (no dataset needed).")
    try:
        if cpu_results is not None:
            print(f"wrote {write_record(read_cpu_results(cpu_results), cpu_record)}")
        return entries, read_current(cpu_record, str(shown(cpu_record)))
    except CpuRecordError as err:
        raise Refused(f"reproduce: error: {err}") from None


def from_ledger(names: Sequence[str], profile: str, overrides: Mapping[str, Any], ledger_root: Path, results: Path,
                write_expected: bool, cpu_record: Path, cpu_results: Path | None, to_render: Sequence[str]) -> int:
    """`--from-ledger`: the ledger's entries against the plan of the profile (with the -p `overrides`), per headline
    claim, each judged claim beside the cpu profile's verdict from the record `cpu_record` (first written from the
    cpu run's results folder `cpu_results` where given); stale entries named; the notebooks `to_render` (each must
    declare claims) rendered from the ledger into results/<profile>/ (their datasets must be on this machine);
    REPORT.md written, and with `write_expected` notebooks/expected-results-<profile>.md (and, rendered,
    notebooks/expected-claims-<profile>.md). Computes no run."""
    params = {name: notebook_parameters(name, profile, overrides) for name in names}
    grids = {name: notebook_specs(name, params[name]) for name in names}
    try:
        entries, cpu = read_inputs(ledger_root, to_render, params, cpu_record, cpu_results)
    except Refused as err:
        print(err, file=sys.stderr)
        return 2
    if cpu.predates:
        print(f"reproduce: note: {cpu.predates}; the cpu verdict column reads \"{TO_BE_REBUILT}\"", file=sys.stderr)
    datasets = set(plan_runs(names, params, {}).datasets)  # every one the plan reads, not only the ledger's
    lacking = unloadable(datasets)
    stand_ins = (f"Datasets this machine lacks ({', '.join(lacking)}) were fabricated as stand-ins (random files in "
                 "their formats): they only build each run for today's code version and give the class counts; "
                 "every number here is read from the ledger.") if lacking else ""
    with fabricated_if_missing(datasets) as root:
        notes = stale_notes(entries, lambda spec: root)
        tables = ledger_verdicts(params, grids, entries, root)
    verdicts = verdicts_markdown(tables, profile, cpu)
    stale = stale_lines(notes)
    report_table = expected_results(grids, entries, str(shown(ledger_root)), profile,
                                    {e.spec: note for e, note in notes}, verdicts=verdicts)
    print(report_table)
    print("Entries computed by code changed since:" + "".join(f"\n  {line}" for line in stale) if stale
          else "No entry was computed by code that has changed since.")
    if stand_ins:
        print(stand_ins)
    if write_expected:
        target = notebooks.NOTEBOOKS / f"expected-results-{profile}.md"
        write_atomic(target, expected_results(grids, entries, str(shown(ledger_root)), profile, verdicts=verdicts))
        print(f"wrote {target}")
        if profile == RESULTS_PROFILE:  # the results table of README.md and docs/results.md
            claims = headline_results(params, tables, headline_status(grids, held_devices(entries)), cpu)
            for page, text in results_pages(notebooks.ROOT, claims, cpu, scales({n: params[n] for n in tables},
                                                                                cpu)).items():
                write_atomic(page, text)
                print(f"wrote {page}")
    stale_md = ("\n## Stale ledger entries\n\n" + "".join(f"- {line}\n" for line in stale)) if stale else ""
    ledger_md = report_table.split("\n", 2)[2] + stale_md + (f"\n{stand_ins}\n" if stand_ins else "")
    return report_from_ledger(to_render, profile, overrides, ledger_root, results, ledger_md, write_expected)


def report_from_ledger(names: Sequence[str], profile: str, overrides: Mapping[str, Any], ledger_root: Path,
                       results: Path, ledger_md: str, write_expected: bool) -> int:
    """REPORT.md with `ledger_md`; the notebooks `names` first rendered with their runs read from the ledger (then
    with `write_expected`, every notebook rendered, notebooks/expected-claims-<profile>.md)."""
    results.mkdir(parents=True, exist_ok=True)
    made = f"{stamp(profile, overrides, None)}, --from-ledger {shown(ledger_root)}"
    if not names:
        report = results / "REPORT.md"
        write_atomic(report, f"# Reproduction report\n\nThis invocation: {made} (no run computed, no notebook "
                             "rendered).\n\n" + ledger_md)
        print(f"wrote {report}")
        return 0
    note = f"{made} (no run computed)"
    injected = {"profile": profile, "results_root": str(results / profile), "runs_root": str(results / "runs"),
                "runner": "local", "ray_address": None, "ledger": str(ledger_root)}
    print(f"== render from the ledger: {len(names)} notebook(s)", flush=True)
    statuses = render_all([(name, run_parameters(name, profile, overrides, injected), results / profile / name)
                           for name in names], note)
    report = write_report(results, results / profile, note, names, tail="\n# The ledger\n" + ledger_md)
    print(f"wrote {report}")
    if write_expected and all(status == "ok" for status in statuses):
        target = notebooks.NOTEBOOKS / f"expected-claims-{profile}.md"
        write_atomic(target, rendered_claims(results / profile, names, Ledger(ledger_root), profile))
        print(f"wrote {target}")
    return 1 if any(status != "ok" for status in statuses) else 0


def rendered_claims(profile_dir: Path, names: Sequence[str], ledger: Ledger, profile: str) -> str:
    """Markdown: the claims tables of the notebooks `names` rendered from `ledger` into `profile_dir`, headed by the
    ledger's digest (a test checks it against the committed ledger) and each notebook's stamp."""
    stamps = [f"- {name}: {(read_stamp(profile_dir / name / 'stamp.json') or {}).get('stamp', 'unknown')}"
              for name in names]
    claims = collect_report(profile_dir).split("\n", 1)[1]  # the scale note stands in REPORT.md
    return (f"# Every claim of the {profile} notebooks, rendered from the ledger\n\n"
            f"Generated by `python scripts/reproduce.py --profile {profile} --from-ledger --write-expected` (each "
            "notebook executed with its runs read from the ledger, none computed; theory and Monte Carlo cells "
            f"run as always). {LEDGER_DIGEST_LABEL} `{ledger.digest()}`: rebuild this file whenever the ledger "
            "changes (a test compares the digest with the committed ledger's).\n\n" + "\n".join(stamps) + "\n"
            + claims)
