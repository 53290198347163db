"""Each paper's parameters dataclass: the one place of names, defaults, docs and valid values. Every notebook's
parameters cell is generated from it, every profile builds it, and wrong names, types and values are errors
naming the field."""
from __future__ import annotations

import dataclasses
import pickle
import re
import typing

import nbformat
import numpy as np
import pytest
from papermill.translators import PythonTranslator

from fedlib.grids import notebook_parameters, profile_values
from fedlib.notebook_params import (NOTEBOOKS, generated_parameters_cell, parameters_cell_source, parameters_source,
                                    write_parameters_cell)
from fedlib.paper import params_class
from fedlib.paper_params import COUNTED, MAX_COUNT, FrozenMap, ParameterError, PaperParams, UnknownParameterError, param
from fedlib.papers.fedshift import FedShiftParams
from fedlib.papers.mucsc import MucscParams
from fedlib.papers.quickstart import QuickstartParams
from fedlib.papers.taco import TacoParams

NAMES = sorted(p.stem for p in NOTEBOOKS.glob("*.py"))
PROFILES = sorted({p.stem for p in NOTEBOOKS.glob("profiles/*/*.yaml")})


@pytest.mark.parametrize("name", NAMES)
def test_the_parameters_cell_is_generated_from_the_dataclass(name):
    assert parameters_cell_source(NOTEBOOKS / f"{name}.py") == generated_parameters_cell(name), (
        f"notebooks/{name}.py: run `python scripts/build_notebooks.py --parameters-only {name}`")


@pytest.mark.parametrize("name", NAMES)
def test_the_generated_cell_runs_to_the_defaults(name):
    """Executed as the kernel executes it (no import before it), the cell's values are the dataclass's defaults."""
    namespace: dict = {}
    exec(parameters_source(params_class(name)), namespace)  # noqa: S102 - our own generated literals
    del namespace["__builtins__"]
    assert set(namespace) - {"__annotations__"} == set(params_class(name).names())
    assert params_class(name).from_mapping({k: v for k, v in namespace.items() if k != "__annotations__"}, name) \
        == params_class(name)()


@dataclasses.dataclass(frozen=True)
class _Typed(PaperParams):
    count: int = param(3, "a count")
    where: str | None = param(None, "a folder")
    rate: float | typing.Literal["1/K"] = param("1/K", "a rate")
    mode: typing.Literal["a", "b"] = param("a", "a mode")
    sizes: tuple[int, ...] = param([1, 2], "sizes")
    kwargs: typing.Mapping[str, typing.Any] = param({"hidden": [8]}, "keyword arguments")
    targets: typing.Mapping[str, float] | None = param({"x": 0.5}, "targets")
    flag: bool = param(True, 'a "quoted" doc')


def test_parameters_source_writes_types_papermill_reads_and_python_runs():
    lines = parameters_source(_Typed).splitlines()[len(PaperParams.names()):]
    assert lines == [
        "count: int = 3  # a count",
        'where: "Optional[str]" = None  # a folder',
        """rate: "Union[float, str]" = "1/K"  # a rate (or "1/K")""",
        'mode: str = "a"  # a mode (one of "a", "b")',
        "sizes: list[int] = [1, 2]  # sizes",
        'kwargs: dict = {"hidden": [8]}  # keyword arguments',
        'targets: "Optional[dict[str, float]]" = {"x": 0.5}  # targets',
        'flag: bool = True  # a "quoted" doc']
    parsed = {p.name: p for p in PythonTranslator.inspect(nbformat.v4.new_code_cell("\n".join(lines)))}
    assert parsed["where"].inferred_type_name == "Optional[str]" and parsed["where"].help == "a folder"
    assert parsed["sizes"].inferred_type_name == "list[int]" and parsed["sizes"].default == "[1, 2]"
    assert parsed["rate"].help == 'a rate (or "1/K")'


