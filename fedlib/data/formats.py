"""Readers for the standard dataset file formats: IDX, CIFAR python batches, SVHN .mat, LEAF JSON,
gzipped CSV.

Each reader takes file paths and returns plain numpy arrays; it knows nothing about where the
files live (that is `datasets.py`'s job). A file that is corrupt, truncated or inconsistent
raises `DatasetFileError` naming the file and what is wrong; no reader ever runs code found in a
file (CIFAR pickles go through `SafeCifarUnpickler`).

Values are checked, never coerced: every value read as a number must be one (`check_numbers`: a JSON `true`
or a string "0.5" is an error naming where it sits, not a 1 or a 0.5; a CSV of integers holds ASCII digits
only, not "٣"), labels must be integers in the format's range (`check_labels`), pixels of 8-bit formats
integers in [0, 255] (`check_pixels`: a 300 is an error, not a 44), features finite (`check_finite`).
Gzipped files are decompressed as a stream up to a size cap per format, so a small file that would expand
to gigabytes is refused after reading at most the cap. Formats that expand internally are capped against the
file's own size before their arrays are built: a CIFAR pickle holds its pixels uncompressed (a batch of N
images is at least N x 3072 bytes; memo references repeating one row are refused), an SVHN .mat may
decompress to at most `MAT_MAX_EXPANSION` times its size (photos compress a few times at most).
"""
from __future__ import annotations

import contextlib
import gzip
import io
import itertools
import json
import math
import pickle
import reprlib
import zlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

# IDX type codes (third magic byte) -> big-endian numpy dtypes.
_IDX_DTYPES = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
_CIFAR_IMAGE_VALUES = 3 * 32 * 32


_REPLACE_IT = "Replace it with a fresh copy (data/README.md says where each file comes from)."
IDX_MAX_BYTES = 1 << 30  # the largest IDX data (EMNIST byclass train images) is 0.55 GB
CSV_MAX_BYTES = 1 << 28  # the bundled CSVs are a few MB
MAT_MAX_EXPANSION = 16  # SVHN's .mat files decompress about 1.2x; zlib on photos never reaches this
MAT_MIN_CAP_BYTES = 1 << 24  # what any .mat may decompress to, however small (fabricated test files)


class DatasetFileError(ValueError):
    """A dataset file is corrupt, truncated, inconsistent or unsafe: the message is
    "<path>: <problem>. <fix>"."""

    def __init__(self, path: str | Path, problem: str, fix: str = _REPLACE_IT) -> None:
        self.path = str(path)
        self.problem = problem
        super().__init__(f"{path}: {problem}. {fix}")


@contextlib.contextmanager
def _reader(path: Path) -> Iterator[Callable[[int], bytes]]:
    """`read(n)` -> up to n bytes of the file, gunzipped as a stream when it starts with the gzip magic;
    gzip failures become `DatasetFileError`s naming the file."""
    with open(path, "rb") as raw:
        stream: BinaryIO = gzip.GzipFile(fileobj=raw) if raw.read(2) == b"\x1f\x8b" else raw
        raw.seek(0)

        def read(n: int) -> bytes:
            try:
                return stream.read(n)
            except EOFError as err:
                raise DatasetFileError(path, f"truncated gzip ({err})") from err
            except (gzip.BadGzipFile, zlib.error) as err:
                raise DatasetFileError(path, f"corrupt gzip ({err})") from err

        yield read


def _read_bytes(path: Path, limit: int) -> bytes:
    """The file's bytes (gunzipped), refusing more than `limit` of them."""
    with _reader(path) as read:
        data = read(limit + 1)
    if len(data) > limit:
        raise DatasetFileError(path, f"holds more than {limit} bytes (decompressed): far larger than any file "
                                     "of this format, refused before reading the rest")
    return data


def _examples(values: np.ndarray, bad: np.ndarray) -> str:
    shown = ", ".join(f"{v:g}" for v in values[bad][:3])
    return f"{int(bad.sum())} value(s) such as {shown}"


def check_finite(path: str | Path, x: np.ndarray, what: str = "features") -> np.ndarray:
    """`x` if every value is finite, else `DatasetFileError` naming the file."""
    if np.issubdtype(x.dtype, np.floating) and not np.isfinite(x).all():
        raise DatasetFileError(path, f"{what} hold {int((~np.isfinite(x)).sum())} NaN or infinite value(s)")
    return x


