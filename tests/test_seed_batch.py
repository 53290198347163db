"""Seeds in one batch (`fedlib.engine.seed_batch`) beyond the conformance battery's equality per algorithm: when the
rule batches, a diverging seed leaves the others unchanged, views that differ in a non-tensor value train apart, and the
run layer files each batched seed under its own key with its records alone, resuming a seed from its checkpoint; a
ledger piece batches a cell's seeds the same way."""
from __future__ import annotations

import importlib
import io
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch
from torch import nn

from fedlib.algorithms import FedAvg
from fedlib.core.contracts import FederatedData, LocalTraining
from fedlib.data import Dataset
from fedlib.engine.executors import ClientGroup, train_stacked
from fedlib.engine.federation import open_federation, run_federation
from fedlib.engine.seed_batch import batches_seeds, run_seed_batch, what_differs
from fedlib.ledger import piece as piece_module
from fedlib.ledger.entries import Ledger
from fedlib.ledger.piece import run_piece
from fedlib.ledger.priority import prioritized
from fedlib.papers.quickstart import QuickstartParams, experiments
from fedlib.runs import Keys, RunSpec, RunStore, execute, run_specs
from fedlib.runs.build import Plans
from fedlib.runs.execute import Stop, execute_cell

TIMING = ["train_s", "wall_s"]
TINY_VMAP = QuickstartParams(rounds=4, num_clients=4, clients_per_round=2, batch_size=64, seeds=(0, 1, 2),
                             executor="vmap", device="cpu")
execute_module = importlib.import_module("fedlib.runs.execute")  # fedlib.runs.execute is also the function
CPU, CUDA = torch.device("cpu"), torch.device("cuda")


@pytest.fixture(scope="module")
def data() -> FederatedData:
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(100, 6, generator=gen)
    y = (x[:, :2].sum(1) > 0).long()
    return FederatedData(Dataset("tiny", x[:80], y[:80], x[80:], y[80:], num_classes=2),
                         [np.arange(0, 24), np.arange(24, 44), np.arange(44, 80)])


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 5), nn.Tanh(), nn.Linear(5, 2))


def conv() -> nn.Module:
    return nn.Sequential(nn.Unflatten(1, (1, 6)), nn.Conv1d(1, 2, 3), nn.Flatten(), nn.Linear(8, 2))


def batchnorm() -> nn.Module:
    return nn.Sequential(nn.Linear(6, 5), nn.BatchNorm1d(5), nn.Linear(5, 2))


class Sequential(FedAvg):
    vmap_compatible = False


@pytest.mark.parametrize("model,algorithm,device,executor,batched", [
    (mlp, FedAvg, CPU, "auto", True),  # dense on a CPU: measured faster batched
    (conv, FedAvg, CPU, "auto", False),  # convolutional on a CPU: measured slower batched
    (conv, FedAvg, CUDA, "auto", True),  # on a GPU a run alone already trains batched
    (conv, FedAvg, CPU, "vmap", True),  # asked for the batched step: batched (bitwise its record alone)
    (mlp, FedAvg, CPU, "sequential", False),  # asked for the sequential executor
    (mlp, Sequential, CPU, "vmap", False),  # an algorithm the batched step cannot run
    (batchnorm, FedAvg, CUDA, "auto", False),  # a model with buffers
])
def test_the_rule(model, algorithm, device, executor, batched):
    assert batches_seeds(model(), algorithm(), device, executor) is batched


def local() -> LocalTraining:
    return LocalTraining(lr=0.1, batch_size=8, epochs=2, momentum=0.5)


def alone(data, seed, **options):
    return run_federation(mlp, data, options.pop("algorithm", FedAvg()), 3, local=local(), executor="vmap",
                          seed=seed, progress=False, **options)


def batch(data, seeds, behaviors=None, algorithm=FedAvg):
    feds = [open_federation(mlp, data, algorithm(), 3, local=local(), executor="vmap", seed=s,
                            client_behavior=(behaviors or {}).get(s)) for s in seeds]
    return run_seed_batch(feds, [None] * len(feds), "vmap")


def same(a, b) -> None:
    pd.testing.assert_frame_equal(a.rounds.drop(columns=TIMING), b.rounds.drop(columns=TIMING), check_exact=True)
    assert all(torch.equal(a.params[k], b.params[k]) for k in a.params)


def test_a_diverging_seed_leaves_the_others_unchanged(data):
    def poison(ctx, received, trained, gen):  # seed 1's clients send NaN from round 2 on
        return {k: v * float("nan") for k, v in trained.items()} if ctx.round >= 1 else trained

    with pytest.warns(RuntimeWarning, match="diverged"):
        got = batch(data, [0, 1, 2], {1: poison})
    assert got[1].rounds["diverged"].tolist() == [False, True, True]
    same(got[0], alone(data, 0))
    same(got[2], alone(data, 2))


