"""environment.yml (conda) and pyproject.toml (pip) declare the same packages with the same lower bounds,
the same Python floor as the README, and the Makefile's setup works as root and for JupyterLab."""
from __future__ import annotations

import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
CONDA_TO_PIP = {"pytorch": "torch", "ray-core": "ray"}


def _parse(requirement: str) -> tuple[str, str]:
    match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*(.*)", requirement)
    assert match, requirement
    name = match.group(1).lower().replace("_", "-")
    return CONDA_TO_PIP.get(name, name), match.group(2).replace(" ", "")


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    pip = dict(_parse(r) for r in project["dependencies"] + extras["vision"] + extras["ray"] + extras["notebooks"]
               + extras["test"] if not r.startswith(project["name"]))  # test's own [notebooks] is listed already
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = dict(_parse(r) for r in env["dependencies"] if isinstance(r, str) and _parse(r)[0] != "python")
    assert conda == pip


def test_python_floor_is_the_same_everywhere_and_holds_here():
    floor = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    version = re.fullmatch(r">=(\d+)\.(\d+)\.(\d+)", floor)
    assert version, f"requires-python {floor!r} is not of the form >=X.Y.Z"
    numbers = tuple(int(v) for v in version.groups())
    assert numbers >= (3, 11), "the tests import tomllib, new in Python 3.11"
    assert sys.version_info[:3] >= numbers, "the tests run on a Python the project does not claim"
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    assert f"python{floor},<{numbers[0]}.{numbers[1] + 1}" in env["dependencies"]
    assert f"Python ≥ {floor[2:]}" in (ROOT / "README.md").read_text()


def test_design_card_packages_are_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_parse(r)[0] for extra in project["optional-dependencies"].values()
                for r in project["dependencies"] + extra}
    card = {"jupyterlab", "papermill", "torch", "torchvision", "numpy", "seaborn", "nbval", "sympy"}
    assert card <= declared


def test_the_library_imports_none_of_the_notebook_and_test_tools():
    """A Flower SuperNode installs the library without the extras: nothing under fedlib/ imports their packages
    at module level (fedlib.notebook_params reads notebooks with jupytext inside its functions)."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    base = {_parse(r)[0] for r in project["dependencies"]}
    tools = {_parse(r)[0] for name in ("notebooks", "test") for r in project["optional-dependencies"][name]} - base
    modules = {"jupyterlab": "jupyterlab", "ipykernel": "ipykernel", "papermill": "papermill", "jupytext": "jupytext",
               "pytest": "pytest", "nbval": "nbval", "pytest-xdist": "xdist", "sympy": "sympy",
               "matplotlib": "matplotlib", "seaborn": "seaborn"}
    assert tools - {project["name"]} == set(modules)
    top_level = re.compile(rf"^(?:import|from) ({'|'.join(modules.values())})\b", re.MULTILINE)
    offenders = [f"{path.relative_to(ROOT)}: {m.group(0)}" for path in sorted((ROOT / "fedlib").rglob("*.py"))
                 for m in top_level.finditer(path.read_text())]
    assert offenders == []


def notebook_builder():
    """scripts/build_notebooks.py as a module (`make notebooks`)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("build_notebooks", ROOT / "scripts" / "build_notebooks.py")
    builder = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(builder)
    return builder


def test_committed_notebooks_carry_the_kernelspec_make_installs():
    """JupyterLab writes the running kernel's spec into a notebook it opens: a difference marks the
    notebook as modified before the reader touched it."""
    import json

    install = re.search(r"ipykernel install .*--name (\S+) --display-name \"([^\"]+)\"",
                        (ROOT / "Makefile").read_text())
    assert install, "Makefile no longer installs a named kernel"
    installed = {"name": install.group(1), "display_name": install.group(2), "language": "python"}
    builder = notebook_builder()
    assert builder.KERNELSPEC == installed
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert json.loads(notebook.read_text())["metadata"]["kernelspec"] == installed, notebook.name


def test_committed_notebooks_name_paths_from_the_repository_root():
    """A committed notebook prints the store's and the claims' folders as the repository names them, not the folder
    of the machine that built it (scripts/build_notebooks.py: `relative_paths`)."""
    import nbformat

    builder = notebook_builder()
    assert builder.relative_paths(f"the store ({ROOT}/results/runs)") == "the store (results/runs)"
    for notebook in sorted((ROOT / "notebooks").glob("*.ipynb")):
        printed = "".join(o.get("text", "") for c in nbformat.read(notebook, as_version=4).cells
                          for o in c.get("outputs", []))
        assert not re.findall(r"/\S*/results/", printed), notebook.name


def test_make_lab_allows_root_exactly_when_run_as_root():
    # --no-print-directory: under `make test` the inner make would also print "Leaving directory" lines
    dry_run = subprocess.run(["make", "--no-print-directory", "-n", "-o", ".venv/.fedlib-installed", "lab"], cwd=ROOT,
                             capture_output=True, text=True, check=True).stdout.strip().splitlines()
    command = next(line for line in dry_run if "jupyter lab" in line)
    assert command.split()[1:4] == ["lab", "notebooks/", "--config=jupyter_server_config.json"]
    assert command.endswith("--allow-root") == (os.geteuid() == 0)