def test_a_doc_papermill_cannot_parse_is_an_error_naming_the_field():
    @dataclasses.dataclass(frozen=True)
    class Equals(PaperParams):
        z: int = param(4, "Z (Z_D = 16)")

    with pytest.raises(ValueError, match="Equals.z: its default or doc has an '='"):
        parameters_source(Equals)

    @dataclasses.dataclass(frozen=True)
    class Hash(PaperParams):
        tag: str = param("a#b", "a tag")

    with pytest.raises(ValueError, match="Hash.tag: its default or doc has an '=' .or its default a '#'"):
        parameters_source(Hash)


def test_write_parameters_cell_replaces_only_the_parameters_cell(tmp_path):
    text = ('# %% [markdown]\n# Title\n\n# %% tags=["parameters"]\nrounds = 16\nlrr = 0.1\n\n'
            '# %%\nparams = check_notebook_parameters("quickstart", globals())\n')
    (tmp_path / "quickstart.py").write_text(text)
    assert write_parameters_cell("quickstart", tmp_path)
    written = (tmp_path / "quickstart.py").read_text()
    assert written == text.replace('# %% tags=["parameters"]\nrounds = 16\nlrr = 0.1',
                                   generated_parameters_cell("quickstart"))
    assert not write_parameters_cell("quickstart", tmp_path)  # a second write changes nothing
    (tmp_path / "quickstart.py").write_text("# %%\nx = 1\n")
    with pytest.raises(ValueError, match="quickstart.py: expected exactly one cell tagged 'parameters', found 0"):
        write_parameters_cell("quickstart", tmp_path)


@pytest.mark.parametrize("name", NAMES)
def test_the_quick_profile_file_is_the_defaults(name):
    assert profile_values(name, "quick") == {"profile": "quick"}
    assert notebook_parameters(name, "quick") == params_class(name)()


@pytest.mark.parametrize("profile", PROFILES)
@pytest.mark.parametrize("name", NAMES)
def test_every_profile_builds_the_dataclass(name, profile):
    params = notebook_parameters(name, profile)
    assert type(params) is params_class(name) and params.profile == profile
    hash(params)  # frozen all the way down


def test_a_profile_with_a_typo_or_a_wrong_value_is_an_error_naming_the_file(tmp_path):
    folder = tmp_path / "profiles" / "quickstart"
    folder.mkdir(parents=True)
    (folder / "cpu.yaml").write_text("profile: cpu\nround: 40\n")
    with pytest.raises(UnknownParameterError, match=r"cpu.yaml: unknown parameter\(s\) round \(did you mean rounds"):
        profile_values("quickstart", "cpu", tmp_path)
    (folder / "cpu.yaml").write_text("profile: cpu\nlr: fast\n")
    with pytest.raises(ParameterError, match="cpu.yaml: QuickstartParams.lr must be a finite number, got 'fast'"):
        profile_values("quickstart", "cpu", tmp_path)


@pytest.mark.parametrize("text, problem", [
    ("", "got nothing (an empty file)"),
    ("# the cpu profile\n\n", "got nothing (an empty file)"),
    ("{}\n", "sets no parameter"),
    ("false\n", "got False (bool)"),  # `or {}` read these three as an empty profile
    ("0\n", "got 0 (int)"),
], ids=["empty", "only-comments", "empty-mapping", "false", "zero"])
def test_a_profile_that_sets_nothing_is_an_error_naming_the_file(tmp_path, text, problem):
    """An empty profile ran the notebook's defaults under the profile's name, silently."""
    folder = tmp_path / "profiles" / "quickstart"
    folder.mkdir(parents=True)
    path = folder / "cpu.yaml"
    path.write_text(text)
    with pytest.raises(ValueError, match=rf"^{path}: .*{re.escape(problem)}.*write at least `profile: cpu`"):
        profile_values("quickstart", "cpu", tmp_path)
    with pytest.raises(ValueError, match=rf"^{path}: "):
        notebook_parameters("quickstart", "cpu", {"rounds": 3}, tmp_path)


