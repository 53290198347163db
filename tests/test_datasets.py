"""Dataset loaders: real file formats fabricated in tmp_path, bundled datasets, errors."""
from __future__ import annotations

import contextlib
import gzip
import hashlib
import json
import pickle
import re
import struct
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch

from fedlib.data import available_datasets, load_dataset, read_cifar_batch, read_csv_gz, read_idx, read_svhn_mat
from fedlib.data.datasets import FASHION_MNIST_SYSTEM_DIR
from fedlib.data.fabricate import idx_bytes, leaf_shard, write_cifar, write_idx_set


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
            "femnist", "shakespeare", "adult", "adult_uci", "synthetic"} == set(available_datasets())


# --- download=True, against a local file:// mirror (no network in tests) -----------------------

def sha256(path: Path) -> tuple[str, str]:
    return "sha256", hashlib.sha256(path.read_bytes()).hexdigest()


def mirror(monkeypatch, name: str, folder: Path) -> None:
    """Point dataset `name`'s downloads at `folder` and its digests at the files there."""
    from fedlib.data import datasets

    monkeypatch.setitem(datasets._URLS, name, folder.as_uri() + "/")
    monkeypatch.setitem(datasets._DIGESTS, name, {f: sha256(folder / f) for f in datasets._DIGESTS[name]})


def test_download_idx_from_mirror(tmp_path, monkeypatch):
    xtr, ytr, _, _ = write_idx_set(tmp_path / "mirror", gz=True)
    mirror(monkeypatch, "mnist", tmp_path / "mirror")
    with pytest.raises(FileNotFoundError):
        load_dataset("mnist", root=tmp_path / "data")  # nothing fetched unless asked
    ds = load_dataset("mnist", root=tmp_path / "data", download=True)
    assert (tmp_path / "data" / "MNIST" / "raw" / "train-images-idx3-ubyte.gz").is_file()
    assert ds.y_train.tolist() == ytr.tolist()


def test_download_cifar_archive_from_mirror(tmp_path, monkeypatch):
    import tarfile

    batches = write_cifar(tmp_path / "src")
    (tmp_path / "mirror").mkdir()
    with tarfile.open(tmp_path / "mirror" / "cifar-10-python.tar.gz", "w:gz") as tar:
        tar.add(tmp_path / "src" / "cifar-10-batches-py", arcname="cifar-10-batches-py")
    mirror(monkeypatch, "cifar10", tmp_path / "mirror")
    ds = load_dataset("cifar10", root=tmp_path / "data", download=True)
    assert ds.y_test.tolist() == batches["test_batch"][1]
    assert not (tmp_path / "data" / "cifar-10-python.tar.gz").exists()


def test_download_urls_are_https_with_a_digest_for_every_file():
    from fedlib.data import datasets

    assert all(url.startswith("https://") for url in datasets._URLS.values())
    assert set(datasets._DIGESTS) == set(datasets._URLS)
    for files in datasets._DIGESTS.values():
        for algorithm, digest in files.values():
            assert re.fullmatch(f"[0-9a-f]{{{2 * hashlib.new(algorithm).digest_size}}}", digest)


def test_download_checksum_mismatch_keeps_nothing(tmp_path, monkeypatch):
    from fedlib.data import DatasetFileError, datasets

    write_idx_set(tmp_path / "mirror", gz=True)  # not the real MNIST: its MD5s cannot match
    monkeypatch.setitem(datasets._URLS, "mnist", (tmp_path / "mirror").as_uri() + "/")
    with pytest.raises(DatasetFileError) as err:
        load_dataset("mnist", root=tmp_path / "data", download=True)
    actual = hashlib.md5((tmp_path / "mirror" / "train-images-idx3-ubyte.gz").read_bytes()).hexdigest()
    msg = str(err.value)
    assert "train-images-idx3-ubyte.gz" in msg and "f68b3c2dcbeaaa9fbdd348bbdeb94873" in msg and actual in msg
    assert list((tmp_path / "data" / "MNIST" / "raw").iterdir()) == []  # no file, no .part


