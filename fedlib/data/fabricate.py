"""Fabricated dataset files: random content in each dataset's real file format and layout under a root.

The tests write them to tmp_path to exercise the loaders; the dry run (`fedlib.dryrun`) writes every dataset
a full profile needs to a temporary root, so that every spec builds and runs without the real files.
`fabricate(name, root, n_train)` writes dataset `name` (a `load_dataset` name) with about `n_train` training
samples (test: a fifth); the `write_*` functions give the tests control over every file.
"""
from __future__ import annotations

import gzip
import json
import pickle
import struct
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import numpy as np

from fedlib.data.leaf import LEAF_VOCABULARY, SEQUENCE_LENGTH
from fedlib.data.tabular import A9A_FEATURES, ATTRIBUTES, CATEGORIES, CONTINUOUS_BINS

IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def idx_bytes(arr: np.ndarray) -> bytes:
    """Serialize an array in IDX format (magic 0x00 0x00 type ndim, big-endian dims)."""
    code = {np.dtype(np.uint8): 0x08, np.dtype(np.int16): 0x0B, np.dtype(np.float32): 0x0D}[arr.dtype]
    header = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    return header + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def write_idx_set(folder: Path, gz: bool, n_train: int = 30, n_test: int = 12, seed: int = 0):
    """Write the four MNIST-style IDX files (28 x 28, 10 classes) into `folder`; return the arrays written."""
    rng = np.random.default_rng(seed)
    arrays = (rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
              rng.integers(0, 10, n_train).astype(np.uint8),
              rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
              rng.integers(0, 10, n_test).astype(np.uint8))
    folder.mkdir(parents=True, exist_ok=True)
    for stem, arr in zip(IDX_FILES, arrays):
        data = idx_bytes(arr)
        if gz:
            # random bytes do not compress: level 9 would only cost time
            (folder / f"{stem}.gz").write_bytes(gzip.compress(data, compresslevel=1, mtime=0))
        else:
            (folder / stem).write_bytes(data)
    return arrays


def write_cifar(root: Path, n_per_batch: int = 8, seed: int = 0,
                n_test: int | None = None) -> dict[str, tuple[np.ndarray, list[int]]]:
    """CIFAR-10's six python batches in root/cifar-10-batches-py (test_batch: `n_test` images, by default
    `n_per_batch`); return {batch: (images, labels)}."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    batches = {}
    for stem in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        n = n_test if stem == "test_batch" and n_test is not None else n_per_batch
        data = rng.integers(0, 256, (n, 3072), dtype=np.uint8)
        # give each channel a different offset so per-channel statistics matter
        data = (data // 4 + np.repeat([0, 60, 120], 1024)).astype(np.uint8)
        labels = rng.integers(0, 10, n).tolist()
        (folder / stem).write_bytes(pickle.dumps({b"data": data, b"labels": labels}))
        batches[stem] = (data.reshape(-1, 3, 32, 32), labels)
    return batches


def write_cifar100(root: Path, n_train: int, n_test: int, seed: int = 0) -> None:
    """CIFAR-100's train and test pickles (fine and coarse labels) in root/cifar-100-python."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-100-python"
    folder.mkdir(parents=True)
    for stem, n in (("train", n_train), ("test", n_test)):
        batch = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
                 b"fine_labels": rng.integers(0, 100, n).tolist(), b"coarse_labels": rng.integers(0, 20, n).tolist()}
        (folder / stem).write_bytes(pickle.dumps(batch))


def write_svhn(root: Path, n_train: int, n_test: int, seed: int = 0) -> None:
    """SVHN's train_32x32.mat and test_32x32.mat (X: 32 x 32 x 3 x N, y in 1..10) in root/svhn."""
    from scipy.io import savemat

    rng = np.random.default_rng(seed)
    (root / "svhn").mkdir(parents=True)
    for stem, n in (("train_32x32.mat", n_train), ("test_32x32.mat", n_test)):
        savemat(root / "svhn" / stem, {"X": rng.integers(0, 256, (32, 32, 3, n), dtype=np.uint8),
                                       "y": rng.integers(1, 11, (n, 1)).astype(np.uint8)})


