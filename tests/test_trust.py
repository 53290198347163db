"""Nothing runs that the user did not ask to run: a spec's `imports` are imported only where allowed (`fedlib.trust`),
the store commands never import what a store or an archive names, and an archive's entry carries only the files
an entry holds. The attack: a store archive whose first entry carries `evil.py` (listed in its manifest) and whose
second entry's spec imports it as `results.runs.<key>.evil`, which `python -m` (the working folder on sys.path)
would find."""
from __future__ import annotations

import hashlib
import io
import json
import os
import pickle
import subprocess
import sys
import tarfile
import textwrap
from pathlib import Path

import pytest

import fedlib
from fedlib.app.options import parse_args
from fedlib.ledger.entries import LedgerEntry
from fedlib.ledger.status import stale_notes
from fedlib.runs import Keys, RunSpec, RunStore, build_run, run_specs
from fedlib.runs.archive import import_entries
from fedlib.runs.entry import PROVENANCE
from fedlib.runs.fingerprint import code_roots, reached_definitions
from fedlib.trust import ALLOW_VAR, ImportNotAllowedError, allow_imports, is_allowed, worker_allowance

ROOT = Path(__file__).resolve().parents[1]


def quick_spec(imports=(), hooks=()) -> RunSpec:
    return RunSpec.make("quickstart", "digits", ("dirichlet", {"num_clients": 2, "alpha": 0.5, "min_size": 10}),
                        ("mlp", {"hidden": [8]}), ("fedavg", {}), 2, 0, local={"lr": 0.05, "batch_size": 32, "steps": 1},
                        loop={"executor": "sequential", "threads": 1}, labels={"method": "FedAvg"},
                        hooks=list(hooks), imports=imports)


# ---- the hostile archive --------------------------------------------------------------------------------------------

def _entry(spec: RunSpec, extra: dict[str, bytes]) -> tuple[str, dict[str, bytes]]:
    """An entry's files, keyed as an attacker can key one: a context chosen so that the key starts with a letter
    (a module path component must be an identifier)."""
    context = next(c for n in range(100) if spec.key(c := json.dumps({"code": f"x{n}"}))[0].isalpha())
    key = spec.key(context)
    files = {"rounds.csv": b"round,test_acc\n1,0.5\n", "spec.json": json.dumps(spec.to_json()).encode(), **extra}
    listed = {name: {"bytes": len(data), "sha256": hashlib.sha256(data).hexdigest()} for name, data in files.items()}
    listed["rounds.csv"].update(rows=1, columns=2)
    manifest = {"key": key, "context": context, "fedlib_version": "0.1.0", "files": listed}
    return key, {**files, "manifest.json": json.dumps(manifest).encode()}


def write_archive(path: Path, entries: list[tuple[str, dict[str, bytes]]]) -> Path:
    with tarfile.open(path, "w") as tar:
        for key, files in entries:
            for name, data in files.items():
                info = tarfile.TarInfo(f"{key}/{name}")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


@pytest.fixture
def hostile(tmp_path):
    """(working folder, archive, evil entry's key, importing entry's key, marker file evil.py would write)."""
    work = tmp_path / "work"
    work.mkdir()
    marker = tmp_path / "PWNED"
    evil_key, evil = _entry(quick_spec(), {"evil.py": f"open({str(marker)!r}, 'w').write('ran')\n".encode()})
    importer_key, importer = _entry(quick_spec(imports=[f"results.runs.{evil_key}.evil"]), {})
    archive = write_archive(work / "evil.tar", [(evil_key, evil), (importer_key, importer)])
    return work, archive, evil_key, importer_key, marker


