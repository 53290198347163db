"""A run's state is declared once: `ServerSide.state_dict` and `ClientSide.state_dict` are what a checkpoint
saves and (the client side's) what a Flower client keeps in its context. A new piece of client state declared
there is carried by both a resumed run and a Flower run with no other edit; one not declared makes both drift."""
from __future__ import annotations

import io
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch

from fedlib.algorithms import Scaffold
from fedlib.codecs.uniform import UniformQuantizer
from fedlib.data import load_dataset
from fedlib.data.partition import dirichlet
from fedlib.engine.channel import Link
import fedlib.engine.federation as federation
from fedlib.engine.federation import (CHECKPOINT_FORMAT, ClientSide, FederatedData, LocalTraining, ServerSide,
                                      open_federation, run_federation)
from fedlib.models import build_model
from fedlib.papers.taco import Freeloaders

flwr = pytest.importorskip("flwr", reason="Flower is not installed: pip install -e '.[flower]'")
from fedlib.flower import client as flower_client  # noqa: E402
from fedlib.flower import run_in_process  # noqa: E402
from fedlib.flower.plans import client_federation  # noqa: E402
from fedlib.runs import RunSpec, build_run  # noqa: E402
from fedlib.runs.build import records_of  # noqa: E402

TIMING = ("train_s", "wall_s")


class CountingClients(ClientSide):
    """The client side with one more piece of client state, declared only in its state_dict: how many rounds
    each client has trained, recorded as the clients table's "visits" column."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.visits: dict[int, int] = {}

    def replies(self, start, jobs, outcomes, history):
        out = super().replies(start, jobs, outcomes, history)
        for reply in out:
            client = reply.result.client
            self.visits[client] = self.visits.get(client, 0) + 1
            reply.row["visits"] = self.visits[client]
        return out

    def state_dict(self) -> dict[str, Any]:
        return {**super().state_dict(), "visits": self.visits}

    def load_state_dict(self, state) -> None:
        super().load_state_dict(state)
        self.visits = dict(state["visits"])


class ForgetfulClients(CountingClients):
    """The same field left out of the declared state: what a field missed in a hand-kept list does."""

    state_dict = ClientSide.state_dict
    load_state_dict = ClientSide.load_state_dict


class RoundCounter:
    """A stateful post-aggregation hook: it records how many rounds it has seen."""

    def __init__(self) -> None:
        self.seen = 0

    def __call__(self, params, info):
        self.seen += 1
        return params, {"hook_rounds_seen": self.seen}

    def state_dict(self) -> dict[str, int]:
        return {"seen": self.seen}

    def load_state_dict(self, state: dict[str, int]) -> None:
        self.seen = int(state["seen"])


class MemoryCheckpoint:
    """Every save as the bytes a file would hold; `load` reads back the save `resume_from` (None: nothing)."""

    def __init__(self, every: int, resume_from: bytes | None = None) -> None:
        self.every, self.saves, self.resume_from = every, [], resume_from

    def load(self) -> dict[str, Any] | None:
        if self.resume_from is None:
            return None
        return torch.load(io.BytesIO(self.resume_from), weights_only=True)  # plain data: no code runs

    def save(self, state: dict[str, Any]) -> None:
        buf = io.BytesIO()
        torch.save(state, buf)
        self.saves.append(buf.getvalue())


@pytest.fixture(scope="module")
def data() -> FederatedData:
    ds = load_dataset("digits")
    return FederatedData(ds, dirichlet(ds.y_train.numpy(), 6, 0.5, np.random.default_rng(0), min_size=20))


def _run(data: FederatedData, checkpoint: MemoryCheckpoint, rounds: int = 6):
    """Every kind of state: SCAFFOLD's client and server states, error-feedback residuals on both links, the
    model the clients hold (downlink "update"), freeloaders' memory, a stateful hook, partial participation."""
    return run_federation(lambda: build_model("mlp", data.dataset.input_shape, 10, hidden=(16,)), data, Scaffold(),
                          rounds, local=LocalTraining(lr=0.05, batch_size=16, steps=3), sampler=3, seed=3,
                          uplink=Link(UniformQuantizer(4), error_feedback=True),
                          downlink=Link(UniformQuantizer(8), payload="update", error_feedback=True),
                          client_behavior=Freeloaders([0, 1]), hooks=[RoundCounter()], progress=False,
                          checkpoint=checkpoint)


def _tables(result) -> dict[str, pd.DataFrame]:
    return {"rounds": result.rounds, "clients": result.clients, "layers": result.layers}


def _same(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame]) -> None:
    for name in a:
        x, y = (f.drop(columns=[c for c in TIMING if c in f]) for f in (a[name], b[name]))
        pd.testing.assert_frame_equal(x, y, check_exact=True)


def _resumed_and_uninterrupted(data: FederatedData):
    whole = MemoryCheckpoint(every=2)
    uninterrupted = _tables(_run(data, whole))
    assert len(whole.saves) == 2  # after rounds 2 and 4 (none after the last round)
    resumed = _tables(_run(data, MemoryCheckpoint(every=2, resume_from=whole.saves[0])))
    return resumed, uninterrupted


def test_a_declared_client_field_survives_a_resume_without_another_edit(data, monkeypatch):
    monkeypatch.setattr(federation, "ClientSide", CountingClients)
    resumed, uninterrupted = _resumed_and_uninterrupted(data)
    _same(resumed, uninterrupted)
    assert uninterrupted["clients"]["visits"].max() > 1  # clients come back: the field's value matters
    assert uninterrupted["rounds"]["hook_rounds_seen"].tolist() == [1, 2, 3, 4, 5, 6]  # the hook's memory too