def leaf_shard(users: Mapping[str, list[int]], rng: np.random.Generator) -> dict:
    """A FEMNIST LEAF shard: each user's labels as given, random 784-pixel images."""
    return {"users": list(users), "num_samples": [len(v) for v in users.values()],
            "user_data": {u: {"x": rng.random((len(v), 784)).round(3).tolist(), "y": v}
                          for u, v in users.items()}}


def write_femnist(root: Path, writers: int, per_writer: int, seed: int = 0) -> None:
    """root/femnist/{train,test}/*.json: `writers` writers, `per_writer` train samples each (a fifth as many
    test samples, at least one), labels in [0, 62)."""
    rng = np.random.default_rng(seed)
    for split, n in (("train", per_writer), ("test", max(1, per_writer // 5))):
        users = {f"f{w:04d}_00": rng.integers(0, 62, n).tolist() for w in range(writers)}
        (root / "femnist" / split).mkdir(parents=True)
        (root / "femnist" / split / f"all_data_0_niid_0_keep_0_{split}_9.json").write_text(
            json.dumps(leaf_shard(users, rng)))


def shakespeare_shard(users: Mapping[str, Sequence[tuple[str, str]]]) -> dict:
    """A LEAF Shakespeare shard from each user's (80-character x, next character y) pairs."""
    return {"users": list(users), "num_samples": [len(v) for v in users.values()],
            "user_data": {u: {"x": [x for x, _ in v], "y": [y for _, y in v]} for u, v in users.items()}}


def random_lines(rng: np.random.Generator, n: int) -> list[tuple[str, str]]:
    """`n` (x, y) pairs of random characters from LEAF's vocabulary."""
    chars = np.array(list(LEAF_VOCABULARY))
    return [("".join(rng.choice(chars, SEQUENCE_LENGTH)), str(rng.choice(chars))) for _ in range(n)]


def write_shakespeare(root: Path, roles: int, per_role: int, seed: int = 0) -> None:
    """root/shakespeare/{train,test}/*.json: `roles` roles with `per_role` train samples each (a fifth as
    many test samples, at least one)."""
    rng = np.random.default_rng(seed)
    names = [f"THE_PLAY_{r // 10}_ROLE_{r}" for r in range(roles)]
    for split, n in (("train", per_role), ("test", max(1, per_role // 5))):
        (root / "shakespeare" / split).mkdir(parents=True)
        (root / "shakespeare" / split / f"all_data_niid_0_keep_0_{split}_9.json").write_text(
            json.dumps(shakespeare_shard({u: random_lines(rng, n) for u in names})))


def a9a_text(x: np.ndarray, y: np.ndarray) -> str:
    """LIBSVM lines for binary rows `x` (N x 123) and labels `y` in {0, 1}."""
    return "".join(("+1" if label else "-1") + "".join(f" {j + 1}:1" for j in np.flatnonzero(row)) + "\n"
                   for row, label in zip(x, y))


def write_a9a(root: Path, n_train: int, n_test: int, seed: int = 0) -> tuple[np.ndarray, ...]:
    """root/adult/a9a and a9a.t with random binary features (a9a.t never uses feature 123, as the real file);
    return (x_train, y_train, x_test, y_test)."""
    rng = np.random.default_rng(seed)
    arrays = []
    for stem, n in (("a9a", n_train), ("a9a.t", n_test)):
        x = (rng.random((n, A9A_FEATURES)) < 0.11).astype(np.uint8)
        if stem == "a9a.t":
            x[:, -1] = 0
        y = rng.integers(0, 2, n)
        (root / "adult").mkdir(parents=True, exist_ok=True)
        (root / "adult" / stem).write_text(a9a_text(x, y))
        arrays += [x, y]
    return tuple(arrays)


def adult_uci_row(rng: np.random.Generator, missing: float = 0.05) -> list[str]:
    """14 random attribute strings of a UCI adult row (categorical ones '?' with probability `missing`)."""
    row = []
    for name in ATTRIBUTES:
        if name in CONTINUOUS_BINS:
            row.append(str(int(rng.integers(0, 100)) if rng.random() < 0.5 or CONTINUOUS_BINS[name] == 5 else 0))
        else:
            row.append("?" if rng.random() < missing else str(rng.choice(CATEGORIES[name])))
    return row


def adult_uci_text(rows: Sequence[Sequence[str]], labels: Sequence[int], test: bool) -> str:
    """adult.data (or, `test`, adult.test with its header line and labels ending in '.') text."""
    suffix = "." if test else ""
    lines = ["|1x3 Cross validator"] if test else []
    lines += [", ".join([*row, (">50K" if label else "<=50K") + suffix]) for row, label in zip(rows, labels)]
    return "\n".join(lines) + "\n\n"


def write_adult_uci(root: Path, n_train: int, n_test: int, seed: int = 0) -> None:
    """root/adult/adult.data and adult.test with random rows."""
    rng = np.random.default_rng(seed)
    (root / "adult").mkdir(parents=True, exist_ok=True)
    for stem, n in (("adult.data", n_train), ("adult.test", n_test)):
        rows = [adult_uci_row(rng) for _ in range(n)]
        (root / "adult" / stem).write_text(adult_uci_text(rows, rng.integers(0, 2, n).tolist(), stem == "adult.test"))


def _idx(folder: str) -> Fabricator:
    def write(root: Path, n_train: int, n_test: int, seed: int) -> None:
        write_idx_set(root / folder, gz=True, n_train=n_train, n_test=n_test, seed=seed)

    return write


def _cifar10(root: Path, n_train: int, n_test: int, seed: int) -> None:
    """Five train batches of n_train // 5 images and a test batch of n_test."""
    write_cifar(root, n_per_batch=max(1, n_train // 5), seed=seed, n_test=n_test)


Fabricator = Callable[[Path, int, int, int], None]  # (root, n_train, n_test, seed)
FABRICATORS: dict[str, Fabricator] = {
    "mnist": _idx("MNIST/raw"),
    "fashion_mnist": _idx("FashionMNIST/raw"),
    "cifar10": _cifar10,
    "cifar100": write_cifar100,
    "svhn": write_svhn,
    "femnist": lambda root, n, t, seed: write_femnist(root, writers=100, per_writer=max(5, n // 100), seed=seed),
    "shakespeare": lambda root, n, t, seed: write_shakespeare(root, roles=100, per_role=max(5, n // 100), seed=seed),
    "adult": write_a9a,
    "adult_uci": write_adult_uci,
}


def fabricate(name: str, root: str | Path, n_train: int = 2000, n_test: int | None = None, seed: int = 0) -> None:
    """Write dataset `name`'s files with about `n_train` random training samples (and `n_test`, by default a fifth
    as many, test samples; LEAF sets: 100 users with a fifth of their train count each) under `root`."""
    if name not in FABRICATORS:
        raise ValueError(f"no fabricator for dataset {name!r}; fabricated: {', '.join(sorted(FABRICATORS))}")
    FABRICATORS[name](Path(root), n_train, max(1, n_train // 5) if n_test is None else n_test, seed)


# Training-set sizes of the real files (data/README.md); the fabricated ones are smaller.
REAL_TRAIN_SIZES = {"mnist": 60_000, "fashion_mnist": 60_000, "cifar10": 50_000, "cifar100": 50_000,
                    "svhn": 73_257, "femnist": 341_873, "shakespeare": 448_340, "adult": 32_561, "adult_uci": 32_561}
# Fabricated training sets have the real sizes (so that the grids' splits, e.g. 100 clients on Dirichlet(0.1)
# with >= 25 samples each, draw as they would on the real files) except the LEAF sets, fabricated as 100 users of
# 50 samples (their real JSON would be gigabytes); test sets are small (each combination evaluates once).
FABRICATED_TRAIN = {**REAL_TRAIN_SIZES, "femnist": 5_000, "shakespeare": 5_000}
FABRICATED_TEST = 64


def fabricate_for(datasets: set[str], root: Path, train_size: int | None = None) -> None:
    """Fabricated files for every file-based dataset in `datasets` (bundled ones need none), with
    `FABRICATED_TRAIN` training samples or `train_size`."""
    for name in sorted(datasets & set(FABRICATORS)):
        fabricate(name, root, train_size or FABRICATED_TRAIN[name], FABRICATED_TEST)
