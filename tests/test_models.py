"""fedlib.models: parameter counts pinned by the specs, forward shapes, FedShift init, errors."""
from __future__ import annotations

import pytest
import torch
from torch import nn

from fedlib.models import available_models, build_model, count_parameters, kaiming_normal_fan_in_

DIGITS, MNIST, CIFAR, A9A = (1, 8, 8), (1, 28, 28), (3, 32, 32), (123,)

# (name, input_shape, num_classes, kwargs, parameter count). Sources: FedShift §2.2 and §5.2, TACO §4.4,
# FedAQ §2.2 and §5.4, MUCSC §6.3/§9.3/§12.1; the rest are this module's documented defaults.
SMALL_COUNTS = [
    ("fedshift_cnn2", CIFAR, 10, {}, 2_155_872),  # FedShift Table III: 8,421 KiB at 32 bits
    ("fedshift_cnn2", MNIST, 10, {}, 1_662_752),
    ("fedshift_cnn2", DIGITS, 10, {}, 800 + 51_200 + 64 * 2 * 2 * 512 + 5_120),
    ("fedshift_cnn2", DIGITS, 10, dict(channels=8, hidden=64), 8 * 25 + 16 * 8 * 25 + 16 * 4 * 64 + 64 * 10),
    ("mlp", DIGITS, 10, dict(hidden=(64,), bias=False), 64 * 64 + 64 * 10),  # FedShift CPU "mlp" 64-64-10
    ("taco_cnn", MNIST, 10, {}, 44_426),  # F = 16*4*4 = 256
    ("taco_cnn", MNIST, 62, {}, 48_846),  # FEMNIST
    ("taco_cnn", CIFAR, 10, {}, 62_006),  # F = 16*5*5 = 400 (SVHN, CIFAR-10)
    ("taco_mlp", A9A, 2, {}, 123 * 32 + 32 + 32 * 16 + 16 + 16 * 8 + 8 + 8 * 2 + 2),
    ("lenet_300_100", MNIST, 10, {}, 266_610),
    ("lenet_300_100", DIGITS, 10, {}, 50_610),  # FedAQ digits-mlp 64-300-100-10
    ("fedaq_cnn", MNIST, 10, {}, 582_026),
    ("allcnn_c", CIFAR, 10, {}, 1_369_738),
    ("allcnn_c", CIFAR, 10, dict(dropout=True), 1_369_738),
    ("femnist_cnn", MNIST, 62, {}, 1_331_758),
    ("mlp", DIGITS, 10, dict(hidden=(256, 256)), 85_002),  # MUCSC CPU "mlp" 64-256-256-10
    ("logistic", DIGITS, 10, {}, 650),  # FedAQ T6 softmax regression, d = 650
    ("mlp", DIGITS, 10, {}, 64 * 128 + 128 + 128 * 10 + 10),
    ("cnn", DIGITS, 10, {}, 9_258),
    ("cnn", MNIST, 10, {}, 55_338),
    ("cnn", CIFAR, 10, {}, 70_986),
    ("char_lstm", (80,), 80, {}, 819_920),
]


def _input(name, shape, num_classes, n=3):
    if name == "char_lstm":
        return torch.randint(0, num_classes, (n, *shape))
    return torch.randn(n, *shape)


@pytest.mark.parametrize("name,shape,k,kw,count", SMALL_COUNTS)
def test_parameter_count_and_forward_shape(name, shape, k, kw, count):
    model = build_model(name, shape, k, seed=0, **kw)
    assert count_parameters(model) == count
    model.eval()
    with torch.no_grad():
        out = model(_input(name, shape, k))
    assert out.shape == (3, k)
    assert torch.isfinite(out).all()


@pytest.fixture(scope="module")
def big_models():
    """The 9M/11M models, built once each."""
    return {
        "fedaq_cnn7": build_model("fedaq_cnn7", CIFAR, 10, seed=0),
        "resnet_bn": build_model("resnet18_cifar", CIFAR, 10, seed=0),
        "resnet_gn": build_model("resnet18_cifar", CIFAR, 100, norm="group", seed=0),
    }


