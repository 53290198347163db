"""The run store key: the code a spec's run reaches, the data files it reads, the environment that changes it."""
from __future__ import annotations

import ast
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
from fedlib.data import load_dataset
from fedlib.data.datasets import MissingDatasetError
from fedlib.data.fabricate import fabricate
from fedlib.ledger.entries import definition_digests
from fedlib.runs import Component, Keys, RunSpec, RunStore, run_specs
from fedlib.runs.fingerprint import (code_roots, code_version, data_fingerprint, environment, key_context,
                                     reached_definitions)


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
            ("fedlib.engine.federation", "run_federation"), ("fedlib.runs.build", "build_run"),
            ("fedlib.papers.fedshift", "plan"), ("fedlib.models", "MLP")} <= reached
    modules = {module for module, _ in reached}
    assert not {"fedlib.algorithms.scaffold", "fedlib.papers.taco", "fedlib.report", "fedlib.papers.fedshift.claims",
                "fedlib.runs.store", "fedlib.codecs.kmeans"} & modules
    assert not {("fedlib.papers.fedshift", "beside_paper"), ("fedlib.papers.fedshift", "experiments"),
                ("fedlib.models", "SmallCNN")} & reached
    assert ("fedlib.algorithms.scaffold", "Scaffold") in reached_definitions(code_roots(spec("scaffold")))


def test_the_codecs_a_codec_policy_holds_are_hashed():
    """A policy names its codec by a string the names never lead to: the built policy's objects do."""
    policy = spec(experiment="fedshift").with_(
        split=Component.of("parity", {"num_clients": 10}),
        uplink=Component.of("mixed_precision", {"codec": "kmeans", "codec_args": {"bits": 2}}))
    assert ("fedlib.codecs.kmeans", "KMeansQuantizer") in reached_definitions(code_roots(policy))


def test_held_objects_follow_attributes_containers_partials_and_closures():
    from fedlib.codecs import KMeansQuantizer, UniformQuantizer
    from fedlib.runs.fingerprint import held_objects

    codec = KMeansQuantizer(bits=2)

    def closure():
        return codec

    held = [{"a": [functools.partial(print, UniformQuantizer(bits=2))]}, closure]
    found = held_objects(held, ("fedlib", __name__))  # this module's code counts (a spec's `imports`)
    assert {KMeansQuantizer, UniformQuantizer, closure} <= set(found) and print not in found
    outside = held_objects(held, ("fedlib",))  # code outside the hashed packages is not followed
    assert UniformQuantizer in outside and closure not in outside and KMeansQuantizer not in outside


def test_every_registered_component_is_hashed_where_it_is_defined():
    from fedlib.data.datasets import dataset_files
    from fedlib.registry import ALGORITHMS, CODECS, DATASETS, MODELS, load_components

    load_components()

    def defined(obj) -> tuple[str, str]:
        obj = getattr(obj, "func", obj)
        return obj.__module__, obj.__qualname__.split(".")[0]

    def available(dataset: str) -> bool:
        try:
            dataset_files(dataset)
        except FileNotFoundError:
            return False
        return True

    cases = [(spec(algorithm=name), cls) for name, cls in ALGORITHMS.items()]
    cases += [(spec().with_(uplink=Component.of(name, CODECS.examples(name)[0])), codec)
              for name, codec in CODECS.items()]
    cases += [(spec(model=name), builder) for name, builder in MODELS.items()
              if name in ("logistic", "mlp", "cnn", "lenet_300_100", "taco_mlp")]  # the ones digits' 8x8 images fit
    cases += [(spec(dataset=name), loader) for name, loader in DATASETS.items() if available(name)]
    # fedlib's own: a user's component that another test of this process registered is hashed through its spec's
    # `imports` (tests/test_user_components.py), not from a spec that names no module
    for case, component in [(c, comp) for c, comp in cases if defined(comp)[0].startswith("fedlib.")]:
        assert defined(component) in reached_definitions(code_roots(case)), case
