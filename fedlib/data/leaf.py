"""LEAF Shakespeare (next-character prediction): JSON shards of 80-character strings and the character after each.

A shard (what LEAF's `preprocess.sh` writes to data/shakespeare/{train,test}/*.json) holds `users` (one per
speaking role of a play, e.g. "THE_TRAGEDY_OF_KING_LEAR_KENT"), `num_samples` and
`user_data{user: {"x": [80-character strings], "y": [the next character]}}`. Characters are encoded as their
index in LEAF's 80-character vocabulary (`LEAF_VOCABULARY`, LEAF's `ALL_LETTERS`), so a sample is 80 token
ids and its label one of 80 classes. LEAF's own `letter_to_index` maps a character outside the vocabulary
to -1; here it is an error naming the file, user, sample and character.
"""
from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from fedlib.data.formats import DatasetFileError, leaf_users

LEAF_VOCABULARY = "\n !\"&'(),-.0123456789:;>?ABCDEFGHIJKLMNOPQRSTUVWXYZ[]abcdefghijklmnopqrstuvwxyz}"
SEQUENCE_LENGTH = 80
_INDEX = np.full(128, -1, dtype=np.int64)  # ASCII code -> token id, -1 outside the vocabulary (all of it is ASCII)
_INDEX[[ord(c) for c in LEAF_VOCABULARY]] = np.arange(len(LEAF_VOCABULARY))


def encode(text: str) -> np.ndarray:
    """Token ids of `text` in LEAF's vocabulary; -1 for a character outside it."""
    codes = np.frombuffer(text.encode("utf-32-le"), dtype="<u4").astype(np.int64)
    return np.where(codes < 128, _INDEX[np.minimum(codes, 127)], -1)


def _user_samples(path: Path, shard: dict, user: str) -> tuple[np.ndarray, np.ndarray]:
    record = shard["user_data"].get(user)
    if not isinstance(record, dict) or not {"x", "y"} <= set(record):
        raise DatasetFileError(path, f"user '{user}' (listed in 'users') has no 'user_data' entry with 'x' and 'y'")
    xs, ys = record["x"], record["y"]
    if not isinstance(xs, list) or not isinstance(ys, list) or len(xs) != len(ys):
        raise DatasetFileError(path, f"user '{user}': 'x' and 'y' must be lists of equal length "
                                     f"(got {type(xs).__name__} and {type(ys).__name__})")
    for i, (x, y) in enumerate(zip(xs, ys)):
        if not isinstance(x, str) or len(x) != SEQUENCE_LENGTH:
            raise DatasetFileError(path, f"user '{user}' sample {i}: x must be a string of {SEQUENCE_LENGTH} "
                                         f"characters, got {len(x) if isinstance(x, str) else type(x).__name__}")
        if not isinstance(y, str) or len(y) != 1:
            raise DatasetFileError(path, f"user '{user}' sample {i}: y must be one character, got {y!r}")
    # one sample = its 80 characters then its label, all encoded at once
    ids = encode("".join(x + y for x, y in zip(xs, ys))).reshape(len(xs), SEQUENCE_LENGTH + 1)
    bad = np.flatnonzero((ids < 0).any(axis=1))
    if len(bad):
        i = int(bad[0])
        unknown = sorted({c for c in xs[i] + ys[i] if c not in LEAF_VOCABULARY})
        raise DatasetFileError(path, f"user '{user}' sample {i}: character(s) "
                                     f"{', '.join(f'{c!r} (U+{ord(c):04X})' for c in unknown)} are not in "
                                     f"LEAF's {len(LEAF_VOCABULARY)}-character vocabulary")
    return ids[:, :-1], ids[:, -1]


def read_leaf_shakespeare(paths: Sequence[str | Path]) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Read LEAF Shakespeare shards: int64 N x 80 token ids, int64 next-character labels, and each sample's
    user (role), in file order then user order."""
    tokens: list[np.ndarray] = []
    labels: list[np.ndarray] = []
    users: list[str] = []
    for _, user, x, y in leaf_users(paths, _user_samples):
        tokens.append(x)
        labels.append(y)
        users += [user] * len(y)
    if not users:
        raise DatasetFileError(", ".join(str(p) for p in paths), "no user with samples in these LEAF shards")
    return np.concatenate(tokens), np.concatenate(labels), users