def test_plain_http_download_is_refused(tmp_path, monkeypatch):
    from fedlib.data import datasets

    monkeypatch.setitem(datasets._URLS, "svhn", "http://ufldl.stanford.edu/housenumbers/")
    with pytest.raises(ValueError, match=r"refusing to download http://ufldl.*only https"):
        load_dataset("svhn", root=tmp_path, download=True)
    assert not (tmp_path / "svhn").exists() or list((tmp_path / "svhn").iterdir()) == []


def test_redirect_to_plain_http_is_refused():
    import urllib.request

    from fedlib.data.datasets import _SecureRedirects

    req = urllib.request.Request("https://example.org/a")
    with pytest.raises(ValueError, match="refusing to download http://example.org/b"):
        _SecureRedirects().redirect_request(req, None, 302, "Found", {}, "http://example.org/b")


# --- untrusted and broken files: every format fails naming the file and the problem ------------

class RunsCommand:
    """Unpickling this calls os.system: what a malicious CIFAR batch would do."""

    def __init__(self, command: str) -> None:
        self.command = command

    def __reduce__(self):
        import os

        return os.system, (self.command,)


def test_crafted_cifar_pickle_does_not_execute(tmp_path):
    write_cifar(tmp_path)
    marker = tmp_path / "pwned"
    batch = tmp_path / "cifar-10-batches-py" / "data_batch_1"
    batch.write_bytes(pickle.dumps({b"data": RunsCommand(f"touch {marker}"), b"labels": [1]}))
    from fedlib.data import DatasetFileError

    with pytest.raises(DatasetFileError) as err:
        load_dataset("cifar10", root=tmp_path)
    assert not marker.exists()
    msg = str(err.value)
    assert str(batch) in msg and "posix.system" in msg and "refusing to unpickle" in msg


@pytest.mark.parametrize("forbidden,args", [(eval, ("1",)), (getattr, (1, "real")), (__import__, ("os",))])
def test_cifar_unpickler_refuses_any_other_global(tmp_path, forbidden, args):
    from fedlib.data import DatasetFileError

    class Calls:
        def __reduce__(self):
            return forbidden, args

    (tmp_path / "b").write_bytes(pickle.dumps({b"data": Calls(), b"labels": []}))
    with pytest.raises(DatasetFileError, match=f"'builtins.{forbidden.__name__}'"):
        read_cifar_batch(tmp_path / "b")


@pytest.mark.parametrize("protocol", [3, 4, 5])
def test_cifar_unpickler_reads_numpy_arrays_of_every_protocol(tmp_path, protocol):
    data = np.arange(2 * 3072).astype(np.uint8).reshape(2, 3072)
    (tmp_path / "b").write_bytes(pickle.dumps({b"data": data, b"labels": np.array([4, 2])}, protocol=protocol))
    x, y = read_cifar_batch(tmp_path / "b")
    np.testing.assert_array_equal(x.reshape(2, -1), data)
    assert y.tolist() == [4, 2]


class Python2Pickler(pickle._Pickler):
    """Writes str and bytes as Python 2 str (BINSTRING), as the pickles on the CIFAR page are."""

    dispatch = pickle._Pickler.dispatch.copy()

    def save_python2_str(self, obj: str | bytes) -> None:
        data = obj.encode("latin1") if isinstance(obj, str) else obj
        self.write(pickle.BINSTRING + struct.pack("<i", len(data)) + data)
        self.memoize(obj)

    dispatch[bytes] = save_python2_str
    dispatch[str] = save_python2_str


def test_cifar_unpickler_reads_the_python2_batches_of_the_cifar_page(tmp_path):
    import io

    data = np.arange(2 * 3072).astype(np.uint8).reshape(2, 3072)
    buffer = io.BytesIO()
    Python2Pickler(buffer, protocol=2).dump({"batch_label": "training batch 1 of 5", "labels": [3, 7],
                                             "data": data, "filenames": ["a.png", "b.png"]})
    # numpy 1.x, which wrote the real files, names the reconstructor numpy.core.multiarray
    python2 = buffer.getvalue().replace(b"numpy._core.multiarray\n", b"numpy.core.multiarray\n")
    assert b"cnumpy.core.multiarray\n_reconstruct\n" in python2 and b"X\x04\x00\x00\x00data" not in python2
    (tmp_path / "b").write_bytes(python2)
    x, y = read_cifar_batch(tmp_path / "b")
    np.testing.assert_array_equal(x.reshape(2, -1), data)
    assert y.tolist() == [3, 7]


