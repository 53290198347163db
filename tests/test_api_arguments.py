"""The public API checks its arguments where they enter: every try a careless user makes (issue 31, item 7) ends
in an error that names the argument and says what it takes, before any training, not in a raw error from deep
inside torch or numpy and not in a silently truncated value."""
from __future__ import annotations

import numpy as np
import pytest

from fedlib.algorithms import FedAvg
from fedlib.core.contracts import FederatedData, LocalTraining
from fedlib.data import load_dataset
from fedlib.data import partition as part
from fedlib.engine.federation import run_federation
from fedlib.models import build_model
from fedlib.runs import Keys, RunStore, run_specs
from fedlib.validate import counts, instance, int_array, rng


@pytest.fixture(scope="module")
def ds():
    return load_dataset("digits")


@pytest.fixture(scope="module")
def data(ds):
    return FederatedData(ds, part.iid(ds.y_train.numpy(), 4, 0))


def _mlp(ds, classes: int = 10):
    return lambda: build_model("mlp", ds.input_shape, classes, hidden=(8,))


def _run(ds, data, model_fn=None, algorithm=None, **kw):
    kw.setdefault("local", LocalTraining(lr=0.05, batch_size=16, steps=2))
    return run_federation(model_fn or _mlp(ds), data, FedAvg() if algorithm is None else algorithm, 1, progress=False,
                          **kw)


MODEL_TRIES = [  # (kwargs of build_model, the message: it names the argument and what it takes)
    ({"name": "mlp", "input_shape": (64,), "num_classes": 10, "hidden": [0]}, r"mlp hidden .*\[0\] must be >= 1, got 0"),
    ({"name": "mlp", "input_shape": (64,), "num_classes": 10, "hidden": [12.5]}, r"mlp hidden .*\[0\] must be an integer, got 12.5"),
    ({"name": "mlp", "input_shape": (64,), "num_classes": 10, "hidden": 12}, r"mlp hidden .*must be a sequence of integers .*got 12"),
    ({"name": "mlp", "input_shape": "64", "num_classes": 10}, r"input_shape .*must be a sequence of integers .*got '64' \(str\)"),
    ({"name": "mlp", "input_shape": (64,), "num_classes": 10.7}, r"num_classes must be an integer, got 10.7"),
    ({"name": "mlp", "input_shape": (64,), "num_classes": 10, "hiden": [8]}, r"model 'mlp' takes no argument 'hiden'; its arguments: hidden, bias"),
    ({"name": "cnn", "input_shape": (1, 8, 8), "num_classes": 10, "channels": (16,)}, r"cnn channels must be two conv widths"),
    ({"name": "resnet18_cifar", "input_shape": (3, 32, 32), "num_classes": 10, "norm": "group", "groups": 3},
     r"resnet18_cifar groups must divide 64"),
    ({"name": "mlp", "input_shape": (64,), "num_classes": 10, "seed": "7"}, r"seed .*must be an integer, got '7'"),
]


@pytest.mark.parametrize("kwargs, message", MODEL_TRIES, ids=[str(t[0]) for t in MODEL_TRIES])
def test_a_model_argument_is_checked_where_it_enters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        build_model(**kwargs)


def test_good_model_arguments_still_build():
    assert build_model("mlp", (64,), 10, hidden=[12]).layers[0].out_features == 12
    assert build_model("mlp", (64,), np.int64(10), hidden=np.array([3, 4]), seed=np.int64(2)).layers[-1].out_features == 10
    assert build_model("mlp", (64,), 10, hidden=()).layers[0].in_features == 64  # no hidden layer: logistic
    assert build_model("resnet18_cifar", (3, 32, 32), 10, norm="group", groups=4) is not None


LABELS = load_dataset("digits").y_train.numpy()

