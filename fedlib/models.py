"""The models of the four papers, plus small CPU stand-ins, behind one `build_model(name, input_shape, num_classes)`.

Images come in as N x C x H x W and `input_shape` is (C, H, W); tabular data comes in as N x D with
`input_shape` (D,). Fully connected models flatten whatever they get; convolutional models also accept
a flat N x (C*H*W) batch and reshape it. Every conv model checks `input_shape` at build time and raises
ValueError naming the shapes it accepts.

Parameter counts pinned by the specs (tests/test_models.py checks each):

    fedshift_cnn2   3x32x32 -> 2,155,872   1x28x28 -> 1,662,752   (FedShift §2.2, bias-free, Kaiming fan_in)
    lenet_300_100   1x28x28 -> 266,610     1x8x8 -> 50,610        (FedAQ §2.2)
    fedaq_cnn       1x28x28 -> 582,026                            (FedAQ §2.2, "vanilla CNN")
    fedaq_cnn7      3x32x32 -> 9,074,218                          (FedAQ §2.2, "7-layer CNN", cnn3 in the code)
    resnet18_cifar  3x32x32 -> 11,173,962 (10 classes)            (FedAQ §2.2, TACO §4.4)
    allcnn_c        3x32x32 -> 1,369,738                          (MUCSC §9.3)
    femnist_cnn     1x28x28, 62 classes -> 1,331,758              (MUCSC §9.3 stand-in)
    taco_cnn        1x28x28 -> 44,426   3x32x32 -> 62,006         (TACO §4.4, NIID-Bench simple-cnn)

Initialisation is each spec's where it states one (FedShift: Kaiming normal fan_in, no biases; TACO MLP:
NIID-Bench N(0, 0.1) weights and 0.1 biases) and PyTorch's default otherwise. Only resnet18_cifar with
norm="batch" has BatchNorm (and hence buffers); every other model is BN-free, so `torch.func.vmap` over
stacked client parameters works on it.
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Sequence

import torch
import torch.nn.functional as F
from torch import nn

from fedlib.registry import MODELS
from fedlib.validate import count, counts, real

__all__ = [
    "build_model", "available_models", "count_parameters", "kaiming_normal_fan_in_",
    "Logistic", "MLP", "SmallCNN", "FedShiftCNN2", "TacoCNN", "TacoMLP", "LeNet300100", "FedAQCNN",
    "FedAQCNN7", "ResNet18CIFAR", "AllCNNC", "FemnistCNN", "CharLSTM",
]


# --------------------------------------------------------------------------------------- helpers

def _conv_out(h: int, k: int, s: int = 1, p: int = 0) -> int:
    """Spatial size after a conv or max-pool with kernel k, stride s, padding p (floor mode)."""
    return (h + 2 * p - k) // s + 1


def _image_shape(input_shape: Sequence[int], model: str, accepts: str) -> tuple[int, int, int]:
    if len(input_shape) != 3:
        raise ValueError(
            f"{model} takes images: input_shape must be (C, H, W) with {accepts}; got {tuple(input_shape)}")
    c, h, w = (int(v) for v in input_shape)
    return c, h, w


def _check_spatial(sizes: Sequence[int], input_shape: Sequence[int], model: str, accepts: str) -> None:
    if min(sizes) < 1:
        raise ValueError(f"{model} accepts (C, H, W) with {accepts}; input_shape {tuple(input_shape)} is too small")


def _two_widths(name: str, widths: Sequence[int]) -> tuple[int, int]:
    values = counts(name, widths)
    if len(values) != 2:
        raise ValueError(f"{name} must be two conv widths (first, second), got {widths!r}")
    return values[0], values[1]


def _as_images(x: torch.Tensor, input_shape: tuple[int, ...]) -> torch.Tensor:
    """Let conv models take a flat N x (C*H*W) batch as well as N x C x H x W."""
    return x.reshape(x.shape[0], *input_shape) if x.dim() == 2 else x


def kaiming_normal_fan_in_(model: nn.Module) -> nn.Module:
    """W ~ N(0, 2/fan_in) for every conv/linear weight (`kaiming_normal_(a=0, mode="fan_in")`), biases to 0."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.kaiming_normal_(m.weight, a=0, mode="fan_in", nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    return model