def cifar_pickle(n_images: int, n_labels: int, width: int = 3072) -> bytes:
    return pickle.dumps({b"data": np.zeros((n_images, width), np.uint8), b"labels": [0] * n_labels})


@pytest.mark.parametrize("content,problem", [
    (cifar_pickle(3, 3)[:-40], "truncated or corrupt pickle (UnpicklingError: pickle data was truncated)"),
    (b"", "truncated or corrupt pickle (EOFError"),
    (b"\x80\x04garbage" + bytes(range(40)), "truncated or corrupt pickle"),
    (cifar_pickle(3, 2), "3 images but 2 labels"),
    (cifar_pickle(3, 3, width=100), "'data' has shape (3, 100)"),
    (pickle.dumps({b"data": np.zeros((1, 3072), np.uint8)}), "lacks ['labels']"),
    (pickle.dumps([1, 2]), "this pickle holds a list"),
])
def test_bad_cifar_batch_is_named(tmp_path, content, problem):
    from fedlib.data import DatasetFileError

    write_cifar(tmp_path)
    bad = tmp_path / "cifar-10-batches-py" / "test_batch"
    bad.write_bytes(content)
    with pytest.raises(DatasetFileError) as err:
        load_dataset("cifar10", root=tmp_path)
    assert str(err.value).startswith(f"{bad}: ") and problem in str(err.value)


