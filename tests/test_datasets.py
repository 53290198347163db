"""Dataset loaders: real file formats fabricated in tmp_path, bundled datasets, errors."""
from __future__ import annotations

import gzip
import json
import pickle
import struct
from pathlib import Path

import numpy as np
import pytest
import torch

from fedlib.data import available_datasets, load_dataset, read_cifar_batch, read_idx, read_svhn_mat
from fedlib.data.datasets import FASHION_MNIST_SYSTEM_DIR

IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
             "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")


def idx_bytes(arr: np.ndarray) -> bytes:
    """Serialize an array in IDX format (magic 0x00 0x00 type ndim, big-endian dims)."""
    code = {np.dtype(np.uint8): 0x08, np.dtype(np.int16): 0x0B, np.dtype(np.float32): 0x0D}[arr.dtype]
    header = bytes([0, 0, code, arr.ndim]) + struct.pack(f">{arr.ndim}I", *arr.shape)
    return header + arr.astype(arr.dtype.newbyteorder(">")).tobytes()


def write_idx_set(folder: Path, gz: bool, n_train: int = 30, n_test: int = 12, seed: int = 0):
    """Write the four MNIST-style IDX files; return the arrays written."""
    rng = np.random.default_rng(seed)
    arrays = (rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
              rng.integers(0, 10, n_train).astype(np.uint8),
              rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
              rng.integers(0, 10, n_test).astype(np.uint8))
    folder.mkdir(parents=True, exist_ok=True)
    for stem, arr in zip(IDX_FILES, arrays):
        data = idx_bytes(arr)
        if gz:
            (folder / f"{stem}.gz").write_bytes(gzip.compress(data))
        else:
            (folder / stem).write_bytes(data)
    return arrays


def standardized(train: np.ndarray, other: np.ndarray) -> np.ndarray:
    """Reference per-channel standardization of `other` with `train`'s statistics (axis 1)."""
    axes = (0,) + tuple(range(2, train.ndim))
    t = train.astype(np.float64)
    mean, std = t.mean(axis=axes, keepdims=True), t.std(axis=axes, keepdims=True)
    return (other - mean) / std


def assert_standardized(x: torch.Tensor) -> None:
    dims = [0] + list(range(2, x.dim()))
    assert torch.allclose(x.mean(dim=dims), torch.zeros(x.shape[1]), atol=1e-4)
    assert torch.allclose(x.std(dim=dims, unbiased=False), torch.ones(x.shape[1]), atol=1e-4)


# --- format readers -------------------------------------------------------------------------

@pytest.mark.parametrize("gz", [False, True])
@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float32])
def test_read_idx_roundtrip(tmp_path, gz, dtype):
    arr = (np.arange(2 * 3 * 4) * 11 - 7).astype(dtype).reshape(2, 3, 4)  # uint8 wraps: fine
    data = idx_bytes(arr)
    path = tmp_path / "a.idx"
    path.write_bytes(gzip.compress(data) if gz else data)
    out = read_idx(path)
    assert out.dtype == dtype and out.shape == (2, 3, 4)
    np.testing.assert_array_equal(out, arr)


def test_read_idx_rejects_bad_magic_and_truncation(tmp_path):
    good = idx_bytes(np.zeros((3, 2), dtype=np.uint8))
    (tmp_path / "bad").write_bytes(b"\x01" + good[1:])
    with pytest.raises(ValueError, match="magic"):
        read_idx(tmp_path / "bad")
    (tmp_path / "short").write_bytes(good[:-1])
    with pytest.raises(ValueError, match="bytes"):
        read_idx(tmp_path / "short")


def test_read_cifar_batch_layout(tmp_path):
    data = np.arange(2 * 3072, dtype=np.int64).astype(np.uint8).reshape(2, 3072)
    (tmp_path / "b").write_bytes(pickle.dumps({b"data": data, b"labels": [3, 7]}))
    x, y = read_cifar_batch(tmp_path / "b")
    assert x.shape == (2, 3, 32, 32) and x.dtype == np.uint8 and y.dtype == np.int64
    # row layout: 1024 red, 1024 green, 1024 blue, each row-major 32 x 32
    assert x[1, 2, 5, 7] == data[1, 2 * 1024 + 5 * 32 + 7]
    assert y.tolist() == [3, 7]


