"""`python -m fedlib.ledger index --check|--write [--ledger DIR]`: a ledger's archives against its index;
`python -m fedlib.ledger rates [--ledger DIR]`: the client-steps/s its entries measured;
`python -m fedlib.ledger checkpoints [--results DIR]`: the runs a piece stopped mid-way, and how far each got.

    python -m fedlib.ledger index --check       # every problem, one line each naming the archive
    python -m fedlib.ledger index --write       # index the archives there (after reviewing them)
    python -m fedlib.ledger rates               # per experiment, dataset, model and device (`fedlib.ledger.rates`)
    python -m fedlib.ledger checkpoints --results /scratch/piece   # the --results folder of a background piece

`--check` reads the ledger as everything that serves it does (`Ledger.check`). `--write` is the explicit act of
vouching for the archives in the folder: each is read and verified, and the index is rewritten to list exactly
them, each change printed (added, changed, removed) for the review of `git diff INDEX.tsv`; where an archive is
damaged or two hold one run, nothing is written. The ledger is `--ledger` (default: the checkout's evidence/gpu/).

`rates` reads only a ledger whose every entry proves its origin (else it names the problems, as `--check` does).
`checkpoints` reads the checkpoints of the run store `<--results>/runs` (default: the checkout's results/), without
resuming any: each run's name, the rounds it finished and when the file was written (a running piece rewrites it
every few rounds); a file it cannot read is named, with why.

Exit status: 0 when every entry proves its origin (or the index was written, or every checkpoint was read), 1
otherwise, 2 on a usage error.
"""
from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from fedlib.ledger.entries import Ledger
from fedlib.ledger.rates import HEADER, scale_rates
from fedlib.paths import checkout
from fedlib.runs.spec import run_name
from fedlib.runs.store import RunStore


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    index = commands.add_parser("index", help="check the archives against the index, or write the index")
    action = index.add_mutually_exclusive_group(required=True)
    action.add_argument("--check", action="store_true", help="name every archive that cannot prove its origin")
    action.add_argument("--write", action="store_true", help="index every archive there (you vouch for them)")
    rates = commands.add_parser("rates", help="client-steps/s of whole runs, per experiment, scale and device")
    for command in (index, rates):
        command.add_argument("--ledger", type=Path, default=None, help="the ledger folder (default: evidence/gpu/)")
    held = commands.add_parser("checkpoints", help="the runs a piece stopped mid-way, and how far each got")
    held.add_argument("--results", type=Path, default=None,
                      help="the --results folder of the pieces (default: the checkout's results/)")
    return parser


def show_checkpoints(results: Path) -> int:
    store = RunStore(results / "runs")
    found = store.checkpoints()
    print(f"{store.root}: {len(found)} checkpoint(s), oldest first (a piece on this --results resumes each where it "
          "stopped, if its code is unchanged)")
    for c in found:
        written = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(c.written))
        print(f"{c.path.name}: cannot be read: {c.problem}" if c.spec is None else
              f"{c.spec.experiment} {run_name(c.spec)}: round {'?' if c.done is None else c.done} of "
              f"{c.spec.rounds}, written {written} ({c.path.name})")
    return 1 if any(c.spec is None for c in found) else 0


def in_checkout(given: Path | None, folder: str, option: str, prog: str) -> Path | None:
    """`given`, else `folder` of the checkout here; None (the error said) where there is no checkout."""
    if given is not None:
        return given
    found = checkout()
    if found is None:
        print(f"{prog}: error: no fedlib checkout here to find {folder}/ in: give {option}", file=sys.stderr)
        return None
    return found / folder


def checkpoints_command(given: Path | None, prog: str) -> int:
    results = in_checkout(given, "results", "--results", prog)
    if results is None:
        return 2
    if not (results / "runs").is_dir():
        print(f"{prog}: error: --results {results} holds no run store (no runs/ folder): give the --results folder "
              "of the pieces", file=sys.stderr)
        return 2
    return show_checkpoints(results)


def main(argv: Sequence[str] | None = None, prog: str = "python -m fedlib.ledger") -> int:
    args = _parser(prog).parse_args(argv)
    if args.command == "checkpoints":
        return checkpoints_command(args.results, prog)
    root = in_checkout(args.ledger, "evidence/gpu", "--ledger", prog)
    if root is None:
        return 2
    if not root.is_dir():
        print(f"python -m fedlib.ledger: error: --ledger {root} is not a folder", file=sys.stderr)
        return 2
    ledger = Ledger(root)
    if args.command == "rates" or args.check:
        entries, problems = ledger.check()
        for problem in problems:
            print(problem)
        if args.command == "rates" and not problems:
            print("\n".join([HEADER, *(row.line for row in scale_rates(entries))]))
            return 0
        print(f"{root}: {len(entries)} entries prove their origin" + (f", {len(problems)} problem(s)" if problems
                                                                       else ""))
        return 1 if problems else 0
    changes, problems = ledger.reindex()
    for line in problems or changes:
        print(line)
    print(f"{root}: nothing written: mend the problems above first" if problems else
          f"wrote {root / 'INDEX.tsv'}: {len(ledger.paths())} entries ({len(changes)} change(s)); review the archives "
          "and `git diff` it before committing")
    return 1 if problems else 0