def _leaves(values: Any, ndim: int) -> Iterator[Any]:
    """The scalars of nested lists `ndim` deep, in row-major order."""
    leaves: Iterable[Any] = [values] if ndim == 0 else values
    for _ in range(ndim - 1):
        leaves = itertools.chain.from_iterable(leaves)
    return iter(leaves)


def _is_number_type(kind: type) -> bool:
    return kind in (int, float) or issubclass(kind, (np.integer, np.floating))  # bool and numpy's bool_ are not


def check_numbers(path: str | Path, values: Any, what: str) -> np.ndarray:
    """`values` (an array, or lists as JSON or a pickle hold them) as a numeric array. numpy would convert what a
    careless or hostile file holds instead of numbers (a boolean `true` to 1, a string "0.5" to 0.5 when a dtype
    is asked for): each is a `DatasetFileError` naming the file and where the value sits."""
    try:
        arr = np.asarray(values)
    except (TypeError, ValueError) as err:  # ragged lists
        raise DatasetFileError(path, f"{what}: not a rectangular numeric array ({err})") from err
    if isinstance(values, np.ndarray) or all(map(_is_number_type, set(map(type, _leaves(values, arr.ndim))))):
        if arr.dtype.kind not in "iuf":
            raise DatasetFileError(path, f"{what} are {arr.dtype}, not numbers")
        return arr
    flat, value = next((i, v) for i, v in enumerate(_leaves(values, arr.ndim)) if not _is_number_type(type(v)))
    at = f"[{', '.join(str(int(i)) for i in np.unravel_index(flat, arr.shape))}]" if arr.ndim else ""
    raise DatasetFileError(path, f"{what}{at} is {reprlib.repr(value)} ({type(value).__name__}), not a number "
                                 "(a boolean or a string is not read as one)")


def _integers(path: str | Path, values: Any, what: str) -> np.ndarray:
    """`values` as int64 if they are all integer numbers (3.0 is, 3.7 is not)."""
    arr = check_numbers(path, values, what)
    if np.issubdtype(arr.dtype, np.floating):
        check_finite(path, arr, what)
        fractional = arr != np.round(arr)
        if fractional.any():
            raise DatasetFileError(path, f"{what} must be integers; found {_examples(arr, fractional)}")
    return arr.astype(np.int64)


def check_labels(path: str | Path, labels: Any, num_classes: int, first: int = 0) -> np.ndarray:
    """Labels as int64, checked to be integers in [first, first + num_classes)."""
    y = _integers(path, labels, "labels")
    outside = (y < first) | (y >= first + num_classes)
    if outside.any():
        raise DatasetFileError(path, f"labels must lie in [{first}, {first + num_classes}); found "
                                     f"{_examples(y, outside)}")
    return y


def check_pixels(path: str | Path, pixels: Any) -> np.ndarray:
    """8-bit pixels as uint8, checked to be integers in [0, 255] (never wrapped)."""
    if isinstance(pixels, np.ndarray) and pixels.dtype == np.uint8:
        return pixels
    x = _integers(path, pixels, "pixels")
    outside = (x < 0) | (x > 255)
    if outside.any():
        raise DatasetFileError(path, f"pixels of an 8-bit image format must lie in [0, 255]; found "
                                     f"{_examples(x, outside)}")
    return x.astype(np.uint8)


def read_idx(path: str | Path) -> np.ndarray:
    """Read an IDX file (MNIST / Fashion-MNIST format), gzipped or not, into a numpy array.

    Layout: two zero bytes, a type code, the number of dimensions, then one big-endian uint32
    per dimension, then the data in row-major order.
    """
    with _reader(Path(path)) as read:
        magic = read(4)
        if len(magic) < 4 or magic[0] != 0 or magic[1] != 0 or magic[2] not in _IDX_DTYPES:
            raise DatasetFileError(path, f"not an IDX file (bad magic number {magic.hex()})")
        dtype = np.dtype(_IDX_DTYPES[magic[2]])
        ndim = magic[3]
        header = 4 + 4 * ndim
        dims = read(4 * ndim)
        if len(dims) < 4 * ndim:
            raise DatasetFileError(path, f"truncated IDX header: {ndim} dimensions need {header} bytes, "
                                         f"the file holds {4 + len(dims)}")
        shape = tuple(int(d) for d in np.frombuffer(dims, dtype=">u4"))
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if expected > IDX_MAX_BYTES:
            raise DatasetFileError(path, f"IDX header says shape {shape} ({expected} bytes), over the "
                                         f"{IDX_MAX_BYTES}-byte cap for this format")
        data = read(expected + 1)
    if len(data) != expected:
        held = f"{len(data)}" if len(data) <= expected else "more than that"
        raise DatasetFileError(path, f"IDX header says shape {shape} ({expected} bytes) "
                                     f"but the file holds {held} data bytes")
    array = np.frombuffer(data, dtype=dtype).reshape(shape).astype(dtype.newbyteorder("="))
    return check_finite(path, array, "values")


