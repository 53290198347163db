"""Train-time data augmentation, drawn from a client's keyed stream so both executors see the same images.

    "crop_flip": RandomCrop(H, padding=4) with zero padding + RandomHorizontalFlip(0.5), the FedShift
                 authors' CIFAR transform (torchvision's defaults);
    "flip_gray": RandomHorizontalFlip(0.5) + RandomGrayscale(0.1), the FedAQ authors' CIFAR transform.
Each takes a batch [n, c, h, w] and a generator and draws, per image, in a fixed order, so a client's
augmentations depend only on (seed, round, client) and the order of its batches.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

PADDING = 4
GRAY_P = 0.1
LUMA = (0.299, 0.587, 0.114)  # ITU-R 601-2, as torchvision's rgb_to_grayscale


def _check(x: torch.Tensor) -> None:
    if x.dim() != 4:
        raise ValueError(f"augmentation needs image batches [n, c, h, w], got shape {tuple(x.shape)}")


def _flip(x: torch.Tensor, flips: torch.Tensor) -> torch.Tensor:
    return torch.where(flips.to(x.device).view(-1, 1, 1, 1), x.flip(3), x)


def crop_flip(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    _check(x)
    n, _, h, w = x.shape
    shifts = torch.randint(0, 2 * PADDING + 1, (n, 2), generator=gen)
    flips = torch.rand(n, generator=gen) < 0.5
    padded = F.pad(x, (PADDING, PADDING, PADDING, PADDING))
    rows = (shifts[:, :1] + torch.arange(h)).to(x.device)  # [n, h]
    cols = (shifts[:, 1:] + torch.arange(w)).to(x.device)  # [n, w]
    batch = torch.arange(n, device=x.device).view(n, 1, 1, 1)
    channels = torch.arange(x.shape[1], device=x.device).view(1, -1, 1, 1)
    cropped = padded[batch, channels, rows.view(n, 1, h, 1), cols.view(n, 1, 1, w)]
    return _flip(cropped, flips)


def flip_gray(x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    _check(x)
    n = x.shape[0]
    flips = torch.rand(n, generator=gen) < 0.5
    gray = torch.rand(n, generator=gen) < GRAY_P
    out = _flip(x, flips)
    if x.shape[1] != 3:
        return out
    luma = (torch.tensor(LUMA, dtype=x.dtype, device=x.device).view(1, 3, 1, 1) * out).sum(1, keepdim=True)
    return torch.where(gray.to(x.device).view(-1, 1, 1, 1), luma.expand_as(out), out)


AUGMENTATIONS: dict[str, Callable[[torch.Tensor, torch.Generator], torch.Tensor]] = {
    "crop_flip": crop_flip, "flip_gray": flip_gray}
