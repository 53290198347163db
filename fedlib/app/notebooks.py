"""Where the application finds the papers' notebooks and claims: the declared papers (`fedlib.paper`), fedlib's and
those of the modules the user allowed; `NOTEBOOKS` is the checkout's folder of the expected-results files."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fedlib.paper import declared, paper, papers

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


def available() -> list[str]:
    """Every declared paper's notebook (read after `allow_imports`: a paper of an allowed module counts)."""
    return [p.name for p in papers()]


def folder(name: str) -> Path:
    """The folder of paper `name`'s notebook source and its profiles (`Paper.notebooks`)."""
    return paper(name).notebooks


def with_claims(names: Sequence[str]) -> list[str]:
    """Those of `names` whose paper declares claims (the Flower notebook's result is its parity table)."""
    return [name for name in names if name in declared()]


def judge_claims(name: str, bundle: object, out_dir: Path) -> None:
    """Paper `name`'s claims judged on the evidence `bundle`, saved as out_dir/claims.csv (`name`: one that
    `with_claims` names; the caller checks)."""
    paper(name).judge(bundle).save(out_dir)
