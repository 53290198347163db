"""The run store key: the code a spec's run reaches, the data files it reads, the environment that changes it."""
from __future__ import annotations

import functools
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from test_datasets import write_idx_set

import fedlib
from fedlib.runs import Component, RunSpec, RunStore, run_specs
from fedlib.runs.fingerprint import code_roots, data_fingerprint, environment, key_context, reached_definitions


def spec(algorithm: str = "fedavg", experiment: str = "quickstart", dataset: str = "digits", model: str = "mlp",
         **loop) -> RunSpec:
    return RunSpec.make(experiment, dataset, ("dirichlet", {"num_clients": 3, "alpha": 0.5, "min_size": 5}),
                        (model, {}), (algorithm, {}), 2, 0, local={"lr": 0.05, "batch_size": 32},
                        loop={"executor": "sequential", **loop})


def test_the_key_covers_code_data_and_environment():
    context = json.loads(key_context(spec()))
    assert set(context) == {"code", "data", "torch", "device", "cpu_capability"}
    assert context["device"] == "cpu" and context["torch"] == __import__("torch").__version__
    assert context["cpu_capability"] == __import__("torch").backends.cpu.get_cpu_capability()


def test_the_cpu_kernel_capability_is_keyed_where_the_run_executes(tmp_path):
    """ATEN_CPU_CAPABILITY=default computes other numbers than AVX2 kernels: a process started with it keys
    its runs apart (computed there, not assumed from the parent)."""
    import os
    import subprocess
    import sys

    code = ("import json, sys; from fedlib.runs import RunSpec; from fedlib.runs.fingerprint import environment; "
            "print(json.dumps(environment(RunSpec.from_json(json.loads(sys.argv[1])))))")
    here = environment(spec())
    proc = subprocess.run([sys.executable, "-c", code, json.dumps(spec().to_json())], capture_output=True, text=True,
                          timeout=300, env={**os.environ, "ATEN_CPU_CAPABILITY": "default"})
    assert proc.returncode == 0, proc.stderr
    there = json.loads(proc.stdout)
    assert there["cpu_capability"] == "DEFAULT"
    assert (there == here) == (here["cpu_capability"] == "DEFAULT")


def test_only_what_the_run_reaches_is_hashed():
    reached = set(reached_definitions(code_roots(spec("fedavg", "fedshift"))))
    assert {("fedlib.algorithms.fedavg", "FedAvg"), ("fedlib.algorithms.base", "Algorithm"),
            ("fedlib.federation", "run_federation"), ("fedlib.runs.runner", "build_run"),
            ("fedlib.papers.fedshift", "plan"), ("fedlib.models", "MLP")} <= reached
    modules = {module for module, _ in reached}
    assert not {"fedlib.algorithms.scaffold", "fedlib.papers.taco", "fedlib.report", "fedlib.claims.fedshift",
                "fedlib.runs.store"} & modules
    assert not {("fedlib.papers.fedshift", "beside_paper"), ("fedlib.papers.fedshift", "experiments"),
                ("fedlib.algorithms", "ALGORITHMS"), ("fedlib.models", "_MODELS"),
                ("fedlib.models", "SmallCNN")} & reached
    assert ("fedlib.algorithms.scaffold", "Scaffold") in reached_definitions(code_roots(spec("scaffold")))


def test_every_registered_component_is_hashed_where_it_is_defined():
    from fedlib.algorithms import ALGORITHMS
    from fedlib.codecs.base import CODECS
    from fedlib.data.datasets import _LOADERS
    from fedlib.models import _MODELS

    def defined(obj) -> tuple[str, str]:
        obj = getattr(obj, "func", obj)
        return obj.__module__, obj.__qualname__.split(".")[0]

    cases = [(spec(algorithm=name), cls) for name, cls in ALGORITHMS.items()]
    cases += [(spec().with_(uplink=Component(name)), entry.factory) for name, entry in CODECS.items()]
    cases += [(spec(model=name), builder) for name, builder in _MODELS.items()]
    cases += [(spec(dataset=name), loader) for name, loader in _LOADERS.items()]
    for case, component in cases:
        assert defined(component) in reached_definitions(code_roots(case)), case
    with pytest.raises(TypeError, match="cannot tell where"):
        reached_definitions([functools.partial(print)])


KEYS_SCRIPT = textwrap.dedent("""
    import json, sys
    import fedlib
    from fedlib.runs import RunSpec
    from fedlib.runs.fingerprint import code_version
    specs = {f"{e}/{a}": RunSpec.make(e, "digits", ("dirichlet", {"num_clients": 3}), ("mlp", {}), (a, {}), 2, 0)
             for e in ("quickstart", "fedshift") for a in ("fedavg", "scaffold")}
    print(json.dumps({"fedlib": fedlib.__file__, **{name: code_version(s) for name, s in specs.items()}}))
""")


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path} no longer holds {old!r}: update this test"
    path.write_text(text.replace(old, new))


