"""Claims tables and result folders shared by the notebooks.

Each notebook ends with a claims table (claim, paper_value, measured, verdict) written to
`results/<notebook>/claims.csv`; `scripts/report.py` collects them into `results/REPORT.md`.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

VERDICTS = ("reproduced", "partly reproduced", "not reproduced", "not testable at this scale")
COLUMNS = ["claim", "paper_value", "measured", "verdict"]


def repo_root(start: Path | None = None) -> Path:
    """The folder holding pyproject.toml, searched upward from `start` (default: the cwd)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").exists() and (folder / "fedlib").is_dir():
            return folder
    raise FileNotFoundError(f"no fedlib checkout (pyproject.toml + fedlib/) above {here}")


def results_dir(notebook: str, root: str | Path | None = None) -> Path:
    """`<repo>/results/<notebook>/` (or `<root>/<notebook>/`), created if missing."""
    base = Path(root) if root is not None else repo_root() / "results"
    path = base / notebook
    path.mkdir(parents=True, exist_ok=True)
    return path


class Claims:
    """Accumulates claim rows; every measured value must come from a run or a computation."""

    def __init__(self) -> None:
        self.rows: list[dict[str, str]] = []

    def add(self, claim: str, paper_value: object, measured: object, verdict: str) -> None:
        if verdict not in VERDICTS:
            raise ValueError(f"verdict must be one of {VERDICTS}, got {verdict!r}")
        self.rows.append({"claim": claim, "paper_value": str(paper_value), "measured": str(measured), "verdict": verdict})

    def table(self) -> pd.DataFrame:
        return pd.DataFrame(self.rows, columns=COLUMNS)

    def save(self, folder: Path) -> Path:
        path = Path(folder) / "claims.csv"
        self.table().to_csv(path, index=False)
        return path


def collect_report(results: Path) -> str:
    """Markdown with every `results/*/claims.csv`, one section per notebook."""
    parts = ["# Reproduction report", ""]
    files = sorted(results.glob("*/claims.csv"))
    if not files:
        raise FileNotFoundError(f"no claims.csv under {results}: run `make reproduce` first")
    for f in files:
        df = pd.read_csv(f, dtype=str).fillna("")
        counts = df["verdict"].value_counts().to_dict()
        parts += [f"## {f.parent.name}", "", ", ".join(f"{v}: {n}" for v, n in counts.items()), ""]
        parts += ["| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
        for _, row in df.iterrows():
            parts.append("| " + " | ".join(str(row[c]).replace("|", "\\|") for c in COLUMNS) + " |")
        parts.append("")
    return "\n".join(parts)
