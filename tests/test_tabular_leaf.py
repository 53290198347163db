"""adult (a9a and UCI) and LEAF Shakespeare loaders, and the natural split: fabricated good and broken files."""
from __future__ import annotations

import json
import re

import numpy as np
import pytest
import torch

from fedlib.data import DatasetFileError, load_dataset, split_clients
from fedlib.data.fabricate import (
    adult_uci_row, adult_uci_text, random_lines, shakespeare_shard, write_a9a, write_adult_uci,
    write_femnist, write_shakespeare,
)
from fedlib.data.leaf import LEAF_VOCABULARY, encode, read_leaf_shakespeare
from fedlib.data.tabular import A9A_FEATURES, ATTRIBUTES, CATEGORIES, adult_one_hot, read_a9a, read_adult_uci


# ------------------------------------------------------------------------------------------- a9a

def test_read_a9a_hand_written_lines(tmp_path):
    path = tmp_path / "a9a"
    path.write_text("-1 3:1 11:1 123:1\n+1 1:1 2:1\n\n1 5:1\n")  # a blank line is skipped
    x, y = read_a9a(path)
    assert x.shape == (3, 123) and x.dtype == np.uint8
    assert y.tolist() == [0, 1, 1]
    assert np.flatnonzero(x[0]).tolist() == [2, 10, 122]
    assert np.flatnonzero(x[1]).tolist() == [0, 1] and np.flatnonzero(x[2]).tolist() == [4]


