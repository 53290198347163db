"""Parameter dictionaries: the one representation of a model's weights inside fedlib."""
from __future__ import annotations

from collections.abc import Iterable, Mapping

import torch

Params = dict[str, torch.Tensor]


def clone(p: Mapping[str, torch.Tensor]) -> Params:
    return {k: v.detach().clone() for k, v in p.items()}


def zeros_like(p: Mapping[str, torch.Tensor]) -> Params:
    return {k: torch.zeros_like(v) for k, v in p.items()}


def sub(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> Params:
    return {k: a[k] - b[k] for k in a}


def add(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor], alpha: float = 1.0) -> Params:
    return {k: a[k] + alpha * b[k] for k in a}


def scale(a: Mapping[str, torch.Tensor], s: float) -> Params:
    return {k: s * v for k, v in a.items()}


def weighted_sum(ps: Iterable[Mapping[str, torch.Tensor]], weights: Iterable[float]) -> Params:
    """sum_i w_i * p_i, accumulated in a fixed order (the order given) for bitwise reproducibility."""
    out: Params | None = None
    for p, w in zip(ps, weights):
        if out is None:
            out = {k: float(w) * v for k, v in p.items()}
        else:
            for k, v in p.items():
                out[k].add_(v, alpha=float(w))
    if out is None:
        raise ValueError("weighted_sum of an empty sequence")
    return out


def flatten(p: Mapping[str, torch.Tensor]) -> torch.Tensor:
    return torch.cat([v.reshape(-1) for v in p.values()])


def unflatten(vec: torch.Tensor, like: Mapping[str, torch.Tensor]) -> Params:
    out, i = {}, 0
    for k, v in like.items():
        n = v.numel()
        out[k] = vec[i : i + n].view_as(v)
        i += n
    if i != vec.numel():
        raise ValueError(f"vector has {vec.numel()} values, parameters need {i}")
    return out


def sq_norm(p: Mapping[str, torch.Tensor]) -> float:
    return float(sum((v.double() ** 2).sum() for v in p.values()))


def dot(a: Mapping[str, torch.Tensor], b: Mapping[str, torch.Tensor]) -> float:
    return float(sum((a[k].double() * b[k].double()).sum() for k in a))