class SafeCifarUnpickler(pickle.Unpickler):
    """Unpickler for CIFAR python batches that resolves only the globals the format needs.

    A CIFAR batch is a dict of bytes keys, lists, strings and numpy arrays. Arrays need numpy's
    reconstruction functions (`_reconstruct` for protocols <= 4, `_frombuffer` for protocol 5;
    `numpy.core` before numpy 2, `numpy._core` since), `ndarray` and `dtype`; containers need at
    most the builtin types below. Any other global (`os.system`, `builtins.eval`, ...) raises
    `DatasetFileError` naming the file and the global, before anything is called.
    """

    ALLOWED_GLOBALS = frozenset({
        ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
        ("numpy.core.numeric", "_frombuffer"), ("numpy._core.numeric", "_frombuffer"),
        ("numpy", "ndarray"), ("numpy", "dtype"),
        ("builtins", "list"), ("builtins", "dict"), ("builtins", "tuple"),
        ("builtins", "set"), ("builtins", "frozenset"), ("builtins", "bytearray"),
    })

    def __init__(self, file: BinaryIO, path: str | Path) -> None:
        super().__init__(file, encoding="bytes")  # CIFAR batches were pickled by Python 2
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in self.ALLOWED_GLOBALS:
            raise DatasetFileError(self.path, f"refusing to unpickle: the file asks for the global "
                                              f"'{module}.{name}', which a CIFAR batch never needs "
                                              f"(it could run code)")
        return super().find_class(module, name)


def _unpickle_cifar(path: Path) -> dict:
    """The batch dict of a CIFAR pickle, keys decoded to str, through `SafeCifarUnpickler`."""
    with open(path, "rb") as f:
        try:
            batch = SafeCifarUnpickler(f, path).load()
        except DatasetFileError:
            raise
        except Exception as err:  # a malformed pickle raises UnpicklingError, EOFError, ValueError, ...
            raise DatasetFileError(path, f"truncated or corrupt pickle ({type(err).__name__}: {err})") from err
    if not isinstance(batch, dict):
        raise DatasetFileError(path, f"a CIFAR batch is a dict, this pickle holds a {type(batch).__name__}")
    return {k.decode() if isinstance(k, bytes) else k: v for k, v in batch.items()}


def _decoded_values(obj: Any, sizes: dict[int, int]) -> int:
    """How many values `obj` (a CIFAR batch's lists, bytes and arrays) holds once expanded; each distinct
    object is counted once (`sizes` by id), so a pickle of memo references is measured without expanding it."""
    if id(obj) in sizes:
        return sizes[id(obj)]
    if isinstance(obj, np.ndarray):
        size = int(obj.size)
    elif isinstance(obj, (bytes, bytearray, str)):
        size = len(obj)
    elif isinstance(obj, (list, tuple)):
        sizes[id(obj)] = 0  # a list that holds itself counts once
        size = sum(_decoded_values(item, sizes) for item in obj) or 1
    else:
        size = 1
    sizes[id(obj)] = size
    return size


def _check_plausible_size(path: Path, batch: dict, keys: Sequence[str]) -> None:
    """Refuse a pickle whose arrays would expand to more bytes than the file holds: CIFAR's pixels and labels
    are stored uncompressed, so a larger expansion comes only from repeated references (a memory bomb)."""
    values = sum(_decoded_values(batch[k], {}) for k in keys)
    size = path.stat().st_size
    if values > size:
        raise DatasetFileError(path, f"its arrays would expand to {values:,} values from a {size:,}-byte file: a "
                                     "CIFAR batch stores its pixels as they are, so this pickle repeats references "
                                     "(it would take that much memory); refused")