def count_parameters(model: nn.Module) -> int:
    """Number of scalar parameters (all of `model.parameters()`; buffers such as BN statistics excluded)."""
    return sum(p.numel() for p in model.parameters())


# ----------------------------------------------------------------------------- fully connected

@MODELS.register("logistic")
class Logistic(nn.Module):
    """Multinomial logistic regression: flatten + Linear. 650 parameters on 8x8 digits."""

    def __init__(self, input_shape: Sequence[int], num_classes: int, bias: bool = True):
        super().__init__()
        self.fc = nn.Linear(math.prod(input_shape), num_classes, bias=bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x.flatten(1))


@MODELS.register("mlp")
class MLP(nn.Module):
    """flatten -> [Linear -> ReLU] per hidden width -> Linear. Layers are fc1, fc2, ..."""

    def __init__(self, input_shape: Sequence[int], num_classes: int, hidden: Sequence[int] = (128,),
                 bias: bool = True):
        super().__init__()
        dims = [math.prod(input_shape), *counts("mlp hidden (layer widths)", hidden), num_classes]
        self.layers = nn.ModuleList(nn.Linear(a, b, bias=bias) for a, b in zip(dims[:-1], dims[1:]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x


@MODELS.register("lenet_300_100")
class LeNet300100(MLP):
    """LeNet-300-100 (FedAQ §2.2): flatten -> 300 -> 100 -> classes, ReLU. Returns logits (no log_softmax)."""

    def __init__(self, input_shape: Sequence[int], num_classes: int):
        super().__init__(input_shape, num_classes, hidden=(300, 100))


@MODELS.register("taco_mlp")
class TacoMLP(MLP):
    """NIID-Bench FcNet(d, [32, 16, 8], classes) for adult/a9a (TACO §4.4): weights N(0, 0.1), biases 0.1."""

    def __init__(self, input_shape: Sequence[int], num_classes: int, hidden: Sequence[int] = (32, 16, 8),
                 dropout: float = 0.0):
        super().__init__(input_shape, num_classes, hidden=hidden)
        self.dropout = real("taco_mlp dropout", dropout, low=0, high=1)
        for layer in self.layers:
            nn.init.normal_(layer.weight, 0.0, 0.1)
            nn.init.constant_(layer.bias, 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.flatten(1)
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.dropout(F.relu(x), self.dropout, self.training)
        return x


# ------------------------------------------------------------------------------------ conv nets

@MODELS.register("cnn")
class SmallCNN(nn.Module):
    """A cheap LeNet-style CNN for CPU runs: [conv3x3 pad 1 -> ReLU -> maxpool 2] x 2 -> fc hidden -> fc.

    Works on 8x8 digits (9,258 params), 1x28x28 (55,338) and 3x32x32 (70,986) with the defaults.
    """

    def __init__(self, input_shape: Sequence[int], num_classes: int, channels: Sequence[int] = (16, 32),
                 hidden: int = 32):
        super().__init__()
        accepts = "H, W >= 4"
        c, h, w = _image_shape(input_shape, "cnn", accepts)
        _check_spatial([h // 4, w // 4], input_shape, "cnn", accepts)
        self.input_shape = (c, h, w)
        c1, c2 = _two_widths("cnn channels", channels)
        hidden = count("cnn hidden", hidden)
        self.conv1 = nn.Conv2d(c, c1, 3, padding=1)
        self.conv2 = nn.Conv2d(c1, c2, 3, padding=1)
        self.fc1 = nn.Linear(c2 * (h // 4) * (w // 4), hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _as_images(x, self.input_shape)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


@MODELS.register("fedshift_cnn2")
class FedShiftCNN2(nn.Module):
    """FedShift's CNN2 (docs/fedshift.md, setups; code `CNN2("CNN", 3, 32, 512, 10)`), bias-free, Kaiming normal fan_in.

    conv5x5(C->ch, pad 1) -> ReLU -> maxpool(2, 2, pad 1) -> conv5x5(ch->2ch, pad 1) -> ReLU -> maxpool(2, 2, pad 1)
    -> fc1(->hidden) -> ReLU -> fc2. Sizes: conv maps H -> H-2, pool H -> H//2 + 1.
    P = 2,155,872 on 3x32x32 and 1,662,752 on 1x28x28 (defaults); 8x8 digits flatten to 2ch*2*2.
    """

    def __init__(self, input_shape: Sequence[int], num_classes: int, channels: int = 32, hidden: int = 512):
        super().__init__()
        accepts = "H, W >= 6"
        c, h, w = _image_shape(input_shape, "fedshift_cnn2", accepts)
        channels, hidden = count("fedshift_cnn2 channels", channels), count("fedshift_cnn2 hidden", hidden)
        sizes = []
        for s in (h, w):
            s = _conv_out(s, 5, p=1)
            s = _conv_out(s, 2, 2, 1) if s >= 1 else 0
            s = _conv_out(s, 5, p=1)
            sizes.append(_conv_out(s, 2, 2, 1) if s >= 1 else 0)
        _check_spatial(sizes, input_shape, "fedshift_cnn2", accepts)
        self.input_shape = (c, h, w)
        self.conv1 = nn.Conv2d(c, channels, 5, padding=1, bias=False)
        self.conv2 = nn.Conv2d(channels, 2 * channels, 5, padding=1, bias=False)
        self.fc1 = nn.Linear(2 * channels * sizes[0] * sizes[1], hidden, bias=False)
        self.fc2 = nn.Linear(hidden, num_classes, bias=False)
        kaiming_normal_fan_in_(self)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _as_images(x, self.input_shape)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2, 2, 1)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2, 2, 1)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class _TwoConvFive(nn.Module):
    """conv5x5 (no pad) -> pool 2 -> ReLU twice, then fully connected layers; shared by TACO's and FedAQ's CNN."""

    name = ""

    def _setup(self, input_shape: Sequence[int], c1: int, c2: int, fcs: Sequence[int], num_classes: int) -> None:
        accepts = "H, W >= 16"
        c, h, w = _image_shape(input_shape, self.name, accepts)
        sizes = [_conv_out(_conv_out(s, 5) // 2, 5) // 2 for s in (h, w)]
        _check_spatial(sizes + [h - 4, w - 4], input_shape, self.name, accepts)
        self.input_shape = (c, h, w)
        self.conv1 = nn.Conv2d(c, c1, 5)
        self.conv2 = nn.Conv2d(c1, c2, 5)
        dims = [c2 * sizes[0] * sizes[1], *fcs, num_classes]
        for i, (a, b) in enumerate(zip(dims[:-1], dims[1:]), start=1):
            setattr(self, f"fc{i}", nn.Linear(a, b))
        self.num_fc = len(dims) - 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _as_images(x, self.input_shape)
        x = F.relu(F.max_pool2d(self.conv1(x), 2))
        x = F.relu(F.max_pool2d(self.conv2(x), 2))
        x = x.flatten(1)
        for i in range(1, self.num_fc + 1):
            x = getattr(self, f"fc{i}")(x)
            if i < self.num_fc:
                x = F.relu(x)
        return x


@MODELS.register("taco_cnn")
class TacoCNN(_TwoConvFive):
    """NIID-Bench simple-cnn (TACO §4.4): conv5x5 6 -> pool -> conv5x5 16 -> pool -> fc 120 -> fc 84 -> fc classes.

    44,426 params on 1x28x28 (F = 256), 62,006 on 3x32x32 (F = 400), 48,846 on FEMNIST (1x28x28, 62 classes).
    """

    name = "taco_cnn"

    def __init__(self, input_shape: Sequence[int], num_classes: int):
        super().__init__()
        self._setup(input_shape, 6, 16, (120, 84), num_classes)


@MODELS.register("fedaq_cnn")
class FedAQCNN(_TwoConvFive):
    """FedAQ "vanilla CNN" (§2.2): conv5x5 32 -> pool -> ReLU -> conv5x5 64 -> pool -> ReLU -> fc 512 -> fc classes.

    582,026 params on 1x28x28.
    """

    name = "fedaq_cnn"

    def __init__(self, input_shape: Sequence[int], num_classes: int):
        super().__init__()
        self._setup(input_shape, 32, 64, (512,), num_classes)


@MODELS.register("fedaq_cnn7")
class FedAQCNN7(nn.Module):
    """FedAQ 7-layer CNN (`cnn3` in the code, §2.2); 9,074,218 params on 3x32x32.

    conv3x3 48 -> conv3x3 96 -> pool -> dropout -> conv3x3 192 -> conv3x3 256 -> pool -> dropout
    -> fc 512 -> fc 64 -> dropout -> fc classes; all convs pad 1, ReLU after every conv and hidden fc.
    """

    def __init__(self, input_shape: Sequence[int], num_classes: int, dropout: float = 0.25):
        super().__init__()
        accepts = "H, W >= 4"
        c, h, w = _image_shape(input_shape, "fedaq_cnn7", accepts)
        _check_spatial([h // 4, w // 4], input_shape, "fedaq_cnn7", accepts)
        self.input_shape = (c, h, w)
        self.dropout = real("fedaq_cnn7 dropout", dropout, low=0, high=1)
        self.conv1 = nn.Conv2d(c, 48, 3, padding=1)
        self.conv2 = nn.Conv2d(48, 96, 3, padding=1)
        self.conv3 = nn.Conv2d(96, 192, 3, padding=1)
        self.conv4 = nn.Conv2d(192, 256, 3, padding=1)
        self.fc1 = nn.Linear(256 * (h // 4) * (w // 4), 512)
        self.fc2 = nn.Linear(512, 64)
        self.fc3 = nn.Linear(64, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _as_images(x, self.input_shape)
        p, t = self.dropout, self.training
        x = F.relu(self.conv2(F.relu(self.conv1(x))))
        x = F.dropout(F.max_pool2d(x, 2), p, t)
        x = F.relu(self.conv4(F.relu(self.conv3(x))))
        x = F.dropout(F.max_pool2d(x, 2), p, t)
        x = F.relu(self.fc1(x.flatten(1)))
        x = F.dropout(F.relu(self.fc2(x)), p, t)
        return self.fc3(x)


@MODELS.register("allcnn_c")
class AllCNNC(nn.Module):
    """ALL-CNN-C (Springenberg et al. 2014; MUCSC §9.3): 1,369,738 params on 3x32x32 with 10 classes.

    conv3x3 96, 96, 96/stride 2, 192, 192, 192/stride 2 (pad 1), conv3x3 192 (no pad), conv1x1 192, conv1x1
    classes, ReLU after each conv (as in the paper), global average pool. dropout=True adds the paper's
    20% input dropout and 50% after each stride-2 conv.
    """

    def __init__(self, input_shape: Sequence[int], num_classes: int, dropout: bool = False):
        super().__init__()
        accepts = "H, W >= 9"
        c, h, w = _image_shape(input_shape, "allcnn_c", accepts)
        sizes = [_conv_out(_conv_out(_conv_out(s, 3, 2, 1), 3, 2, 1), 3) for s in (h, w)]
        _check_spatial(sizes, input_shape, "allcnn_c", accepts)
        self.input_shape = (c, h, w)
        self.dropout = bool(dropout)
        spec = [(c, 96, 3, 1, 1), (96, 96, 3, 1, 1), (96, 96, 3, 2, 1), (96, 192, 3, 1, 1), (192, 192, 3, 1, 1),
                (192, 192, 3, 2, 1), (192, 192, 3, 1, 0), (192, 192, 1, 1, 0), (192, num_classes, 1, 1, 0)]
        self.convs = nn.ModuleList(nn.Conv2d(i, o, k, stride=s, padding=p) for i, o, k, s, p in spec)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _as_images(x, self.input_shape)
        if self.dropout:
            x = F.dropout(x, 0.2, self.training)
        for conv in self.convs:
            x = F.relu(conv(x))
            if self.dropout and conv.stride[0] == 2:
                x = F.dropout(x, 0.5, self.training)
        return x.mean(dim=(2, 3))


@MODELS.register("femnist_cnn")
class FemnistCNN(nn.Module):
    """MUCSC's FEMNIST stand-in (§9.3; the paper's LeNet-5 variant is unspecified, d ~ 1,356,136 implied).

    conv5x5 32 pad 2 -> ReLU -> pool -> conv5x5 64 pad 2 -> ReLU -> pool -> fc 400 -> ReLU -> fc classes;
    1,331,758 params on 1x28x28 with 62 classes.
    """

    def __init__(self, input_shape: Sequence[int], num_classes: int, hidden: int = 400):
        super().__init__()
        accepts = "H, W >= 4"
        c, h, w = _image_shape(input_shape, "femnist_cnn", accepts)
        hidden = count("femnist_cnn hidden", hidden)
        _check_spatial([h // 4, w // 4], input_shape, "femnist_cnn", accepts)
        self.input_shape = (c, h, w)
        self.conv1 = nn.Conv2d(c, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * (h // 4) * (w // 4), hidden)
        self.fc2 = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _as_images(x, self.input_shape)
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


# ------------------------------------------------------------------------------------- ResNet-18

def _norm(kind: str, channels: int, groups: int) -> nn.Module:
    return nn.BatchNorm2d(channels) if kind == "batch" else nn.GroupNorm(groups, channels)


class _BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int, norm: str, groups: int):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False)
        self.bn1 = _norm(norm, cout, groups)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = _norm(norm, cout, groups)
        self.shortcut = nn.Sequential()
        if stride != 1 or cin != cout:
            self.shortcut = nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=False), _norm(norm, cout, groups))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return F.relu(out + self.shortcut(x))


@MODELS.register("resnet18_cifar")
class ResNet18CIFAR(nn.Module):
    """CIFAR-style ResNet-18 (FedAQ §2.2, TACO §4.4): 3x3 stride-1 stem, no max-pool, [2, 2, 2, 2] BasicBlocks of
    64/128/256/512 with 1x1 projection shortcuts, global average pool, fc. 11,173,962 params with 10 classes.

    norm="batch" (the FedDQ code; BN running statistics are buffers) or "group" (GroupNorm with `groups` groups;
    same parameter count, no buffers).
    """

    def __init__(self, input_shape: Sequence[int], num_classes: int, norm: str = "batch", groups: int = 2):
        super().__init__()
        if norm not in ("batch", "group"):
            raise ValueError(f"norm must be 'batch' or 'group', got {norm!r}")
        groups = count("resnet18_cifar groups", groups)
        if norm == "group" and 64 % groups:
            raise ValueError(f"resnet18_cifar groups must divide 64 (every block's channels are multiples of 64), "
                             f"got {groups}")
        accepts = "H, W >= 1"
        c, h, w = _image_shape(input_shape, "resnet18_cifar", accepts)
        _check_spatial([h, w], input_shape, "resnet18_cifar", accepts)
        self.input_shape = (c, h, w)
        self.conv1 = nn.Conv2d(c, 64, 3, padding=1, bias=False)
        self.bn1 = _norm(norm, 64, groups)
        layers, cin = [], 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            layers.append(nn.Sequential(_BasicBlock(cin, cout, stride, norm, groups),
                                        _BasicBlock(cout, cout, 1, norm, groups)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = layers
        self.linear = nn.Linear(512, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = _as_images(x, self.input_shape)
        x = F.relu(self.bn1(self.conv1(x)))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.linear(x.mean(dim=(2, 3)))  # = avg_pool2d(x, 4) on 32x32 inputs


# ----------------------------------------------------------------------------------------- LSTM

@MODELS.register("char_lstm")
class CharLSTM(nn.Module):
    """LEAF's Shakespeare next-character model (TACO §4.4 recommendation): embedding 8 -> 2-layer LSTM 256 ->
    fc to the vocabulary (num_classes, 80 in LEAF), read off the last time step. Input: N x L int64 tokens,
    input_shape (L,). 819,920 params with the defaults and 80 classes.
    """

    def __init__(self, input_shape: Sequence[int], num_classes: int, embed_dim: int = 8, hidden: int = 256,
                 num_layers: int = 2):
        super().__init__()
        if len(input_shape) != 1:
            raise ValueError(f"char_lstm takes token sequences: input_shape must be (L,); got {tuple(input_shape)}")
        embed_dim, hidden = count("char_lstm embed_dim", embed_dim), count("char_lstm hidden", hidden)
        num_layers = count("char_lstm num_layers", num_layers)
        self.embed = nn.Embedding(num_classes, embed_dim)
        self.lstm = nn.LSTM(embed_dim, hidden, num_layers=num_layers, batch_first=True)
        self.fc = nn.Linear(hidden, num_classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.embed(x.long()))
        return self.fc(out[:, -1])


# ------------------------------------------------------------------------------------- building by name

_INITS = (None, "default", "kaiming_normal_fan_in")


def available_models() -> list[str]:
    return sorted(MODELS)


def build_model(name: str, input_shape: tuple[int, ...], num_classes: int, *, init: str | None = None,
                seed: int | None = None, **kwargs) -> nn.Module:
    """Build model `name` for inputs of shape `input_shape` (no batch dim) and `num_classes` outputs.

    kwargs go to the model (e.g. mlp hidden=(64,), bias=False; fedshift_cnn2 channels=8, hidden=64;
    resnet18_cifar norm="group"). init="kaiming_normal_fan_in" re-initialises every conv/linear weight as
    N(0, 2/fan_in) with zero biases (FedShift's init, for any model); None/"default" keeps the model's own.
    seed makes the initial weights reproducible without touching the global RNG.
    """
    if name not in MODELS:
        raise ValueError(f"unknown model {name!r}; available: {', '.join(available_models())}")
    if init not in _INITS:
        raise ValueError(f"unknown init {init!r}; choose from {_INITS}")
    input_shape = counts("input_shape (sizes without the batch dimension)", input_shape, allow_empty=False)
    num_classes = count("num_classes", num_classes)
    seed = None if seed is None else count("seed (None or an integer >= 0)", seed, low=0)
    _check_kwargs(name, kwargs)
    with torch.random.fork_rng(devices=[], enabled=seed is not None):
        if seed is not None:
            torch.manual_seed(seed)
        model = MODELS[name](input_shape, num_classes, **kwargs)
        if init == "kaiming_normal_fan_in":
            kaiming_normal_fan_in_(model)
    return model


def _check_kwargs(name: str, kwargs: dict) -> None:
    """A keyword the model does not take is named with the ones it does."""
    parameters = inspect.signature(MODELS[name]).parameters
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters.values()):
        return  # it takes any keyword: the model itself checks them
    takes = [p for p in parameters if p not in ("input_shape", "num_classes")]
    unknown = sorted(set(kwargs) - set(takes))
    if unknown:
        raise ValueError(f"model {name!r} takes no argument {', '.join(map(repr, unknown))}; its arguments: "
                         f"{', '.join(takes) or 'none'}")