def test_truncated_and_corrupt_gzip_are_named(tmp_path):
    from fedlib.data import DatasetFileError

    write_idx_set(tmp_path / "MNIST" / "raw", gz=True)
    path = tmp_path / "MNIST" / "raw" / "train-images-idx3-ubyte.gz"
    good = path.read_bytes()
    path.write_bytes(good[: len(good) // 2])
    with pytest.raises(DatasetFileError, match=rf"^{path}: truncated gzip"):
        load_dataset("mnist", root=tmp_path)
    path.write_bytes(good[:-8] + b"\0" * 8)  # CRC and length trailer zeroed
    with pytest.raises(DatasetFileError, match=rf"^{path}: corrupt gzip"):
        read_idx(path)


def test_idx_labels_that_do_not_match_images_are_named(tmp_path):
    from fedlib.data import DatasetFileError

    folder = tmp_path / "mnist"
    write_idx_set(folder, gz=False, n_train=50)
    labels = folder / "train-labels-idx1-ubyte"
    labels.write_bytes(idx_bytes(np.zeros(49, np.uint8)))
    with pytest.raises(DatasetFileError) as err:
        load_dataset("mnist", root=tmp_path)
    msg = str(err.value)
    assert "50 images but 49 labels" in msg and str(folder / "train-images-idx3-ubyte") in msg and str(labels) in msg


def test_idx_files_of_the_wrong_rank_are_named(tmp_path):
    from fedlib.data import DatasetFileError

    folder = tmp_path / "mnist"
    write_idx_set(folder, gz=False)
    (folder / "t10k-labels-idx1-ubyte").write_bytes(idx_bytes(np.zeros((12, 2), np.uint8)))
    with pytest.raises(DatasetFileError, match=r"t10k-labels-idx1-ubyte: labels have shape \(12, 2\)"):
        load_dataset("mnist", root=tmp_path)
    write_idx_set(folder, gz=False)
    (folder / "t10k-images-idx3-ubyte").write_bytes(idx_bytes(np.zeros((12, 14, 14), np.uint8)))
    with pytest.raises(DatasetFileError, match=r"t10k-images-idx3-ubyte: images are 14 x 14; MNIST and Fashion-MNIST "
                                               r"images are 28 x 28"):
        load_dataset("mnist", root=tmp_path)


def test_idx_header_shorter_than_its_dimensions(tmp_path):
    from fedlib.data import DatasetFileError

    (tmp_path / "h").write_bytes(bytes([0, 0, 0x08, 3, 0, 0]))
    with pytest.raises(DatasetFileError, match="truncated IDX header: 3 dimensions need 16 bytes"):
        read_idx(tmp_path / "h")


def write_svhn_pair(folder: Path) -> None:
    from scipy.io import savemat

    folder.mkdir(parents=True, exist_ok=True)
    for stem, n in (("train_32x32.mat", 5), ("test_32x32.mat", 3)):
        savemat(folder / stem, {"X": np.zeros((32, 32, 3, n), np.uint8), "y": np.ones((n, 1), np.uint8)})


@pytest.mark.parametrize("variables,problem", [
    ({"X": np.zeros((32, 32, 3, 5), np.uint8), "y": np.ones((4, 1))}, "5 images but 4 labels"),
    ({"X": np.zeros((32, 32, 5), np.uint8), "y": np.ones((5, 1))}, "X has shape (32, 32, 5)"),
    ({"X": np.zeros((32, 32, 3, 5), np.uint8)}, "missing variable(s) ['y']"),
])
def test_inconsistent_svhn_mat_is_named(tmp_path, variables, problem):
    from scipy.io import savemat

    from fedlib.data import DatasetFileError

    write_svhn_pair(tmp_path / "svhn")
    bad = tmp_path / "svhn" / "train_32x32.mat"
    savemat(bad, variables)
    with pytest.raises(DatasetFileError) as err:
        load_dataset("svhn", root=tmp_path)
    assert str(err.value).startswith(f"{bad}: ") and problem in str(err.value)


@pytest.mark.parametrize("cut", [0.5, 0.0])
def test_truncated_svhn_mat_is_named(tmp_path, cut):
    from fedlib.data import DatasetFileError

    write_svhn_pair(tmp_path / "svhn")
    bad = tmp_path / "svhn" / "test_32x32.mat"
    bad.write_bytes(bad.read_bytes()[: int(cut * bad.stat().st_size)])
    with pytest.raises(DatasetFileError, match=rf"^{bad}: truncated or corrupt \.mat file"):
        load_dataset("svhn", root=tmp_path)


def write_femnist(root: Path, train_shard: object) -> Path:
    rng = np.random.default_rng(0)
    for split in ("train", "test"):
        (root / "femnist" / split).mkdir(parents=True)
    (root / "femnist" / "test" / "t.json").write_text(json.dumps(leaf_shard({"u1": [1]}, rng)))
    path = root / "femnist" / "train" / "a.json"
    path.write_text(train_shard if isinstance(train_shard, str) else json.dumps(train_shard))
    return path


def good_shard() -> dict:
    return leaf_shard({"u1": [1, 2], "u2": [3]}, np.random.default_rng(1))


def drop_user_data(shard: dict) -> dict:
    del shard["user_data"]["u1"]
    return shard


def set_user(user: str, **record) -> Callable[[dict], dict]:
    def edit(shard: dict) -> dict:
        shard["user_data"][user].update(record)
        return shard
    return edit


@pytest.mark.parametrize("edit,problem", [
    (lambda s: json.dumps(s)[:-30], "invalid JSON"),
    (drop_user_data, "missing key 'user_data' for user 'u1'"),
    (lambda s: {"users": s["users"]}, "keys 'users' and 'user_data' (found ['users'])"),
    (lambda s: [s], "(found list)"),
    (set_user("u2", y=[3, 4]), "user 'u2' has 1 samples but 2 labels"),
    (set_user("u1", x=[[0.0] * 784, [0.0] * 10]), "user 'u1': 'x': not a rectangular numeric array"),
    (set_user("u2", x=[[0.0] * 10]), "user 'u2' has 10 features per sample, earlier users have 784"),
    (lambda s: {**s, "user_data": {u: {"x": [], "y": []} for u in s["users"]}}, "no user with samples"),
])
def test_bad_femnist_json_is_named(tmp_path, edit, problem):
    from fedlib.data import DatasetFileError

    path = write_femnist(tmp_path, edit(good_shard()))
    with pytest.raises(DatasetFileError) as err:
        load_dataset("femnist", root=tmp_path)
    assert str(path) in str(err.value) and problem in str(err.value)


def set_value(user: str, key: str, index: tuple[int, ...], value: object) -> Callable[[dict], dict]:
    def edit(shard: dict) -> dict:
        *outer, last = index
        target = shard["user_data"][user][key]
        for i in outer:
            target = target[i]
        target[last] = value
        return shard
    return edit


@pytest.mark.parametrize("edit,problem", [
    (set_value("u1", "y", (0,), True), "user 'u1': labels[0] is True (bool), not a number"),
    (set_value("u1", "y", (1,), "2"), "user 'u1': labels[1] is '2' (str), not a number"),
    (set_value("u2", "x", (0, 5), True), "user 'u2': 'x'[0, 5] is True (bool), not a number"),
    (set_value("u1", "x", (1, 783), "0.5"), "user 'u1': 'x'[1, 783] is '0.5' (str), not a number"),
    (set_value("u1", "x", (0, 0), None), "user 'u1': 'x'[0, 0] is None (NoneType), not a number"),
    (lambda s: {**s, "users": 5}, "'users' must be a list of user names (strings), got 5"),
    (lambda s: {**s, "users": [["u1"]]}, "'users' must be a list of user names (strings), got [['u1']]"),
    (lambda s: {**s, "user_data": []}, "'user_data' must be an object mapping each user to its samples, got a list"),
    (set_user("u2", y=3), "user 'u2': labels must be a flat list, one per sample (got shape ())"),
], ids=["true-label", "string-label", "true-pixel", "string-pixel", "null-pixel", "users-a-number",
        "users-not-names", "user-data-a-list", "labels-a-number"])
def test_femnist_values_that_are_not_numbers_are_named_not_converted(tmp_path, edit, problem):
    """numpy reads `true` as 1 and "0.5" as 0.5 (and a malformed shard raised a TypeError or AttributeError):
    each is a DatasetFileError naming the file, the user and the sample."""
    from fedlib.data import DatasetFileError

    path = write_femnist(tmp_path, edit(good_shard()))
    with pytest.raises(DatasetFileError) as err:
        load_dataset("femnist", root=tmp_path)
    assert str(err.value).startswith(f"{path}: {problem}")


def test_a_cifar_label_that_is_a_boolean_is_named_not_converted(tmp_path):
    from fedlib.data import DatasetFileError

    path = tmp_path / "batch"
    path.write_bytes(pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [3, True]}))
    with pytest.raises(DatasetFileError, match=rf"^{path}: 'labels'\[1\] is True \(bool\), not a number"):
        read_cifar_batch(path)


