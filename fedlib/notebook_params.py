"""Reject notebook parameters that a notebook does not declare, before the notebook runs, and check each
notebook's parameters cell against its paper's parameters dataclass.

papermill injects `-p NAME VALUE` and `-f profile.yaml` values as a cell after the one tagged
`parameters`, and only logs a warning for a name that cell does not declare: a typo such as
`-p lrr 0.1` then runs the whole notebook on its defaults and ends with status ok. Two guards:

* every notebook calls `check_notebook_parameters("<name>", globals())` in the cell right after
  its parameters cell, which raises `UnknownParameterError` when papermill injected a name that is not a
  field of the paper's dataclass (`fedlib.paper_params.params_class`), and returns the typed instance;
* `scripts/reproduce.py` builds that dataclass from every profile and `-p` value before it starts papermill.

The parameters cell stays plain literals (papermill needs them); `cell_drift` compares it with the dataclass,
which is the one place that knows the names and defaults (tests/test_paper_params.py runs it on every notebook).
"""
from __future__ import annotations

import ast
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fedlib.paper_params import PaperParams, params_class

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _code_cells(notebook: Path) -> list:
    import jupytext

    return [c for c in jupytext.read(notebook).cells if c.cell_type == "code"]


def _python_source(cell_source: str) -> str:
    """A cell's source as plain Python (IPython magics such as `%time` rewritten as calls)."""
    from IPython.core.inputtransformer2 import TransformerManager

    return TransformerManager().transform_cell(cell_source)


def _assigned_names(tree: ast.AST) -> set[str]:
    """Every name `tree` binds: assignment and loop targets, imports, def and class names."""
    names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    for node in ast.walk(tree):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            names |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            names.add(node.name)
    return names


def parameters_cell(notebook: str | Path) -> dict[str, Any]:
    """The names and literal values (`ast.literal_eval`: nothing is executed) the one cell tagged `parameters`
    of `notebook` (a .ipynb or its jupytext .py source) assigns, in order."""
    cells = [c for c in _code_cells(Path(notebook)) if "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"{notebook}: expected exactly one cell tagged 'parameters', found {len(cells)}")
    try:
        body = ast.parse(cells[0].source).body
    except SyntaxError as err:
        raise ValueError(f"{notebook}: the parameters cell is not plain Python ({err})") from err
    values: dict[str, Any] = {}
    for statement in body:
        if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1
                and isinstance(statement.targets[0], ast.Name)):
            raise ValueError(f"{notebook}: line {statement.lineno} of the parameters cell is not `name = literal`")
        try:
            values[statement.targets[0].id] = ast.literal_eval(statement.value)
        except ValueError as err:
            raise ValueError(f"{notebook}: parameter {statement.targets[0].id} is not a literal ({err})") from err
    return values


def _literal(value: Any) -> str:
    """`value` as JSON, tuples as lists and mappings as objects: 5 and 5.0 differ, [1] and (1,) do not."""
    return json.dumps(value, sort_keys=True, default=dict)


def cell_drift(cls: type[PaperParams], cell: Mapping[str, Any]) -> list[str]:
    """One line per difference between a parameters cell's names and values and `cls`'s fields and defaults."""
    defaults = cls()
    lines = [f"{name}: in the parameters cell, not a field of {cls.__name__}" for name in cell if name not in
             cls.names()]
    lines += [f"{name}: a field of {cls.__name__}, missing from the parameters cell" for name in cls.names()
              if name not in cell]
    lines += [f"{name}: the cell says {_literal(cell[name])}, {cls.__name__} says {_literal(getattr(defaults, name))}"
              for name in cls.names() if name in cell and _literal(cell[name]) != _literal(getattr(defaults, name))]
    return lines


def _kernel_names() -> set[str]:
    """Names IPython itself puts in a kernel's namespace (In, Out, get_ipython, exit, ...)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return set()
    shell = get_ipython()
    return set(shell.user_ns_hidden) if shell is not None else set()


def check_notebook_parameters(name: str, namespace: Mapping[str, object],
                              notebooks: Path = NOTEBOOKS) -> PaperParams:
    """The notebook's parameters as its paper's dataclass, built from `namespace` (the notebook's `globals()`);
    `UnknownParameterError` for a name papermill injected that is not a field, `ParameterError` for a wrong value.

    Call it in the cell right after the parameters cell. Private names (`_x`), IPython's own names
    and names any cell of the notebook binds (so re-running the cell later in a live session is
    fine) are not parameters; a mistyped parameter is none of these.
    """
    source = notebooks / f"{name}.py"
    if not source.is_file():
        raise FileNotFoundError(f"{source} is missing: check_notebook_parameters reads the notebook's jupytext "
                                f"source from the repository (install fedlib with `pip install -e .`)")
    cls = params_class(name)
    bound = set().union(*(_assigned_names(ast.parse(_python_source(c.source))) for c in _code_cells(source)))
    ignored = _kernel_names() | (bound - set(cls.names()))
    return cls.from_mapping({k: v for k, v in namespace.items() if not k.startswith("_") and k not in ignored},
                            f"notebook '{name}'")