def test_read_svhn_mat_transposes_and_maps_ten_to_zero(tmp_path):
    from scipy.io import savemat

    rng = np.random.default_rng(0)
    X = rng.integers(0, 256, (32, 32, 3, 5), dtype=np.uint8)
    savemat(tmp_path / "s.mat", {"X": X, "y": np.array([[10], [1], [9], [10], [4]], dtype=np.uint8)})
    x, y = read_svhn_mat(tmp_path / "s.mat")
    assert x.shape == (5, 3, 32, 32)
    assert x[3, 2, 4, 9] == X[4, 9, 2, 3]
    assert y.tolist() == [0, 1, 9, 0, 4]


# --- file-based datasets --------------------------------------------------------------------

@pytest.mark.parametrize("name,folder,gz", [
    ("mnist", "MNIST/raw", True),
    ("mnist", "mnist", False),
    ("fashion_mnist", "FashionMNIST/raw", False),
    ("fashion_mnist", "fashion_mnist", True),
])
def test_idx_datasets_load_and_normalize(tmp_path, name, folder, gz):
    xtr, ytr, xte, yte = write_idx_set(tmp_path / folder, gz)
    ds = load_dataset(name, root=tmp_path)
    assert ds.name == name and ds.num_classes == 10 and ds.groups is None
    assert ds.input_shape == (1, 28, 28)
    assert ds.x_train.shape == (30, 1, 28, 28) and ds.x_test.shape == (12, 1, 28, 28)
    assert ds.x_train.dtype == torch.float32 and ds.y_train.dtype == torch.int64
    assert ds.y_train.tolist() == ytr.tolist() and ds.y_test.tolist() == yte.tolist()
    assert_standardized(ds.x_train)
    np.testing.assert_allclose(ds.x_test.numpy(), standardized(xtr[:, None], xte[:, None]), atol=1e-4)


def test_missing_idx_file_is_named(tmp_path):
    write_idx_set(tmp_path / "MNIST" / "raw", gz=True)
    (tmp_path / "MNIST" / "raw" / "t10k-labels-idx1-ubyte.gz").unlink()
    with pytest.raises(FileNotFoundError) as err:
        load_dataset("mnist", root=tmp_path)
    msg = str(err.value)
    assert "t10k-labels-idx1-ubyte" in msg and "train-images" not in msg
    assert str(tmp_path / "MNIST" / "raw") in msg
    assert "data/README.md" in msg and "download=True" in msg


def test_fashion_mnist_error_mentions_debian_location(tmp_path):
    if FASHION_MNIST_SYSTEM_DIR.is_dir():
        pytest.skip("the Debian dataset-fashion-mnist package is installed here")
    with pytest.raises(FileNotFoundError, match="fashion-mnist"):
        load_dataset("fashion_mnist", root=tmp_path)