def test_idx_images_of_another_size_than_28x28_are_named(tmp_path):
    """32 x 32 images in MNIST's files loaded as a 32 x 32 dataset: now an error naming the file."""
    from fedlib.data import DatasetFileError

    folder = tmp_path / "mnist"
    write_idx_set(folder, gz=False)
    rng = np.random.default_rng(0)
    for stem, n in (("train-images-idx3-ubyte", 30), ("t10k-images-idx3-ubyte", 12)):
        (folder / stem).write_bytes(idx_bytes(rng.integers(0, 256, (n, 32, 32), dtype=np.uint8)))
    with pytest.raises(DatasetFileError, match=rf"^{folder}/train-images-idx3-ubyte: images are 32 x 32; MNIST and "
                                               r"Fashion-MNIST images are 28 x 28"):
        load_dataset("mnist", root=tmp_path)


def test_a_csv_digit_of_another_script_is_named_with_its_line(tmp_path):
    from fedlib.data import DatasetFileError

    path = tmp_path / "t.csv.gz"
    path.write_bytes(gzip.compress("1,2,3\n4,5,\u0663\n".encode(), mtime=0))  # U+0663: ARABIC-INDIC DIGIT THREE
    with pytest.raises(DatasetFileError, match=rf"^{path}: line 2: '\u0663' \(U\+0663\) is not an ASCII digit"):
        read_csv_gz(path)


