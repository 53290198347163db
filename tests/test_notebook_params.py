"""Unknown notebook parameters are rejected before a notebook runs: in the notebook itself (the plain
papermill path) and in scripts/reproduce.py (profiles and -p options)."""
from __future__ import annotations

import ast
import dataclasses
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import papermill
import pytest
import yaml

from fedlib.app import reproduce as reproduce_module
from fedlib.app.plan import run_parameters
from fedlib.notebook_params import python_source, check_notebook_parameters
from fedlib.paper import PAPERS, paper, params_class
from fedlib.paper_params import ParameterError, UnknownParameterError, check_names

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
NAMES = sorted(p.stem for p in NOTEBOOKS.glob("*.py"))


def parameters_namespace(name: str) -> dict:
    """The kernel namespace right after the parameters cell ran (without IPython's own names)."""
    cell = next(c for c in jupytext.read(NOTEBOOKS / f"{name}.py").cells if "parameters" in c.metadata.get("tags", []))
    namespace: dict = {}
    exec(cell.source, namespace)
    del namespace["__builtins__"], namespace["__annotations__"]  # the cell's `name: type = value` lines
    return namespace


@pytest.mark.parametrize("name", NAMES)
def test_every_notebook_checks_its_parameters_right_after_the_parameters_cell(name):
    cells = jupytext.read(NOTEBOOKS / f"{name}.py").cells
    i = next(i for i, c in enumerate(cells) if "parameters" in c.metadata.get("tags", []))
    assert f'check_notebook_parameters("{name}", globals())' in cells[i + 1].source
    assert {"profile", "results_root", "device"} <= set(params_class(name).names())


@pytest.mark.parametrize("name", NAMES)
def test_notebook_check_passes_declared_and_rejects_injected_typo(name):
    namespace = parameters_namespace(name)
    assert check_notebook_parameters(name, namespace) == params_class(name)()  # defaults, as in the committed run
    namespace["profile"] = "cpu"  # a declared parameter injected by papermill
    assert check_notebook_parameters(name, namespace).profile == "cpu"
    namespace["lrr"] = 0.1
    with pytest.raises(UnknownParameterError) as err:
        check_notebook_parameters(name, namespace)
    msg = str(err.value)
    assert msg.startswith(f"notebook '{name}': unknown parameter(s) lrr")
    assert "Valid parameters: " in msg and all(p in msg for p in namespace if p != "lrr")


@pytest.mark.parametrize("name", NAMES)
def test_cells_after_the_check_read_params_not_the_parameters_globals(name):
    """The parameters cell's globals exist for papermill only; every later cell reads the checked `params`."""
    cells = [c for c in jupytext.read(NOTEBOOKS / f"{name}.py").cells if c.cell_type == "code"]
    check = next(i for i, c in enumerate(cells) if "check_notebook_parameters(" in c.source)
    fields = set(params_class(name).names())
    globals_read = sorted({(n.id, c.source.splitlines()[0][:60]) for c in cells[check + 1:]
                           for n in ast.walk(ast.parse(python_source(c.source)))
                           if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load) and n.id in fields})
    assert globals_read == [], f"{name}: read params.<name> instead of the global (name, cell): {globals_read}"


