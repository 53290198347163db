"""The run store: every finished run's records under `results/runs/`, keyed by content.

Layout: `<root>/<key>/` with `spec.json` and one CSV per record table (`rounds.csv`, `clients.csv`, and
any tables the experiment collects); `<root>/in-progress/<key>.pt` holds a running spec's checkpoint.
The key hashes the spec and `code_version(spec.experiment)`: the source of every fedlib module that can
change a run's records (the engine: everything but the paper modules and the modules that only read
records, `report`, `targets` and `notebook_params`) plus the spec's own paper module. A change there makes
the entries it could affect stale (recomputed on the next request, never silently reused); notebook,
theory, test and other papers' changes do not. Entries are written to a temporary folder and renamed into place, so an interrupted write leaves no
half entry; checkpoints are replaced atomically the same way. Nothing read from the store is executed:
records are CSV, checkpoints load with `torch.load(weights_only=True)`.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd
import torch

from fedlib.runs.spec import RunSpec

Records = dict[str, pd.DataFrame]  # table name -> frame ("rounds", "clients", ...)


# Modules that only read records (verdict rules, targets, notebook parameters, the claims tables): editing them
# must not invalidate stored runs.
RECORD_READERS = ("report.py", "targets.py", "notebook_params.py", "claims")


def versioned_sources(experiment: str) -> list[Path]:
    """The fedlib sources that can change `experiment`'s records (paths relative to the package): the engine
    and the experiment's own paper module, not the other papers' modules nor the record readers."""
    package = Path(__file__).resolve().parents[1]
    sources = []
    for path in sorted(package.rglob("*.py")):
        relative = path.relative_to(package)
        if relative.parts[0] == "papers" and relative.stem not in ("__init__", experiment):
            continue
        if str(relative) in RECORD_READERS or relative.parts[0] in RECORD_READERS:
            continue
        sources.append(relative)
    return sources


@functools.lru_cache(maxsize=None)
def code_version(experiment: str) -> str:
    """Hash (paths and contents) of `versioned_sources(experiment)`."""
    package = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for relative in versioned_sources(experiment):
        digest.update(str(relative).encode())
        digest.update((package / relative).read_bytes())
    return digest.hexdigest()[:16]


class FileCheckpoint:
    """A run's checkpoint file (see `fedlib.contracts.Checkpoint`)."""

    def __init__(self, path: Path, every: int) -> None:
        if every < 1:
            raise ValueError(f"checkpoint every must be >= 1 round, got {every}")
        self.path, self.every = path, every

    def load(self) -> dict[str, Any] | None:
        if not self.path.exists():
            return None
        try:
            return torch.load(self.path, map_location="cpu", weights_only=True)
        except Exception as err:  # a checkpoint we cannot read is reported, not trusted and not deleted
            reason = (str(err).strip().splitlines() or [type(err).__name__])[0]
            raise ValueError(f"cannot read checkpoint {self.path} ({reason}); it holds only tensors and plain data, "
                             "so it is not loaded any other way: delete it to restart that run") from err

    def save(self, state: dict[str, Any]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=self.path.parent, suffix=".tmp")
        os.close(fd)
        torch.save(state, tmp)
        os.replace(tmp, self.path)


class RunStore:
    def __init__(self, root: str | Path, code: str | None = None) -> None:
        """`code` overrides the code version of every entry (None: `code_version` of each spec's experiment)."""
        self.root = Path(root)
        self.code = code

    @staticmethod
    def at(root: str | Path | None = None) -> RunStore:
        """The store at `root`, or the repository's results/runs/ (a notebook's `runs_root` parameter)."""
        if root is not None and str(root) != "":
            return RunStore(root)
        from fedlib.report import repo_root

        return RunStore(repo_root(Path(__file__).parent) / "results" / "runs")

    def key(self, spec: RunSpec) -> str:
        return spec.key(code_version(spec.experiment) if self.code is None else self.code)

    def folder(self, spec: RunSpec) -> Path:
        return self.root / self.key(spec)

    def has(self, spec: RunSpec) -> bool:
        return (self.folder(spec) / "spec.json").exists()

    def checkpoint(self, spec: RunSpec, every: int) -> FileCheckpoint:
        return FileCheckpoint(self.root / "in-progress" / f"{self.key(spec)}.pt", every)

    def load(self, spec: RunSpec) -> Records:
        folder = self.folder(spec)
        stored = json.loads((folder / "spec.json").read_text())
        if stored != spec.to_json():
            raise ValueError(f"{folder}/spec.json does not match the spec it is filed under; delete the folder")
        return {p.stem: pd.read_csv(p, float_precision="round_trip") for p in sorted(folder.glob("*.csv"))}

    def save(self, spec: RunSpec, records: Records) -> Path:
        if "rounds" not in records:
            raise ValueError("a run's records need a 'rounds' table")
        folder = self.folder(spec)
        self.root.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=self.root, prefix=".writing-"))
        for name, frame in records.items():
            frame.to_csv(tmp / f"{name}.csv", index=False)
        (tmp / "spec.json").write_text(json.dumps(spec.to_json(), indent=1, sort_keys=True))
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
        self.checkpoint(spec, 1).path.unlink(missing_ok=True)
        return folder
