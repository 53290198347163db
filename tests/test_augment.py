"""Train-time augmentation: the transforms by hand, their rates, and both executors drawing the same images."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.algorithms import FedAvg
from fedlib.core.augment import PADDING, crop_flip, flip_gray
from fedlib.core.contracts import FederatedData, LocalTraining
from fedlib.data import Dataset
from fedlib.engine.federation import run_federation


def reference_crop_flip(x: torch.Tensor, shifts: torch.Tensor, flips: torch.Tensor) -> torch.Tensor:
    """Independent route: a loop over images with explicit zero padding and slicing."""
    n, c, h, w = x.shape
    out = torch.empty_like(x)
    for i in range(n):
        padded = torch.zeros(c, h + 2 * PADDING, w + 2 * PADDING)
        padded[:, PADDING:PADDING + h, PADDING:PADDING + w] = x[i]
        crop = padded[:, shifts[i, 0]:shifts[i, 0] + h, shifts[i, 1]:shifts[i, 1] + w]
        out[i] = crop.flip(2) if flips[i] else crop
    return out


def test_crop_flip_matches_a_loop_over_images():
    x = torch.arange(5 * 3 * 6 * 7, dtype=torch.float32).view(5, 3, 6, 7)
    gen = torch.Generator().manual_seed(3)
    y = crop_flip(x, gen)
    replay = torch.Generator().manual_seed(3)
    shifts = torch.randint(0, 2 * PADDING + 1, (5, 2), generator=replay)
    flips = torch.rand(5, generator=replay) < 0.5
    torch.testing.assert_close(y, reference_crop_flip(x, shifts, flips))


def test_augmentation_rates_by_monte_carlo():
    n = 4000
    x = torch.ones(n, 3, 8, 8)
    x[:, :, :, 0] = 2.0  # the left column marks flips
    y = flip_gray(x, torch.Generator().manual_seed(0))
    flipped = y[:, 0, 0, -1] == 2.0
    se = lambda p: 5 * (p * (1 - p) / n) ** 0.5  # noqa: E731
    assert abs(float(flipped.float().mean()) - 0.5) < se(0.5)
    # a red image shows the grayscale conversion: every channel becomes 0.299
    x2 = torch.zeros(n, 3, 4, 4)
    x2[:, 0] = 1.0
    y2 = flip_gray(x2, torch.Generator().manual_seed(1))
    converted = (y2[:, 1] > 0).all(dim=(1, 2))
    assert abs(float(converted.float().mean()) - 0.1) < se(0.1)
    torch.testing.assert_close(y2[converted], torch.full_like(y2[converted], 0.299))


def test_both_executors_draw_the_same_augmentations():
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(60, 1, 6, 6, generator=gen)
    y = torch.randint(0, 3, (60,), generator=gen)
    ds = Dataset("tiny-images", x[:48], y[:48], x[48:], y[48:], num_classes=3)
    data = FederatedData(ds, [np.arange(0, 20), np.arange(20, 34), np.arange(34, 48)])
    model = lambda: nn.Sequential(nn.Flatten(), nn.Linear(36, 3))  # noqa: E731
    local = LocalTraining(lr=0.1, batch_size=8, epochs=1, augment="crop_flip")
    runs = [run_federation(model, data, FedAvg(), 2, local=local, executor=ex, progress=False)
            for ex in ("sequential", "vmap")]
    for k in runs[0].params:
        torch.testing.assert_close(runs[1].params[k], runs[0].params[k], atol=1e-5, rtol=1e-5)
    plain = run_federation(model, data, FedAvg(), 2, local=LocalTraining(lr=0.1, batch_size=8, epochs=1),
                           executor="sequential", progress=False)
    assert not torch.equal(plain.params["1.weight"], runs[0].params["1.weight"])


def test_unknown_augmentation_is_rejected():
    with pytest.raises(ValueError, match="augment must be None or one of"):
        LocalTraining(augment="mixup")


@pytest.mark.parametrize("notebook,augment", [("fedaq", "flip_gray"), ("fedshift", "crop_flip")])
def test_papers_pass_the_augmentation_to_every_run(notebook, augment):
    """The notebook parameter `augment` reaches every spec's local training; unset, FedAQ's specs carry no key
    (their store keys stay as they were)."""
    from dataclasses import replace

    from fedlib.paper import paper

    experiments = paper(notebook).experiments
    params = paper(notebook).params()
    assert all(LocalTraining(**s.get("local")).augment is None for s in experiments(params))
    if notebook == "fedaq":
        assert all("augment" not in s.get("local") for s in experiments(params))
    specs = experiments(replace(params, augment=augment))
    assert specs and all(s.get("local")["augment"] == augment for s in specs if s.get("local").get("epochs"))