def test_big_model_counts_and_shapes(big_models):
    assert count_parameters(big_models["fedaq_cnn7"]) == 9_074_218
    assert count_parameters(big_models["resnet_bn"]) == 11_173_962
    # Same parameters with GroupNorm; a 100-class head (TACO CIFAR-100) adds 90 * 513.
    assert count_parameters(big_models["resnet_gn"]) == 11_173_962 + 90 * 513
    x = torch.randn(2, *CIFAR)
    for key, k in (("fedaq_cnn7", 10), ("resnet_bn", 10), ("resnet_gn", 100)):
        m = big_models[key].eval()
        with torch.no_grad():
            assert m(x).shape == (2, k)


def test_batchnorm_only_in_resnet_batch(big_models):
    def has_bn(m):
        return any(isinstance(s, nn.modules.batchnorm._BatchNorm) for s in m.modules())

    assert has_bn(big_models["resnet_bn"])
    assert not has_bn(big_models["resnet_gn"]) and not list(big_models["resnet_gn"].buffers())
    assert not has_bn(big_models["fedaq_cnn7"])
    for name, shape, k, kw, _ in SMALL_COUNTS:
        assert not has_bn(build_model(name, shape, k, **kw)), name


@pytest.mark.parametrize("name,shape", [
    ("logistic", MNIST), ("logistic", A9A), ("mlp", CIFAR), ("mlp", A9A), ("lenet_300_100", CIFAR), ("taco_mlp", MNIST),
    ("cnn", (1, 16, 16)), ("fedshift_cnn2", (3, 6, 6)), ("taco_cnn", (1, 16, 16)), ("fedaq_cnn", CIFAR),
    ("fedaq_cnn7", DIGITS), ("allcnn_c", (1, 9, 9)), ("allcnn_c", MNIST), ("femnist_cnn", DIGITS),
    ("femnist_cnn", CIFAR), ("resnet18_cifar", DIGITS),
])
def test_other_supported_shapes(name, shape):
    model = build_model(name, shape, 7).eval()
    with torch.no_grad():
        assert model(torch.randn(2, *shape)).shape == (2, 7)


def test_conv_models_accept_flat_batches():
    for name, shape in (("cnn", DIGITS), ("fedshift_cnn2", DIGITS), ("taco_cnn", MNIST), ("allcnn_c", (3, 12, 12))):
        model = build_model(name, shape, 10, seed=1).eval()
        x = torch.randn(4, *shape)
        with torch.no_grad():
            torch.testing.assert_close(model(x.flatten(1)), model(x))


def test_fedshift_cnn2_layers_no_bias_and_kaiming_init():
    model = build_model("fedshift_cnn2", CIFAR, 10, seed=0)
    params = dict(model.named_parameters())
    assert list(params) == ["conv1.weight", "conv2.weight", "fc1.weight", "fc2.weight"]
    assert [tuple(p.shape) for p in params.values()] == [(32, 3, 5, 5), (64, 32, 5, 5), (512, 4096), (10, 512)]
    w = params["fc1.weight"].detach().double()  # 2.1M draws: the sample variance is within ~0.2% of 2/4096
    assert abs(w.mean().item()) < 1e-4
    assert w.var().item() == pytest.approx(2 / 4096, rel=0.02)
    w = params["conv2.weight"].detach().double()  # 51,200 draws, fan_in 32*25
    assert w.var().item() == pytest.approx(2 / 800, rel=0.05)
    # Not torch's default init (uniform +-1/sqrt(fan_in), variance 1/(3 fan_in)).
    assert build_model("fedshift_cnn2", MNIST, 10, seed=0).fc1.weight.var().item() == pytest.approx(2 / 3136, rel=0.02)


