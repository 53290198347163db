"""MUCSC's runs as data: the grid the notebook reads, a tiny spec through the runner, STC's reported model."""
from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import pandas as pd

from fedlib.algorithms import FedAvg
from fedlib.core.contracts import SERVER, LocalTraining, layer_table
from fedlib.data import iid, load_dataset
from fedlib.engine.federation import FederatedData, evaluate, run_federation
from fedlib.models import build_model
from fedlib.papers import mucsc as paper
from fedlib.runs import Keys, RunSpec, RunStore, execute


@pytest.fixture(scope="module")
def defaults() -> paper.MucscParams:
    return paper.MucscParams()


def test_the_grid_covers_every_run_the_notebook_reads(defaults):
    p = replace(defaults, seeds=[0, 1])
    main, sweep, levels = paper.main_grid(p), paper.z_sweep(p), paper.level_grid(p)
    assert len(main) == len(p.methods) * len(p.partitions) * 2
    assert {(s.get("labels")["method"], s.get("labels")["partition"], s.seed) for s in main} == {
        (m, part, seed) for m in p.methods for part in p.partitions for seed in (0, 1)}
    specs = paper.experiments(p)
    # the sweep's Z = (zu, zd) run and the level grid's default search and QSGD runs are main-grid runs: computed once
    assert len(specs) == len(main) + (len(p.z_sweep) - 1 + 1) * 2 + (len(p.level_searches) - 1) * 2
    assert set(main) | set(sweep) | set(levels) == set(specs)
    assert len({s.key() for s in specs}) == len(specs)
    for spec in specs:
        assert RunSpec.from_json(json.loads(json.dumps(spec.to_json()))) == spec
    thirds = [s for s in sweep if s.uplink.name == "level_split"]
    assert len(thirds) == 2 and all(s.uplink.args["choices"] == list(p.zu_thirds) for s in thirds)


def test_a_subset_of_methods_selects_a_subset(defaults):
    specs = paper.main_grid(replace(defaults, methods=["mucsc"]))
    assert {s.get("labels")["method"] for s in specs} == {"mucsc"}
    assert [s for s in paper.experiments(defaults) if s.matches({"method": ["stc"], "partition": ["iid"]})]


def test_unknown_partition_is_named(defaults):
    with pytest.raises(ValueError, match="MucscParams.partitions must be one of 'iid', 'noniid', 'writers', "
                                         "got 'writer'"):
        replace(defaults, partitions=["writer"])


@pytest.fixture(scope="module")
def tiny(defaults) -> paper.MucscParams:
    return replace(defaults, num_clients=6, clients_per_round=3, rounds=3, local_steps=2, model_kwargs={"hidden": [8]},
                   partitions=["noniid"], methods=["nc", "mucsc", "stc"], z_sweep=[4], level_searches=["descent"],
                   lr_t_per_round=2)


def test_a_tiny_spec_runs_through_the_runner_with_the_columns_the_notebook_reads(tiny, tmp_path):
    store, keys = RunStore(tmp_path), Keys()
    specs = paper.main_grid(tiny)
    records = {}
    for spec in specs:
        run = keys(spec)
        for name, frame in execute(run, store).items():
            records.setdefault(name, []).append(frame.assign(run=run.key, **spec.get("labels"), seed=spec.seed))
    records = {k: pd.concat(v, ignore_index=True) for k, v in records.items()}
    assert {"rounds", "clients", "comm", "server"} <= set(records)
    runs = paper.run_rounds(records)
    for col in ("test_acc", "bits_down", "wall_s", "comm_s", "up_mean_bits", "traffic_MB", "time_s"):
        assert runs[col].notna().all(), col
    per_seed = paper.to_target(records, 0.5)
    table = paper.target_table(per_seed)
    assert set(table["method"]) == {"nc", "mucsc", "stc"}
    assert np.allclose(table.loc[table.method == "nc", "traffic_pct_of_NC"].replace(np.inf, 100.0), 100.0)
    layers = records["layers"][(records["layers"]["method"] == "mucsc") & (records["layers"]["client"] != SERVER)]
    j = layers.pivot(index=["run", "round", "client", "layer"], columns="key", values="value")
    assert set(j.index.get_level_values("layer")) == {"model"} and len(j) == (records["clients"]["method"] == "mucsc").sum()
    assert (j["J"] <= j["J_init"] * (1 + 1e-9)).all()  # descent never raises J above the uniform start
    # the per-client Z_U split goes through the plan
    thirds = [s for s in paper.z_sweep(tiny) if s.uplink.name == "level_split"][0]
    codecs = set(execute(keys(thirds), store)["clients"]["codec"])
    assert codecs <= {"mucsc4", "mucsc8", "mucsc16"} and len(codecs) > 1


