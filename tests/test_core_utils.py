"""Seeding streams, parameter-dict helpers and the identity codec (claims tables: test_report.py)."""
from __future__ import annotations

import pytest
import torch

from fedlib.codecs import Identity, roundtrip
from fedlib.core import params as P
from fedlib.core.seeding import Seeds
from fedlib.engine.channel import Link, transmit


def test_streams_are_reproducible_and_independent():
    s = Seeds(5)
    assert s.numpy("batches", 1, 2).integers(1 << 30) == Seeds(5).numpy("batches", 1, 2).integers(1 << 30)
    draws = {s.numpy(p, *k).integers(1 << 30) for p, k in [("batches", (1, 2)), ("batches", (2, 1)),
                                                           ("sampling", (1,)), ("batches", (1, 3))]}
    assert len(draws) == 4
    assert torch.equal(torch.rand(3, generator=s.torch("codec", 0)), torch.rand(3, generator=Seeds(5).torch("codec", 0)))
    with pytest.raises(ValueError, match="non-negative"):
        Seeds(-1)


def test_weighted_sum_flatten_roundtrip():
    a = {"w": torch.tensor([1.0, 2.0]), "b": torch.tensor([[3.0]])}
    b = {"w": torch.tensor([5.0, 6.0]), "b": torch.tensor([[7.0]])}
    out = P.weighted_sum([a, b], [0.25, 0.75])
    assert torch.allclose(out["w"], torch.tensor([4.0, 5.0])) and torch.allclose(out["b"], torch.tensor([[6.0]]))
    assert a["w"].tolist() == [1.0, 2.0]  # inputs untouched
    flat = P.flatten(a)
    assert flat.tolist() == [1.0, 2.0, 3.0]
    assert all(torch.equal(P.unflatten(flat, a)[k], a[k]) for k in a)
    assert P.dot(a, b) == 1 * 5 + 2 * 6 + 3 * 7 and P.sq_norm(a) == 14
    with pytest.raises(ValueError):
        P.unflatten(torch.zeros(4), a)


def test_identity_codec_and_transmit_bits():
    x = torch.randn(10)
    y, msg = roundtrip(Identity(), x)
    assert torch.equal(x, y) and msg.bits == 320
    params = {"a": torch.randn(2, 3), "b": torch.randn(4)}
    for gran in ("layer", "model"):
        tx = transmit(Identity(), params, gran, None)
        assert tx.bits == 32 * 10
        assert all(torch.equal(tx.decoded[k], params[k]) for k in params)
    with pytest.raises(ValueError, match="granularity"):
        Link(granularity="tensor")
    with pytest.raises(ValueError, match="payload"):
        Link(payload="gradient")

