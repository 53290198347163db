"""Readers for the standard dataset file formats: IDX, CIFAR python batches, SVHN .mat, LEAF JSON.

Each reader takes file paths and returns plain numpy arrays; it knows nothing about where the
files live (that is `datasets.py`'s job).
"""
from __future__ import annotations

import gzip
import json
import pickle
from collections.abc import Sequence
from pathlib import Path

import numpy as np

# IDX type codes (third magic byte) -> big-endian numpy dtypes.
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}


def _read_bytes(path: Path) -> bytes:
    """Read a file, transparently gunzipping it when it starts with the gzip magic."""
    data = Path(path).read_bytes()
    return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (MNIST / Fashion-MNIST format), gzipped or not, into a numpy array.

    Layout: two zero bytes, a type code, the number of dimensions, then one big-endian uint32
    per dimension, then the data in row-major order.
    """
    data = _read_bytes(Path(path))
    if len(data) < 4 or data[0] != 0 or data[1] != 0 or data[2] not in _IDX_DTYPES:
        raise ValueError(f"{path}: not an IDX file (bad magic number {data[:4].hex()})")
    dtype = np.dtype(_IDX_DTYPES[data[2]])
    ndim = data[3]
    header = 4 + 4 * ndim
    shape = tuple(int(d) for d in np.frombuffer(data, dtype=">u4", count=ndim, offset=4))
    expected = int(np.prod(shape)) * dtype.itemsize
    if len(data) - header != expected:
        raise ValueError(f"{path}: IDX header says shape {shape} ({expected} bytes) "
                         f"but the file holds {len(data) - header} data bytes")
    return np.frombuffer(data, dtype=dtype, offset=header).reshape(shape).astype(dtype.newbyteorder("="))


def read_cifar_batch(path: str | Path, label_key: str = "labels") -> tuple[np.ndarray, np.ndarray]:
    """Read one CIFAR python pickle batch: images as uint8 N x 3 x 32 x 32 and int64 labels.

    `label_key` is "labels" for CIFAR-10 and "fine_labels" (or "coarse_labels") for CIFAR-100.
    """
    with open(path, "rb") as f:
        batch = pickle.load(f, encoding="bytes")
    batch = {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}
    if "data" not in batch or label_key not in batch:
        raise ValueError(f"{path}: CIFAR batch lacks 'data' or '{label_key}' (keys: {sorted(batch)})")
    x = np.asarray(batch["data"], dtype=np.uint8).reshape(-1, 3, 32, 32)
    y = np.asarray(batch[label_key], dtype=np.int64)
    if len(x) != len(y):
        raise ValueError(f"{path}: {len(x)} images but {len(y)} labels")
    return x, y


def read_svhn_mat(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read an SVHN cropped-digits .mat file: uint8 N x 3 x 32 x 32 images, labels 0-9 (10 -> 0)."""
    from scipy.io import loadmat

    mat = loadmat(str(path))
    x = np.ascontiguousarray(np.transpose(mat["X"], (3, 2, 0, 1)), dtype=np.uint8)  # HWCN -> NCHW
    y = np.asarray(mat["y"], dtype=np.int64).reshape(-1) % 10
    if len(x) != len(y):
        raise ValueError(f"{path}: {len(x)} images but {len(y)} labels")
    return x, y


def read_leaf_json(paths: Sequence[str | Path]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Read LEAF JSON shards (keys users / num_samples / user_data{user: {x, y}}).

    Returns float32 features (N x D), int64 labels and the user name of every sample, in file
    order then user order.
    """
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    users: list[str] = []
    for path in paths:
        with open(path) as f:
            shard = json.load(f)
        for user in shard["users"]:
            record = shard["user_data"][user]
            x = np.asarray(record["x"], dtype=np.float32)
            y = np.asarray(record["y"], dtype=np.int64)
            if len(y) == 0:
                continue
            if len(x) != len(y):
                raise ValueError(f"{path}: user {user} has {len(x)} samples but {len(y)} labels")
            xs.append(x.reshape(len(x), -1))
            ys.append(y)
            users.extend([user] * len(y))
    if not xs:
        raise ValueError(f"no users found in {[str(p) for p in paths]}")
    return np.concatenate(xs), np.concatenate(ys), users
