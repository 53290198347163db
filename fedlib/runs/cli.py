"""`python -m fedlib.runs ls|verify|gc|export|import`: look after a run store (default: results/runs/).

    python -m fedlib.runs ls                              # every entry: key, experiment, seed, rounds, labels
    python -m fedlib.runs verify                          # check every entry; damaged ones move to .damaged/
    python -m fedlib.runs gc [--dry-run]                  # delete entries whose code version is gone
    python -m fedlib.runs export grid.tar.gz [--select seed=0,algorithm=fedavg]
    python -m fedlib.runs import grid.tar.gz              # merge another machine's entries (verified)

Exit status: 0 when all is well, 1 when an entry was damaged or an archive entry rejected.
"""
from __future__ import annotations

import argparse
import json
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from fedlib.runs.archive import export_entries, import_entries
from fedlib.runs.entry import SPEC, DamagedEntryError, read_entry, read_manifest
from fedlib.runs.fingerprint import code_version
from fedlib.runs.spec import RunSpec, parse_selection
from fedlib.runs.store import DamagedEntryWarning, RunStore


def _spec(folder: Path) -> RunSpec | None:
    try:
        return RunSpec.from_json(json.loads((folder / SPEC).read_text()))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def list_entries(store: RunStore) -> list[dict[str, Any]]:
    """One row per entry: key, experiment, dataset, algorithm, seed, rounds, labels (unverified: see verify)."""
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
                       seed=spec.seed, labels=",".join(f"{k}={v}" for k, v in spec.get("labels").items()))
        rows.append(row)
    return rows


def verify_all(store: RunStore) -> tuple[int, dict[str, str]]:
    """(intact entries, {key: damage}); damaged entries are moved to `.damaged/`."""
    intact, damaged = 0, {}
    for folder in store.entries():
        try:
            spec_json, _ = read_entry(folder)
            spec = RunSpec.from_json(spec_json)
            if spec.key(read_manifest(folder).get("context", "")) != folder.name:
                raise DamagedEntryError(folder / SPEC, "its spec and the manifest's context do not hash to the key")
            intact += 1
        except (DamagedEntryError, ValueError, KeyError) as err:
            damage = err if isinstance(err, DamagedEntryError) else DamagedEntryError(folder / SPEC, str(err))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DamagedEntryWarning)  # reported below
                moved = store.quarantine(folder, damage)
            damaged[folder.name] = f"{damage}; moved to {moved}"
    return intact, damaged


def stale_entries(store: RunStore) -> tuple[dict[Path, str], dict[str, str]]:
    """({entry no current key reaches: why}, {key: why kept though undecidable}). Unreached: its recorded code
    version differs from the code now, or it has no manifest (an older store's entry: its key rule is gone)."""
    stale, undecided = {}, {}
    for folder in store.entries():
        try:
            manifest = read_manifest(folder)
        except DamagedEntryError as err:
            stale[folder] = f"no readable manifest ({err.problem})"
            continue
        spec = _spec(folder)
        try:
            recorded = json.loads(manifest.get("context", ""))["code"]
            current = code_version(spec) if spec is not None else None
        except (ValueError, KeyError, TypeError, ImportError) as err:
            undecided[folder.name] = f"{type(err).__name__}: {err}"
            continue
        if current is None:
            undecided[folder.name] = "unreadable spec.json (run verify)"
        elif recorded != current:
            stale[folder] = f"code version {recorded}, now {current}"
    return stale, undecided


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m fedlib.runs", description=__doc__.split("\n")[0])
    parser.add_argument("--root", type=Path, default=None, help="the run store (default: results/runs/)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("ls", help="list entries with their labels")
    commands.add_parser("verify", help="verify every entry against its manifest")
    gc = commands.add_parser("gc", help="delete entries whose code version is gone")
    gc.add_argument("--dry-run", action="store_true", help="only list them")
    export = commands.add_parser("export", help="write entries to a tar archive")
    export.add_argument("archive", type=Path)
    export.add_argument("--select", default="", help="key=value,... as in reproduce --select")
    imp = commands.add_parser("import", help="merge a tar archive's entries, verified")
    imp.add_argument("archive", type=Path)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    store = RunStore.at(args.root)
    if args.command == "ls":
        rows = list_entries(store)
        for row in rows:
            print("  ".join(f"{v}" for v in row.values()))
        print(f"{len(rows)} entries in {store.root}")
    elif args.command == "verify":
        intact, damaged = verify_all(store)
        for key, why in damaged.items():
            print(f"damaged {key}: {why}")
        print(f"{intact} intact, {len(damaged)} damaged in {store.root}")
        return int(bool(damaged))
    elif args.command == "gc":
        stale, undecided = stale_entries(store)
        for folder, why in stale.items():
            if not args.dry_run:
                store.remove(folder)
            print(f"{'would delete' if args.dry_run else 'deleted'} {folder.name}: {why}")
        for key, why in undecided.items():
            print(f"kept {key}: cannot tell its code version ({why})")
        print(f"{len(stale)} stale entries {'found' if args.dry_run else 'deleted'} in {store.root}")
    elif args.command == "export":
        selection = parse_selection(args.select)
        folders = [f for f in store.entries() if (s := _spec(f)) is not None and s.matches(selection)]
        keys = export_entries(store, folders, args.archive)
        print(f"exported {len(keys)} entries to {args.archive}")
    else:
        report = import_entries(store, args.archive)
        for key, why in report.rejected.items():
            print(f"rejected {key}: {why}")
        print(f"imported {len(report.imported)} entries into {store.root}, {len(report.already_there)} already "
              f"there, {len(report.rejected)} rejected")
        return int(bool(report.rejected))
    return 0