def test_code_versions_change_with_the_code_a_run_reaches_only(tmp_path):
    """On a copy of fedlib: display helpers, docstrings, comments, a new algorithm and a new paper change no
    key; editing an algorithm changes the keys of the specs that use it, and only those."""
    package = tmp_path / "fedlib"
    shutil.copytree(Path(fedlib.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))

    def keys() -> dict[str, str]:
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}
        out = json.loads(subprocess.run([sys.executable, "-c", KEYS_SCRIPT], env=env, cwd=tmp_path,
                                        capture_output=True, text=True, timeout=300, check=True).stdout)
        assert out.pop("fedlib") == str(package / "__init__.py")  # the copy, not this checkout
        return out

    before = keys()
    assert len(set(before.values())) == 4
    edit(package / "papers" / "fedshift.py", '.fillna("")\n', '.fillna("-")\n')  # a display helper
    edit(package / "federation.py", "def run_federation(\n", "def run_federation(  # a comment\n")
    edit(package / "algorithms" / "fedavg.py", '"""FedAvg (McMahan', '"""FedAvg, a docstring edit (McMahan')
    (package / "algorithms" / "fedsomething.py").write_text(
        "from fedlib.algorithms.base import Algorithm\n\n\nclass FedSomething(Algorithm):\n    name = 'fedsomething'\n")
    edit(package / "algorithms" / "__init__.py", '    "fedacg": FedACG,\n',
         '    "fedacg": FedACG,\n    "fedsomething": FedSomething,\n')
    edit(package / "algorithms" / "__init__.py", "from fedlib.algorithms.fedacg import FedACG\n",
         "from fedlib.algorithms.fedacg import FedACG\nfrom fedlib.algorithms.fedsomething import FedSomething\n")
    (package / "papers" / "newpaper.py").write_text(
        "from fedlib.runs import register_experiment\n\n\n@register_experiment('newpaper')\n"
        "def plan(spec, run):\n    return run\n")
    assert keys() == before

    edit(package / "algorithms" / "fedavg.py", '    name = "fedavg"\n', '    name = "fedavg"\n    tolerance = 0.5\n')
    after = keys()
    assert {name for name in before if after[name] != before[name]} == {"quickstart/fedavg", "fedshift/fedavg"}


def test_a_changed_data_file_changes_the_key_and_an_identical_copy_does_not(tmp_path):
    write_idx_set(tmp_path / "a" / "fashion_mnist", gz=True)
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # the same data on another machine
    fashion = spec(dataset="fashion_mnist")
    store_a = RunStore(tmp_path / "runs", data_root=tmp_path / "a")
    store_b = RunStore(tmp_path / "runs", data_root=tmp_path / "b")
    assert store_a.key(fashion) == store_b.key(fashion)
    write_idx_set(tmp_path / "b" / "fashion_mnist", gz=True, seed=1)  # another copy of the dataset
    assert store_a.key(fashion) != store_b.key(fashion)
    assert data_fingerprint("fashion_mnist", tmp_path / "a") != data_fingerprint("fashion_mnist", tmp_path / "b")


def test_bundled_data_files_are_fingerprinted(monkeypatch, tmp_path):
    from fedlib.data import datasets

    copy = tmp_path / "digits.csv.gz"
    shutil.copy(datasets.dataset_files("digits")[0], copy)
    before = data_fingerprint("digits")
    monkeypatch.setitem(datasets._FILES, "digits", lambda root: [copy])
    assert data_fingerprint("digits") == before  # the name and the content count, not the folder
    content = bytearray(copy.read_bytes())
    content[len(content) // 2] ^= 0xFF
    copy.write_bytes(bytes(content))
    assert data_fingerprint("digits") != before


def test_every_dataset_declares_the_files_it_reads():
    from fedlib.data import datasets

    assert set(datasets._FILES) == set(datasets._LOADERS)


def test_a_run_on_changed_data_is_recomputed(tmp_path, capsys):
    data = tmp_path / "data"
    write_idx_set(data / "fashion_mnist", gz=True, n_train=60, n_test=20)
    store = RunStore(tmp_path / "runs")
    fashion = spec(dataset="fashion_mnist")
    first = run_specs([fashion], store=store, root=data, progress=False)
    run_specs([fashion], store=store, root=data, progress=False)
    assert "1 from the store" in capsys.readouterr().err
    write_idx_set(data / "fashion_mnist", gz=True, n_train=60, n_test=20, seed=1)
    second = run_specs([fashion], store=store, root=data, progress=False)
    assert "1 to compute" in capsys.readouterr().err
    assert first["rounds"]["run"][0] != second["rounds"]["run"][0]


def test_the_thread_count_is_keyed_where_torch_picks_it():
    from fedlib.federation import DEFAULT_THREADS

    assert environment(spec(dataset="mnist5k", model="cnn"))["threads"] == DEFAULT_THREADS
    assert "threads" not in environment(spec(dataset="mnist5k", model="mlp"))  # dense models run on one thread
    assert "threads" not in environment(spec(dataset="mnist5k", model="cnn", threads=2))  # the spec says it