@pytest.mark.parametrize("values, problem", [
    ({"lr": "0.05"}, "QuickstartParams.lr must be a finite number, got '0.05'"),
    ({"lr": float("nan")}, "QuickstartParams.lr must be a finite number, got nan"),
    ({"rounds": 15.0}, "QuickstartParams.rounds must be an integer, got 15.0"),
    ({"rounds": True}, "QuickstartParams.rounds must be an integer, got True"),
    ({"seeds": 0}, "QuickstartParams.seeds must be a list, got 0"),
    ({"seeds": [0, "1"]}, r"QuickstartParams.seeds\[1\] must be an integer, got '1'"),
    ({"model_kwargs": [64]}, "QuickstartParams.model_kwargs must be a mapping, got \\[64\\]"),
    ({"data_root": 3}, "QuickstartParams.data_root must be str or None, got 3"),
    ({"executor": "batched"}, "QuickstartParams.executor must be one of 'sequential', 'vmap', 'graph', 'auto', got 'batched'"),
    ({"rounds": 0}, r"QuickstartParams.rounds must be >= 1, got 0"),
    ({"clients_per_round": 11}, r"QuickstartParams.clients_per_round must be in \[1, 10\], got 11"),
    ({"seeds": []}, r"QuickstartParams.seeds must list at least one value, got none"),
    ({"device": "cdua"}, r"QuickstartParams.device must be 'auto' or a torch device such as 'cpu', 'cuda' or "
                         r"'cuda:0', got 'cdua'"),
    ({"device": "cuda:x"}, r"QuickstartParams.device must be 'auto' or a torch device .*, got 'cuda:x'"),
])
def test_wrong_types_and_values_are_errors_naming_the_field(values, problem):
    with pytest.raises(ParameterError, match=f"^where: {problem}"):
        QuickstartParams.from_mapping(values, "where")


@pytest.mark.parametrize("device", ["cpu", "auto", "cuda", "cuda:1"])
def test_devices_torch_can_name_are_accepted_without_a_gpu(device):
    assert QuickstartParams(device=device).device == device  # availability is checked when a run starts


def test_unknown_names_are_errors_with_a_suggestion():
    with pytest.raises(UnknownParameterError, match=r"^where: unknown parameter\(s\) lrr \(did you mean lr\?\)"):
        QuickstartParams.from_mapping({"lrr": 0.1}, "where")


@pytest.mark.parametrize("values, problem", [
    ({"group_sizes": [10, 10]}, "group_sizes .* and label_fractions .* must have one entry per group"),
    ({"algorithms": ["FedAvg", "FedAvgg"]}, "TacoParams.algorithms must be one of 'FedAvg', .*, got 'FedAvgg'"),
    ({"kappa_grid": [0.5, 1.5]}, r"TacoParams.kappa_grid must be in \(0, 1\], got 1.5"),
    ({"taco_gamma": "1/k"}, "TacoParams.taco_gamma must be float or one of '1/K', got '1/k'"),
    ({"n_freeloaders": 20}, r"TacoParams.n_freeloaders must be in \[0, 19\], got 20"),
])
def test_taco_checks_its_own_rules(values, problem):
    with pytest.raises(ParameterError, match=problem):
        TacoParams(**values)
    assert TacoParams(taco_gamma=0.5).taco_gamma == 0.5


def test_papers_check_their_own_rules():
    with pytest.raises(ParameterError, match="MucscParams: give exactly one of local_steps .10. and local_epochs"):
        MucscParams(local_epochs=5.0)
    assert MucscParams(local_steps=None, local_epochs=5.0).local_epochs == 5.0
    with pytest.raises(ParameterError, match=r"FedShiftParams.kmeans_reference_bits must be in \[1, 16\], got 0"):
        FedShiftParams(kmeans_reference_bits=0)
    assert FedShiftParams(kmeans_reference_bits=None).kmeans_reference_bits is None  # None: the grid is off
    with pytest.raises(ParameterError, match="FedShiftParams.kmeans_init must be one of 'quantile', .*, got 'kmeans'"):
        FedShiftParams(kmeans_init="kmeans")