def write_cifar(root: Path, n_per_batch: int = 8, seed: int = 0):
    rng = np.random.default_rng(seed)
    folder = root / "cifar-10-batches-py"
    folder.mkdir(parents=True)
    batches = {}
    for stem in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        data = rng.integers(0, 256, (n_per_batch, 3072), dtype=np.uint8)
        # give each channel a different offset so per-channel statistics matter
        data = (data // 4 + np.repeat([0, 60, 120], 1024)).astype(np.uint8)
        labels = rng.integers(0, 10, n_per_batch).tolist()
        (folder / stem).write_bytes(pickle.dumps({b"data": data, b"labels": labels}))
        batches[stem] = (data.reshape(-1, 3, 32, 32), labels)
    return batches


def test_cifar10_loads_all_batches_with_per_channel_normalization(tmp_path):
    batches = write_cifar(tmp_path)
    ds = load_dataset("cifar10", root=tmp_path)
    assert ds.x_train.shape == (40, 3, 32, 32) and ds.x_test.shape == (8, 3, 32, 32)
    assert ds.input_shape == (3, 32, 32) and ds.num_classes == 10
    train_x = np.concatenate([batches[f"data_batch_{i}"][0] for i in range(1, 6)])
    assert ds.y_train.tolist() == sum((batches[f"data_batch_{i}"][1] for i in range(1, 6)), [])
    assert_standardized(ds.x_train)
    np.testing.assert_allclose(ds.x_test.numpy(), standardized(train_x, batches["test_batch"][0]), atol=1e-4)


def test_cifar10_missing_batch_is_named(tmp_path):
    write_cifar(tmp_path)
    (tmp_path / "cifar-10-batches-py" / "data_batch_3").unlink()
    with pytest.raises(FileNotFoundError, match="data_batch_3"):
        load_dataset("cifar10", root=tmp_path)


def test_cifar100_uses_fine_labels(tmp_path):
    folder = tmp_path / "cifar-100-python"
    folder.mkdir()
    for stem, n in (("train", 6), ("test", 4)):
        batch = {b"data": np.full((n, 3072), 7, dtype=np.uint8) + np.arange(n, dtype=np.uint8)[:, None],
                 b"fine_labels": [99 - i for i in range(n)], b"coarse_labels": [0] * n}
        (folder / stem).write_bytes(pickle.dumps(batch))
    ds = load_dataset("cifar100", root=tmp_path)
    assert ds.num_classes == 100 and ds.x_train.shape == (6, 3, 32, 32)
    assert ds.y_train.tolist() == [99, 98, 97, 96, 95, 94] and ds.y_test.tolist() == [99, 98, 97, 96]


def test_svhn_loads_from_svhn_folder(tmp_path):
    from scipy.io import savemat

    rng = np.random.default_rng(1)
    (tmp_path / "svhn").mkdir()
    for stem, n in (("train_32x32.mat", 9), ("test_32x32.mat", 4)):
        y = rng.integers(1, 11, (n, 1)).astype(np.uint8)
        y[0] = 10
        savemat(tmp_path / "svhn" / stem, {"X": rng.integers(0, 256, (32, 32, 3, n), dtype=np.uint8), "y": y})
    ds = load_dataset("svhn", root=tmp_path)
    assert ds.x_train.shape == (9, 3, 32, 32) and ds.x_test.shape == (4, 3, 32, 32)
    assert ds.y_train[0] == 0 and int(ds.y_train.max()) <= 9 and int(ds.y_test.min()) >= 0
    assert_standardized(ds.x_train)


def test_svhn_missing_test_file_is_named(tmp_path):
    from scipy.io import savemat

    (tmp_path / "svhn").mkdir()
    savemat(tmp_path / "svhn" / "train_32x32.mat",
            {"X": np.zeros((32, 32, 3, 2), np.uint8), "y": np.ones((2, 1))})
    with pytest.raises(FileNotFoundError, match="test_32x32.mat"):
        load_dataset("svhn", root=tmp_path)


def leaf_shard(users: dict[str, list[int]], rng) -> dict:
    return {"users": list(users), "num_samples": [len(v) for v in users.values()],
            "user_data": {u: {"x": rng.random((len(v), 784)).round(3).tolist(), "y": v}
                          for u, v in users.items()}}


def test_femnist_leaf_json_groups_by_writer(tmp_path):
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        (tmp_path / "femnist" / split).mkdir(parents=True)
    shards = {"train/all_data_0_niid_0_keep_0_train_9.json": {"f0007_12": [0, 61, 5], "f0001_03": [10, 11]},
              "train/all_data_1_niid_0_keep_0_train_9.json": {"f0100_44": [35, 36, 37, 61]},
              "test/all_data_0_niid_0_keep_0_test_9.json": {"f0007_12": [1], "f0100_44": [60]}}
    for rel, users in shards.items():
        (tmp_path / "femnist" / rel).write_text(json.dumps(leaf_shard(users, rng)))
    ds = load_dataset("femnist", root=tmp_path)
    assert ds.num_classes == 62 and ds.input_shape == (1, 28, 28)
    assert ds.x_train.shape == (9, 1, 28, 28) and ds.x_test.shape == (2, 1, 28, 28)
    assert ds.y_train.tolist() == [0, 61, 5, 10, 11, 35, 36, 37, 61]
    assert ds.groups.tolist() == [0, 0, 0, 1, 1, 2, 2, 2, 2]
    assert_standardized(ds.x_train)


def test_femnist_missing_test_split_is_named(tmp_path):
    (tmp_path / "femnist" / "train").mkdir(parents=True)
    (tmp_path / "femnist" / "train" / "a.json").write_text(
        json.dumps(leaf_shard({"u": [1]}, np.random.default_rng(0))))
    with pytest.raises(FileNotFoundError, match=r"test/\*\.json"):
        load_dataset("femnist", root=tmp_path)


def test_missing_dataset_never_falls_back(tmp_path):
    for name in ("mnist", "cifar10", "cifar100", "svhn", "femnist"):
        with pytest.raises(FileNotFoundError, match="data/README.md"):
            load_dataset(name, root=tmp_path)


# --- bundled and synthetic ------------------------------------------------------------------

def test_digits():
    ds = load_dataset("digits")
    assert ds.input_shape == (1, 8, 8) and ds.num_classes == 10 and ds.groups is None
    assert len(ds.y_train) + len(ds.y_test) == 1797 and len(ds.y_test) == 360
    assert torch.bincount(ds.y_test, minlength=10).min() >= 35  # stratified
    assert_standardized(ds.x_train)


def test_mnist5k():
    ds = load_dataset("mnist5k")
    assert ds.x_train.shape == (4000, 1, 28, 28) and ds.x_test.shape == (1000, 1, 28, 28)
    assert torch.bincount(ds.y_train, minlength=10).tolist() == [400] * 10
    assert torch.bincount(ds.y_test, minlength=10).tolist() == [100] * 10
    assert ds.x_train.dtype == torch.float32 and ds.y_test.dtype == torch.int64
    assert_standardized(ds.x_train)


def test_load_is_cached_and_split_is_fixed():
    a = load_dataset("digits")
    assert load_dataset("digits", root="data") is a
    from fedlib.data.datasets import _load_cached

    _load_cached.cache_clear()
    b = load_dataset("digits")
    assert b is not a and torch.equal(a.x_test, b.x_test) and torch.equal(a.y_train, b.y_train)


def test_synthetic_groups_and_determinism():
    ds = load_dataset("synthetic", alpha=0.5, beta=0.5, num_clients=12, seed=3)
    assert ds.input_shape == (60,) and ds.num_classes == 10
    assert ds.groups.shape == (len(ds.y_train),) and set(ds.groups.tolist()) == set(range(12))
    assert np.bincount(ds.groups).min() >= 45  # lognormal + 50 per client, 90% kept for training
    assert_standardized(ds.x_train)
    again = load_dataset("synthetic", alpha=0.5, beta=0.5, num_clients=12, seed=3)
    other = load_dataset("synthetic", alpha=0.5, beta=0.5, num_clients=12, seed=4)
    assert again is ds and not torch.equal(other.y_train[:50], ds.y_train[:50])
    from fedlib.data import leaf_synthetic

    raw = leaf_synthetic(0.5, 0.5, num_clients=12, seed=3)
    np.testing.assert_array_equal(raw.train_groups, ds.groups)
    np.testing.assert_array_equal(raw.y_train, ds.y_train.numpy())


def test_synthetic_iid_is_homogeneous_and_niid_is_not():
    """Synthetic-IID clients share one label distribution; Synthetic(1, 1) clients do not."""
    def mean_tv(**kwargs):
        s = load_dataset("synthetic", num_clients=30, seed=0, **kwargs)
        y, g = s.y_train.numpy(), s.groups
        glob = np.bincount(y, minlength=10) / len(y)
        return np.mean([0.5 * np.abs(np.bincount(y[g == k], minlength=10) / np.sum(g == k) - glob).sum()
                        for k in range(30)])
    assert mean_tv(iid=True) < 0.3 < mean_tv(alpha=1.0, beta=1.0)


def test_unknown_name_and_bad_options():
    with pytest.raises(ValueError, match="available: .*cifar10.*digits.*mnist5k"):
        load_dataset("imagenet")
    with pytest.raises(TypeError, match="no options"):
        load_dataset("digits", alpha=1.0)
    assert {"digits", "mnist5k", "mnist", "fashion_mnist", "cifar10", "cifar100", "svhn",
            "femnist", "synthetic"} == set(available_datasets())


# --- download=True, against a local file:// mirror (no network in tests) -----------------------

def test_download_idx_from_mirror(tmp_path, monkeypatch):
    from fedlib.data import datasets

    xtr, ytr, _, _ = write_idx_set(tmp_path / "mirror", gz=True)
    monkeypatch.setitem(datasets._URLS, "mnist", (tmp_path / "mirror").as_uri() + "/")
    with pytest.raises(FileNotFoundError):
        load_dataset("mnist", root=tmp_path / "data")  # nothing fetched unless asked
    ds = load_dataset("mnist", root=tmp_path / "data", download=True)
    assert (tmp_path / "data" / "MNIST" / "raw" / "train-images-idx3-ubyte.gz").is_file()
    assert ds.y_train.tolist() == ytr.tolist()


def test_download_cifar_archive_from_mirror(tmp_path, monkeypatch):
    import tarfile

    from fedlib.data import datasets

    batches = write_cifar(tmp_path / "src")
    archive = tmp_path / "cifar-10-python.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(tmp_path / "src" / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    monkeypatch.setitem(datasets._URLS, "cifar10", archive.as_uri())
    ds = load_dataset("cifar10", root=tmp_path / "data", download=True)
    assert ds.y_test.tolist() == batches["test_batch"][1]
    assert not (tmp_path / "data" / "cifar-10-python.tar.gz").exists()
