"""environment.yml (conda) and pyproject.toml (pip) declare the same packages with the same lower bounds."""
from __future__ import annotations

import re
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
CONDA_TO_PIP = {"pytorch": "torch"}


def _parse(requirement: str) -> tuple[str, str]:
    match = re.fullmatch(r"\s*([A-Za-z0-9_.\-]+)\s*(.*)", requirement)
    assert match, requirement
    name = match.group(1).lower().replace("_", "-")
    return CONDA_TO_PIP.get(name, name), match.group(2).replace(" ", "")


def test_environment_yml_matches_pyproject():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    pip = dict(_parse(r) for r in project["dependencies"] + project["optional-dependencies"]["vision"])
    env = yaml.safe_load((ROOT / "environment.yml").read_text())
    conda = dict(_parse(r) for r in env["dependencies"] if isinstance(r, str) and not r.startswith("python="))
    assert conda == pip


def test_design_card_packages_are_declared():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    declared = {_parse(r)[0] for r in project["dependencies"] + project["optional-dependencies"]["vision"]}
    card = {"jupyterlab", "papermill", "torch", "torchvision", "numpy", "seaborn", "nbval", "sympy"}
    assert card <= declared