# Prints the code version of each spec below, then again after each edit named in argv[1] (a JSON list of
# [file under fedlib/, qualified name]): the edit inserts a statement into that definition's body on disk, and
# code_version, which re-reads a module whose file changed, keys the edited code in the same process.
KEYS_SCRIPT = textwrap.dedent("""
    import ast
    import json
    import sys
    from pathlib import Path

    import fedlib
    from fedlib.runs import RunSpec
    from fedlib.runs.fingerprint import code_version

    def make(experiment="quickstart", dataset="digits", split=("dirichlet", {"num_clients": 6, "alpha": 0.5}),
             model=("mlp", {"hidden": [8]}), algorithm=("fedavg", {}), **named):
        return RunSpec.make(experiment, dataset, split, model, algorithm, 2, 0, local=named.pop("local", {"lr": 0.05}),
                            **named)

    parity = ("parity", {"num_clients": 10})
    specs = {
        "plain": make(),
        "fedprox+kmeans": make(algorithm=("fedprox", {"mu": 0.1}), uplink=("kmeans", {"bits": 2})),
        "policy-kmeans": make("fedshift", split=parity, uplink=("mixed_precision", {"codec": "kmeans",
                              "codec_args": {"bits": 2}}), sampler=("stratified", {"per_round_inferior": 1,
                              "per_round_superior": 1}), hooks=[("fedshift", {})],
                              collectors=[("fedshift_predictions", {})]),
        "policy-uniform": make("fedshift", split=parity, uplink=("mixed_precision", {"codec": "uniform",
                               "codec_args": {"bits": 2}}), sampler=("uniform", {"clients": 3})),
        "logistic": make(model=("logistic", {})),
        "freeloaders": make(client_behavior=("freeloaders", {"count": 1})),
        "synthetic": make(dataset="synthetic"),
        "lr-schedule": make(local={}, lr_schedule=("mucsc_paper_lr", {"lr0": 0.1, "decay": 0.9, "floor": 0.01,
                                                                     "steps_per_round": 1})),
    }

    def insert_statement(path, qualname, statement="_edited_by_the_test = 1"):
        text = path.read_text()
        node = ast.parse(text)
        for part in qualname.split("."):
            node = next(n for n in node.body if isinstance(n, (ast.ClassDef, ast.FunctionDef)) and n.name == part)
        body = node.body
        first = body[1] if (len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                            and isinstance(body[0].value.value, str)) else body[0]
        lines = text.splitlines(keepends=True)
        lines.insert(first.lineno - 1, " " * first.col_offset + statement + "\\n")
        path.write_text("".join(lines))

    package = Path(fedlib.__file__).parent
    keys = [{name: code_version(s) for name, s in specs.items()}]
    for file, qualname in json.loads(sys.argv[1]):
        insert_statement(package / file, qualname)
        keys.append({name: code_version(s) for name, s in specs.items()})
    print(json.dumps({"fedlib": fedlib.__file__, "keys": keys}))
""")
QUICKSTART_SPECS = {"plain", "fedprox+kmeans", "logistic", "freeloaders", "synthetic", "lr-schedule"}
# (file, definition, the specs whose key an edit of it changes): one component of each kind
EDITS = [
    ("codecs/kmeans.py", "KMeansQuantizer.encode", {"fedprox+kmeans", "policy-kmeans"}),  # a codec, also in a policy
    ("algorithms/fedprox.py", "FedProx", {"fedprox+kmeans"}),  # an algorithm
    ("papers/fedshift/__init__.py", "mixed_precision_uplink", {"policy-kmeans", "policy-uniform"}),  # a codec policy
    ("codecs/policies.py", "PerClient.codec_of", {"policy-kmeans", "policy-uniform"}),  # the policy object's class
    ("models.py", "Logistic", {"logistic"}),  # a model
    ("data/datasets.py", "_load_synthetic", {"synthetic"}),  # a dataset loader
    ("papers/fedshift/__init__.py", "parity_split", {"policy-kmeans", "policy-uniform"}),  # a split
    ("papers/fedshift/__init__.py", "StratifiedSampler", {"policy-kmeans"}),  # a sampler (the object the run holds)
    ("papers/fedshift/__init__.py", "FedShift", {"policy-kmeans"}),  # a hook (the object the run holds)
    ("papers/taco/__init__.py", "Freeloaders", {"freeloaders"}),  # a client behaviour
    ("papers/mucsc/__init__.py", "PaperLR", {"lr-schedule"}),  # an lr schedule
    ("papers/fedshift/__init__.py", "prediction_table", {"policy-kmeans"}),  # a collector
    ("papers/quickstart/__init__.py", "plan", QUICKSTART_SPECS),  # an experiment's plan
]


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert text.count(old) == 1, f"{path} no longer holds {old!r}: update this test"
    path.write_text(text.replace(old, new))


