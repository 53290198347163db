"""`python -m fedlib.runs ls|verify|gc|export|import`: look after a run store (default: results/runs/).

    python -m fedlib.runs ls [--root X]                   # every entry: key, experiment, seed, rounds, labels, imports
    python -m fedlib.runs verify                          # check every entry; damaged ones move to .damaged/
    python -m fedlib.runs gc [--delete]                   # list (or delete) entries whose code version is gone
    python -m fedlib.runs export grid.tar.gz [--select seed=0,algorithm=fedavg]
    python -m fedlib.runs import grid.tar.gz              # merge another machine's entries (verified)
    python -m fedlib.runs mark --root X                   # a store written before stores were marked

A run store is a folder marked by its `.fedlib-run-store` file (written with its first entry). `ls`, `verify`
and `gc` refuse a folder without it (a mistyped --root, or one level too high, touches nothing), and look only
at entry folders (named by their key): anything else there is listed as left alone. `gc` deletes only intact
entries (exactly the files their manifest lists) whose code version is gone, and only with --delete.

None of them imports a module a store or an archive names: `ls`, `verify` and `import` read bytes only, and `gc`
tells an entry's code version only where its spec's `imports` are allowed (`--allow-import MOD`, repeatable, or
FEDLIB_ALLOW_IMPORTS: `fedlib.trust`); an entry whose spec imports another module is kept, saying so.

Exit status: 0 when all is well, 1 when an entry was damaged or an archive entry rejected, 2 on a usage error
(not a store, no such archive, a --select that matches no run).
"""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fedlib.runs.archive import ArchiveError, export_entries, import_entries, origin
from fedlib.runs.entry import SPEC, DamagedEntryError, read_manifest, verify_entry, verify_keyed_entry
from fedlib.runs.fingerprint import code_version
from fedlib.runs.selection import SelectionError, check_selection
from fedlib.runs.spec import RunSpec, parse_selection
from fedlib.runs.store import DamagedEntryWarning, NotAStoreError, RunStore
from fedlib.trust import ImportNotAllowedError, allow_imports, module_option