class SeedScaled(FedAvg):
    """A correction read from a view whose number (not a tensor) differs by seed: the initial model's sum."""

    def init_server_state(self, params, num_clients):
        return {"scale": round(float(sum(v.sum() for v in params.values())), 3)}

    def client_view(self, server_state, ctx):
        return {"scale": server_state["scale"]}

    def correction(self, p, anchor, client_state, server_state):
        return {k: 0.01 * server_state["scale"] * (p[k] - anchor[k]) for k in p}


def test_views_differing_in_a_number_train_apart_each_as_alone(data):
    got = batch(data, [0, 1], algorithm=SeedScaled)
    for seed in (0, 1):
        same(got[seed], alone(data, seed, algorithm=SeedScaled()))


def test_stacking_groups_whose_view_numbers_differ_is_refused(data):
    jobs = []  # never reached: the views are stacked before any step
    groups = [ClientGroup({"w": torch.zeros(2)}, {"scale": s}, jobs) for s in (1.0, 2.0)]
    with pytest.raises(ValueError, match=r"client view\['scale'\] differ"):
        train_stacked(mlp(), torch.zeros(1, 6), torch.zeros(1), groups, local(), SeedScaled(), 0)


def spec(seed: int, executor: str = "vmap") -> RunSpec:
    return RunSpec.make("quickstart", "digits", ("dirichlet", {"num_clients": 4, "alpha": 0.5, "min_size": 10}),
                        ("mlp", {"hidden": [12]}), ("scaffold", {}), 4, seed,
                        local={"lr": 0.05, "batch_size": 32, "epochs": 1, "momentum": 0.5},
                        uplink=("stc", {"frac": 0.2, "error_feedback": True}), sampler=("uniform", {"clients": 2}),
                        loop={"executor": executor})


