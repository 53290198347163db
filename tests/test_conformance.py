"""The conformance battery: every registered algorithm, every exported codec and every registered codec policy,
tested the same way.

A new `ALGORITHMS`, `CODECS` or `CODEC_POLICIES` entry (fedlib.registry, with its `examples`) is picked up here
without editing this file.
Algorithms: two rounds on a tiny model under every executor they support; batched == sequential within
1e-5; the same seed gives a bitwise-identical record; three seeds in one batch (`fedlib.engine.seed_batch`) give each
seed bitwise the record it has alone under the batched executors, and within 1e-5 of the sequential one's. Codecs: shapes and dtypes, exact bit fields, bits ==
packed size where a codec packs, all-zero and constant tensors, unbiasedness by Monte Carlo where a codec
claims it, determinism where it claims it; each codec through the round loop with both payloads, with and
without error feedback. Codec policies: built from each registered example for a run of the battery's clients,
every client's codec round-trips and counts bits, before and after a round of history, and the link runs
through the round loop. The same tests run with device="cuda" under the `gpu` marker (skipped without one).
"""
from __future__ import annotations

import inspect
import math

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from fedlib.algorithms import make_algorithm
import fedlib.codecs as codecs
from fedlib.codecs import make_codec
from fedlib.core.contracts import FederatedData, LocalTraining
from fedlib.data import Dataset
from fedlib.engine.channel import Link, LinkContext, transmit
import fedlib.engine.executors as executors
from fedlib.engine.federation import open_federation, run_federation
from fedlib.engine.seed_batch import run_seed_batch
from fedlib.registry import ALGORITHMS, CODEC_POLICIES, CODECS, load_components
from fedlib.runs import RunPlan, RunSpec
from fedlib.runs.build import make_component

load_components()  # every paper registers its codec policies

DEVICES = ["cpu", pytest.param("cuda", marks=[pytest.mark.gpu, pytest.mark.skipif(
    not torch.cuda.is_available(), reason="no CUDA GPU here")])]
TIMING = ["train_s", "wall_s"]


@pytest.fixture(scope="module")
def data() -> FederatedData:
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(120, 8, generator=gen)
    y = (x[:, :3].argmax(1) + (x[:, 3] > 1).long()) % 3
    ds = Dataset("tiny", x[:96], y[:96], x[96:], y[96:], num_classes=3)
    sizes = [30, 26, 22, 18]  # uneven, so the batched executor pads and masks
    bounds = np.cumsum([0, *sizes])
    return FederatedData(ds, [np.arange(bounds[i], bounds[i + 1]) for i in range(len(sizes))])


def tiny_model() -> nn.Module:
    return nn.Sequential(nn.Linear(8, 6), nn.Tanh(), nn.Linear(6, 3))


def run(data: FederatedData, name: str, executor: str, device: str = "cpu", seed: int = 0,
        local: LocalTraining | None = None, **kwargs):
    local = local or LocalTraining(lr=0.1, batch_size=8, epochs=1, momentum=0.5, weight_decay=1e-3)
    return run_federation(tiny_model, data, make_algorithm(name), rounds=2, local=local, executor=executor,
                          device=device, seed=seed, progress=False, **kwargs)


def executors_of(name: str) -> list[str]:
    return ["sequential", "vmap", "graph"] if make_algorithm(name).vmap_compatible else ["sequential"]


ALGO_EXECUTORS = [(name, ex) for name in ALGORITHMS for ex in executors_of(name)]


# ---------------------------------------------------------------------------------------------- algorithms
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,executor", ALGO_EXECUTORS)
def test_algorithm_runs_two_rounds(data, name, executor, device):
    res = run(data, name, executor, device)
    assert list(res.rounds["round"]) == [1, 2]
    assert np.isfinite(res.rounds["test_loss"]).all() and not res.diverged
    assert res.clients.groupby("round").size().tolist() == [4, 4]
    assert all(v.device.type == device for v in res.params.values())


class _Recording(dict):
    """A server state that notes every key client code reads."""

    def __init__(self, state: dict, touched: set) -> None:
        super().__init__(state)
        self.touched = touched

    def __getitem__(self, key):
        self.touched.add(key)
        return super().__getitem__(key)

    def get(self, key, default=None):
        self.touched.add(key)
        return super().get(key, default)


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
def test_client_code_reads_only_what_its_view_declares(data, name):
    """Client methods get the whole server state (recording reads) instead of the view: every key they
    touch must be one client_view declares (a client on another machine gets only the view)."""
    algo = make_algorithm(name)
    declare, touched, declared = algo.client_view, set(), set()

    def recording_view(server_state, ctx):
        declared.update(declare(server_state, ctx))
        return _Recording(server_state, touched)

    algo.client_view, algo.client_view_bits = recording_view, lambda view: 0
    local = LocalTraining(lr=0.1, batch_size=8, epochs=1)
    run_federation(tiny_model, data, algo, rounds=3, local=local, executor="sequential", progress=False)
    assert touched <= declared, f"{name}: client code read undeclared server state {sorted(touched - declared)}"