def _spec(folder: Path) -> RunSpec | None:
    try:
        return RunSpec.from_json(json.loads((folder / SPEC).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def list_entries(store: RunStore) -> list[dict[str, Any]]:
    """One row per entry: key, experiment, dataset, algorithm, seed, rounds, labels, the modules its spec imports
    (unverified: see verify; none imported)."""
    rows = []
    for folder in store.entries():
        spec = _spec(folder)
        try:
            rounds = read_manifest(folder)["files"].get("rounds.csv", {}).get("rows")
        except DamagedEntryError:
            rounds = "no manifest"
        row: dict[str, Any] = {"key": folder.name, "rounds": rounds}
        if spec is None:
            row["experiment"] = "(unreadable spec.json)"
        else:
            row.update(experiment=spec.experiment, dataset=spec.dataset, algorithm=spec.algorithm.name,
                       seed=spec.seed, labels=",".join(f"{k}={v}" for k, v in spec.get("labels").items()),
                       imports="imports=" + (",".join(spec.imports) or "none"))
        rows.append(row)
    return rows


def verify_all(store: RunStore) -> tuple[int, dict[str, str]]:
    """(intact entries, {key: damage}); damaged entries are moved to `.damaged/`. Only entry folders (named as a
    key) are looked at: anything else in the store is left where it is."""
    intact, damaged = 0, {}
    for folder in store.entries():
        try:
            verify_keyed_entry(folder)
            intact += 1
        except DamagedEntryError as damage:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DamagedEntryWarning)  # reported below
                moved = store.quarantine(folder, damage)
            damaged[folder.name] = f"{damage}; " + (f"moved to {moved}" if moved else "left in place (not movable)")
    return intact, damaged


def stale_entries(store: RunStore) -> tuple[dict[Path, str], dict[str, str]]:
    """({entry no current key reaches: why}, {key: why kept}). Stale: an intact entry (exactly the files its
    manifest lists, as written) whose recorded code version differs from the code now. Kept: anything that
    cannot be shown to be an entry this store wrote (no manifest, a file added or changed) or whose code
    version cannot be told, or whose spec imports a module that is not allowed (never imported to tell it)."""
    stale, kept = {}, {}
    for folder in store.entries():
        try:
            manifest = verify_entry(folder)
        except DamagedEntryError as err:
            kept[folder.name] = f"not an intact entry ({err}): run verify, or delete it by hand if it is yours"
            continue
        spec = _spec(folder)
        try:
            recorded = json.loads(manifest.get("context", ""))["code"]
            current = code_version(spec) if spec is not None else None
        except ImportNotAllowedError as err:
            kept[folder.name] = err.skipped("not imported, so its code version is not compared")
            continue
        except (ValueError, KeyError, TypeError, ImportError) as err:
            kept[folder.name] = f"cannot tell its code version ({type(err).__name__}: {err})"
            continue
        if current is None:
            kept[folder.name] = "cannot tell its code version (unreadable spec.json: run verify)"
        elif recorded != current:
            stale[folder] = f"code version {recorded}, now {current}"
    return stale, kept


def _print_strangers(store: RunStore) -> None:
    for path in store.strangers():
        print(f"left alone {path.name}: not a store entry")


def _parser(prog: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog=prog, description=__doc__.split("\n")[0])
    root_help = "the run store (default: results/runs/)"
    parser.add_argument("--root", type=Path, default=None, help=root_help)
    anywhere = argparse.ArgumentParser(add_help=False)  # --root after the command too, without resetting it
    anywhere.add_argument("--root", type=Path, default=argparse.SUPPRESS, help=root_help)
    allow_help = "allow run specs to import module MOD (repeatable; gc tells an entry's code version by importing it)"
    parser.add_argument("--allow-import", type=module_option, action="append", default=[], metavar="MOD",
                        help=allow_help)
    anywhere.add_argument("--allow-import", type=module_option, action="append", dest="allow_import_after",
                          default=argparse.SUPPRESS, metavar="MOD", help=allow_help)
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("ls", parents=[anywhere], help="list entries with their labels")
    commands.add_parser("verify", parents=[anywhere], help="verify every entry against its manifest")
    gc = commands.add_parser("gc", parents=[anywhere], help="list (or with --delete, delete) entries whose code "
                                                            "version is gone")
    how = gc.add_mutually_exclusive_group()
    how.add_argument("--delete", action="store_true", help="delete them (default: only list them)")
    how.add_argument("--dry-run", action="store_true", help="only list them (the default)")
    commands.add_parser("mark", parents=[anywhere], help="mark a folder of entries as a run store (stores written "
                                                         "before stores were marked)")
    export = commands.add_parser("export", parents=[anywhere], help="write entries to a tar archive")
    export.add_argument("archive", type=Path)
    export.add_argument("--select", default="", help="key=value,... as in reproduce --select")
    imp = commands.add_parser("import", parents=[anywhere], help="merge a tar archive's entries, verified")
    imp.add_argument("archive", type=Path)
    return parser


def main(argv: Sequence[str] | None = None, prog: str = "python -m fedlib.runs") -> int:
    args = _parser(prog).parse_args(argv)
    try:
        allow_imports(*args.allow_import, *getattr(args, "allow_import_after", []))
    except ValueError as err:  # a FEDLIB_ALLOW_IMPORTS naming no module
        print(f"python -m fedlib.runs {args.command}: error: {err}", file=sys.stderr)
        return 2
    store = RunStore.at(args.root)
    try:
        return _command(args, store)
    except DamagedEntryError as err:  # export of a damaged entry
        print(f"python -m fedlib.runs {args.command}: error: {err} (run verify)", file=sys.stderr)
        return 1
    except (NotAStoreError, ArchiveError, SelectionError, FileNotFoundError, OSError) as err:
        print(f"python -m fedlib.runs {args.command}: error: {err}", file=sys.stderr)
        return 2


def _command(args: argparse.Namespace, store: RunStore) -> int:
    if args.command == "mark":
        return _mark(store)
    if args.command == "import":
        return _import(store, args.archive)
    store.require_store()
    if args.command == "ls":
        rows = list_entries(store)
        origins = {row["key"]: origin(store.root / row["key"]) for row in rows}
        for row in rows:
            found = origins[row["key"]]
            print("  ".join(f"{v}" for v in row.values())
                  + (f"  imported from {found.get('archive')} at {found.get('imported')}" if found else ""))
        _print_strangers(store)
        print(f"{len(rows)} entries in {store.root}, {sum(map(bool, origins.values()))} imported from archives "
              "(the store checks each entry's files and key, not that its records came from running its spec)")
    elif args.command == "verify":
        intact, damaged = verify_all(store)
        for key, why in damaged.items():
            print(f"damaged {key}: {why}")
        _print_strangers(store)
        print(f"{intact} intact, {len(damaged)} damaged in {store.root}")
        return int(bool(damaged))
    elif args.command == "gc":
        stale, kept = stale_entries(store)
        for folder, why in stale.items():
            if args.delete:
                store.remove(folder)
            print(f"{'deleted' if args.delete else 'would delete'} {folder.name}: {why}")
        for key, why in kept.items():
            print(f"kept {key}: {why}")
        _print_strangers(store)
        print(f"{len(stale)} stale entries {'deleted' if args.delete else 'found'} in {store.root}"
              + ("" if args.delete or not stale else "; delete them with: python -m fedlib.runs gc --delete "
                 f"--root {store.root}"))
    else:
        selection = parse_selection(args.select)
        folders = store.entries()
        if selection:
            specs = {folder: _spec(folder) for folder in folders}
            check_selection(selection, [s for s in specs.values() if s is not None])
            folders = [f for f, s in specs.items() if s is not None and s.matches(selection)]
        keys = export_entries(store, folders, args.archive)
        print(f"exported {len(keys)} entries to {args.archive}")
    return 0


def _mark(store: RunStore) -> int:
    if not store.root.is_dir():
        raise NotAStoreError(f"{store.root} is not a folder (check --root)")
    strangers = store.strangers()
    if strangers:
        names = ", ".join(p.name for p in strangers[:5]) + (", ..." if len(strangers) > 5 else "")
        raise NotAStoreError(f"{store.root} holds what is not a store entry ({names}): a run store is the folder of "
                             "entry folders (named by their 24-character keys); not marked")
    store.mark()
    print(f"marked {store.root} as a run store ({len(store.entries())} entries)")
    return 0


def _import(store: RunStore, archive: Path) -> int:
    if store.root.exists() and not store.is_store() and any(store.root.iterdir()):
        store.require_store()  # importing into a non-empty folder that is no store: refused, naming how to mark it
    report = import_entries(store, archive)
    for key, why in report.rejected.items():
        print(f"rejected {key}: {why}")
    print(f"imported {len(report.imported)} entries into {store.root}, {len(report.already_there)} already "
          f"there, {len(report.rejected)} rejected")
    return int(bool(report.rejected))
