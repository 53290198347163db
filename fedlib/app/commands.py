"""`python -m fedlib COMMAND [OPTIONS]`: the application's commands, each `COMMAND --help` for its options."""
from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Sequence
from typing import Any


def _main_of(module: str, **given: Any) -> Callable[[list[str], str], int]:
    """A command running `module.main` (imported only when called) on the command line's rest."""
    return lambda argv, prog: importlib.import_module(module).main(argv, prog=prog, **given)


# name -> (what it does, what runs it)
COMMANDS: dict[str, tuple[str, Callable[[list[str], str], int]]] = {
    "reproduce": ("plan, compute and render the notebooks of a profile, write REPORT.md (scripts/reproduce.py)",
                  _main_of("fedlib.app.reproduce")),
    "dry-run": ("build whole grids and run each combination one round on fabricated files (fedlib.dryrun)",
                _main_of("fedlib.dryrun")),
    "piece": ("compute the next runs the ledger lacks within --budget (reproduce --piece)",
              _main_of("fedlib.app.reproduce", mode="piece")),
    "from-ledger": ("judge the headline claims and render the notebooks from the ledger, computing nothing "
                    "(reproduce --from-ledger)", _main_of("fedlib.app.reproduce", mode="from_ledger")),
    "store": ("look after a run store: ls, verify, gc, export, import, mark (fedlib.runs)",
              _main_of("fedlib.runs.cli")),
    "ledger": ("check or write a ledger's index, or print its measured rates (fedlib.ledger)",
               _main_of("fedlib.ledger.cli")),
}
USAGE = "usage: python -m fedlib COMMAND [OPTIONS]  (python -m fedlib COMMAND --help: its options)\n\ncommands:\n" + \
    "".join(f"  {name:<12} {what}\n" for name, (what, _) in COMMANDS.items())


def main(argv: Sequence[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, end="", file=sys.stdout if argv else sys.stderr)
        return 0 if argv else 2
    if argv[0] not in COMMANDS:
        print(f"python -m fedlib: error: unknown command {argv[0]!r}; commands: {', '.join(COMMANDS)}", file=sys.stderr)
        return 2
    return COMMANDS[argv[0]][1](argv[1:], f"python -m fedlib {argv[0]}")
