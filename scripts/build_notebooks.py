"""`make notebooks`: write each notebook's parameters cell from its paper's dataclass into the jupytext source
notebooks/<name>.py, rebuild notebooks/<name>.ipynb from that source and execute it in place with the quick
profile, so the committed notebook carries the outputs nbval checks.

    python scripts/build_notebooks.py [name ...]
    python scripts/build_notebooks.py --parameters-only [name ...]   # only write the parameters cells
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import jupytext
import nbformat
import papermill

from fedlib.notebook_params import write_parameters_cell

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
# The kernel `make setup` installs (Makefile: ipykernel install --name ... --display-name ...). JupyterLab
# writes the running kernel's spec into the notebook on opening: any difference marks it as modified.
KERNELSPEC = {"name": "python3", "display_name": "Python 3 (fedlib)", "language": "python"}


def build(name: str) -> float:
    write_parameters_cell(name)
    source, target = NOTEBOOKS / f"{name}.py", NOTEBOOKS / f"{name}.ipynb"
    nb = jupytext.read(source)
    nb.metadata["kernelspec"] = KERNELSPEC
    nb.metadata.pop("jupytext", None)
    nbformat.write(nb, target)
    start = time.perf_counter()
    papermill.execute_notebook(str(target), str(target), kernel_name="python3", cwd=str(NOTEBOOKS),
                               progress_bar=False, extra_arguments=["--IPKernelApp.log_level=ERROR"])  # no TCP warning
    executed = nbformat.read(target, as_version=4)
    executed.metadata.pop("papermill", None)  # run timestamps would make every rebuild a diff
    for cell in executed.cells:
        cell.metadata.pop("papermill", None)
        cell.metadata.pop("execution", None)
        for output in cell.get("outputs", []):
            if output.get("name") in ("stdout", "stderr"):
                output["text"] = relative_paths(output["text"])
    nbformat.write(executed, target)
    return time.perf_counter() - start


def relative_paths(text: str) -> str:
    """`text` with this checkout's folder left out of the paths it prints (the store's, the claims'): a committed
    notebook names them from the repository's root, not the folder of the machine that built it."""
    return text.replace(f"{NOTEBOOKS.parent}{os.sep}", "")


def main(argv: list[str]) -> None:
    parameters_only = "--parameters-only" in argv
    names = [a for a in argv if a != "--parameters-only"]
    sources = sorted(p.stem for p in NOTEBOOKS.glob("*.py"))
    os.environ["TQDM_DISABLE"] = "1"  # the kernels inherit it (fedlib.display.show_progress): no bars in committed outputs
    for name in names or sources:
        if name not in sources:
            raise SystemExit(f"no notebooks/{name}.py; sources: {sources}")
        if parameters_only:
            print(f"{name}: parameters cell {'written' if write_parameters_cell(name) else 'unchanged'}")
        else:
            print(f"{name}: executed in {build(name):.0f} s", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
