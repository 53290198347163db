"""Reject notebook parameters that a notebook does not declare, before the notebook runs, and check each
notebook's parameters cell against its paper's parameters dataclass.

papermill injects `-p NAME VALUE` and `-f profile.yaml` values as a cell after the one tagged
`parameters`, and only logs a warning for a name that cell does not declare: a typo such as
`-p lrr 0.1` then runs the whole notebook on its defaults and ends with status ok. Two guards:

* every notebook calls `check_notebook_parameters("<name>", globals())` in the cell right after
  its parameters cell, which raises `UnknownParameterError` when papermill injected a name that is not a
  field of the paper's dataclass (`fedlib.paper.params_class`), and returns the typed instance;
* `scripts/reproduce.py` builds that dataclass from every profile and `-p` value before it starts papermill.

The dataclass is the one place that knows the names, types, defaults and docs: each notebook's parameters cell is
generated from it (`generated_parameters_cell`; `scripts/build_notebooks.py` writes it into notebooks/<name>.py), as
`name: type = literal  # doc` lines, which papermill reads (`papermill --help-notebook`) and injects after; the
cell is collapsed in Lab and in rendered HTML. tests/test_paper_params.py fails when a cell differs from the
generator's. The cells after the check read `params.<name>`, never the cell's globals.
"""
from __future__ import annotations

import ast
import dataclasses
import json
import re
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from fedlib.grids import read_yaml
from fedlib.paper import notebooks_of, params_class
from fedlib.paper_params import PaperParams, ParameterError

NOTEBOOKS = Path(__file__).resolve().parents[1] / "notebooks"


def _code_cells(notebook: Path) -> list:
    import jupytext

    return [c for c in jupytext.read(notebook).cells if c.cell_type == "code"]


def python_source(cell_source: str) -> str:
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