PARTITION_TRIES = [
    (lambda: part.dirichlet(LABELS, 4, "0.5", 0), r"dirichlet alpha .*must be a real number, got '0.5' \(str\)"),
    (lambda: part.dirichlet(LABELS, 4, float("inf"), 0), r"dirichlet alpha .*must be a finite number in \(0, inf\), got inf"),
    (lambda: part.dirichlet(LABELS, 4, 0.5, 0, min_size=2.5), r"min_size must be an integer, got 2.5"),
    (lambda: part.iid(LABELS, True, 0), r"num_clients must be a positive integer, got True"),
    (lambda: part.iid(LABELS, 4, "0"), r"rng \(a numpy Generator or an integer seed\) must be an integer, got '0'"),
    (lambda: part.shards(LABELS, 4, 1.5, 0), r"shards_per_client must be an integer, got 1.5"),
    (lambda: part.labels_per_client(LABELS, 4, 2.5, 0), r"k \(labels per client\) must be an integer, got 2.5"),
    (lambda: part.labels_per_client(LABELS, 2, [1.0, 9.5], 0), r"k \(labels per client\) must hold integers .*float64"),
    (lambda: part.from_indices([[0.0, 1.5]], 10), r"parts\[0\] \(client 0's sample indices\) must hold integers"),
]