def test_fedshift_cnn2_forward_shapes():
    for shape, flat in ((CIFAR, 64 * 8 * 8), (MNIST, 64 * 7 * 7), (DIGITS, 64 * 2 * 2)):
        model = build_model("fedshift_cnn2", shape, 10)
        assert model.fc1.in_features == flat
        assert model(torch.randn(2, *shape)).shape == (2, 10)


def test_taco_mlp_niid_bench_init():
    model = build_model("taco_mlp", A9A, 2, seed=0)
    linears = [m for m in model.modules() if isinstance(m, nn.Linear)]
    assert [(m.in_features, m.out_features) for m in linears] == [(123, 32), (32, 16), (16, 8), (8, 2)]
    for m in linears:
        assert torch.all(m.bias == 0.1)
    assert linears[0].weight.std().item() == pytest.approx(0.1, rel=0.1)  # 3,936 draws


def test_generic_kaiming_init_and_seed():
    a = build_model("mlp", DIGITS, 10, hidden=(256,), init="kaiming_normal_fan_in", seed=3)
    b = build_model("mlp", DIGITS, 10, hidden=(256,), init="kaiming_normal_fan_in", seed=3)
    for (ka, va), (kb, vb) in zip(a.state_dict().items(), b.state_dict().items()):
        assert ka == kb and torch.equal(va, vb)
    assert torch.all(a.layers[0].bias == 0)
    assert a.layers[0].weight.var().item() == pytest.approx(2 / 64, rel=0.05)  # 16,384 draws
    # seed leaves the global RNG alone
    torch.manual_seed(5)
    expected = torch.rand(1)
    torch.manual_seed(5)
    build_model("cnn", DIGITS, 10, seed=0)
    assert torch.equal(torch.rand(1), expected)
    c = build_model("fedshift_cnn2", DIGITS, 10, seed=4)
    assert not torch.equal(c.fc1.weight, build_model("fedshift_cnn2", DIGITS, 10, seed=5).fc1.weight)
    assert kaiming_normal_fan_in_(c) is c


def test_allcnn_c_dropout_flag():
    model = build_model("allcnn_c", (3, 12, 12), 10, dropout=True, seed=0)
    x = torch.randn(4, 3, 12, 12)
    model.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(x), model(x))
        model.train()
        assert not torch.equal(model(x), model(x))


def test_vmap_over_stacked_clients():
    """BN-free models work with torch.func (the vmap client executor)."""
    from torch.func import functional_call, stack_module_state, vmap

    models = [build_model("cnn", DIGITS, 10, seed=s) for s in range(3)]
    params, buffers = stack_module_state(models)
    x = torch.randn(3, 5, *DIGITS)
    base = build_model("cnn", DIGITS, 10)
    out = vmap(lambda p, b, xb: functional_call(base, (p, b), (xb,)))(params, buffers, x)
    for i, m in enumerate(models):
        torch.testing.assert_close(out[i], m(x[i]))


def test_available_models_lists_the_required_names():
    names = available_models()
    assert names == sorted(names)
    for required in ("logistic", "mlp", "cnn", "fedshift_cnn2", "taco_cnn", "taco_mlp", "lenet_300_100", "fedaq_cnn",
                     "fedaq_cnn7", "resnet18_cifar", "allcnn_c", "femnist_cnn"):
        assert required in names


def test_unknown_name_raises_listing_names():
    with pytest.raises(ValueError, match="available: .*fedshift_cnn2"):
        build_model("vgg16", CIFAR, 10)