def test_femnist_samples_that_are_not_28x28_are_named(tmp_path):
    from fedlib.data import DatasetFileError

    shard = {"users": ["u1"], "num_samples": [1], "user_data": {"u1": {"x": [[0.5] * 100], "y": [3]}}}
    write_femnist(tmp_path, shard)
    with pytest.raises(DatasetFileError, match=r"femnist/train: samples have 100 features, FEMNIST images need 784"):
        load_dataset("femnist", root=tmp_path)


# mtime=0 and explicit ids: test ids must not depend on the clock (parallel workers compare their collections)
@pytest.mark.parametrize("content,problem", [
    (gzip.compress(b"1,2,3\n4,5\n", mtime=0), "not a CSV of integers 0-255"),
    (gzip.compress(b"1,2,300\n", mtime=0), "not a CSV of integers 0-255"),
    (gzip.compress(b"1,2,3\n", mtime=0)[:-5], "truncated gzip"),
    (gzip.compress(b"", mtime=0), "empty CSV"),
], ids=["ragged-rows", "value-over-255", "truncated", "empty"])
def test_bad_bundled_csv_is_named(tmp_path, content, problem):
    from fedlib.data import DatasetFileError, read_csv_gz

    (tmp_path / "t.csv.gz").write_bytes(content)
    with pytest.raises(DatasetFileError, match=rf"^{tmp_path / 't.csv.gz'}: {re.escape(problem)}"):
        read_csv_gz(tmp_path / "t.csv.gz")


def test_bundled_csv_with_the_wrong_width_is_named(tmp_path, monkeypatch):
    from fedlib.data import DatasetFileError, datasets

    (tmp_path / "digits.csv.gz").write_bytes(gzip.compress(b"1,2,3\n4,5,6\n"))
    monkeypatch.setattr(datasets, "_package_file", lambda package, relative: tmp_path / "digits.csv.gz")
    with pytest.raises(DatasetFileError, match=r"digits.csv.gz: rows have 3 columns, expected 64 pixels \(1 x 8 x 8\)"):
        datasets._load_digits(tmp_path)


def test_labels_out_of_range_name_the_file(tmp_path):
    from fedlib.data import DatasetFileError

    folder = tmp_path / "mnist"
    write_idx_set(folder, gz=False)
    (folder / "train-labels-idx1-ubyte").write_bytes(idx_bytes(np.full(30, 12, np.uint8)))
    with pytest.raises(DatasetFileError, match=rf"^{folder}/train-labels-idx1-ubyte: labels must lie in \[0, 10\); "
                                               r"found 30 value\(s\) such as 12, 12, 12"):
        load_dataset("mnist", root=tmp_path)


# ------------------------------------------------------------------ values are checked, never coerced
def svhn_with(folder: Path, X: np.ndarray, y: np.ndarray) -> Path:
    from scipy.io import savemat

    write_svhn_pair(folder)
    savemat(folder / "train_32x32.mat", {"X": X, "y": y})
    return folder / "train_32x32.mat"


@pytest.mark.parametrize("label", [12, 0, -1])
def test_svhn_labels_outside_one_to_ten_are_refused_not_wrapped(tmp_path, label):
    from fedlib.data import DatasetFileError

    bad = svhn_with(tmp_path / "svhn", np.zeros((32, 32, 3, 5), np.uint8), np.array([[1], [10], [label], [2], [3]]))
    with pytest.raises(DatasetFileError,
                       match=rf"^{bad}: labels must lie in \[1, 11\); found 1 value\(s\) such as {label}"):
        load_dataset("svhn", root=tmp_path)


def test_svhn_ten_still_means_zero(tmp_path):
    x, y = read_svhn_mat(svhn_with(tmp_path / "svhn", np.zeros((32, 32, 3, 3), np.uint8), np.array([[10], [1], [9]])))
    assert y.tolist() == [0, 1, 9]


@pytest.mark.parametrize("value", [300, -300])
def test_cifar_pixels_outside_a_byte_are_refused_not_wrapped(tmp_path, value):
    from fedlib.data import DatasetFileError

    data = np.zeros((2, 3072), np.int64)
    data[1, 5] = value
    path = tmp_path / "batch"
    path.write_bytes(pickle.dumps({b"data": data, b"labels": [0, 1]}))
    with pytest.raises(DatasetFileError, match=rf"^{path}: pixels of an 8-bit image format must lie in \[0, 255\]; "
                                               rf"found 1 value\(s\) such as {value}"):
        read_cifar_batch(path)