def test_an_undeclared_client_field_makes_the_resumed_run_drift(data, monkeypatch):
    monkeypatch.setattr(federation, "ClientSide", ForgetfulClients)
    resumed, uninterrupted = _resumed_and_uninterrupted(data)
    with pytest.raises(AssertionError):
        _same(resumed, uninterrupted)
    _same({"rounds": resumed["rounds"]}, {"rounds": uninterrupted["rounds"]})  # only the field's column drifts


def test_the_checkpoint_is_the_two_sides_state_dicts(data):
    checkpoint = MemoryCheckpoint(every=1)
    _run(data, checkpoint, rounds=2)
    saved = torch.load(io.BytesIO(checkpoint.saves[0]), weights_only=True)
    assert saved["format"] == CHECKPOINT_FORMAT and set(saved) == {"format", "server", "clients"}
    assert set(saved["clients"]) == {"algorithm", "residuals", "behavior"}
    assert sorted(saved["clients"]["algorithm"]) == sorted(saved["clients"]["residuals"])  # round 1's clients
    assert saved["server"]["hooks"] == [{"seen": 1}] and saved["server"]["sampler"] is None


def test_a_checkpoint_of_the_old_flat_format_is_refused(data):
    class Old(MemoryCheckpoint):
        path = "in-progress/abc.pt"

        def load(self):
            return {"w": {}, "history": "[]", "clients": {}}  # format 1: one hand-kept list, no "format"

    with pytest.raises(ValueError, match=r"checkpoint in-progress/abc.pt holds run state of format None, not "
                                         rf"{CHECKPOINT_FORMAT}.*another fedlib version.*delete it"):
        _run(data, Old(every=1))


def test_a_component_that_saves_its_memory_must_restore_it(data):
    class SavesOnly:
        def __call__(self, ctx, received, trained, gen):
            return trained

        def state_dict(self):
            return {}

    model_fn = lambda: build_model("mlp", data.dataset.input_shape, 10, hidden=(4,))  # noqa: E731
    with pytest.raises(TypeError, match="client_behavior .*defines state_dict but not load_state_dict"):
        open_federation(model_fn, data, Scaffold(), 1, client_behavior=SavesOnly())

    class RestoresOnly:
        def __call__(self, params, info):
            return params, {}

        def load_state_dict(self, state):
            pass

    with pytest.raises(TypeError, match=r"hooks\[1\] .*defines load_state_dict but not state_dict"):
        open_federation(model_fn, data, Scaffold(), 1, hooks=[RoundCounter(), RestoresOnly()])


def test_the_sides_take_keywords_only(data):
    fed = open_federation(lambda: build_model("mlp", data.dataset.input_shape, 10, hidden=(4,)), data, Scaffold(), 1)
    with pytest.raises(TypeError, match="positional"):
        ServerSide(fed.server.model, 6)  # type: ignore[misc]
    with pytest.raises(TypeError, match="positional"):
        ClientSide(fed.clients.model, data)  # type: ignore[misc]


def test_a_saved_side_missing_a_field_is_refused_by_name(data):
    fed = open_federation(lambda: build_model("mlp", data.dataset.input_shape, 10, hidden=(4,)), data, Scaffold(), 1)
    state = fed.state_dict()
    del state["clients"]["residuals"]
    with pytest.raises(ValueError, match=r"saved client side state lacks \['residuals'\]"):
        fed.load_state_dict(state)


# ---- Flower: the client app keeps the client side's state_dict in its context -----------------------------------

def _spec() -> RunSpec:
    return RunSpec.make("quickstart", "digits", ("dirichlet", {"num_clients": 5, "alpha": 0.5, "min_size": 10}),
                        ("mlp", {"hidden": [12]}), ("scaffold", {}), 4, 1,
                        local={"lr": 0.05, "batch_size": 16, "steps": 3},
                        uplink=("stc", {"frac": 0.2, "error_feedback": True}), sampler=("uniform", {"clients": 3}),
                        loop={"executor": "sequential"})


def _flower_and_loop(spec: RunSpec, monkeypatch) -> tuple[dict[str, pd.DataFrame], dict[str, pd.DataFrame]]:
    """Flower in process, every client call in a fresh federation, as in a fresh process (a restarted SuperNode,
    a Ray actor that served other clients): what a client keeps is only what its Flower context holds."""
    def fresh_federation(spec_json: str, root: str | None):
        client_federation.cache_clear()
        return client_federation(spec_json, root)

    monkeypatch.setattr(flower_client, "client_federation", fresh_federation)
    try:
        got = run_in_process(spec, seed=2)
    finally:
        client_federation.cache_clear()
    plan = build_run(spec)
    return got, records_of(plan, run_federation(plan.model_fn, plan.data, progress=False, **plan.kwargs))


def test_a_declared_client_field_travels_in_the_flower_context_without_another_edit(monkeypatch):
    monkeypatch.setattr(federation, "ClientSide", CountingClients)
    got, loop = _flower_and_loop(_spec(), monkeypatch)
    _same(got, loop)
    assert loop["clients"]["visits"].max() > 1


def test_an_undeclared_client_field_makes_the_flower_run_drift(monkeypatch):
    monkeypatch.setattr(federation, "ClientSide", ForgetfulClients)
    got, loop = _flower_and_loop(_spec(), monkeypatch)
    assert got["clients"]["visits"].max() == 1 < loop["clients"]["visits"].max()  # each call starts it afresh