@pytest.mark.parametrize("name,shape,accepts", [
    ("cnn", (64,), r"\(C, H, W\)"),
    ("cnn", (1, 3, 3), "H, W >= 4"),
    ("fedshift_cnn2", (1, 5, 5), "H, W >= 6"),
    ("fedshift_cnn2", (28, 28), r"\(C, H, W\)"),
    ("taco_cnn", DIGITS, "H, W >= 16"),
    ("fedaq_cnn", DIGITS, "H, W >= 16"),
    ("fedaq_cnn7", (3, 2, 32), "H, W >= 4"),
    ("allcnn_c", DIGITS, "H, W >= 9"),
    ("femnist_cnn", (784,), r"\(C, H, W\)"),
    ("resnet18_cifar", (3072,), r"\(C, H, W\)"),
    ("char_lstm", MNIST, r"\(L,\)"),
])
def test_bad_input_shape_raises_saying_what_is_accepted(name, shape, accepts):
    with pytest.raises(ValueError, match=accepts):
        build_model(name, shape, 10)


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="norm"):
        build_model("resnet18_cifar", CIFAR, 10, norm="layer")
    with pytest.raises(ValueError, match="init"):
        build_model("mlp", DIGITS, 10, init="xavier")
    with pytest.raises(ValueError, match="input_shape"):
        build_model("mlp", (), 10)
    with pytest.raises(ValueError, match="num_classes"):
        build_model("mlp", DIGITS, 0)


def lstm_layer(inputs: int, hidden: int) -> int:
    """torch.nn.LSTM layer: 4 gates, each W_ih (hidden x inputs), W_hh (hidden x hidden) and two biases."""
    return 4 * hidden * (inputs + hidden) + 2 * 4 * hidden


def test_char_lstm_count_by_hand_and_architecture():
    """LEAF's Shakespeare model: embedding 80 x 8, LSTM 8 -> 256, LSTM 256 -> 256, fc 256 -> 80."""
    model = build_model("char_lstm", (80,), 80, seed=0)
    expected = 80 * 8 + lstm_layer(8, 256) + lstm_layer(256, 256) + 256 * 80 + 80
    assert expected == 819_920 and count_parameters(model) == expected
    assert (model.embed.num_embeddings, model.embed.embedding_dim) == (80, 8)
    assert (model.lstm.num_layers, model.lstm.hidden_size, model.lstm.batch_first) == (2, 256, True)
    with torch.no_grad():  # next-character logits depend on the whole 80-character context
        x = torch.randint(0, 80, (2, 80))
        y = x.clone()
        y[:, 0] = (y[:, 0] + 1) % 80
        assert not torch.equal(model.eval()(x), model(y))


def test_taco_mlp_architecture_and_init():
    """NIID-Bench FcNet(123, [32, 16, 8], 2): weights N(0, 0.1), biases 0.1."""
    model = build_model("taco_mlp", A9A, 2, seed=0)
    shapes = [tuple(p.shape) for p in model.parameters()]
    assert shapes == [(32, 123), (32,), (16, 32), (16,), (8, 16), (8,), (2, 8), (2,)]
    assert all(torch.all(layer.bias == 0.1) for layer in model.layers)
    assert model.layers[0].weight.std().item() == pytest.approx(0.1, rel=0.1)  # 3,936 draws


def conv(cin: int, cout: int, k: int) -> int:
    return cin * cout * k * k  # bias-free


def test_resnet18_count_by_hand():
    """FedAQ §2.2 / TACO §4.4 CIFAR ResNet-18: stem, four stages of two BasicBlocks, 1x1 projections, fc."""
    bn = 2  # weight and bias per channel (GroupNorm: the same)
    total = conv(3, 64, 3) + bn * 64
    cin = 64
    for cout in (64, 128, 256, 512):
        for block in range(2):
            first_in = cin if block == 0 else cout
            total += conv(first_in, cout, 3) + conv(cout, cout, 3) + 2 * bn * cout
            if block == 0 and cin != cout:
                total += conv(cin, cout, 1) + bn * cout
        cin = cout
    for classes in (10, 100):
        expected = total + 512 * classes + classes
        for norm in ("batch", "group"):
            assert count_parameters(build_model("resnet18_cifar", CIFAR, classes, norm=norm)) == expected
    assert total + 5130 == 11_173_962