def records_equal(a, b, exact: bool = True) -> None:
    for name in a:
        drop = [c for c in TIMING if c in a[name]]
        pd.testing.assert_frame_equal(a[name].drop(columns=drop), b[name].drop(columns=drop), check_exact=exact,
                                      atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("executor,exact", [("vmap", True), ("auto", False)])
def test_run_specs_files_each_batched_seed_under_its_key_with_its_records_alone(tmp_path, monkeypatch, executor,
                                                                                exact):
    """Under "vmap" bitwise; under "auto" on a CPU (alone: the sequential executor) within 1e-5."""
    specs = [spec(s, executor) for s in (0, 1, 2)]
    batches = []
    monkeypatch.setattr(execute_module, "run_seed_batch", lambda feds, *a: batches.append(len(feds)) or
                        run_seed_batch(feds, *a))
    single, together = RunStore(tmp_path / "alone"), RunStore(tmp_path / "batched")
    a = run_specs(specs, store=single, seed_batches=False, progress=False)
    assert batches == []
    b = run_specs(specs, store=together, progress=False)
    assert batches == [3]
    keys = Keys()  # run_specs' keys: this process's code, data and environment
    assert all(single.has(keys(s)) and together.has(keys(s)) for s in specs)
    assert [keys(s).key for s in specs] == list(a["rounds"]["run"].unique()) == list(b["rounds"]["run"].unique())
    records_equal(a, b, exact)


def test_a_batch_resumes_each_seed_from_its_own_checkpoint(tmp_path):
    store, keys = RunStore(tmp_path / "store"), Keys()

    def stop_at_two(done: int) -> None:
        if done >= 2:
            raise Stop

    with pytest.raises(Stop):  # seed 1 alone, interrupted after round 2 (its checkpoint holds 2 rounds)
        execute(keys(spec(1)), store, checkpoint_every=2, watch=stop_at_two)
    execute_cell([keys(spec(s)) for s in (0, 1, 2)], store, Plans(), checkpoint_every=2)
    for s in (0, 1, 2):
        records_equal(store.load(keys(spec(s))), execute(keys(spec(s)), RunStore(tmp_path / f"fresh{s}")))


def test_seeds_with_another_learning_rate_are_not_one_batch(data):
    """A plan may derive the learning rate from the seed's split (FedShift's logistic runs): such seeds cannot
    share a step, so the run layer trains them alone and `run_seed_batch` refuses them."""
    feds = [open_federation(mlp, data, FedAvg(), 2, local=LocalTraining(lr=lr, batch_size=8), seed=s)
            for s, lr in ((0, 0.1), (1, 0.2))]
    assert what_differs(feds) == "seed 1 has another local training than seed 0"
    with pytest.raises(ValueError, match="only runs that differ by seed alone train as one batch"):
        run_seed_batch(feds, [None, None])


def test_a_piece_trains_a_cells_seeds_as_one_batch_each_entry_holding_its_records_alone(tmp_path):
    """A ledger piece over the quickstart's tiny grid under "vmap": each cell's three seeds train as one batch, each
    seed's entry holds bitwise the records of a piece that trains every run alone (`seed_batches=False`), its
    provenance says how many seeds trained together, and the seeds' wall seconds are the batch's, shared by
    client-steps. A batch stopped by the budget keeps every seed's checkpoint and finishes in the next piece."""
    ranked = prioritized({"quickstart": experiments(TINY_VMAP)})
    out = io.StringIO()
    batched = run_piece(ranked, Ledger(tmp_path / "batched"), RunStore(tmp_path / "b"), 600, rate=1e3, out=out)
    alone = run_piece(ranked, Ledger(tmp_path / "alone"), RunStore(tmp_path / "a"), 600, rate=1e3,
                      seed_batches=False, out=io.StringIO())
    assert {r.spec for r, *_ in batched.added} == {r.spec for r, *_ in alone.added} == {r.spec for r in ranked}
    cells = len({r.spec.with_(seed=0) for r in ranked})
    assert out.getvalue().count("3 seeds trained as one batch") == cells
    together = {e.spec: e for e in Ledger(tmp_path / "batched").entries()}
    for entry in Ledger(tmp_path / "alone").entries():
        mine = together[entry.spec]
        records_equal(mine.records, entry.records)
        assert (entry.provenance["seed_batch"], mine.provenance["seed_batch"]) == (1, 3)
    for cell in {s.with_(seed=0) for s in together}:
        seeds = [e for s, e in together.items() if s.with_(seed=0) == cell]
        walls, steps = ([e.provenance[k] for e in seeds] for k in ("wall_s", "client_steps"))
        # provenance stores wall seconds to the millisecond, so each share may be off by one millisecond
        assert walls == pytest.approx([sum(walls) * n / sum(steps) for n in steps], rel=1e-2, abs=1e-3)


def test_a_piece_stopped_mid_batch_keeps_every_seeds_checkpoint_and_a_later_piece_resumes_them(tmp_path,
                                                                                              monkeypatch):
    """A clock advancing 30 s at each checkpoint of the batch (50 rounds, each checkpointed): the batch is stopped
    after round 2, each seed keeping its checkpoint; the next piece resumes all three, and each equals its run
    alone."""
    every = prioritized({"quickstart": experiments(replace(TINY_VMAP, rounds=50))})
    ranked = [r for r in every if r.spec.with_(seed=0) == every[0].spec.with_(seed=0)]  # one cell's three seeds
    ledger, store, out, now = Ledger(tmp_path / "ledger"), RunStore(tmp_path / "runs"), io.StringIO(), [0.0]
    real = piece_module.Watch.__call__

    def watched(self, done: int) -> None:
        now[0] += 30.0
        real(self, done)

    monkeypatch.setattr(piece_module.Watch, "__call__", watched)
    report = run_piece(ranked, ledger, store, 600, clock=lambda: now[0], out=out)
    assert report.added == [] and len(report.skipped) == 3 and out.getvalue().count("after round 2 of 50") == 3
    keys = Keys()  # the piece's keys for the quickstart's runs (its data root: the data-root rule)
    assert all(store.checkpoint(keys(r.spec), 1).path.exists() for r in ranked) and ledger.paths() == []
    monkeypatch.undo()
    again = run_piece(ranked, ledger, store, 600, out=io.StringIO())
    assert {r.spec for r, *_ in again.added} == {r.spec for r in ranked}
    for entry in ledger.entries():
        records_equal(entry.records, execute(keys(entry.spec), RunStore(tmp_path / f"fresh{entry.spec.seed}")))
        clients, prov = entry.records["clients"], entry.provenance
        assert prov["resumed_after_round"] == 2  # its pace: the client-steps of the rounds this piece computed
        assert prov["client_steps"] == clients.loc[clients["round"] >= 3, "steps"].sum() < clients["steps"].sum()


def test_deciding_whether_a_cell_batches_leaves_the_random_state_alone():
    """`seeds_batch` builds the cell's model to look at it, from a forked random state: a notebook's later draws
    from torch's global generator are those it gets without the decision."""
    plan = execute_module.build_run(spec(0))
    before = torch.get_rng_state()
    assert execute_module.seeds_batch(plan) is True
    assert torch.equal(torch.get_rng_state(), before)