def test_code_versions_change_with_the_code_a_run_builds_only(tmp_path):
    """On a copy of fedlib: display helpers, docstrings, comments, a new algorithm, a new paper and a definition
    moved unchanged to another module change no key; editing a component of each kind changes the keys of exactly
    the specs whose built run holds or names it."""
    package = tmp_path / "fedlib"
    shutil.copytree(Path(fedlib.__file__).parent, package, ignore=shutil.ignore_patterns("__pycache__"))

    def keys(edits: list[tuple[str, str]]) -> list[dict[str, str]]:
        env = {**os.environ, "PYTHONPATH": str(tmp_path)}
        out = subprocess.run([sys.executable, "-c", KEYS_SCRIPT, json.dumps(edits)], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        result = json.loads(out.stdout)
        assert result["fedlib"] == str(package / "__init__.py")  # the copy, not this checkout
        return result["keys"]

    [before] = keys([])
    assert len(set(before.values())) == len(before)
    edit(package / "papers" / "fedshift" / "__init__.py", '.fillna("")\n', '.fillna("-")\n')  # a display helper
    edit(package / "engine" / "federation.py", "def run_federation(\n", "def run_federation(  # a comment\n")
    edit(package / "algorithms" / "fedavg.py", '"""FedAvg (McMahan', '"""FedAvg, a docstring edit (McMahan')
    (package / "algorithms" / "fedsomething.py").write_text(
        "from fedlib.algorithms.base import Algorithm\nfrom fedlib.registry import ALGORITHMS\n\n\n"
        "@ALGORITHMS.register('fedsomething')\nclass FedSomething(Algorithm):\n    name = 'fedsomething'\n")
    edit(package / "algorithms" / "__init__.py", "from fedlib.algorithms.fedacg import FedACG\n",
         "from fedlib.algorithms.fedacg import FedACG\nfrom fedlib.algorithms.fedsomething import FedSomething\n")
    (package / "papers" / "newpaper.py").write_text(
        "from fedlib.registry import EXPERIMENTS\n\n\n@EXPERIMENTS.register('newpaper')\n"
        "def plan(spec, run):\n    return run\n")
    # a definition every run reaches, moved unchanged to another module: keys hash what a definition is, not where
    has_conv = "def _has_conv(model: nn.Module) -> bool:\n    return any(isinstance(m, nn.modules.conv._ConvNd) " \
               "for m in model.modules())\n"
    edit(package / "engine" / "federation.py", has_conv + "\n\n", "")
    edit(package / "engine" / "federation.py", "from fedlib.validate import instance\n",
         "from fedlib.validate import instance\nfrom fedlib.modelinfo import _has_conv\n")
    (package / "modelinfo.py").write_text("from torch import nn\n\n\n" + has_conv)
    # a fresh process on the edited copy (the new modules imported), then each edit of EDITS in turn
    after_each = keys([(file, qualname) for file, qualname, _ in EDITS])
    assert after_each[0] == before
    for (file, qualname, expected), previous, after in zip(EDITS, after_each, after_each[1:]):
        changed = {name for name in previous if after[name] != previous[name]}
        assert changed == expected, (file, qualname, changed)


def test_a_changed_data_file_changes_the_key_and_an_identical_copy_does_not(tmp_path):
    write_idx_set(tmp_path / "a" / "fashion_mnist", gz=True)
    shutil.copytree(tmp_path / "a", tmp_path / "b")  # the same data on another machine
    fashion = spec(dataset="fashion_mnist")
    keys_a, keys_b = Keys(tmp_path / "a"), Keys(tmp_path / "b")
    assert keys_a(fashion).key == keys_b(fashion).key
    write_idx_set(tmp_path / "b" / "fashion_mnist", gz=True, seed=1)  # another copy of the dataset
    assert keys_a(fashion).key != keys_b(fashion).key
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
    from fedlib.registry import DATASETS

    assert set(datasets._FILES) == set(DATASETS)


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
    from fedlib.engine.federation import DEFAULT_THREADS

    assert environment(spec(dataset="mnist5k", model="cnn"))["threads"] == DEFAULT_THREADS
    assert "threads" not in environment(spec(dataset="mnist5k", model="mlp"))  # dense models run on one thread
    assert "threads" not in environment(spec(dataset="mnist5k", model="cnn", threads=2))  # the spec says it


def test_definitions_are_dumped_alike_on_every_python():
    """A run keyed on a 3.11 CPU and on a GPU machine's 3.12 must hash alike: 3.12's ast.dump adds an empty
    type_params to functions and classes, 3.13's leaves empty fields out. The expected text is 3.11's dump."""
    from fedlib.runs.fingerprint import syntax_dump

    tree = ast.parse("class C:\n    def f(self, x):\n        return x + 1")
    assert syntax_dump(tree) == (
        "Module(body=[ClassDef(name='C', bases=[], keywords=[], body=[FunctionDef(name='f', args=arguments("
        "posonlyargs=[], args=[arg(arg='self'), arg(arg='x')], kwonlyargs=[], kw_defaults=[], defaults=[]), "
        "body=[Return(value=BinOp(left=Name(id='x', ctx=Load()), op=Add(), right=Constant(value=1)))], "
        "decorator_list=[])], decorator_list=[])], type_ignores=[])")


def test_a_run_whose_dataset_is_missing_has_the_code_version_it_has_with_it(tmp_path):
    """Telling a run's code builds it; where the dataset is not on this machine, from fabricated files of its format
    (a stale check needs no dataset), with the code version the real files give. Its key still needs the files."""
    real, missing = tmp_path / "real", tmp_path / "missing"
    fabricate("adult", real, 600, 100)  # stands for the real files
    missing.mkdir()
    spec = RunSpec.make("quickstart", "adult", ("dirichlet", {"num_clients": 3, "alpha": 0.5}), ("logistic", {}),
                        ("fedavg", {}), 1, 0, local={"lr": 0.05})
    with pytest.raises(MissingDatasetError):
        load_dataset("adult", root=missing)
    assert code_version(spec, missing) == code_version(spec, real)
    assert definition_digests(spec, missing) == definition_digests(spec, real)
    with pytest.raises(MissingDatasetError):
        data_fingerprint("adult", missing)


def test_numeric_switches_are_keyed_where_they_differ_from_torchs_defaults():
    """A run under torch's defaults keeps its key; TF32 matrix products, cuDNN autotuning or an autocast in force
    change its float32 arithmetic, and so its key."""
    import torch

    from fedlib.runs.fingerprint import CUDA_NUMERIC_DEFAULTS, numerics

    cpu = spec()
    assert numerics("cuda") == CUDA_NUMERIC_DEFAULTS  # torch's defaults, read from torch itself
    assert numerics("cpu") == {}
    assert "numerics" not in json.loads(key_context(cpu))
    default = key_context(cpu)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        assert numerics("cpu") == {"autocast": "torch.bfloat16"}
        assert json.loads(key_context(cpu))["numerics"] == {"autocast": "torch.bfloat16"}
    assert key_context(cpu) == default
    for module, switch, name in ((torch.backends.cuda.matmul, "allow_tf32", "matmul_tf32"),
                                 (torch.backends.cudnn, "allow_tf32", "cudnn_tf32"),
                                 (torch.backends.cudnn, "benchmark", "cudnn_benchmark")):
        setattr(module, switch, not getattr(module, switch))  # torch's cuBLAS switches refuse monkeypatch
        try:
            assert numerics("cuda")[name] is not CUDA_NUMERIC_DEFAULTS[name]
            assert {k for k, v in numerics("cuda").items() if CUDA_NUMERIC_DEFAULTS[k] != v} == {name}
            assert numerics("cpu") == {}  # the CUDA switches leave a CPU run's arithmetic as it is
        finally:
            setattr(module, switch, not getattr(module, switch))
    assert numerics("cuda") == CUDA_NUMERIC_DEFAULTS
