"""Checks for arguments where they enter the public API: a finite number in range, an integer, a sequence or
array of integers, a random generator, an instance of a type; else a ValueError naming the parameter."""
from __future__ import annotations

import math
import numbers
from collections.abc import Sequence

import numpy as np


def real(name: str, value: object, *, low: float = -math.inf, low_inclusive: bool = True, high: float = math.inf,
         high_inclusive: bool = False) -> float:
    """A finite real number in the stated range, or a ValueError naming the parameter."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise ValueError(f"{name} must be a real number, got {value!r} ({type(value).__name__})")
    v = float(value)
    above = v >= low if low_inclusive else v > low
    below = v <= high if high_inclusive else v < high
    if not math.isfinite(v) or not above or not below:
        bounds = f"{'[' if low_inclusive else '('}{low:g}, {high:g}{']' if high_inclusive else ')'}"
        raise ValueError(f"{name} must be a finite number in {bounds}, got {value!r}")
    return v


def count(name: str, value: object, *, low: int = 1) -> int:
    """An integer >= low (numpy integers too; 2.0 is accepted, 2.5 is not)."""
    if (isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(float(value))
            or float(value) != int(value)):
        raise ValueError(f"{name} must be an integer, got {value!r} ({type(value).__name__})")
    if int(value) < low:
        raise ValueError(f"{name} must be >= {low}, got {value!r}")
    return int(value)


def counts(name: str, value: object, *, low: int = 1, allow_empty: bool = True) -> tuple[int, ...]:
    """A sequence of integers >= low (layer widths, an input shape); a string or a lone number is refused
    rather than iterated or wrapped."""
    if isinstance(value, (str, bytes)) or not isinstance(value, (Sequence, np.ndarray)):
        raise ValueError(f"{name} must be a sequence of integers (a list or tuple), got {value!r} "
                         f"({type(value).__name__})")
    if not allow_empty and len(value) == 0:
        raise ValueError(f"{name} must hold at least one integer, got {value!r}")
    return tuple(count(f"{name}[{i}]", v, low=low) for i, v in enumerate(value))


def int_array(name: str, value: object) -> np.ndarray:
    """A 1-D array of integers (an integer dtype or a list of ints), as int64; float and bool values are refused,
    not truncated."""
    arr = np.asarray(value)
    if arr.ndim != 1:
        raise ValueError(f"{name} must be a 1-D array of integers, got shape {arr.shape}")
    if arr.dtype.kind not in "iu" and arr.size > 0:  # an empty list is float64 to numpy; its caller says it is empty
        raise ValueError(f"{name} must hold integers (an integer dtype), got dtype {arr.dtype}")
    return arr.astype(np.int64)


def rng(name: str, value: object) -> np.random.Generator:
    """A numpy Generator, or one seeded by an integer >= 0."""
    if isinstance(value, np.random.Generator):
        return value
    return np.random.default_rng(count(f"{name} (a numpy Generator or an integer seed)", value, low=0))


def instance(name: str, value: object, expected: type | tuple[type, ...], hint: str = "") -> None:
    """A ValueError naming the argument unless `value` is an instance of `expected`; `hint` says how to make one."""
    if not isinstance(value, expected):
        kinds = [t.__name__ for t in (expected if isinstance(expected, tuple) else (expected,)) if t is not type(None)]
        names = " or ".join(f"{'an' if k[0].upper() in 'AEIOU' else 'a'} {k}" for k in kinds)
        none = " or None" if isinstance(None, expected) else ""
        shown = repr(value)
        got = f"{shown} ({type(value).__name__})" if len(shown) <= 80 else f"a {type(value).__name__}"
        raise ValueError(f"{name} must be {names}{none}, got {got}{'; ' + hint if hint else ''}")