def test_declared_views_are_counted_on_the_downlink(data):
    """SCAFFOLD's c and STEM's v_bar (one value per parameter) cost 32 bits each; TACO sends its alphas
    and K (its Delta_t the clients derive from the two global models they received); FedAvg sends nothing."""
    n_params = sum(p.numel() for p in tiny_model().parameters())
    bits = {name: run(data, name, "sequential").rounds["bits_down_extra"].tolist()
            for name in ("fedavg", "scaffold", "stem", "taco")}
    assert bits["fedavg"] == [0, 0]
    assert bits["scaffold"] == [32 * n_params] * 2
    assert bits["stem"] == [32 * n_params + 1] * 2  # v_bar and the has_v_bar flag
    assert bits["taco"] == [32 * 4 + 0, 32 * 4 + 32]  # alpha per client; K is None before the first round


@pytest.mark.parametrize("name,executor", ALGO_EXECUTORS)
def test_same_seed_same_record_bitwise(data, name, executor):
    a, b = run(data, name, executor), run(data, name, executor)
    pd.testing.assert_frame_equal(a.rounds.drop(columns=TIMING), b.rounds.drop(columns=TIMING), check_exact=True)
    assert all(torch.equal(a.params[k], b.params[k]) for k in a.params)
    c = run(data, name, executor, seed=1)
    assert not all(torch.equal(a.params[k], c.params[k]) for k in a.params)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batched", ["vmap", "graph"])
@pytest.mark.parametrize("name", [n for n in ALGORITHMS if make_algorithm(n).vmap_compatible])
def test_batched_equals_sequential(data, name, batched, device, monkeypatch):
    """Three local epochs: 12, 12, 9 and 9 steps a round (ragged, and enough for the graph executor to capture its
    step on a GPU: the count of graph replays shows it did; on a CPU nothing is captured)."""
    replays = []
    replay = torch.cuda.CUDAGraph.replay
    monkeypatch.setattr(torch.cuda.CUDAGraph, "replay", lambda graph: (replays.append(1), replay(graph))[1])
    local = LocalTraining(lr=0.1, batch_size=8, epochs=3, momentum=0.5, weight_decay=1e-3)
    seq, bat = run(data, name, "sequential", device, local=local), run(data, name, batched, device, local=local)
    for k in seq.params:
        torch.testing.assert_close(bat.params[k], seq.params[k], atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(bat.rounds["test_loss"], seq.rounds["test_loss"], atol=1e-5, rtol=1e-5)
    np.testing.assert_allclose(bat.clients["loss"], seq.clients["loss"], atol=1e-5, rtol=1e-5)
    captured = batched == "graph" and device == "cuda"
    assert len(replays) == (2 * (12 - executors.WARMUP_STEPS) if captured else 0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batched", ["vmap", "graph"])
@pytest.mark.parametrize("name", [n for n in ALGORITHMS if make_algorithm(n).vmap_compatible])
def test_seeds_in_one_batch_give_each_seed_its_record_alone(data, name, batched, device):
    """Seeds 0-2, two clients of four a round (each seed samples its own; TACO takes all), ragged local steps:
    each seed's record and model bitwise those it has alone with the same executor, and within 1e-5 of the
    sequential executor's."""
    local = LocalTraining(lr=0.1, batch_size=8, epochs=3, momentum=0.5, weight_decay=1e-3)
    options = {"local": local, "sampler": 1.0 if name.startswith("taco") else 2}
    feds = [open_federation(tiny_model, data, make_algorithm(name), 2, seed=s, executor=batched, device=device,
                            **options)
            for s in range(3)]
    together = run_seed_batch(feds, [None] * 3, batched)
    for seed, got in enumerate(together):
        alone = run(data, name, batched, device, seed=seed, **options)
        pd.testing.assert_frame_equal(got.rounds.drop(columns=TIMING), alone.rounds.drop(columns=TIMING),
                                      check_exact=True)
        pd.testing.assert_frame_equal(got.clients, alone.clients, check_exact=True)
        assert all(torch.equal(got.params[k], alone.params[k]) for k in alone.params)
        sequential = run(data, name, "sequential", device, seed=seed, **options)
        for k in sequential.params:
            torch.testing.assert_close(got.params[k], sequential.params[k], atol=1e-5, rtol=1e-5)


def test_every_algorithm_is_registered_and_buildable_with_defaults():
    import fedlib.algorithms as algorithms
    exported = {obj for obj in vars(algorithms).values()
                if inspect.isclass(obj) and issubclass(obj, algorithms.Algorithm) and obj is not algorithms.Algorithm}
    assert exported <= set(ALGORITHMS.values()), f"not in ALGORITHMS: {exported - set(ALGORITHMS.values())}"
    for name in ALGORITHMS:
        assert make_algorithm(name).name == name


def numeric_parameters(factory) -> list[str]:
    """Constructor parameters whose default is a number (bools excluded)."""
    return [p.name for p in inspect.signature(factory).parameters.values()
            if isinstance(p.default, (int, float)) and not isinstance(p.default, bool)]


@pytest.mark.parametrize("name", sorted(ALGORITHMS))
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "0.1"])
def test_algorithms_reject_non_finite_and_mistyped_numbers(name, bad):
    for arg in numeric_parameters(ALGORITHMS[name]):
        with pytest.raises(ValueError, match=arg):
            make_algorithm(name, **{arg: bad})