def read_cifar_batch(path: str | Path, label_key: str = "labels",
                     num_classes: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Read one CIFAR python pickle batch: images as uint8 N x 3 x 32 x 32 and int64 labels.

    `label_key` is "labels" for CIFAR-10 and "fine_labels" (or "coarse_labels") for CIFAR-100; labels are
    checked to lie in [0, num_classes) (default: 10, 100 or 20 by `label_key`).
    """
    batch = _unpickle_cifar(Path(path))
    missing = [k for k in ("data", label_key) if k not in batch]
    if missing:
        raise DatasetFileError(path, f"CIFAR batch lacks {missing} (keys: {sorted(map(str, batch))})")
    _check_plausible_size(Path(path), batch, ("data", label_key))
    data = check_pixels(path, batch["data"])
    y = _integers(path, batch[label_key], f"'{label_key}'")
    if data.ndim != 2 or data.shape[1] != _CIFAR_IMAGE_VALUES:
        raise DatasetFileError(path, f"'data' has shape {data.shape}, expected N x {_CIFAR_IMAGE_VALUES} "
                                     f"(3 x 32 x 32 per image)")
    if y.ndim != 1 or len(data) != len(y):
        raise DatasetFileError(path, f"{len(data)} images but {y.size} labels")
    classes = num_classes or {"labels": 10, "fine_labels": 100, "coarse_labels": 20}.get(label_key, 0)
    if classes:
        check_labels(path, y, classes)
    return data.reshape(-1, 3, 32, 32), y


def _loadmat(path: Path) -> dict:
    """scipy's loadmat, with any read failure reported as a `DatasetFileError`; a file whose variables would
    decompress to more than `MAT_MAX_EXPANSION` times its size is refused before any is read."""
    from scipy.io import loadmat, whosmat

    try:
        declared = sum(math.prod(shape) * _mat_itemsize(kind) for _, shape, kind in whosmat(str(path)))
        cap = max(MAT_MIN_CAP_BYTES, MAT_MAX_EXPANSION * path.stat().st_size)
        if declared > cap:
            raise DatasetFileError(path, f"its variables would decompress to {declared:,} bytes from a "
                                         f"{path.stat().st_size:,}-byte file (over {MAT_MAX_EXPANSION}x: no "
                                         "dataset of photos compresses so far); refused")
        return loadmat(str(path))
    except DatasetFileError:
        raise
    except Exception as err:  # scipy raises ValueError, TypeError, MatReadError, OSError, ...
        raise DatasetFileError(path, f"truncated or corrupt .mat file ({type(err).__name__}: {err})") from err


def _mat_itemsize(kind: str) -> int:
    """Bytes per element of a .mat variable class as `whosmat` names it ("uint8", "double", "cell", ...)."""
    try:
        return np.dtype({"single": "float32", "double": "float64"}.get(kind, kind)).itemsize
    except TypeError:
        return 8  # cells, structs, chars: counted as a pointer or a wide character each


def read_svhn_mat(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Read an SVHN cropped-digits .mat file: uint8 N x 3 x 32 x 32 images, labels 0-9 (the file's 1-10,
    10 standing for the digit 0; any other label is an error)."""
    mat = _loadmat(Path(path))
    missing = [k for k in ("X", "y") if k not in mat]
    if missing:
        raise DatasetFileError(path, f"missing variable(s) {missing} (an SVHN file holds X and y)")
    X, y = np.asarray(mat["X"]), np.asarray(mat["y"])
    if X.ndim != 4 or X.shape[:3] != (32, 32, 3):
        raise DatasetFileError(path, f"X has shape {X.shape}, expected 32 x 32 x 3 x N")
    if X.shape[3] != y.size:
        raise DatasetFileError(path, f"{X.shape[3]} images but {y.size} labels")
    x = np.ascontiguousarray(np.transpose(check_pixels(path, X), (3, 2, 0, 1)))  # HWCN -> NCHW
    return x, check_labels(path, y.reshape(-1), 10, first=1) % 10


def _load_json(path: Path) -> Any:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as err:
        raise DatasetFileError(path, f"invalid JSON ({err})") from err
    except UnicodeDecodeError as err:
        raise DatasetFileError(path, f"not UTF-8 text ({err})") from err


def load_leaf_shard(path: Path) -> dict:
    """A LEAF JSON shard: an object with 'users' (a list of names) and 'user_data' (an object), else a
    DatasetFileError naming the file."""
    shard = _load_json(path)
    if not isinstance(shard, dict) or not {"users", "user_data"} <= set(shard):
        found = sorted(shard) if isinstance(shard, dict) else type(shard).__name__
        raise DatasetFileError(path, f"a LEAF shard is an object with keys 'users' and 'user_data' (found {found})")
    users, user_data = shard["users"], shard["user_data"]
    if not isinstance(users, list) or not all(isinstance(u, str) for u in users):
        raise DatasetFileError(path, f"'users' must be a list of user names (strings), got {reprlib.repr(users)}")
    if not isinstance(user_data, dict):
        raise DatasetFileError(path, f"'user_data' must be an object mapping each user to its samples, got a "
                                     f"{type(user_data).__name__}")
    return shard


LeafUserReader = Callable[[Path, dict, str], tuple[np.ndarray, np.ndarray]]


def leaf_users(paths: Sequence[str | Path],
               read_user: LeafUserReader) -> Iterator[tuple[Path, str, np.ndarray, np.ndarray]]:
    """(path, user, x, y) for every user of every LEAF shard, in file order then user order; `read_user(path,
    shard, user)` reads and checks one user's samples."""
    for path in map(Path, paths):
        shard = load_leaf_shard(path)
        for user in shard["users"]:
            yield (path, user, *read_user(path, shard, user))


def _leaf_user(path: Path, shard: dict, user: str) -> tuple[np.ndarray, np.ndarray]:
    """One user's (x as float32 with N rows, y as N int64) from a LEAF shard, checked for consistency."""
    record = shard["user_data"].get(user)
    if not isinstance(record, dict):
        raise DatasetFileError(path, f"missing key 'user_data' for user '{user}' (listed in 'users')")
    missing = [k for k in ("x", "y") if k not in record]
    if missing:
        raise DatasetFileError(path, f"user '{user}' lacks {missing}")
    with np.errstate(over="ignore"):  # a value beyond float32 becomes inf, which check_finite names
        x = check_numbers(path, record["x"], f"user '{user}': 'x'").astype(np.float32)
    check_finite(path, x, f"user '{user}': 'x'")
    y = _integers(path, record["y"], f"user '{user}': labels")
    if y.ndim != 1:
        raise DatasetFileError(path, f"user '{user}': labels must be a flat list, one per sample (got shape "
                                     f"{y.shape})")
    if len(x) != len(y):
        raise DatasetFileError(path, f"user '{user}' has {len(x)} samples but {y.size} labels")
    return x, y


def read_leaf_json(paths: Sequence[str | Path],
                   num_classes: int | None = None) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Read LEAF JSON shards (keys users / num_samples / user_data{user: {x, y}}).

    Returns float32 features (N x D, finite), int64 labels (in [0, num_classes) when given) and the
    user name of every sample, in file order then user order. Every user must have the same number of
    features D.
    """
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    users: list[str] = []
    for path, user, x, y in leaf_users(paths, _leaf_user):
        if len(y) == 0:
            continue
        if num_classes is not None:
            check_labels(path, y, num_classes)
        x = x.reshape(len(x), -1)
        if xs and x.shape[1] != xs[0].shape[1]:
            raise DatasetFileError(path, f"user '{user}' has {x.shape[1]} features per sample, "
                                         f"earlier users have {xs[0].shape[1]}")
        xs.append(x)
        ys.append(y)
        users.extend([user] * len(y))
    if not xs:
        raise DatasetFileError(", ".join(str(p) for p in paths), "no user with samples in these LEAF shards")
    return np.concatenate(xs), np.concatenate(ys), users


def read_csv_gz(path: str | Path) -> np.ndarray:
    """Read a (gzipped or plain) CSV of integers 0-255 as a 2-D uint8 table."""
    data = _read_bytes(Path(path), CSV_MAX_BYTES)
    if not data.strip():
        raise DatasetFileError(path, "empty CSV")
    if not data.isascii():
        raise _not_ascii(path, data)
    try:
        return np.loadtxt(io.BytesIO(data), delimiter=",", dtype=np.uint8, ndmin=2)
    except ValueError as err:
        raise DatasetFileError(path, f"not a CSV of integers 0-255 ({err})") from err


def _not_ascii(path: str | Path, data: bytes) -> DatasetFileError:
    """The error for a CSV of integers holding a non-ASCII character (an Arabic-Indic digit, a superscript, a
    byte of another encoding), naming its line."""
    lines = data.decode("utf-8", errors="replace").split("\n")
    number, odd = next((n, c) for n, line in enumerate(lines, start=1) for c in line if not c.isascii())
    return DatasetFileError(path, f"line {number}: {odd!r} (U+{ord(odd):04X}) is not an ASCII digit; a CSV of "
                                  "integers 0-255 holds only the digits 0-9 and commas")