def test_a_nan_pixel_is_refused(tmp_path):
    from fedlib.data import DatasetFileError

    data = np.zeros((2, 3072))
    data[0, 0] = np.nan
    path = tmp_path / "batch"
    path.write_bytes(pickle.dumps({b"data": data, b"labels": [0, 1]}))
    with pytest.raises(DatasetFileError, match=rf"^{path}: pixels hold 1 NaN or infinite value"):
        read_cifar_batch(path)
    bad = svhn_with(tmp_path / "svhn", np.full((32, 32, 3, 2), np.nan), np.array([[1], [2]]))
    with pytest.raises(DatasetFileError, match=rf"^{bad}: pixels hold 6144 NaN"):
        read_svhn_mat(bad)


def test_float_labels_are_refused_not_truncated(tmp_path):
    from fedlib.data import DatasetFileError

    path = tmp_path / "batch"
    path.write_bytes(pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"labels": [3.7, 1.0]}))
    with pytest.raises(DatasetFileError, match=rf"^{path}: 'labels' must be integers; found 1 value\(s\) such as 3.7"):
        read_cifar_batch(path)
    bad = svhn_with(tmp_path / "svhn", np.zeros((32, 32, 3, 2), np.uint8), np.array([[3.7], [2.0]]))
    with pytest.raises(DatasetFileError, match=rf"^{bad}: labels must be integers; found 1 value\(s\) such as 3.7"):
        read_svhn_mat(bad)
    (tmp_path / "f").write_bytes(idx_bytes(np.array([1.0, 3.7, 2.0], np.float32)))
    assert read_idx(tmp_path / "f")[1] == np.float32(3.7)  # an IDX float array is read as is; as labels:
    write_idx_set(tmp_path / "mnist", gz=False)
    (tmp_path / "mnist" / "t10k-labels-idx1-ubyte").write_bytes(idx_bytes(np.full(12, 3.7, np.float32)))
    with pytest.raises(DatasetFileError, match=r"t10k-labels-idx1-ubyte: labels must be integers"):
        load_dataset("mnist", root=tmp_path)


def test_cifar100_fine_labels_must_lie_below_100(tmp_path):
    from fedlib.data import DatasetFileError

    path = tmp_path / "train"
    path.write_bytes(pickle.dumps({b"data": np.zeros((2, 3072), np.uint8), b"fine_labels": [99, 100]}))
    with pytest.raises(DatasetFileError, match=r"labels must lie in \[0, 100\); found 1 value\(s\) such as 100"):
        read_cifar_batch(path, "fine_labels")


def test_femnist_values_are_checked(tmp_path):
    from fedlib.data import DatasetFileError, read_leaf_json

    path = tmp_path / "shard.json"
    shard = {"users": ["u"], "user_data": {"u": {"x": [[0.5] * 4, [float("nan")] * 4], "y": [1, 2]}}}
    path.write_text(json.dumps(shard))  # json writes NaN, and reads it back
    with pytest.raises(DatasetFileError, match=rf"^{path}: user 'u': 'x' hold 4 NaN"):
        read_leaf_json([path])
    shard["user_data"]["u"] = {"x": [[0.5] * 4] * 2, "y": [1, 62]}
    path.write_text(json.dumps(shard))
    with pytest.raises(DatasetFileError, match=r"labels must lie in \[0, 62\); found 1 value\(s\) such as 62"):
        read_leaf_json([path], num_classes=62)