@pytest.mark.parametrize("call, message", PARTITION_TRIES, ids=[m[:40] for _, m in PARTITION_TRIES])
def test_a_split_argument_is_checked_where_it_enters(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_good_split_arguments_still_split_the_same():
    gen_parts = part.dirichlet(LABELS, 4, 0.5, np.random.default_rng(3))
    int_parts = part.dirichlet(LABELS, 4, np.float32(0.5), 3, min_size=np.int64(10))
    assert all(np.array_equal(a, b) for a, b in zip(gen_parts, int_parts))
    assert len(part.labels_per_client(LABELS, 2, np.array([5, 5]), 0)) == 2


LOCAL_TRIES = [
    ({"lr": 1e308}, r"lr must be a finite number in \(0, 3.40282e\+38\], got 1e\+308"),
    ({"lr": float("nan")}, r"lr must be a finite number in \(0, 3.40282e\+38\], got nan"),
    ({"lr": -0.1}, r"lr must be a finite number in \(0, 3.40282e\+38\], got -0.1"),
    ({"lr": 0}, r"lr must be a finite number in \(0, 3.40282e\+38\], got 0"),
    ({"weight_decay": 1e308}, r"weight_decay must be a finite number in \[0, 3.40282e\+38\]"),
]


@pytest.mark.parametrize("kwargs, message", LOCAL_TRIES, ids=[str(t[0]) for t in LOCAL_TRIES])
def test_a_local_training_argument_is_checked_where_it_enters(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LocalTraining(**kwargs)


@pytest.mark.parametrize("field, value, message", [
    ("lr", float("nan"), r"local: lr must be a finite number in \(0, .*\], got nan \(a LocalTraining field set "
                         r"after it was built is checked when the run starts\)"),
    ("lr", "0.1", r"local: lr must be a real number, got '0.1'"),
    ("batch_size", 0, r"local: batch_size must be >= 1, got 0"),
    ("momentum", 1.5, r"local: momentum must be a finite number in \[0, 1\), got 1.5"),
    ("epochs", 3.0, r"local: LocalTraining takes epochs or steps, not both"),
])
def test_a_local_training_field_set_after_construction_is_checked_when_the_run_starts(ds, data, field, value,
                                                                                       message):
    """`local.lr = nan` after LocalTraining(...) trained (every loss NaN, the run flagged diverged)."""
    local = LocalTraining(lr=0.05, batch_size=16, steps=2)
    setattr(local, field, value)
    with pytest.raises(ValueError, match=message):
        _run(ds, data, local=local)


def test_a_schedule_step_size_that_overflows_float32_is_named(ds, data):
    with pytest.raises(ValueError, match=r"schedule returned 1e\+308 at round 0, step 0; a step size is a number in"):
        _run(ds, data, local=LocalTraining(lr=lambda r, k: 1e308, batch_size=16, steps=2))


def test_federated_data_refuses_float_indices_rather_than_truncating(ds):
    with pytest.raises(ValueError, match=r"client_indices\[1\] must hold integers \(an integer dtype\), got dtype float64"):
        FederatedData(ds, [np.arange(5), np.array([3.0, 4.5])])
    with pytest.raises(ValueError, match=r"client_indices must be a list with one index array per client .*ndarray of "
                                         r"shape \(100,\)"):
        FederatedData(ds, np.arange(100))
    with pytest.raises(ValueError, match=r"FederatedData dataset must be a Dataset, got 'digits' \(str\); load one"):
        FederatedData("digits", [np.arange(5)])
    with pytest.raises(ValueError, match=r"client 1 holds no samples"):
        FederatedData(ds, [np.arange(5), []])
    kept = FederatedData(ds, [np.arange(5, dtype=np.int32), [7, 8]])  # integer arrays and lists of ints still enter
    assert [idx.dtype for idx in kept.client_indices] == [np.int64, np.int64]


RUN_TRIES = [
    ({"algorithm": "fedavg"}, r"algorithm must be an Algorithm, got 'fedavg' \(str\); an algorithm object, e.g. FedAvg\(\) "
                              r"or fedlib.algorithms.make_algorithm\('fedavg'\)"),
    ({"model_fn": "built"}, r"model_fn must be a function that builds a fresh model .*got MLP"),
    ({"data": "dataset"}, r"data must be a FederatedData, got a Dataset; FederatedData\(dataset, client_indices\)"),
    ({"uplink": "stc"}, r"uplink must be a Link or None, got 'stc' \(str\); Link\(codec='stc'\)"),
    ({"hooks": "one"}, r"hooks must be a list of callables hook\(params, info\)"),
    ({"seed": "7"}, r"seed must be a non-negative integer, got '7'"),  # Seeds checked it already
    ({"local": {"lr": 0.1}}, r"local must be a LocalTraining or None, got \{'lr': 0.1\} \(dict\)"),
    ({"model_fn": "cnn28"}, r"model_fn's model \(SmallCNN\) cannot take the inputs of dataset 'digits' \(input_shape \(1, 8, 8\)\): "
                            r"mat1 and mat2 shapes cannot be multiplied"),
    ({"model_fn": "mlp5"}, r"model_fn's model \(MLP\) gives outputs of shape \(5,\) per sample, but dataset 'digits' has 10 "
                           r"classes .*num_classes=10"),
    ({"model_fn": "not a module"}, r"model_fn\(\) must be a Module, got 3 \(int\)"),
]


@pytest.mark.parametrize("change, message", RUN_TRIES, ids=[str(t[0]) for t in RUN_TRIES])
def test_a_run_argument_is_checked_where_it_enters(ds, data, change, message):
    models = {"built": build_model("mlp", ds.input_shape, 10), "cnn28": lambda: build_model("cnn", (1, 28, 28), 10),
              "mlp5": _mlp(ds, classes=5), "not a module": lambda: 3}
    kw = dict(change)
    if "model_fn" in kw:
        kw["model_fn"] = models[kw["model_fn"]]
    if kw.get("data") == "dataset":
        kw["data"] = ds
    if kw.get("hooks") == "one":
        kw["hooks"] = lambda params, info: (params, {})
    with pytest.raises(ValueError, match=message):
        _run(ds, data if "data" not in kw else kw.pop("data"), **kw)


def test_the_shared_checks_name_the_argument():
    assert counts("widths", [3, np.int64(4)]) == (3, 4)
    with pytest.raises(ValueError, match=r"widths\[1\] must be >= 1, got -2"):
        counts("widths", [3, -2])
    with pytest.raises(ValueError, match=r"widths must hold at least one integer"):
        counts("widths", [], allow_empty=False)
    assert int_array("idx", [1, 2]).dtype == np.int64 and len(int_array("idx", [])) == 0
    with pytest.raises(ValueError, match=r"idx must be a 1-D array of integers, got shape \(2, 1\)"):
        int_array("idx", [[1], [2]])
    with pytest.raises(ValueError, match=r"idx must hold integers .*got dtype bool"):
        int_array("idx", [True, False])
    gen = np.random.default_rng(0)
    assert rng("rng", gen) is gen and rng("rng", 4).integers(100) == np.random.default_rng(4).integers(100)
    with pytest.raises(ValueError, match=r"rng .*must be >= 0, got -1"):
        rng("rng", -1)
    with pytest.raises(ValueError, match=r"thing must be an int or a float, got 'x' \(str\); say so"):
        instance("thing", "x", (int, float), "say so")


@pytest.mark.parametrize(("rounds", "seed", "message"), [
    (True, 0, r"RunSpec rounds must be an integer, got True \(bool\)"),
    (2.5, 0, r"RunSpec rounds must be an integer, got 2.5"),
    (0, 0, r"RunSpec rounds must be >= 1, got 0"),
    (3, "7", r"RunSpec seed must be an integer, got '7' \(str\)"),
    (3, -1, r"RunSpec seed must be >= 0, got -1"),
])
def test_run_spec_make_refuses_rounds_and_seeds_it_would_convert(rounds, seed, message):
    from fedlib.runs import RunSpec

    with pytest.raises(ValueError, match=message):
        RunSpec.make("quickstart", "digits", ("iid", {"num_clients": 4}), ("mlp", {}), ("fedavg", {}), rounds, seed)
    assert RunSpec.make("quickstart", "digits", ("iid", {"num_clients": 4}), ("mlp", {}), ("fedavg", {}),
                        np.int64(3), np.int64(1)).seed == 1


KEYS = Keys(fixed="test")  # keys that compute nothing: every try below is refused before any run is keyed

STORE_TRIES = [  # (a call with a careless argument, the message: it names the argument and what it takes)
    (lambda store, spec: run_specs([spec.to_json()], store=store, keys=KEYS),
     r"^run_specs specs\[0\] must be a RunSpec, got a dict; .*RunSpec.from_json\(data\)"),
    (lambda store, spec: run_specs([spec, "fedavg"], store=store, keys=KEYS),
     r"^run_specs specs\[1\] must be a RunSpec, got 'fedavg'"),
    (lambda store, spec: run_specs(spec, store=store, keys=KEYS),
     r"^run_specs specs must be a list of RunSpec, got one RunSpec: pass \[spec\]"),
    (lambda store, spec: run_specs(3, store=store, keys=KEYS),
     r"^run_specs specs must be a list of RunSpec, got 3 \(int\)"),
    (lambda store, spec: run_specs([spec], store=str(store.root), keys=KEYS),
     r"^run_specs store must be a RunStore, got '.*' \(str\); e.g. RunStore.at\(\)"),
    (lambda store, spec: RunStore(5), r"^RunStore root must be a str or a PathLike, got 5 \(int\); a folder"),
    (lambda store, spec: run_specs([spec], store=store, keys=Keys(3)),  # the data root runs are keyed with
     r"^Keys data_root must be a str or a PathLike or None, got 3 \(int\)"),
    (lambda store, spec: run_specs([spec], store=store, keys="test"),
     r"^run_specs keys must be a Keys or None, got 'test' \(str\); e.g. Keys\(\)"),
]


@pytest.mark.parametrize("call, message", STORE_TRIES, ids=[m[1:40] for _, m in STORE_TRIES])
def test_a_run_store_argument_is_checked_where_it_enters(tmp_path, call, message):
    """run_specs([dict]) raised "unhashable type: 'dict'", RunStore(5) a TypeError from pathlib."""
    from fedlib.runs import RunSpec

    store = RunStore(tmp_path / "runs")
    spec = RunSpec.make("quickstart", "digits", ("iid", {"num_clients": 4}), ("mlp", {}), ("fedavg", {}), 1, 0)
    with pytest.raises(ValueError, match=message):
        call(store, spec)
    assert not store.root.exists()  # refused before anything ran or was written