def test_papermill_runs_a_notebook_with_its_quick_profile_file(tmp_path):
    """`papermill -f notebooks/profiles/<name>/quick.yaml` (here on the parameters and check cells only)."""
    nb = jupytext.read(NOTEBOOKS / "quickstart.py")
    check = next(i for i, c in enumerate(nb.cells) if "check_notebook_parameters(" in c.source)
    nb.cells = nb.cells[:check + 1] + [nbformat.v4.new_code_cell("print(params == type(params)())")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    jupytext.write(nb, tmp_path / "quickstart.ipynb")
    profile = NOTEBOOKS / "profiles" / "quickstart" / "quick.yaml"
    done = subprocess.run([sys.executable, "-m", "papermill", str(tmp_path / "quickstart.ipynb"),
                           str(tmp_path / "out.ipynb"), "-f", str(profile), "--cwd", str(NOTEBOOKS)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert out.cells[-1].outputs[0]["text"] == "True\n"  # the file's values are the defaults


def test_papermill_p_gives_lists_and_mappings_as_strings_which_the_notebook_reads_as_yaml(tmp_path):
    """`papermill -p seeds "[0, 1]"` injects the string "[0, 1]" (papermill types only numbers, True, False, None):
    the check cell reads it by reproduce's strict YAML reader, as `reproduce -p` would."""
    nb = jupytext.read(NOTEBOOKS / "quickstart.py")
    check = next(i for i, c in enumerate(nb.cells) if "check_notebook_parameters(" in c.source)
    nb.cells = nb.cells[:check + 1] + [nbformat.v4.new_code_cell(
        "print(params.seeds, dict(params.model_kwargs), params.alpha, params.device)")]
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    jupytext.write(nb, tmp_path / "quickstart.ipynb")
    done = subprocess.run([sys.executable, "-m", "papermill", str(tmp_path / "quickstart.ipynb"),
                           str(tmp_path / "out.ipynb"), "-p", "seeds", "[0, 1]", "-p", "model_kwargs",
                           "{hidden: [32]}", "-p", "alpha", "0.5", "-p", "device", "cpu", "--cwd", str(NOTEBOOKS)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    out = nbformat.read(tmp_path / "out.ipynb", as_version=4)
    assert out.cells[-1].outputs[0]["text"] == "(0, 1) {'hidden': (32,)} 0.5 cpu\n"


@pytest.mark.parametrize("given, message", [
    ("[0, 1", r"notebook 'quickstart', -p seeds '\[0, 1', line 1, column 6: "),  # the YAML reader's line and column
    ("0 1", r"QuickstartParams.seeds must be a list, got '0 1'"),  # YAML, but no list: the dataclass says so
    ("[0, 0]", r"QuickstartParams.seeds lists a seed more than once"),
])
def test_a_string_that_is_no_list_stops_the_check_naming_the_parameter(given, message):
    with pytest.raises(ParameterError, match=message):
        check_notebook_parameters("quickstart", {**parameters_namespace("quickstart"), "seeds": given})


def test_a_string_parameter_stays_a_string_even_when_it_reads_as_yaml():
    namespace = {**parameters_namespace("quickstart"), "device": "[cpu]", "model": "{mlp}"}
    with pytest.raises(ParameterError, match="device must be 'auto' or a torch device"):
        check_notebook_parameters("quickstart", namespace)
    assert check_notebook_parameters("quickstart", {**namespace, "device": "cpu"}).model == "{mlp}"


def test_notebook_check_ignores_names_the_notebook_binds_later():
    """Re-running the check cell in a live session, after later cells defined more names, is fine."""
    namespace = {**parameters_namespace("quickstart"), "np": object(), "check_notebook_parameters": object(),
                 "records": [], "_private": 1}
    check_notebook_parameters("quickstart", namespace)


def test_check_names_suggests_the_closest_name():
    with pytest.raises(UnknownParameterError, match=r"^nb: unknown parameter\(s\) lrr \(did you mean lr\?\), "
                                                    r"zzz\. Valid parameters: lr, rounds\."):
        check_names(["lr", "zzz", "lrr"], ["rounds", "lr"], "nb")
    check_names(["lr"], ["rounds", "lr"], "nb")


def test_notebook_check_rejects_a_wrong_value_naming_it():
    namespace = {**parameters_namespace("quickstart"), "lr": "0.1"}
    with pytest.raises(ValueError, match=r"^notebook 'quickstart': QuickstartParams.lr must be a finite number, "
                                         r"got '0.1'"):
        check_notebook_parameters("quickstart", namespace)


def test_notebook_check_rejects_a_count_beyond_the_bound_naming_it():
    """papermill reads `-p rounds 100000000000000000000` as that integer: the check cell stops it."""
    namespace = {**parameters_namespace("quickstart"), "rounds": 10**20}
    with pytest.raises(ValueError, match=r"^notebook 'quickstart': QuickstartParams.rounds must be at most 100,000"):
        check_notebook_parameters("quickstart", namespace)


def test_plain_papermill_run_with_a_typo_fails_in_the_check_cell(tmp_path):
    """`papermill nb.ipynb out.ipynb -p lrr 0.1` only warns; the notebook's check cell stops the run."""
    nb = jupytext.read(NOTEBOOKS / "quickstart.py")
    nb.metadata["kernelspec"] = {"name": "python3", "display_name": "Python 3", "language": "python"}
    jupytext.write(nb, tmp_path / "quickstart.ipynb")
    with pytest.raises(papermill.PapermillExecutionError) as err:
        papermill.execute_notebook(str(tmp_path / "quickstart.ipynb"), str(tmp_path / "out.ipynb"),
                                   parameters={"lrr": 0.1}, kernel_name="python3", progress_bar=False)
    assert err.value.ename == "UnknownParameterError"
    assert "unknown parameter(s) lrr (did you mean lr?)" in err.value.evalue
    executed = jupytext.read(tmp_path / "out.ipynb")
    assert not any(c.get("execution_count") for c in executed.cells[executed.cells.index(
        next(c for c in executed.cells if "check_notebook_parameters(" in c.source)) + 1:])  # nothing ran after


@pytest.fixture
def reproduce(tmp_path, monkeypatch):
    """reproduce over a copy of the quickstart notebook (its `Paper.notebooks`), with papermill forbidden to start."""
    notebooks = tmp_path / "notebooks"
    (notebooks / "profiles" / "quickstart").mkdir(parents=True)
    shutil.copy(NOTEBOOKS / "quickstart.py", notebooks)

    def no_execution(*args, **kwargs):
        raise AssertionError("papermill started although a parameter is unknown")

    monkeypatch.setattr(papermill, "execute_notebook", no_execution)
    with PAPERS.override("quickstart", dataclasses.replace(paper("quickstart"), notebooks=notebooks)):
        yield reproduce_module, notebooks / "profiles" / "quickstart" / "cpu.yaml"


def test_reproduce_rejects_unknown_profile_key_before_executing(reproduce, tmp_path, capsys):
    module, profile = reproduce
    profile.write_text(yaml.safe_dump({"profile": "cpu", "lrr": 0.1, "rounds": 3}))
    assert module.main(["--profile", "cpu", "--only", "quickstart", "--results", str(tmp_path / "results")]) == 2
    err = capsys.readouterr().err
    assert f"notebook 'quickstart', {profile}: unknown parameter(s) lrr (did you mean lr?)" in err
    assert "Valid parameters: alpha, batch_size" in err
    assert not (tmp_path / "results").exists()


def test_reproduce_rejects_unknown_override_before_executing(reproduce, tmp_path, capsys):
    module, profile = reproduce
    profile.write_text(yaml.safe_dump({"profile": "cpu", "rounds": 3}))
    assert module.main(["--profile", "cpu", "--only", "quickstart", "-p", "round", "5", "--results", str(tmp_path / "results")]) == 2
    assert "notebook 'quickstart', -p option: unknown parameter(s) round (did you mean rounds?)" in capsys.readouterr().err


def test_reproduce_passes_profile_and_overrides_to_papermill(reproduce, tmp_path):
    module, profile = reproduce
    profile.write_text(yaml.safe_dump({"profile": "cpu", "rounds": 3}))
    injected = {"results_root": str(tmp_path), "runs_root": str(tmp_path / "runs"), "runner": "local",
                "ray_address": None}
    assert run_parameters("quickstart", "cpu", {"seeds": [0, 1]}, injected) == {
        "profile": "cpu", "rounds": 3, "seeds": [0, 1], "results_root": str(tmp_path),
        "runs_root": str(tmp_path / "runs"), "runner": "local", "ray_address": None}