@pytest.mark.parametrize("name, value, problem", [
    ("rounds", 10**20, "QuickstartParams.rounds must be at most 100,000"),
    ("rounds", 1e20, "QuickstartParams.rounds must be an integer, got 1e+20"),
    ("num_clients", 100_001, "QuickstartParams.num_clients must be at most 100,000"),
    ("toy_steps", 10**12, "MucscParams.toy_steps must be at most 100,000"),
    ("gamma_steps", [10, 10**9], "TacoParams.gamma_steps must be at most 100,000"),
])
def test_a_count_of_rounds_steps_or_clients_is_an_integer_within_a_bound(name, value, problem):
    """`-p rounds 100000000000000000000` planned and started a run that never ends."""
    notebook = {"toy_steps": "mucsc", "gamma_steps": "taco"}.get(name, "quickstart")
    with pytest.raises(ParameterError, match=rf"^notebook '{notebook}'.*: {re.escape(problem)}"):
        notebook_parameters(notebook, "quick", {name: value})
    assert getattr(notebook_parameters(notebook, "quick", {name: MAX_COUNT if name != "gamma_steps" else [MAX_COUNT]}),
                   name) in (MAX_COUNT, (MAX_COUNT,))


@pytest.mark.parametrize("name", NAMES)
def test_every_count_of_rounds_steps_or_clients_is_typed_an_integer(name):
    """So a value that is not an integer (1e3, 2.5, "10") is refused by its type, and the bound applies."""
    cls = params_class(name)
    hints = typing.get_type_hints(cls)
    counted = [f.name for f in dataclasses.fields(cls) if COUNTED & set(f.name.split("_"))]
    assert counted
    for field in counted:
        assert hints[field] in (int, int | None, tuple[int, ...]), f"{cls.__name__}.{field} is {hints[field]}"


def test_values_are_converted_to_frozen_python_values():
    p = QuickstartParams(seeds=[np.int64(1), 2], lr=np.float64(0.1), alpha=1, model_kwargs={"hidden": [64, 32]})
    assert p.seeds == (1, 2) and all(type(s) is int for s in p.seeds)
    assert type(p.lr) is float and type(p.alpha) is int  # an int for a float stays an int: 1 != 1.0 in a spec
    assert isinstance(p.model_kwargs, FrozenMap) and p.model_kwargs == {"hidden": (64, 32)}
    assert hash(p) == hash(QuickstartParams(seeds=(1, 2), lr=0.1, alpha=1, model_kwargs={"hidden": (64, 32)}))
    assert pickle.loads(pickle.dumps(p)) == p


def test_parameters_are_frozen():
    p = QuickstartParams()
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.rounds = 3  # type: ignore[misc]
    with pytest.raises(TypeError):
        p.model_kwargs["hidden"] = (8,)  # type: ignore[index]
    assert dataclasses.replace(p, rounds=3).rounds == 3 and p.rounds == 15


@pytest.mark.parametrize("name", NAMES)
def test_every_field_has_a_one_line_doc_and_a_checked_type(name):
    cls = params_class(name)
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        doc = f.metadata.get("doc", "")
        assert doc and "\n" not in doc, f"{cls.__name__}.{f.name} has no one-line doc"
        assert hints[f.name] is not typing.Any, f"{cls.__name__}.{f.name} is untyped"
    assert issubclass(cls, PaperParams) and cls.__module__ == f"fedlib.papers.{name}"


def test_params_class_names_what_is_missing():
    with pytest.raises(ParameterError, match="notebook 'nope' is no declared paper: unknown paper 'nope'; registered: "):
        params_class("nope")

