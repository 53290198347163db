"""Checks for numeric arguments: a finite number in range, or an integer, else a ValueError naming the parameter."""
from __future__ import annotations

import math
import numbers


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
