"""fedlib.grids: the main job reads bundled data only, YAML numbers, local SGD step counts on hand-computed cases."""
from __future__ import annotations

import pytest

from fedlib.data import load_dataset
from fedlib.grids import (BUNDLED_DATASETS, YamlValueError, client_steps, datasets_named, notebook_parameters,
                          notebook_specs, profile_values, read_yaml)
from fedlib.notebook_params import NOTEBOOKS
from fedlib.paper_params import ParameterError, UnknownParameterError
from fedlib.papers.taco import TacoParams
from fedlib.runs import RunSpec, build_run

NOTEBOOK_NAMES = sorted(p.stem for p in NOTEBOOKS.glob("*.py"))


@pytest.mark.parametrize("profile", ["quick", "cpu"])
@pytest.mark.parametrize("notebook", NOTEBOOK_NAMES)
def test_the_main_job_reads_only_bundled_datasets(notebook, profile):
    params = notebook_parameters(notebook, profile)
    read = {spec.dataset for spec in notebook_specs(notebook, params)} | datasets_named(params)
    assert read, f"{notebook}/{profile}: no dataset found in its parameters or specs"
    assert read <= set(BUNDLED_DATASETS), (
        f"{notebook}/{profile} reads {sorted(read - set(BUNDLED_DATASETS))}, which no installed package ships: "
        "move that setting to the gpu profile")


@pytest.mark.parametrize("name", BUNDLED_DATASETS)
def test_bundled_datasets_load_from_an_empty_data_root(name, tmp_path, monkeypatch):
    monkeypatch.delenv("FEDLIB_DATA", raising=False)
    ds = load_dataset(name, root=tmp_path)
    assert len(ds.y_train) > 0 and len(ds.y_test) > 0


def test_datasets_named_finds_every_dataset_valued_parameter():
    params = TacoParams(dataset="digits", oscillation_dataset="fashion_mnist", timing_dataset="digits",
                        timing_model="cifar10 x")
    assert datasets_named(params) == {"digits", "fashion_mnist"}


@pytest.mark.parametrize("text, value", [
    ("1e6", 1e6), ("-3E-4", -3e-4), ("2.5e+3", 2500.0), ("5", 5), ("0.1", 0.1), ("[1e-3, 2]", [1e-3, 2]),
    ("{lr: 1e-2}", {"lr": 0.01}), ("abc", "abc"), ("true", True), ("null", None), ("e5", "e5"), ("1e", "1e"),
    ("0", 0), ("-0", 0), ("0o17", 15), ("0x1F", 31), (".5", 0.5), ("-.inf", float("-inf")), ("yes", "yes"),
    ("off", "off"), ("2024-01-02", "2024-01-02"), ("'010'", "010"), ("0.05", 0.05), ("~", None), ("", None),
])
def test_read_yaml_reads_yaml_1_2_numbers(text, value):
    """YAML 1.2's core schema (YAML 1.1 would read 1e6 as a string, yes/off as booleans, 2024-01-02 as a date)."""
    got = read_yaml(text, "-p x")
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("text, problem", [
    ("010", "'010' is read differently by YAML versions"),  # YAML 1.1: octal 8
    ("1:5", "'1:5' is read differently"),  # YAML 1.1: base 60, 65
    ("1_000", "'1_000' is read differently"),
    ("0b11", "'0b11' is read differently"),
    ("[1, 2", "line 1, column 6: expected ',' or ']'"),
    ("{a: 1, a: 2}", "key 'a' appears twice"),
    ("[&a [1, 2], *a]", "anchors and aliases (& and *) are not accepted"),
])
def test_read_yaml_refuses_what_it_cannot_read_strictly_naming_where(text, problem):
    with pytest.raises(YamlValueError, match=r"^-p rounds '.*', line 1, column \d+: ") as err:
        read_yaml(text, f"-p rounds {text!r}")
    assert problem in str(err.value) and "<unicode string>" not in str(err.value)


def test_an_alias_bomb_is_refused_at_its_first_anchor():
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"{chr(98 + i)}: &{chr(98 + i)} [{','.join(['*' + chr(97 + i)] * 9)}]" for i in range(8)]
    with pytest.raises(YamlValueError, match="line 1, column 4: anchors and aliases"):
        read_yaml("\n".join(lines), "-p bomb")


def test_a_profile_with_a_duplicated_key_is_refused_naming_the_file_and_line(tmp_path):
    path = tmp_path / "profiles" / "quickstart" / "cpu.yaml"
    path.parent.mkdir(parents=True)
    path.write_text("rounds: 5\nlr: 0.1\nrounds: 6\n")
    with pytest.raises(YamlValueError, match=f"{path}, line 3, column 1: key 'rounds' appears twice .first at line 1"):
        profile_values("quickstart", "cpu", tmp_path)
    path.write_text("rounds: [5\n")
    with pytest.raises(YamlValueError, match=f"{path}, line 2"):
        profile_values("quickstart", "cpu", tmp_path)


def test_a_profile_value_and_an_override_are_checked_and_layered():
    params = notebook_parameters("quickstart", "cpu", {"rounds": 7})
    assert params.rounds == 7 and params.dataset == "mnist5k"  # override > cpu.yaml > the dataclass's defaults
    with pytest.raises(UnknownParameterError, match="lrr .did you mean lr"):
        notebook_parameters("quickstart", "cpu", {"lrr": 0.1})
    with pytest.raises(ParameterError, match="profile 'cpu' with -p options: QuickstartParams.rounds must be an "
                                             "integer, got 7.5"):
        notebook_parameters("quickstart", "cpu", {"rounds": 7.5})
    with pytest.raises(FileNotFoundError, match="no 'nope' profile"):
        notebook_parameters("quickstart", "nope")


def _digits_iid(**local) -> RunSpec:
    # digits: 1,797 images, 360 held out -> 1,437 training images, 4 IID clients of 359 or 360.
    return RunSpec.make("quickstart", "digits", ("iid", {"num_clients": 4}), ("mlp", {"hidden": [8]}), ("fedavg", {}),
                        3, 0, local={"lr": 0.1, "batch_size": 100, **local},
                        sampler=("uniform", {"clients": 2}))


def test_client_steps_counts_rounds_times_sampled_clients_times_local_steps():
    spec = _digits_iid(steps=5)
    assert client_steps(spec, build_run(spec)) == 3 * 2 * 5


def test_client_steps_from_epochs_uses_each_clients_share():
    spec = _digits_iid(epochs=1)
    plan = build_run(spec)
    assert sorted(len(i) for i in plan.data.client_indices) == [359, 359, 359, 360]
    assert client_steps(spec, plan) == 3 * 2 * 4  # ceil(359 / 100) = ceil(360 / 100) = 4 steps per epoch
    assert client_steps(spec, plan, train_scale=2.0) == 3 * 2 * 8  # ceil(718 / 100) = ceil(720 / 100) = 8