def test_adult_loads_a9a_pair_and_standardizes(tmp_path):
    xtr, ytr, xte, yte = write_a9a(tmp_path, 40, 12)
    ds = load_dataset("adult", root=tmp_path)
    assert ds.num_classes == 2 and ds.input_shape == (A9A_FEATURES,)
    assert ds.y_train.tolist() == ytr.tolist() and ds.y_test.tolist() == yte.tolist()
    mean, std = xtr.mean(0), xtr.std(0)
    expected = (xte - mean) / np.maximum(std, 1e-8)
    np.testing.assert_allclose(ds.x_test.numpy(), expected, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("text,problem", [
    ("+1 3:1 5:", "'5:' is not <index>:<value> (a truncated line?)"),
    ("+1 3:1 5", "'5' is not <index>:<value>"),
    ("+1 0:1", "feature index 0 is outside [1, 123]"),
    ("+1 124:1", "feature index 124 is outside [1, 123]"),
    ("+1 x:1", "feature index 'x' is not a number in the ASCII digits 0-9"),
    ("+1 \u0663:1", "feature index '\u0663' is not a number in the ASCII digits 0-9"),  # Arabic-Indic 3: int() reads 3
    ("+1 7:1 3:1", "feature index 3 follows 7"),
    ("+1 7:1 7:1", "feature index 7 follows 7"),
    ("+1 7:0.5", "feature 7 has value '0.5'"),
    ("+1 7:nan", "feature 7 has value 'nan'"),
    ("2 7:1", "label '2' is not -1 or +1"),
    ("0 7:1", "label '0' is not -1 or +1"),
    ("", "empty file"),
    ("\n  \n", "empty file"),
])
def test_read_a9a_rejects_broken_files(tmp_path, text, problem):
    path = tmp_path / "a9a"
    path.write_text("-1 1:1 4:1\n" + text if text.strip() else text)
    with pytest.raises(DatasetFileError) as err:
        read_a9a(path)
    assert str(path) in str(err.value) and problem in str(err.value)
    if text.strip():
        assert "line 2" in str(err.value)


def test_a9a_missing_test_file_is_named(tmp_path):
    write_a9a(tmp_path, 5, 2)
    (tmp_path / "adult" / "a9a.t").unlink()
    with pytest.raises(FileNotFoundError, match=r"a9a\.t"):
        load_dataset("adult", root=tmp_path)


# ------------------------------------------------------------------------------------------- UCI adult

ROW = ["39", "State-gov", "77516", "Bachelors", "13", "Never-married", "Adm-clerical", "Not-in-family", "White",
       "Male", "2174", "0", "40", "United-States"]


def block_offsets() -> dict[str, int]:
    sizes = {"age": 5, "fnlwgt": 5, "education-num": 5, "capital-gain": 2, "capital-loss": 2, "hours-per-week": 5}
    offsets, at = {}, 0
    for name in ATTRIBUTES:
        offsets[name] = at
        at += sizes.get(name) or len(CATEGORIES[name])
    assert at == A9A_FEATURES  # a9a's 123 columns
    return offsets


def test_uci_one_hot_hand_computed(tmp_path):
    """Five train rows whose ages are 10, 20, 30, 40, 50: quintile cuts 18, 26, 34, 42, so 39 -> bin 3."""
    rows = []
    for age in (10, 20, 30, 40, 50):
        row = list(ROW)
        row[0] = str(age)
        rows.append(row)
    rows[1][1] = "?"  # a missing workclass: all-zero block
    (tmp_path / "adult.data").write_text(adult_uci_text(rows, [0, 1, 0, 0, 1], test=False))
    (tmp_path / "adult.test").write_text(adult_uci_text([ROW], [1], test=True))
    xtr, ytr, xte, yte = adult_one_hot(tmp_path / "adult.data", tmp_path / "adult.test")
    assert xtr.shape == (5, 123) and xte.shape == (1, 123)
    assert ytr.tolist() == [0, 1, 0, 0, 1] and yte.tolist() == [1]
    off = block_offsets()
    assert [int(np.argmax(r[off["age"]:off["age"] + 5])) for r in xtr] == [0, 1, 2, 3, 4]
    assert np.flatnonzero(xte[0][off["age"]:off["age"] + 5]).tolist() == [3]
    assert xtr[1][off["workclass"]:off["workclass"] + 8].sum() == 0
    assert np.flatnonzero(xte[0][off["workclass"]:off["workclass"] + 8]).tolist() == [5]  # State-gov
    assert np.flatnonzero(xte[0][off["education"]:off["education"] + 16]).tolist() == [0]  # Bachelors
    assert np.flatnonzero(xte[0][off["capital-gain"]:off["capital-gain"] + 2]).tolist() == [1]  # 2174 > 0
    assert np.flatnonzero(xte[0][off["capital-loss"]:off["capital-loss"] + 2]).tolist() == [0]
    assert np.flatnonzero(xte[0][off["native-country"]:]).tolist() == [0]
    assert xte[0].sum() == 14  # one 1 per attribute
    assert xtr[1].sum() == 13


def test_adult_uci_dataset_from_fabricated_files(tmp_path):
    write_adult_uci(tmp_path, 30, 10)
    ds = load_dataset("adult_uci", root=tmp_path)
    assert ds.input_shape == (123,) and ds.num_classes == 2
    assert len(ds.y_train) == 30 and len(ds.y_test) == 10
    assert torch.isfinite(ds.x_train).all() and torch.isfinite(ds.x_test).all()


@pytest.mark.parametrize("line,problem", [
    (", ".join(ROW[:-1]) + ", <=50K", "14 fields, a UCI adult row has 15"),  # a field short: truncated row
    (", ".join(ROW) + ", <=50K, 7", "16 fields"),
    (", ".join(["abc", *ROW[1:]]) + ", <=50K", "age 'abc' is not a non-negative integer"),
    (", ".join(["-3", *ROW[1:]]) + ", <=50K", "age '-3' is not a non-negative integer"),
    (", ".join(["\u0663\u0669", *ROW[1:]]) + ", <=50K", "age '\u0663\u0669' is not a non-negative integer"),  # Arabic-Indic 39
    (", ".join(["3\u00b2", *ROW[1:]]) + ", <=50K", "age '3\u00b2' is not a non-negative integer"),  # a superscript two
    (", ".join(["9" * 19, *ROW[1:]]) + ", <=50K", f"age '{'9' * 19}' is not a non-negative integer (ASCII digits, at "
                                                  "most 18)"),
    (", ".join([ROW[0], "Astronaut", *ROW[2:]]) + ", <=50K", "unknown workclass 'Astronaut'"),
    (", ".join(ROW) + ", 50K", "label '50K' is not <=50K or >50K"),
])
def test_read_adult_uci_rejects_broken_rows(tmp_path, line, problem):
    path = tmp_path / "adult.data"
    path.write_text(", ".join(ROW) + ", >50K\n" + line + "\n")
    with pytest.raises(DatasetFileError) as err:
        read_adult_uci(path)
    assert str(path) in str(err.value) and "line 2" in str(err.value) and problem in str(err.value)


def test_read_adult_uci_rejects_empty_and_header_only(tmp_path):
    for text, problem in (("", "empty file"), ("|1x3 Cross validator\n", "no samples")):
        (tmp_path / "adult.test").write_text(text)
        with pytest.raises(DatasetFileError, match=problem):
            read_adult_uci(tmp_path / "adult.test")


def test_adult_uci_row_fabricator_is_valid(tmp_path):
    rng = np.random.default_rng(3)
    (tmp_path / "adult.data").write_text(adult_uci_text([adult_uci_row(rng) for _ in range(20)], [0] * 20, False))
    rows, _ = read_adult_uci(tmp_path / "adult.data")
    assert len(rows) == 20 and all(len(r) == 14 for r in rows)


# ------------------------------------------------------------------------------------------- Shakespeare

def write_shards(root, shards: dict) -> None:
    for rel, users in shards.items():
        (root / "shakespeare" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "shakespeare" / rel).write_text(json.dumps(shakespeare_shard(users)))


def test_vocabulary_is_leafs_80_characters():
    assert len(LEAF_VOCABULARY) == 80 and len(set(LEAF_VOCABULARY)) == 80
    assert LEAF_VOCABULARY[:3] == "\n !" and LEAF_VOCABULARY[-1] == "}"
    assert encode(LEAF_VOCABULARY).tolist() == list(range(80))
    assert encode("a~é\x00}").tolist() == [LEAF_VOCABULARY.index("a"), -1, -1, -1, 79]


def test_a_role_without_samples_is_skipped(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(shakespeare_shard({"A": [], "B": [("b" * 80, "c")]})))
    x, y, users = read_leaf_shakespeare([tmp_path / "s.json"])
    assert x.shape == (1, 80) and y.tolist() == [LEAF_VOCABULARY.index("c")] and users == ["B"]


def test_shakespeare_tokens_labels_and_roles(tmp_path):
    rng = np.random.default_rng(0)
    line = "To be, or not to be: that is the question:" + " " * 38
    write_shards(tmp_path, {
        "train/a.json": {"HAMLET_HAMLET": [(line, "W"), *random_lines(rng, 2)], "HAMLET_OPHELIA": random_lines(rng, 1)},
        "train/b.json": {"LEAR_KENT": random_lines(rng, 2)},
        "test/a.json": {"HAMLET_HAMLET": random_lines(rng, 1), "LEAR_KENT": random_lines(rng, 1)}})
    ds = load_dataset("shakespeare", root=tmp_path)
    assert ds.num_classes == 80 and ds.input_shape == (80,)
    assert ds.x_train.shape == (6, 80) and ds.x_test.shape == (2, 80)
    assert ds.groups.tolist() == [0, 0, 0, 1, 2, 2]
    # token ids are kept as they are (not standardized): "T" is index 49, " " 1, "W" 52
    assert ds.x_train[0, :3].tolist() == [LEAF_VOCABULARY.index("T"), LEAF_VOCABULARY.index("o"), 1]
    assert int(ds.y_train[0]) == LEAF_VOCABULARY.index("W")
    assert torch.equal(ds.x_train, ds.x_train.round()) and ds.x_train.max() < 80


@pytest.mark.parametrize("record,problem", [
    ({"x": ["a" * 79], "y": ["b"]}, "x must be a string of 80 characters, got 79"),
    ({"x": ["a" * 80], "y": ["bc"]}, "y must be one character, got 'bc'"),
    ({"x": ["a" * 79 + "é"], "y": ["b"]}, "'é' (U+00E9) are not in LEAF's 80-character vocabulary"),
    ({"x": ["a" * 80], "y": ["~"]}, "'~' (U+007E)"),
    ({"x": ["a" * 80, "b" * 80], "y": ["b"]}, "'x' and 'y' must be lists of equal length"),
    ({"x": [[1] * 80], "y": ["b"]}, "got list"),
    ({"y": ["b"]}, "no 'user_data' entry with 'x' and 'y'"),
])
def test_shakespeare_rejects_broken_samples(tmp_path, record, problem):
    path = tmp_path / "s.json"
    path.write_text(json.dumps({"users": ["R"], "num_samples": [1], "user_data": {"R": record}}))
    with pytest.raises(DatasetFileError) as err:
        read_leaf_shakespeare([path])
    assert str(path) in str(err.value) and "'R'" in str(err.value) and problem in str(err.value)


@pytest.mark.parametrize("shard,problem", [
    ({"users": 5, "user_data": {}}, "'users' must be a list of user names (strings), got 5"),
    ({"users": ["A"], "user_data": ["A"]}, "'user_data' must be an object mapping each user to its samples"),
], ids=["users-a-number", "user-data-a-list"])
def test_a_shakespeare_shard_of_the_wrong_shape_is_named_not_a_traceback(tmp_path, shard, problem):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(shard))
    with pytest.raises(DatasetFileError, match=rf"^{path}: {re.escape(problem)}"):
        read_leaf_shakespeare([path])


