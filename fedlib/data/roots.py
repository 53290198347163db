"""Where datasets are looked for: one rule for notebooks, the runner and the loaders.

    1. the `root` given (a notebook's `data_root` parameter, `load_dataset(root=...)`);
    2. the FEDLIB_DATA environment variable;
    3. the `data/` folder of the repository this fedlib comes from (the README's layout);
    4. `./data` when fedlib is installed outside a checkout.
The loaders then also search system locations (Debian's Fashion-MNIST in /usr/share/datasets/).
"""
from __future__ import annotations

import os
from pathlib import Path

ENV_VAR = "FEDLIB_DATA"


def data_root(root: str | Path | None = None) -> Path:
    if root is not None and str(root) != "":
        return Path(root).expanduser().resolve()
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser().resolve()
    checkout = Path(__file__).resolve().parents[2]
    if (checkout / "pyproject.toml").is_file() and (checkout / "data").is_dir():
        return checkout / "data"
    return Path("data").resolve()