def test_a_gzip_bomb_is_refused_after_reading_at_most_the_cap(tmp_path, monkeypatch):
    """A 1 MB .gz that expands to 1 GB: refused without holding more than the cap in memory."""
    from fedlib.data import DatasetFileError, formats

    bomb = tmp_path / "train-images-idx3-ubyte.gz"
    with gzip.open(bomb, "wb", compresslevel=9) as f:  # a valid IDX header claiming 60000 x 28 x 28, then zeros
        f.write(bytes([0, 0, 0x08, 3]) + struct.pack(">3I", 60000, 28, 28))
        for _ in range(1 << 10):
            f.write(bytes(1 << 20))
    assert bomb.stat().st_size < 2 << 20
    reads = []
    real_reader = formats._reader

    @contextlib.contextmanager
    def counting(path):
        with real_reader(path) as read:
            yield lambda n: reads.append(len(data := read(n))) or data

    monkeypatch.setattr(formats, "_reader", counting)
    with pytest.raises(DatasetFileError, match=rf"^{bomb}: IDX header says shape \(60000, 28, 28\) \(47040000 bytes\) "
                                               "but the file holds more than that data bytes"):
        read_idx(bomb)
    assert sum(reads) <= 47040000 + 1 + 16
    huge = tmp_path / "huge.gz"
    with gzip.open(huge, "wb") as f:
        f.write(bytes([0, 0, 0x08, 3]) + struct.pack(">3I", 1 << 20, 1 << 10, 1 << 10))
    with pytest.raises(DatasetFileError, match=r"over the 1073741824-byte cap"):
        read_idx(huge)
    monkeypatch.setattr(formats, "CSV_MAX_BYTES", 1000)
    csv = tmp_path / "table.csv.gz"
    csv.write_bytes(gzip.compress(b"1,2\n" * 1000))
    with pytest.raises(DatasetFileError, match=rf"^{csv}: holds more than 1000 bytes \(decompressed\)"):
        read_csv_gz(csv)


def test_a_data_file_changed_under_a_running_process_is_read_again(tmp_path):
    """A notebook kernel that loaded a dataset, then the file is replaced: the new arrays, not the cached ones."""
    from fedlib.data.fabricate import fabricate

    fabricate("fashion_mnist", tmp_path, n_train=40, n_test=10, seed=1)
    first = load_dataset("fashion_mnist", root=tmp_path)
    assert load_dataset("fashion_mnist", root=tmp_path) is first  # unchanged: cached
    fabricate_into = tmp_path / "other"
    fabricate("fashion_mnist", fabricate_into, n_train=40, n_test=10, seed=2)
    for new in fabricate_into.rglob("*"):
        if new.is_file():
            (tmp_path / new.relative_to(fabricate_into)).write_bytes(new.read_bytes())
    second = load_dataset("fashion_mnist", root=tmp_path)
    assert second is not first and not torch.equal(first.x_train, second.x_train)


def test_a_cifar_pickle_of_memo_references_is_refused_before_it_expands(tmp_path):
    """A few hundred KB of pickle that repeats one 3072-value row 50,000 times would load 150 MB of images."""
    row = [0] * 3072
    path = tmp_path / "data_batch_1"
    with open(path, "wb") as f:
        pickle.dump({b"data": [row] * 50_000, b"labels": [0] * 50_000}, f, protocol=4)
    assert path.stat().st_size < 300_000
    with pytest.raises(ValueError, match="would expand to 153,650,000 values from a .*-byte file.*repeats "
                                         "references"):
        read_cifar_batch(path)


def test_an_svhn_mat_that_decompresses_far_beyond_its_size_is_refused(tmp_path):
    from scipy.io import savemat

    from fedlib.data import formats

    path = tmp_path / "train_32x32.mat"
    savemat(path, {"X": np.zeros((32, 32, 3, 20_000), dtype=np.uint8), "y": np.ones((20_000, 1), dtype=np.uint8)},
            do_compression=True)
    assert path.stat().st_size < 200_000  # 61 MB of zeros
    with pytest.raises(ValueError, match=r"would decompress to 61,460,000 bytes from a .*-byte file .over 16x"):
        read_svhn_mat(path)
    small = tmp_path / "test_32x32.mat"  # a small real-looking file stays readable
    rng = np.random.default_rng(0)
    savemat(small, {"X": rng.integers(0, 256, (32, 32, 3, 50), dtype=np.uint8),
                    "y": rng.integers(1, 11, (50, 1)).astype(np.uint8)}, do_compression=True)
    x, y = read_svhn_mat(small)
    assert x.shape == (50, 3, 32, 32) and formats.MAT_MAX_EXPANSION == 16