# ---------------------------------------------------------------------------------------------- codecs
CODEC_CASES = [pytest.param(name, kw, id=f"{name}-{i}") for name in CODECS
               for i, kw in enumerate(CODECS.examples(name))]


def test_every_exported_codec_is_registered():
    exported = [getattr(codecs, n) for n in codecs.__all__]
    codec_classes = {obj for obj in exported if inspect.isclass(obj) and obj is not codecs.Codec
                     and hasattr(obj, "encode") and hasattr(obj, "decode")}
    registered = set(CODECS.values())
    assert codec_classes and codec_classes <= registered, f"unregistered codecs: {codec_classes - registered}"


def codec_device(name: str, device: str) -> str:
    """The device a codec's test runs on; a codec that is not device-generic is only tested on the CPU."""
    if device != "cpu" and not getattr(CODECS[name], "device_generic", False):
        pytest.skip(f"{name} encodes on the CPU only (not device_generic)")
    return device


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,kwargs", CODEC_CASES)
def test_codec_shapes_dtypes_and_bit_fields(name, kwargs, device):
    device = codec_device(name, device)
    codec = make_codec(name, **kwargs)
    x = torch.randn(3, 17, generator=torch.Generator().manual_seed(1)).to(device)
    msg = codec.encode(x, torch.Generator(device).manual_seed(2))
    y = codec.decode(msg)
    assert y.shape == x.shape and y.dtype == x.dtype and y.device == x.device and torch.isfinite(y).all()
    assert isinstance(msg.payload_bits, int) and isinstance(msg.side_bits, int)
    assert msg.payload_bits >= 0 and msg.side_bits >= 0 and msg.bits == msg.payload_bits + msg.side_bits
    if hasattr(codec, "pack"):
        packed = codec.pack(msg)
        assert msg.bits <= 8 * len(packed) < msg.bits + 16, (len(packed), msg.bits)


@pytest.mark.parametrize("name,kwargs", CODEC_CASES)
@pytest.mark.parametrize("value", [0.0, 0.25, -3.0])
def test_codec_zero_and_constant_tensors(name, kwargs, value):
    codec = make_codec(name, **kwargs)
    x = torch.full((40,), value)
    y = codec.decode(codec.encode(x, torch.Generator().manual_seed(0)))
    assert torch.isfinite(y).all() and y.shape == x.shape
    if value == 0.0:
        assert torch.equal(y, torch.zeros_like(x)), "an all-zero tensor must decode to zeros"


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name,kwargs", [c for c in CODEC_CASES if getattr(make_codec(c.values[0], **c.values[1]), "unbiased", False)])
def test_unbiased_codecs_by_monte_carlo(name, kwargs, device):
    """E[decode(encode(x))] = x: every element's mean over m draws within 5 standard errors, and the
    standardized mean error over all elements consistent with N(0, 1/d). On a GPU this tests the codec's
    device path with a device generator."""
    device = codec_device(name, device)
    codec = make_codec(name, **kwargs)
    x = torch.randn(24, generator=torch.Generator().manual_seed(3)).to(device)
    m = 3000
    draws = torch.stack([codec.decode(codec.encode(x, torch.Generator(device).manual_seed(s))) for s in range(m)])
    draws, x = draws.double().cpu(), x.cpu()
    mean, se = draws.mean(0), draws.std(0) / math.sqrt(m)
    exact = se < 1e-12  # elements the codec sends exactly (min/max levels)
    assert torch.allclose(mean[exact], x.double()[exact], atol=1e-6)
    z = (mean[~exact] - x.double()[~exact]) / se[~exact]
    if len(z) == 0:  # lossless
        return
    assert z.abs().max() < 5, z
    assert abs(float(z.mean())) < 5 / math.sqrt(len(z))


