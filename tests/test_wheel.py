"""The package outside its checkout: the built wheel, installed into a fresh venv in a temporary folder, runs the
store CLI and the dry run from folders that are not a checkout, and installs no top-level `theory`.

The fresh venv gets the wheel alone (`pip install --no-deps`); its dependencies come from this project's venv,
whose site-packages folder is appended to the fresh venv's path by a .pth line (so this project's editable
install, itself a .pth hook, is not active there: `import fedlib` finds the wheel's copy)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
import tomllib
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _run(args: list, cwd: Path, check: bool = True) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "FEDLIB_DATA")}
    result = subprocess.run([str(a) for a in args], cwd=cwd, capture_output=True, text=True, env=env)
    if check and result.returncode != 0:
        raise AssertionError(f"{args} exited {result.returncode}:\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="module")
def wheel_venv(tmp_path_factory) -> tuple[Path, Path]:
    """(the fresh venv's python, the wheel), built from a copy of the sources (the checkout gets no build/)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "source"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "fedlib", source / "fedlib", ignore=shutil.ignore_patterns("__pycache__"))
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "-w", tmp / "dist",
          source], cwd=tmp)
    (wheel,) = (tmp / "dist").glob("*.whl")
    venv = tmp / "venv"
    _run([sys.executable, "-m", "venv", "--without-pip", venv], cwd=tmp)
    python = venv / "bin" / "python"
    purelib = Path(_run([python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                        cwd=tmp).stdout.strip())
    (purelib / "project-venv.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    _run([sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index", wheel],
         cwd=tmp)
    return python, wheel


def test_the_wheel_holds_fedlib_only_under_the_companion_name(wheel_venv):
    python, wheel = wheel_venv
    name = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"]
    assert wheel.name.startswith(name.replace("-", "_") + "-")
    top_level = {n.split("/")[0] for n in zipfile.ZipFile(wheel).namelist()}
    assert {t for t in top_level if not t.endswith(".dist-info")} == {"fedlib"}
    where = _run([python, "-c", "import fedlib; print(fedlib.__file__)"], cwd=wheel.parent).stdout
    assert Path(where.strip()).is_relative_to(python.parents[1])  # the wheel's copy, not the checkout's
    missing = _run([python, "-c", "import theory"], cwd=wheel.parent, check=False)
    assert missing.returncode != 0 and "No module named 'theory'" in missing.stderr


def test_the_store_cli_works_outside_a_checkout(wheel_venv, tmp_path):
    """`ls` with no --root reads results/runs/ of the working folder; --root reads a store from anywhere."""
    python, _ = wheel_venv
    from fedlib.runs import RunSpec, RunStore, run_specs

    spec = RunSpec.make("quickstart", "digits", ("iid", {"num_clients": 2}), ("mlp", {"hidden": [4]}),
                        ("fedavg", {}), 1, 0, local={"lr": 0.1, "batch_size": 16, "steps": 1})
    run_specs([spec], store=RunStore(tmp_path / "results" / "runs"), progress=False)
    listed = _run([python, "-m", "fedlib.runs", "ls"], cwd=tmp_path).stdout
    assert "quickstart  digits  fedavg  0" in listed and f"1 entries in {tmp_path / 'results' / 'runs'}" in listed
    verified = _run([python, "-m", "fedlib.runs", "--root", tmp_path / "results" / "runs", "verify"], cwd=ROOT.parent)
    assert "1 intact, 0 damaged" in verified.stdout


def test_the_dry_run_finds_a_notebooks_folder_or_is_given_one(wheel_venv, tmp_path):
    """The working folder as the notebooks folder, and one given with --notebooks (a copy of quickstart's
    source and profiles: no checkout anywhere)."""
    python, _ = wheel_venv
    notebooks = tmp_path / "my-notebooks"
    notebooks.mkdir()
    shutil.copy(ROOT / "notebooks" / "quickstart.py", notebooks)
    shutil.copytree(ROOT / "notebooks" / "profiles" / "quickstart", notebooks / "profiles" / "quickstart")
    quick = ["--profile", "quick", "--steps", "1"]
    found = _run([python, "-m", "fedlib.dryrun", "--only", "quickstart", *quick], cwd=notebooks)
    assert "quickstart (quick): 3 runs" in found.stdout and ": ok" in found.stdout
    given = _run([python, "-m", "fedlib.dryrun", *quick, "--notebooks", notebooks], cwd=tmp_path)
    assert "quickstart (quick): 3 runs" in given.stdout and ": ok" in given.stdout
