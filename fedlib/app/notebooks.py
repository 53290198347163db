"""Which of the declared papers (`fedlib.paper`: fedlib's and those of the modules the user allowed) have claims, and
their judging; `NOTEBOOKS` is the checkout's folder of the expected-results files."""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from fedlib.paper import declared, paper

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"


def with_claims(names: Sequence[str]) -> list[str]:
    """Those of `names` whose paper declares claims (the Flower notebook's result is its parity table)."""
    claimed = declared()
    return [name for name in names if name in claimed]


def judge_claims(name: str, bundle: object, out_dir: Path) -> None:
    """Paper `name`'s claims judged on the evidence `bundle`, saved as out_dir/claims.csv (`name`: one that
    `with_claims` names; the caller checks)."""
    paper(name).judge(bundle).save(out_dir)