def test_setup_installs_the_rest_with_the_installer_named_and_refuses_an_unknown_one(tmp_path):
    def dry_run(*options: str) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "--no-print-directory", "-n", "-B", f"VENV={tmp_path / 'venv'}", *options,
                               "setup"], cwd=ROOT, capture_output=True, text=True)

    default, pip = dry_run().stdout, dry_run("INSTALLER=pip").stdout
    assert "uv pip install --quiet --compile-bytecode --python" in default and "uv pip install" not in pip
    assert all('-e ".[ray,flower,notebooks,test]"' in out for out in (default, pip))
    unknown = dry_run("INSTALLER=conda")
    assert unknown.returncode != 0
    assert "INSTALLER=conda is not an installer: use INSTALLER=uv or INSTALLER=pip" in unknown.stderr
    assert not (tmp_path / "venv").exists()


def test_ledger_piece_starts_the_pieces_asked_for_each_at_the_lowest_priority_with_its_own_log(tmp_path):
    """`make ledger-piece PIECES=2` starts two pieces in the background (here a stand-in interpreter that writes its
    niceness and arguments to its log), the second logging beside the first; a count that is not one or more is
    refused, naming PIECES, and starts none."""
    python = tmp_path / "python"
    python.write_text('#!/bin/sh\necho "nice $(nice) args $*"\n')
    python.chmod(0o755)

    def make(pieces: str, log: Path) -> subprocess.CompletedProcess:
        return subprocess.run(["make", "--no-print-directory", "-o", ".venv/.fedlib-installed", "ledger-piece",
                               f"PY={python}", f"PIECES={pieces}", f"PIECE_LOG={log}", "BUDGET=5m"], cwd=ROOT,
                              capture_output=True, text=True)

    started = make("2", tmp_path / "logs" / "piece.log")
    assert started.returncode == 0, started.stderr
    logs = [tmp_path / "logs" / "piece.log", tmp_path / "logs" / "piece-2.log"]
    for log in logs:
        assert f"tail -f {log}" in started.stdout
    deadline = time.monotonic() + 30
    while not all(log.exists() and log.read_text() for log in logs) and time.monotonic() < deadline:
        time.sleep(0.1)
    for log in logs:
        assert log.read_text() == "nice 19 args -m fedlib piece --profile gpu --budget 5m --long-runs continue\n"
    assert sorted(p.name for p in (tmp_path / "logs").iterdir()) == ["piece-2.log", "piece.log"]
    for bad in ("0", "two", "", "-1"):
        refused = make(bad, tmp_path / "refused" / "piece.log")
        assert refused.returncode != 0 and f"PIECES={bad}: the number of pieces to start, 1 or more" in refused.stderr
        assert not (tmp_path / "refused").exists()


def test_lab_lists_each_notebook_once_and_opens_it_with_its_source():
    """The contents manager `make lab` runs (jupytext's, with the repository's config) lists notebooks/ with each
    notebook once, as .ipynb, and opening it reads its cells from the paired .py source."""
    import json

    import jupytext
    from jupytext.sync_contentsmanager import TextFileContentsManager  # what jupytext's server extension installs

    config = json.loads((ROOT / "jupyter_server_config.json").read_text())
    manager = TextFileContentsManager(root_dir=str(ROOT / "notebooks"),
                                      hide_globs=config["ContentsManager"]["hide_globs"])
    listed = [item["name"] for item in manager.get("", content=True)["content"] if item["type"] == "notebook"]
    sources = sorted(p.stem for p in (ROOT / "notebooks").glob("*.py"))
    assert sorted(listed) == [f"{name}.ipynb" for name in sources]
    opened = manager.get("quickstart.ipynb", content=True)["content"]
    source = jupytext.read(ROOT / "notebooks" / "quickstart.py")
    assert [c.source for c in opened.cells] == [c.source for c in source.cells]


def test_nbval_waits_for_a_cells_output_as_long_as_the_root_conftest_says():
    """nbval's own 5 s wait for a cell's output fails cells that ran, on a loaded machine (conftest.py)."""
    import runpy

    collected: list[pytest.Item] = []

    class Collect:
        def pytest_collection_finish(self, session: pytest.Session) -> None:
            collected.extend(session.items)

    root = Path(__file__).resolve().parents[1]
    code = pytest.main(["--collect-only", "-q", "-p", "no:cacheprovider", "-p", "no:xdist",
                        str(root / "notebooks" / "quickstart.ipynb")], plugins=[Collect()])
    assert code == 0 and collected
    wait = runpy.run_path(str(root / "conftest.py"))["NBVAL_OUTPUT_TIMEOUT_S"]
    assert wait > 5 and {item.output_timeout for item in collected} == {wait}