@pytest.mark.parametrize("name,kwargs", [c for c in CODEC_CASES if getattr(make_codec(c.values[0], **c.values[1]), "deterministic", False)])
def test_deterministic_codecs_ignore_the_generator(name, kwargs):
    codec = make_codec(name, **kwargs)
    x = torch.randn(50, generator=torch.Generator().manual_seed(4))
    a = codec.decode(codec.encode(x, torch.Generator().manual_seed(0)))
    b = codec.decode(codec.encode(x, torch.Generator().manual_seed(1)))
    assert torch.equal(a, b)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", sorted(CODECS))
@pytest.mark.parametrize("payload,error_feedback", [("update", False), ("update", True), ("weights", False),
                                                    ("weights", True)])
def test_codec_through_the_round_loop(data, name, payload, error_feedback, device):
    codec = make_codec(name, **CODECS.examples(name)[0])
    uplink = Link(codec=codec, payload=payload, error_feedback=error_feedback)
    down = Link(codec=codec, payload="update", error_feedback=error_feedback)
    res = run(data, "fedavg", "sequential", device, uplink=uplink, downlink=down)
    assert (res.clients["bits_up"] > 0).all() and (res.rounds["bits_down"] > 0).all()
    assert (res.rounds["payload_bits_up"] <= res.rounds["bits_up"]).all()
    assert np.isfinite(res.rounds["test_loss"]).all()


@pytest.mark.parametrize("name", sorted(CODECS))
@pytest.mark.parametrize("bad", [float("nan"), float("inf"), "4", 2.5])
def test_codecs_reject_non_finite_and_mistyped_numbers(name, bad):
    base = CODECS.examples(name)[0]
    for arg in [*numeric_parameters(CODECS[name]), *[k for k, v in base.items() if isinstance(v, (int, float))
                                                              and not isinstance(v, bool)]]:
        if bad == 2.5 and isinstance(base.get(arg, inspect.signature(CODECS[name]).parameters[arg].default),
                                     float):
            continue  # 2.5 is a fine value for a real parameter
        with pytest.raises(ValueError, match=arg):
            make_codec(name, **{**base, arg: bad})


def test_link_resolves_codec_names_and_says_what_to_pass():
    assert Link(codec="stc").codec.name == make_codec("stc").name
    with pytest.raises(ValueError, match="bits"):
        Link(codec="uniform")
    with pytest.raises(ValueError, match="registered codecs"):
        Link(codec="qsgdd")


# ---------------------------------------------------------------------------------------------- codec policies
POLICY_CASES = [pytest.param(name, kw, id=f"{name}-{i}") for name in sorted(CODEC_POLICIES)
                for i, kw in enumerate(CODEC_POLICIES.examples(name))]


def policy_link(data: FederatedData, name: str, kwargs: dict) -> Link:
    """The uplink a registered codec policy builds for a run of the battery's clients."""
    spec = RunSpec.make("conformance", "tiny", ("iid", {"num_clients": data.num_clients}), ("tiny", {}),
                        ("fedavg", {}), 2, 0)
    link = make_component("uplink", RunPlan(spec, data.dataset, tiny_model, data, torch.device("cpu"), {}),
                          name, kwargs)
    assert isinstance(link, Link), f"codec policy {name!r} must build a Link, got {link!r}"
    return link


def test_papers_register_codec_policies():
    assert POLICY_CASES, "no codec policy registered: the paper modules register theirs"


@pytest.mark.parametrize("name,kwargs", POLICY_CASES)
def test_codec_policy_gives_each_client_a_codec_that_round_trips_and_counts_bits(data, name, kwargs):
    link = policy_link(data, name, kwargs)
    gen = torch.Generator().manual_seed(5)
    x = {"w": torch.randn(3, 17, generator=gen), "b": torch.randn(5, generator=gen)}
    history = [{"round": 1, "train_loss": 2.0, "test_acc": 0.3}, {"round": 2, "train_loss": 0.5, "test_acc": 0.6}]
    for client in range(data.num_clients):
        for past in ([], history):
            codec = link.codec_for(LinkContext(round=len(past), client=client, history=past))
            tx = transmit(codec, x, link.granularity, torch.Generator().manual_seed(client))
            for k, v in x.items():
                y = tx.decoded[k]
                assert y.shape == v.shape and y.dtype == v.dtype and torch.isfinite(y).all(), (name, client, k)
            assert isinstance(tx.payload_bits, int) and isinstance(tx.side_bits, int)
            assert tx.payload_bits > 0 and tx.side_bits >= 0, (name, client, tx.payload_bits, tx.side_bits)


@pytest.mark.parametrize("name,kwargs", POLICY_CASES)
def test_codec_policy_through_the_round_loop(data, name, kwargs):
    res = run(data, "fedavg", "sequential", uplink=policy_link(data, name, kwargs))
    assert (res.clients["bits_up"] > 0).all() and (res.clients["payload_bits_up"] <= res.clients["bits_up"]).all()
    assert np.isfinite(res.rounds["test_loss"]).all()
