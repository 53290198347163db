"""Where this package's checkout is and where results go by default (kept apart from fedlib.report so that the
store and the command line find their folders without importing the statistics)."""
from __future__ import annotations

from pathlib import Path


def repo_root(start: Path | None = None) -> Path:
    """The folder holding pyproject.toml, searched upward from `start` (default: the cwd)."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        if (folder / "pyproject.toml").exists() and (folder / "fedlib").is_dir():
            return folder
    raise FileNotFoundError(f"no fedlib checkout (pyproject.toml + fedlib/) above {here}")


def checkout() -> Path | None:
    """The fedlib checkout this package is imported from (an editable install), else the one above the working
    folder, else None (an installed package used outside any checkout)."""
    for start in (Path(__file__).parent, Path.cwd()):
        try:
            return repo_root(start)
        except FileNotFoundError:
            continue
    return None


def results_root() -> Path:
    """Where results go by default: `<checkout>/results` (see `checkout`), or `results/` in the working folder
    outside any checkout."""
    found = checkout()
    return (found if found is not None else Path.cwd()) / "results"


def results_dir(notebook: str, root: str | Path | None = None) -> Path:
    """`<results_root()>/<notebook>/` (or `<root>/<notebook>/`), created if missing."""
    base = Path(root) if root is not None else results_root()
    path = base / notebook
    path.mkdir(parents=True, exist_ok=True)
    return path
