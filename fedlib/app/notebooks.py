"""Where the application finds the checkout's notebooks and the papers' claims: each lookup one small function,
read at call time (a test points `NOTEBOOKS` at a copy)."""
from __future__ import annotations

import importlib
from collections.abc import Sequence
from pathlib import Path

from fedlib.claims.judge import declared
from fedlib.dryrun import notebook_names

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


def available() -> list[str]:
    """Every notebook of the checkout: the stems of its jupytext sources."""
    return list(notebook_names(NOTEBOOKS))


def with_claims(names: Sequence[str]) -> list[str]:
    """Those of `names` whose paper declares claims (the Flower notebook's result is its parity table)."""
    return [name for name in names if name in declared()]


def judge_claims(module: str, bundle: object, out_dir: Path) -> None:
    """Paper `module`'s claims judged on the evidence `bundle`, saved as out_dir/claims.csv (`module`: one that
    `with_claims` names; the caller checks)."""
    importlib.import_module(f"fedlib.claims.{module}").claims(bundle).save(out_dir)