def literal_source(value: Any) -> str:
    """`value` as Python source papermill reads: tuples as lists, mappings as dicts, strings double-quoted."""
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if value is None or isinstance(value, (bool, int, float)):
        return repr(value)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(map(literal_source, value)) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{literal_source(k)}: {literal_source(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"a parameter default must be a literal (None, bool, number, str, list, dict), got {value!r}")


def _literal_values(hint: Any) -> tuple[Any, ...]:
    """The values a `Literal[...]` annotation, or the `Literal` arm of a union, allows."""
    if typing.get_origin(hint) is typing.Literal:
        return typing.get_args(hint)
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return tuple(v for arm in typing.get_args(hint) for v in _literal_values(arm))
    return ()


def _type_name(hint: Any) -> str:
    """`hint` as a type papermill's parameter pattern accepts (words, brackets, commas): `list[int]`,
    `Optional[str]`, `Union[float, str]`; a `Literal` is the type of its values, a tuple a list, a mapping a dict."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Literal:
        return type(args[0]).__name__
    if origin in (typing.Union, types.UnionType):
        arms = list(dict.fromkeys(_type_name(a) for a in args if a is not type(None)))
        name = arms[0] if len(arms) == 1 else f"Union[{', '.join(arms)}]"
        return f"Optional[{name}]" if type(None) in args else name
    if origin is tuple:
        return f"list[{_type_name(args[0])}]"
    if origin is Mapping:
        return "dict" if Any in args else f"dict[{_type_name(args[0])}, {_type_name(args[1])}]"
    return hint.__name__


def parameters_source(cls: type[PaperParams]) -> str:
    """The parameters cell of `cls`'s notebook: one `name: type = default  # doc` line per field, in field order.

    papermill reads each line's type and doc (`papermill --help-notebook`); the kernel runs the cell as it is, so a
    type that needs `typing` (Optional, Union) is written as a string, which Python does not evaluate."""
    hints = typing.get_type_hints(cls)
    defaults = cls()
    lines = []
    for f in dataclasses.fields(cls):
        name = _type_name(hints[f.name])
        annotation = f'"{name}"' if re.search(r"\b(Optional|Union|Any)\b", name) else name
        choices = _literal_values(hints[f.name])
        doc = f.metadata["doc"]
        if choices:
            doc += f" ({'one of' if typing.get_origin(hints[f.name]) is typing.Literal else 'or'} "
            doc += f"{', '.join(map(literal_source, choices))})"
        value = literal_source(getattr(defaults, f.name))
        line = f"{f.name}: {annotation} = {value}  # {doc}"
        # papermill skips a line with a second '=' ("Unable to parse line") and cuts a value at a '#'
        if line.count("=") > 1 or "#" in value:
            raise ValueError(f"{cls.__name__}.{f.name}: its default or doc has an '=' (or its default a '#'), which "
                             f"papermill cannot parse in a parameters cell; reword it in {cls.__module__}")
        lines.append(line)
    return "\n".join(lines)


PARAMETERS_HEADER = '# %% tags=["parameters"] jupyter={"source_hidden": true}'
_CELL_HEADER = re.compile(r"^# %%.*$", re.MULTILINE)


def _parameters_cell_span(text: str, where: Path) -> tuple[int, int]:
    """Where the parameters cell's code starts and ends in a jupytext percent source."""
    headers = [m for m in _CELL_HEADER.finditer(text) if 'tags=["parameters"]' in m.group(0)]
    if len(headers) != 1:
        raise ValueError(f"{where}: expected exactly one cell tagged 'parameters', found {len(headers)}")
    following = _CELL_HEADER.search(text, headers[0].end())
    if following is None:
        raise ValueError(f"{where}: the parameters cell must be followed by the cell that checks it")
    return headers[0].start(), following.start()


def parameters_cell_source(notebook: Path) -> str:
    """The parameters cell of a jupytext percent source as it stands: its header line and code."""
    text = notebook.read_text()
    start, end = _parameters_cell_span(text, notebook)
    return text[start:end].rstrip("\n")


def generated_parameters_cell(name: str) -> str:
    """What the parameters cell of notebooks/<name>.py must be: its header and `parameters_source`."""
    return f"{PARAMETERS_HEADER}\n{parameters_source(params_class(name))}"


def write_parameters_cell(name: str, notebooks: Path | None = None) -> bool:
    """Write `generated_parameters_cell(name)` into notebooks/<name>.py; True if the file changed."""
    source = notebooks_of(name, notebooks) / f"{name}.py"
    text = source.read_text()
    start, end = _parameters_cell_span(text, source)
    updated = f"{text[:start]}{generated_parameters_cell(name)}\n\n{text[end:]}"
    if updated == text:
        return False
    source.write_text(updated)
    return True


def _kernel_names() -> set[str]:
    """Names IPython itself puts in a kernel's namespace (In, Out, get_ipython, exit, ...)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return set()
    shell = get_ipython()
    return set(shell.user_ns_hidden) if shell is not None else set()


def check_notebook_parameters(name: str, namespace: Mapping[str, object],
                              notebooks: Path | None = None) -> PaperParams:
    """The notebook's parameters as its paper's dataclass, built from `namespace` (the notebook's `globals()`);
    `UnknownParameterError` for a name papermill injected that is not a field, `ParameterError` for a wrong value.

    Call it in the cell right after the parameters cell. Private names (`_x`), IPython's own names
    and names any cell of the notebook binds (so re-running the cell later in a live session is
    fine) are not parameters; a mistyped parameter is none of these.
    """
    source = notebooks_of(name, notebooks) / f"{name}.py"
    if not source.is_file():
        raise FileNotFoundError(f"{source} is missing: check_notebook_parameters reads the notebook's jupytext "
                                f"source from the repository (install fedlib with `pip install -e .`)")
    cls = params_class(name)
    bound = set().union(*(_assigned_names(ast.parse(python_source(c.source))) for c in _code_cells(source)))
    ignored = _kernel_names() | (bound - set(cls.names()))
    given = {k: v for k, v in namespace.items() if not k.startswith("_") and k not in ignored}
    return cls.from_mapping(read_papermill_strings(cls, given, f"notebook '{name}'"), f"notebook '{name}'")


def _takes_container_not_text(hint: Any) -> bool:
    """Whether a parameter annotated `hint` takes a list, tuple or mapping and never a string."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        arms = typing.get_args(hint)
        return str not in arms and any(_takes_container_not_text(a) for a in arms)
    return typing.get_origin(hint) in (tuple, Mapping)


def read_papermill_strings(cls: type[PaperParams], values: Mapping[str, Any], where: str) -> dict[str, Any]:
    """`values` with each string given to a list, tuple or mapping parameter read as strict YAML 1.2, the reader of
    `reproduce -p` (`fedlib.grids.read_yaml`): papermill's `-p seeds "[0, 1]"` hands the notebook the string
    "[0, 1]". Every other value is left as it is, for the dataclass to check."""
    hints = typing.get_type_hints(cls)
    read = dict(values)
    for name, value in values.items():
        if isinstance(value, str) and name in hints and _takes_container_not_text(hints[name]):
            try:
                read[name] = read_yaml(value, f"{where}, -p {name} {value!r}")
            except ValueError as err:  # the YAML reader's one line: where, the line and the problem
                raise ParameterError(str(err)) from None
    return read