def test_stc_reports_the_accuracy_of_the_model_the_clients_hold(tmp_path):
    """With STC's downlink (server residual) the clients' model lags the server's: the record's test_acc is the
    clients' model's. Read both from the checkpoint after round 1 and evaluate each independently."""
    ds = load_dataset("digits")
    data = FederatedData(ds, iid(ds.y_train.numpy(), 6, np.random.default_rng(0)))
    model_fn = lambda: build_model("mlp", ds.input_shape, 10, hidden=(16,))  # noqa: E731
    up, down = paper.links("stc", paper.Setup(stc_frac=0.01))
    saved = {}

    class Keep:
        every = 1

        def load(self):
            return None

        def save(self, state):
            saved.update(state)

    res = run_federation(model_fn, data, FedAvg(), 2, local=LocalTraining(lr=0.5, batch_size=8, steps=5), sampler=3,
                         uplink=up, downlink=down, downlink_receivers="all", progress=False, checkpoint=Keep())
    model = model_fn()
    held = evaluate(model, saved["server"]["held"], {}, ds.x_test, ds.y_test)[0]
    server = evaluate(model, saved["server"]["w"], {}, ds.x_test, ds.y_test)[0]
    assert held != server  # the two models differ on this run
    assert res.rounds["test_acc"].iloc[0] == held


def test_notebook_parameters_include_the_runner_ones(defaults):
    for name in ("data_root", "runs_root", "runner", "ray_address", "results_root", "level_search", "level_searches"):
        assert name in defaults.names()
    assert defaults.level_search in defaults.level_searches


def test_writers_split_gives_one_client_per_writer_and_checks_the_count():
    import torch
    from fedlib.data import Dataset
    from fedlib.core.seeding import Seeds

    x = torch.zeros(6, 2)
    ds = Dataset("w", x, torch.tensor([0, 1, 0, 1, 0, 1]), x[:2], torch.tensor([0, 1]), num_classes=2,
                 groups=np.array([7, 3, 7, 9, 3, 7]))
    parts = paper.writers_split(ds, 3, Seeds(0))
    assert [p.tolist() for p in parts] == [[1, 4], [0, 2, 5], [3]]  # writers 3, 7, 9 in id order
    with pytest.raises(ValueError, match="has 3 writers; set num_clients = 3"):
        paper.writers_split(ds, 4, Seeds(0))


def test_level_variants_reads_the_uplink_j_ratio_from_the_layer_table():
    """J / J_init per uploaded message (run, round, client, layer); the downlink's own J ("down/J") is not an upload."""
    ids = {"run": "r", "method": "mucsc", "setting": "Z=4, descent"}
    records = {"rounds": pd.DataFrame([{**ids, "round": 1, "bits_down": 10, "wall_s": 0.5}]),
               "clients": pd.DataFrame([{**ids, "round": 1, "client": c, "bits_up": 8} for c in (0, 1)]),
               "comm": pd.DataFrame([{**ids, "round": 1, "up_s": 1.0, "down_s": 1.0, "comm_s": 2.0}]),
               "layers": layer_table([{"round": 1, "client": c, "layer": "model", "key": k, "value": v}
                                      for c, k, v in ((0, "J", 1.0), (0, "J_init", 4.0), (1, "J", 3.0), (1, "J_init", 4.0),
                                                      (SERVER, "down/J", 9.0), (SERVER, "down/J_init", 9.0))]).assign(**ids)}
    runs, clients = paper.level_variants(records)
    assert runs["variant"].tolist() == ["MUCSC descent"]
    assert clients[["client", "ratio", "variant"]].values.tolist() == [[0, 0.25, "MUCSC descent"], [1, 0.75, "MUCSC descent"]]