def test_shakespeare_rejects_truncated_empty_and_userless_files(tmp_path):
    good = json.dumps(shakespeare_shard({"R": [("a" * 80, "b")]}))
    for text, problem in ((good[:-7], "invalid JSON"), ("", "invalid JSON"), ("[]", "found list"),
                          (json.dumps({"users": [], "user_data": {}}), "no user with samples")):
        (tmp_path / "s.json").write_text(text)
        with pytest.raises(DatasetFileError, match=problem):
            read_leaf_shakespeare([tmp_path / "s.json"])


def test_shakespeare_missing_test_split_is_named(tmp_path):
    write_shards(tmp_path, {"train/a.json": {"R": [("a" * 80, "b")]}})
    with pytest.raises(FileNotFoundError, match=r"test/\*\.json"):
        load_dataset("shakespeare", root=tmp_path)


# ------------------------------------------------------------------------------------------- natural split

def test_natural_split_gives_each_writer_its_samples(tmp_path):
    write_femnist(tmp_path, writers=6, per_writer=4)
    ds = load_dataset("femnist", root=tmp_path)
    parts = split_clients(ds.y_train.numpy(), 6, "natural", 0, groups=ds.groups)
    assert [p.tolist() for p in parts] == [list(range(4 * w, 4 * w + 4)) for w in range(6)]
    subset = split_clients(ds.y_train.numpy(), 3, "natural", 0, groups=ds.groups)
    assert len(subset) == 3 and all(len(p) == 4 and len(set(ds.groups[p])) == 1 for p in subset)
    with pytest.raises(ValueError, match=r"num_clients must be in \[1, 6\]"):
        split_clients(ds.y_train.numpy(), 7, "natural", 0, groups=ds.groups)


def test_natural_split_needs_groups():
    with pytest.raises(ValueError, match="needs the dataset's groups"):
        split_clients(np.zeros(10, dtype=int), 2, "natural", 0, groups=None)


def test_build_run_dispatches_the_natural_split(tmp_path):
    from fedlib.runs import RunSpec
    from fedlib.runs.build import build_run

    write_shakespeare(tmp_path, roles=5, per_role=3)
    spec = RunSpec.make("quickstart", "shakespeare", ("natural", {"num_clients": 4}), ("char_lstm", {}),
                        ("fedavg", {}), 1, 0, local={"lr": 1.0, "batch_size": 2, "steps": 1})
    plan = build_run(spec, root=tmp_path)
    assert len(plan.data.client_indices) == 4
    assert all(len(set(plan.dataset.groups[p])) == 1 for p in plan.data.client_indices)


def test_missing_files_never_fall_back(tmp_path):
    for name, file in (("adult", "a9a"), ("adult_uci", "adult.data"), ("shakespeare", "train")):
        with pytest.raises(FileNotFoundError, match=f"{file}.*data/README.md"):
            load_dataset(name, root=tmp_path)