def runs_cli(work: Path, *args: str) -> subprocess.CompletedProcess:
    """`python -m fedlib.runs --root results/runs ...` run in `work`, as a user would (cwd on sys.path)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), ALLOW_VAR: ""}
    return subprocess.run([sys.executable, "-m", "fedlib.runs", "--root", "results/runs", *args], cwd=work, env=env,
                          capture_output=True, text=True, timeout=600)


def test_the_store_commands_never_run_a_module_a_hostile_archive_carries(hostile):
    work, archive, evil_key, importer_key, marker = hostile
    imported = runs_cli(work, "import", archive.name)
    assert imported.returncode == 1 and f"rejected {evil_key}: " in imported.stdout
    assert f"{evil_key}/evil.py: not a file a run store entry holds" in imported.stdout
    assert "imported 1 entries" in imported.stdout
    store = work / "results" / "runs"
    assert not (store / evil_key).exists() and (store / importer_key).is_dir()
    with tarfile.open(archive) as tar:  # a store filled by an earlier fedlib, which took the evil entry in
        tar.extractall(store, members=[m for m in tar.getmembers() if m.name.startswith(evil_key)], filter="data")
    assert (store / evil_key / "evil.py").is_file()

    listed = runs_cli(work, "ls")
    assert listed.returncode == 0 and f"imports=results.runs.{evil_key}.evil" in listed.stdout
    collected = runs_cli(work, "gc")
    assert collected.returncode == 0, collected.stderr
    assert f"kept {importer_key}: its spec imports results.runs.{evil_key}.evil (not allowed): not imported" \
        in collected.stdout
    assert f"kept {evil_key}: not an intact entry" in collected.stdout and "evil.py" in collected.stdout
    assert not marker.exists()
    # The attack path is live: the same gc, told to allow the module, imports it from the working folder.
    allowed = runs_cli(work, "gc", "--allow-import", f"results.runs.{evil_key}.evil")
    assert allowed.returncode == 0, allowed.stderr
    assert marker.exists() and f"would delete {importer_key}" in allowed.stdout
    marker.unlink()
    verified = runs_cli(work, "verify")
    assert verified.returncode == 1 and f"damaged {evil_key}: " in verified.stdout and "1 intact" in verified.stdout
    assert not marker.exists()


def test_import_refuses_a_member_of_no_kind_an_entry_holds_and_keeps_provenance(tmp_path):
    provenance = json.dumps({"data": "x"}).encode()
    cases = {"notes.txt": b"hello", "helper.py": b"x = 1\n", PROVENANCE: provenance}
    entries = [_entry(quick_spec().with_(seed=seed), {name: data}) for seed, (name, data) in enumerate(cases.items())]
    report = import_entries(RunStore(tmp_path / "runs"), write_archive(tmp_path / "a.tar", entries))
    (notes_key, _), (helper_key, _), (provenance_key, _) = entries
    assert report.imported == [provenance_key]
    assert report.rejected[notes_key].endswith(f"{notes_key}/notes.txt: not a file a run store entry holds (record "
                                               "tables as *.csv, spec.json, provenance.json): refused, though the "
                                               "manifest lists it")
    assert f"{helper_key}/helper.py: not a file a run store entry holds" in report.rejected[helper_key]


# ---- the gate ------------------------------------------------------------------------------------------------------

def user_module(folder: Path, name: str) -> str:
    """A module `name` in `folder` registering the hook `<name>_norm`; `folder` put on sys.path."""
    (folder / f"{name}.py").write_text(textwrap.dedent(f'''
        from fedlib.registry import HOOKS


        @HOOKS.register("{name}_norm")
        def norm(run):
            def hook(params, info):
                return params, {{"user_norm": float(sum(v.double().pow(2).sum() for v in params.values()) ** 0.5)}}

            return hook
    '''))
    return name


@pytest.fixture
def on_path(tmp_path, monkeypatch):
    folder = tmp_path / "user"
    folder.mkdir()
    monkeypatch.syspath_prepend(str(folder))
    monkeypatch.setenv("PYTHONPATH", str(folder))
    yield folder
    for name in [m for m in sys.modules if m.startswith("trust_user_")]:  # modules of this test only
        del sys.modules[name]


def test_a_spec_importing_a_module_not_allowed_is_refused_in_one_line_naming_how(on_path):
    module = user_module(on_path, "trust_user_refused")
    spec = quick_spec([module], [(f"{module}_norm", {})])
    with pytest.raises(ImportNotAllowedError) as refused:
        build_run(spec)
    said = str(refused.value)
    assert "\n" not in said and module not in sys.modules
    assert said.startswith(f"run spec 'quickstart' (method=FedAvg seed=0) imports module '{module}', which is not "
                           "allowed here")
    assert f"--allow-import {module}" in said and f"{ALLOW_VAR}={module}" in said
    assert f"fedlib.allow_imports('{module}')" in said
    assert isinstance(refused.value, ValueError)


def test_the_refusal_reaches_the_caller_of_a_worker_whole():
    refused = pickle.loads(pickle.dumps(ImportNotAllowedError("evil", "run spec 'quickstart' (seed=0)")))
    assert isinstance(refused, ImportNotAllowedError) and refused.module == "evil"
    assert str(refused).startswith("run spec 'quickstart' (seed=0) imports module 'evil', which is not allowed")


def test_a_spec_runs_its_module_when_allowed_by_the_environment_variable(on_path, tmp_path, monkeypatch):
    module = user_module(on_path, "trust_user_env")
    monkeypatch.setenv(ALLOW_VAR, f"other, {module}")
    records = run_specs([quick_spec([module], [(f"{module}_norm", {})])], store=RunStore(tmp_path / "runs"),
                        progress=False)
    assert records["rounds"]["user_norm"].notna().all()


def test_a_spec_runs_its_module_when_allowed_by_a_call(on_path, tmp_path):
    module = user_module(on_path, "trust_user_call")
    fedlib.allow_imports(module)
    assert os.environ[ALLOW_VAR] == module  # processes started from here inherit it
    records = run_specs([quick_spec([module], [(f"{module}_norm", {})])], store=RunStore(tmp_path / "runs"),
                        progress=False)
    assert records["rounds"]["user_norm"].notna().all()


def test_worker_processes_may_import_what_the_caller_imported_itself(on_path, tmp_path):
    """The user imported the module (allowed here, nothing new runs); fresh worker processes have not, and are
    handed the allowance explicitly (the environment allows nothing)."""
    module = user_module(on_path, "trust_user_pool")
    __import__(module)
    assert os.environ[ALLOW_VAR] == "" and worker_allowance([module, "json", "not_imported"]) == (module, "json")
    specs = [quick_spec([module], [(f"{module}_norm", {})]).with_(seed=seed) for seed in (0, 1)]
    records = run_specs(specs, store=RunStore(tmp_path / "runs"), keys=Keys(fixed="test"), progress=False, workers=2)
    assert len(records["rounds"]) == 4 and records["rounds"]["user_norm"].notna().all()


def test_allowing_a_package_allows_its_submodules_and_nothing_beside_it():
    allow_imports("mypkg", "other.sub")
    assert is_allowed("mypkg") and is_allowed("mypkg.components") and is_allowed("other.sub.deeper")
    assert not is_allowed("mypkgx") and not is_allowed("other") and not is_allowed("other.sibling")
    assert is_allowed("json") and "json" in sys.modules  # imported already: importing it runs nothing new
    assert not is_allowed("this")


def test_module_names_are_checked_wherever_they_are_given(monkeypatch):
    with pytest.raises(ValueError, match=r"allow_imports: '\.\./evil' is not a module name"):
        allow_imports("../evil")
    monkeypatch.setenv(ALLOW_VAR, "ok,a b")
    with pytest.raises(ValueError, match=f"environment variable {ALLOW_VAR}: 'a b' is not a module name"):
        is_allowed("ok")
    with pytest.raises(ValueError, match=r"RunSpec imports: '\.evil' is not a module name"):
        quick_spec([".evil"])


def test_a_string_of_imports_is_refused_not_split_into_letters():
    with pytest.raises(ValueError, match=r"RunSpec imports must be a list of module names, e.g. \['my_components'\], "
                                         "got 'os'"):
        quick_spec("os")
    data = quick_spec().to_json()
    for wrong in ("os", {"os": 1}, 7):
        with pytest.raises(ValueError, match="RunSpec imports must be a list of module names"):
            RunSpec.from_json({**data, "imports": wrong})
    with pytest.raises(ValueError, match="RunSpec imports must be a tuple of module names"):
        RunSpec(**{**quick_spec().__dict__, "imports": "os"})
    assert RunSpec.from_json({**data, "imports": ["os"]}).imports == ("os",)


def test_the_cli_options_refuse_what_is_no_module_name(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    bad = runs_cli(work, "--allow-import", "a/b", "ls")
    assert bad.returncode == 2 and "--allow-import: 'a/b' is not a module name" in bad.stderr
    env = {**os.environ, "PYTHONPATH": str(ROOT), ALLOW_VAR: "a b"}
    from_env = subprocess.run([sys.executable, "-m", "fedlib.runs", "--root", "x", "ls"], cwd=work, env=env,
                              capture_output=True, text=True, timeout=600)
    assert from_env.returncode == 2 and from_env.stderr.count("\n") == 1
    assert f"environment variable {ALLOW_VAR}: 'a b' is not a module name" in from_env.stderr


def test_an_allow_import_given_before_and_after_the_command_both_count(tmp_path):
    from fedlib.runs.cli import main

    (tmp_path / "runs").mkdir()
    main(["--allow-import", "first_mod", "ls", "--allow-import", "second_mod", "--root", str(tmp_path / "runs")])
    assert is_allowed("first_mod") and is_allowed("second_mod")


def test_the_gate_is_no_part_of_any_store_key():
    """Allowing or refusing decides whether a run starts, not what it computes: editing fedlib.trust changes no key."""
    assert not [d for d in reached_definitions(code_roots(quick_spec())) if d[0] == "fedlib.trust"]


# ---- ledgers -------------------------------------------------------------------------------------------------------

def test_a_ledger_entry_importing_a_module_not_allowed_is_listed_as_such_never_imported(capsys):
    spec = quick_spec(["this"])
    entry = LedgerEntry(Path("quickstart-x.tar.gz"), "k", spec, {}, {"code_version": "old", "data": "d", "commit": "c"}, "0" * 64)
    assert stale_notes([entry], lambda _: None) == \
        [(entry, "its spec imports this (not allowed): not imported, so not compared with today's code; if you trust "
                 "it, allow it with --allow-import this")]
    assert "this" not in sys.modules and "Beautiful is better than ugly" not in capsys.readouterr().out


def test_reproduce_takes_allow_import():
    args = parse_args(["--allow-import", "mymod", "--allow-import", "pkg.sub"])
    assert args.allow_import == ["mymod", "pkg.sub"]
