"""fedlib.codecs.policies.PerClient: the assignment, the default, bad clients and codecs, the downlink, and the
bits each client sends through the round loop (hand-counted). AdaQuantFL's schedule: tests/test_fedaq_codecs.py."""
from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from fedlib.algorithms import make_algorithm
from fedlib.codecs import Identity, PerClient, SignSGD, UniformQuantizer
from fedlib.core.contracts import FederatedData, LocalTraining
from fedlib.data import Dataset
from fedlib.engine.channel import Link, LinkContext
from fedlib.engine.federation import run_federation


def ctx(client: int | None) -> LinkContext:
    return LinkContext(round=0, client=client, history=[])


def test_each_client_gets_its_groups_codec_and_the_rest_the_default():
    sign = SignSGD()
    policy = PerClient(6, [(("uniform", {"bits": 2}), [1, 3]), (sign, np.array([4])), ("fp32", [5])],
                       default=("uniform", {"bits": 8}))
    q = policy(ctx(1))
    assert isinstance(q, UniformQuantizer) and q.bits == 2 and policy(ctx(3)) is q  # one codec per group
    assert policy(ctx(4)) is sign  # a codec object is used as it is
    assert isinstance(policy(ctx(5)), Identity)
    for unassigned in (0, 2):
        assert policy(ctx(unassigned)) is policy.default and policy.default.bits == 8
    assert policy.codec_of(np.int64(3)) is q  # numpy client ids, as np.flatnonzero gives them
    assert isinstance(PerClient(3, []).codec_of(2), Identity)  # the default default is fp32


def test_the_downlink_has_no_client():
    with pytest.raises(ValueError, match="uplink policy .* downlink has no client"):
        PerClient(2, [("sign", [0])])(ctx(None))


@pytest.mark.parametrize("client", [4, -1, 100])
def test_a_client_outside_the_run_is_refused_at_call_and_in_a_group(client):
    policy = PerClient(4, [("sign", [0])])
    with pytest.raises(ValueError, match=r"client -?\d+ is outside 0\.\.3 .*built for 4 clients"):
        policy(ctx(client))
    with pytest.raises(ValueError, match=r"group 1: client -?\d+ is outside 0\.\.3"):
        PerClient(4, [("sign", [0]), ("fp32", [1, client])])


@pytest.mark.parametrize("client", [1.5, "1", True, None, float("nan")])
def test_a_client_id_that_is_not_an_integer_is_refused(client):
    with pytest.raises(ValueError, match="a client is an integer id"):
        PerClient(4, [("sign", [client])])
    if client is not None:
        with pytest.raises(ValueError, match="a client is an integer id"):
            PerClient(4, []).codec_of(client)


@pytest.mark.parametrize("groups", [[("sign", 2)], [("sign",)], ["sign"], [("sign", "12")], {1: "sign"}])
def test_a_group_that_is_not_codec_and_clients_is_refused(groups):
    with pytest.raises(ValueError, match=r"group 0: a group is \(codec, client ids\)"):
        PerClient(4, groups)


def test_a_client_in_two_groups_is_refused():
    with pytest.raises(ValueError, match="client 2 is in group 1 and in an earlier group"):
        PerClient(4, [("sign", [0, 2]), ("fp32", [2])])


@pytest.mark.parametrize("choice, match", [
    (("uniform",), "a codec is a codec object"), (3, "a codec is a codec object"), (("uniform", [2]), "codec object"),
    (("nope", {}), "unknown codec 'nope'"), ("uniform", "codec 'uniform'.*bits"),
])
def test_a_bad_codec_is_refused_naming_where(choice, match):
    with pytest.raises(ValueError, match=match):
        PerClient(4, [(choice, [0])])
    with pytest.raises(ValueError, match=match):
        PerClient(4, [], default=choice)


@pytest.mark.parametrize("n", [0, -2, 2.5, "4"])
def test_the_client_count_must_be_a_positive_integer(n):
    with pytest.raises(ValueError, match="num_clients"):
        PerClient(n, [])


def test_each_clients_bits_through_the_round_loop_are_its_codecs():
    """Linear(8, 3) per layer: fp32 sends 27 x 32 = 864 bits; 2-bit uniform sends 2 x 24 + 64 (weight) and
    2 x 3 + 64 (bias) = 182; sign sends 24 + 32 and 3 + 32 = 91 (one bit per value and the fp32 scale)."""
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(60, 8, generator=gen)
    y = x[:, :3].argmax(1)
    data = FederatedData(Dataset("tiny", x[:48], y[:48], x[48:], y[48:], num_classes=3),
                         [np.arange(i, 48, 4) for i in range(4)])
    policy = PerClient(4, [(("uniform", {"bits": 2}), [1, 2]), ("sign", [3])])
    res = run_federation(lambda: nn.Linear(8, 3), data, make_algorithm("fedavg"), rounds=2,
                         local=LocalTraining(lr=0.1, batch_size=4, epochs=1), uplink=Link(policy), progress=False)
    bits = res.clients.groupby("client")["bits_up"].unique().map(list).to_dict()
    assert bits == {0: [864], 1: [182], 2: [182], 3: [91]}
    assert res.clients.groupby("client")["codec"].unique().map(list).to_dict() == {
        0: ["fp32"], 1: ["uniform2"], 2: ["uniform2"], 3: ["sign"]}
