"""Every notebook: a papermill-parseable parameters cell, cpu/full profiles naming only real parameters,
and a committed .ipynb whose cells are exactly its jupytext source (so nbval checks what the source says)."""
from __future__ import annotations

import dataclasses
import io
import logging
from pathlib import Path

import jupytext
import nbformat
import pytest
import yaml
from papermill.translators import PythonTranslator

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"
NAMES = sorted(p.stem for p in NOTEBOOKS.glob("*.py"))


def _parameters(name: str) -> dict:
    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    cells = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(cells) == 1, f"{name}: exactly one cell tagged 'parameters'"
    log = io.StringIO()
    handler = logging.StreamHandler(log)
    logging.getLogger("papermill").addHandler(handler)
    try:
        params = {p.name: p for p in PythonTranslator.inspect(cells[0])}
    finally:
        logging.getLogger("papermill").removeHandler(handler)
    assert not log.getvalue(), f"{name}: papermill cannot parse its parameters cell: {log.getvalue()}"
    return params


def test_there_are_notebooks():
    assert {"quickstart", "fedshift", "taco", "fedaq", "mucsc"} <= set(NAMES)


PROFILES = ("quick", "cpu", "gpu", "full")


@pytest.mark.parametrize("name", NAMES)
def test_parameters_and_profiles(name):
    params = _parameters(name)
    # the runner's parameters (scripts/reproduce.py injects them) and the data-root rule's
    assert {"profile", "results_root", "runs_root", "runner", "ray_address", "data_root", "device"} <= set(params)
    for profile in PROFILES:
        values = yaml.safe_load((NOTEBOOKS / "profiles" / name / f"{profile}.yaml").read_text())
        unknown = set(values) - set(params)
        assert not unknown, f"{name}/{profile}.yaml sets unknown parameters {sorted(unknown)}"
        assert values["profile"] == profile


@pytest.mark.parametrize("name", NAMES)
def test_papermill_help_shows_every_parameter_typed_and_described(name, tmp_path):
    from fedlib.paper import params_class

    nb = jupytext.read(NOTEBOOKS / f"{name}.py")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    jupytext.write(nb, tmp_path / f"{name}.ipynb")
    from click.testing import CliRunner
    from papermill.cli import papermill  # what `python -m papermill` runs, here in this process

    done = CliRunner().invoke(papermill, ["--help-notebook", str(tmp_path / f"{name}.ipynb")])
    assert done.exit_code == 0, done.output
    shown = done.output
    assert "Unknown type" not in shown
    docs = {f.name: f.metadata["doc"] for f in dataclasses.fields(params_class(name))}
    for field, doc in docs.items():
        assert f"  {field}: " in shown and doc in shown, f"{name}: {field} missing from --help-notebook"


@pytest.mark.parametrize("name", NAMES)
def test_the_parameters_cell_is_collapsed(name):
    cell = next(c for c in jupytext.read(NOTEBOOKS / f"{name}.py").cells if "parameters" in c.metadata.get("tags", []))
    assert cell.metadata["jupyter"] == {"source_hidden": True}  # Lab collapses it; nbconvert's lab template too


@pytest.mark.parametrize("name", NAMES)
def test_gpu_profile_is_fashion_mnist_on_a_gpu_with_seeds(name):
    """The gpu tier: data any machine can have offline (Debian's Fashion-MNIST), >= 3 seeds, device auto."""
    text = (NOTEBOOKS / "profiles" / name / "gpu.yaml").read_text()
    values = yaml.safe_load(text)
    assert values["dataset"] == "fashion_mnist", f"{name}/gpu.yaml must use Fashion-MNIST (or state a stand-in)"
    assert values["device"] in ("auto", "cuda")
    assert len(values["seeds"]) >= 3
    assert text.lstrip().startswith("#"), f"{name}/gpu.yaml starts with a comment stating the paper's setting"


@pytest.mark.parametrize("name", NAMES)
def test_committed_notebook_matches_its_source(name):
    source = [c.source for c in jupytext.read(NOTEBOOKS / f"{name}.py").cells]
    committed = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    assert [c.source for c in committed.cells] == source, f"run `make notebooks` to rebuild {name}.ipynb"
    assert committed.metadata["kernelspec"]["name"] == "python3"
    assert any(c.get("outputs") for c in committed.cells if c.cell_type == "code"), "committed without outputs"


@pytest.mark.parametrize("name", NAMES)
def test_committed_outputs_hold_no_warnings(name):
    """What a reader sees first: no warning text in a committed notebook's outputs (tqdm's "IProgress not found"
    nag, for one, appeared in every notebook's second cell until fedlib.runs.runner silenced it on import)."""
    committed = nbformat.read(NOTEBOOKS / f"{name}.ipynb", as_version=4)
    for i, cell in enumerate(c for c in committed.cells if c.cell_type == "code"):
        for output in cell.get("outputs", []):
            text = output.get("text", "") if output.get("output_type") == "stream" else ""
            assert "Warning:" not in text, f"{name}.ipynb, code cell {i}: {text[:200]}"
