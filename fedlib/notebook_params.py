"""Reject notebook parameters that a notebook does not declare, before the notebook runs.

papermill injects `-p NAME VALUE` and `-f profile.yaml` values as a cell after the one tagged
`parameters`, and only logs a warning for a name that cell does not declare: a typo such as
`-p lrr 0.1` then runs the whole notebook on its defaults and ends with status ok. Two guards:

* every notebook calls `check_notebook_parameters("<name>", globals())` in the cell right after
  its parameters cell, which raises `UnknownParameterError` when papermill injected a name the
  parameters cell does not declare (the plain `papermill notebooks/x.ipynb ...` path);
* `scripts/reproduce.py` calls `check_parameters` on every profile and `-p` value before it
  starts papermill.

The declared names are the names the notebook's cell tagged `parameters` assigns, read with
`ast` from the notebook file (a .ipynb or its jupytext .py source), never from the kernel.
"""
from __future__ import annotations

import ast
import difflib
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


class UnknownParameterError(ValueError):
    """Parameters given to a notebook that its parameters cell does not declare."""


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


def declared_parameters(notebook: str | Path) -> list[str]:
    """Names assigned at the top level of `notebook`'s one cell tagged `parameters`, in order.

    `notebook` is a .ipynb or a jupytext .py file.
    """
    cells = [c for c in _code_cells(Path(notebook)) if "parameters" in c.metadata.get("tags", [])]
    if len(cells) != 1:
        raise ValueError(f"{notebook}: expected exactly one cell tagged 'parameters', found {len(cells)}")
    try:
        body = ast.parse(cells[0].source).body
    except SyntaxError as err:
        raise ValueError(f"{notebook}: the parameters cell is not plain Python ({err})") from err
    names: list[str] = []
    for statement in body:
        targets = statement.targets if isinstance(statement, ast.Assign) else (
            [statement.target] if isinstance(statement, ast.AnnAssign) else [])
        names += [t.id for t in targets if isinstance(t, ast.Name) and t.id not in names]
    return names


def parameter_defaults(notebook: str | Path) -> dict[str, object]:
    """The parameters cell's values (literals only: `ast.literal_eval`, nothing is executed)."""
    cells = [c for c in _code_cells(Path(notebook)) if "parameters" in c.metadata.get("tags", [])]
    names = declared_parameters(notebook)
    values: dict[str, object] = {}
    for statement in ast.parse(cells[0].source).body:
        if isinstance(statement, ast.Assign) and len(statement.targets) == 1 and isinstance(statement.targets[0], ast.Name):
            try:
                values[statement.targets[0].id] = ast.literal_eval(statement.value)
            except ValueError as err:
                raise ValueError(f"{notebook}: parameter {statement.targets[0].id} is not a literal ({err})") from err
    return {k: values[k] for k in names if k in values}


def check_parameters(given: Iterable[str], declared: Iterable[str], where: str) -> None:
    """Raise `UnknownParameterError` if a name in `given` is not in `declared`; `where` names the notebook."""
    valid = sorted(declared)
    unknown = sorted(set(given) - set(valid))
    if unknown:
        raise UnknownParameterError(
            f"{where}: unknown parameter(s) {', '.join(map(_with_suggestion(valid), unknown))}. "
            f"Valid parameters: {', '.join(valid)}. Fix the name in the -p option or the profile YAML.")


def _with_suggestion(valid: list[str]) -> Callable[[str], str]:
    """`name` followed by the closest valid name, if one is close: "lrr (did you mean lr?)"."""
    def show(name: str) -> str:
        close = difflib.get_close_matches(name, valid, n=1)
        return f"{name} (did you mean {close[0]}?)" if close else name
    return show


def _kernel_names() -> set[str]:
    """Names IPython itself puts in a kernel's namespace (In, Out, get_ipython, exit, ...)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return set()
    shell = get_ipython()
    return set(shell.user_ns_hidden) if shell is not None else set()


def check_notebook_parameters(name: str, namespace: Mapping[str, object],
                              notebooks: Path = NOTEBOOKS) -> dict[str, object]:
    """Raise `UnknownParameterError` when `namespace` (the notebook's `globals()`) holds a name that
    papermill injected but the notebook `notebooks/<name>.py` does not declare; otherwise return the
    declared parameters with their values (what the paper's `experiments(params)` reads).

    Call it in the cell right after the parameters cell. Private names (`_x`), IPython's own names
    and names any cell of the notebook binds (so re-running the cell later in a live session is
    fine) are not parameters; a mistyped parameter is none of these.
    """
    source = notebooks / f"{name}.py"
    if not source.is_file():
        raise FileNotFoundError(f"{source} is missing: check_notebook_parameters reads the notebook's jupytext "
                                f"source from the repository (install fedlib with `pip install -e .`)")
    declared = declared_parameters(source)
    bound = set().union(*(_assigned_names(ast.parse(_python_source(c.source))) for c in _code_cells(source)))
    ignored = _kernel_names() | (bound - set(declared))
    given = [k for k in namespace if not k.startswith("_") and k not in ignored]
    check_parameters(given, declared, f"notebook '{name}'")
    return {k: namespace[k] for k in declared}
