"""fedlib in Flower (fedlib.flower): the Strategy and ClientApp give run_federation's record on the same spec.

In process (`InProcessGrid`: random 64-bit node ids, shuffled replies) the record is bitwise equal for every
registered algorithm and one codec of every codec family (each module of fedlib.codecs), and for the paper
components that keep client-side memory or read the record (TACO's freeloaders, AdaQuantFL's loss-driven
policy). One run goes through Flower's simulation engine (Ray, 2 workers)."""
from __future__ import annotations

import os
import re
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("flwr", reason="Flower is not installed: pip install -e '.[flower]' (make setup installs it)")

from flwr.app import Context, Message, MessageType, RecordDict  # noqa: E402

from fedlib.algorithms import ALGORITHMS  # noqa: E402
from fedlib.core.contracts import SERVER  # noqa: E402
from fedlib.engine.federation import open_federation, run_federation  # noqa: E402
from fedlib.flower import FedlibStrategy, InProcessGrid, client_app, run_in_process, run_in_simulation  # noqa: E402
from fedlib.registry import CODECS  # noqa: E402
from fedlib.runs import Component, RunSpec, build_run, freeze  # noqa: E402
from fedlib.runs.build import records_of  # noqa: E402

TIMING = ("train_s", "wall_s")


def spec_of(algorithm: str = "fedavg", algorithm_args: dict | None = None, uplink=("fp32", {}),
            downlink=("fp32", {"payload": "weights"}), rounds: int = 3, sampler: int | float = 3, **more) -> RunSpec:
    return RunSpec.make("quickstart", "digits", ("dirichlet", {"num_clients": 5, "alpha": 0.5, "min_size": 10}),
                        ("mlp", {"hidden": [12]}), (algorithm, algorithm_args or {}), rounds, 1,
                        local={"lr": 0.05, "batch_size": 16, "steps": 3, "momentum": 0.5},
                        uplink=uplink, downlink=downlink, sampler=("uniform", {"clients": sampler}),
                        loop={"executor": "sequential"}, **more)


def reference(spec: RunSpec) -> dict[str, pd.DataFrame]:
    plan = build_run(spec)
    return records_of(plan, run_federation(plan.model_fn, plan.data, progress=False, **plan.kwargs))


def same_records(a: dict[str, pd.DataFrame], b: dict[str, pd.DataFrame], rtol: float = 0.0) -> None:
    assert set(a) == set(b)
    assert len(a["rounds"]) > 0 and len(a["clients"]) > 0
    for name in a:
        x, y = (f.drop(columns=[c for c in TIMING if c in f]) for f in (a[name], b[name]))
        if rtol == 0.0:
            pd.testing.assert_frame_equal(x, y, check_exact=True)
        else:
            pd.testing.assert_frame_equal(x, y, check_exact=False, rtol=rtol, atol=0.0)


# Every registered algorithm; TACO needs full participation (the paper's setting, enforced by its server).
ALGORITHM_SAMPLERS = {name: (1.0 if name == "taco" else 3) for name in ALGORITHMS}


@pytest.mark.parametrize("algorithm", sorted(ALGORITHMS))
def test_every_algorithm_gives_run_federations_record_bitwise(algorithm):
    """Error-feedback STC up (each client's residual kept in its Flower context), an 8-bit stochastic update
    downlink, partial participation: the four places Flower's own loop would break parity all matter here."""
    spec = spec_of(algorithm, uplink=("stc", {"frac": 0.2, "error_feedback": True}),
                   downlink=("uniform", {"bits": 8, "rounding": "stochastic", "payload": "update"}),
                   sampler=ALGORITHM_SAMPLERS[algorithm])
    same_records(reference(spec), run_in_process(spec, seed=3))


def _families() -> dict[str, tuple[str, dict]]:
    """One registered codec per codec module (fedlib/codecs/<family>.py), with its first example."""
    families: dict[str, tuple[str, dict]] = {}
    for name, codec in CODECS.items():
        families.setdefault(codec.__module__.rsplit(".", 1)[-1], (name, CODECS.examples(name)[0]))
    return families


def test_every_codec_family_is_in_the_grid():
    assert set(_families()) == {"base", "kmeans", "mucsc", "qsgd", "sparse", "uniform"}


@pytest.mark.parametrize("family", sorted(_families()))
def test_one_codec_per_family_gives_the_same_record_and_bits(family):
    name, args = _families()[family]
    spec = spec_of("fedavg", uplink=(name, {**args, "granularity": "model"}),
                   downlink=(name, {**args, "payload": "update"}))
    ref, got = reference(spec), run_in_process(spec)
    same_records(ref, got)
    assert got["rounds"]["bits_up"].sum() > 0


def test_taco_with_freeloaders_keeps_each_freeloaders_memory_in_its_context():
    """"previous_update" freeloaders need the model of the round before: a client behaviour's memory travels
    in each client's Flower context, not in a process (live expulsion and the alpha collectors included)."""
    spec = RunSpec.make("taco", "digits", ("dirichlet", {"num_clients": 5, "alpha": 0.5, "min_size": 10}),
                        ("mlp", {"hidden": [12]}), ("taco", {"expel_after": 2}), 4, 0,
                        local={"lr": 0.05, "batch_size": 16, "steps": 3}, loop={"aggregation_weights": "uniform"},
                        client_behavior=("freeloaders", {"count": 2}),
                        collectors=[("taco_alpha", {}), ("taco_expelled", {}), ("taco_output", {})])
    ref, got = reference(spec), run_in_process(spec, seed=5)
    same_records(ref, got)
    assert set(got) == {"rounds", "clients", "layers", "alpha", "expelled", "output"}


def test_adaquantfl_reads_the_servers_record_rows_on_the_client():
    spec = RunSpec.make("fedaq", "digits", ("equal_shards", {"num_clients": 5}),
                        ("mlp", {"hidden": [12]}), ("fedavg", {}), 4, 0,
                        local={"lr": 0.05, "batch_size": 16, "steps": 3},
                        uplink=("adaquantfl", {"s0": 3}))
    ref, got = reference(spec), run_in_process(spec)
    same_records(ref, got)
    assert got["clients"]["bits_up"].nunique() > 1  # the bit-length moved with the loss


def _paper_spec(paper: str, has) -> RunSpec:
    """The first spec of a paper notebook's default grid that `has`, cut to 3 rounds."""
    from fedlib.paper import paper as declared

    specs = declared(paper).experiments(declared(paper).params())
    return next(s for s in specs if has(s)).with_(rounds=3)


@pytest.mark.parametrize("paper, has", [
    # hooks that read the round's uplink codecs (reconstructed on the server), a stratified sampler, a
    # per-client mixed-precision uplink
    ("fedshift", lambda s: "fedshift" in [h.name for h in s.hooks] and getattr(s.sampler, "name", "") == "stratified"),
    ("mucsc", lambda s: s.uplink.name == "level_split"),  # MUCSC's per-client level split, a MUCSC downlink
], ids=["fedshift hooks", "mucsc level split"])
def test_paper_components_give_the_same_record(paper, has):
    spec = _paper_spec(paper, has)
    got = run_in_process(spec)
    same_records(reference(spec), got)
    # per-layer rows from the clients' messages (uplink codec info) and the server (hooks, downlink) crossed too
    assert set(got["layers"]["client"]) - {SERVER} and (got["layers"]["client"] == SERVER).any()


def test_batchnorm_buffers_travel_both_ways():
    spec = RunSpec.make("quickstart", "digits", ("dirichlet", {"num_clients": 3, "alpha": 0.5, "min_size": 10}),
                        ("resnet18_cifar", {}), ("fedavg", {}), 2, 1, local={"lr": 0.05, "batch_size": 16, "steps": 1},
                        sampler=("uniform", {"clients": 2}))
    ref, got = reference(spec), run_in_process(spec)
    same_records(ref, got)
    assert (got["rounds"]["bits_up_extra"] > 0).all()  # the buffers' 32 bits per value


def test_every_selected_client_must_reply_once():
    plan = build_run(spec_of())
    fed = open_federation(plan.model_fn, plan.data, **plan.kwargs)
    start = fed.server.open_round(0)
    jobs, outcomes = fed.clients.train(start, fed.server.buffers)
    replies = fed.clients.replies(start, jobs, outcomes, [])
    with pytest.raises(ValueError, match="every selected client must reply exactly once"):
        fed.server.close_round(start, replies[:-1], 0.0)
    with pytest.raises(ValueError, match="every selected client must reply exactly once"):
        fed.server.close_round(start, [*replies, replies[0]], 0.0)
    row = fed.server.close_round(start, replies[::-1], 0.0)  # any order: sorted by client
    assert row["clients"] == len(start.ids) == 3


def test_nodes_must_be_one_per_client_with_their_partition_ids():
    spec = spec_of(rounds=1)
    with pytest.raises(ValueError, match="one node per fedlib client"):
        FedlibStrategy(spec).run(InProcessGrid(client_app, 6))
    grid = InProcessGrid(client_app, 5)
    next(iter(grid.contexts.values())).node_config = {}
    with pytest.raises(ValueError, match="has no 'partition-id'"):
        FedlibStrategy(spec).run(grid)
    grid = InProcessGrid(client_app, 5)
    for context in grid.contexts.values():
        context.node_config = {**context.node_config, "partition-id": 0}
    with pytest.raises(ValueError, match=r"hold partitions \[0\]"):
        FedlibStrategy(spec).run(grid)


def test_a_node_refuses_another_clients_work():
    grid = InProcessGrid(client_app, 5)
    strategy = FedlibStrategy(spec_of(rounds=1))
    (msg, *_), = [list(strategy.configure_train(1, None, None, grid))]
    wrong = next(c for c in grid.contexts.values() if c.node_id != msg.metadata.dst_node_id)
    with pytest.raises(ValueError, match="was sent the work of client"):
        client_app(msg, wrong)


def test_a_query_reports_the_partition():
    grid = InProcessGrid(client_app, 2)
    node, context = next(iter(grid.contexts.items()))
    reply = client_app(Message(RecordDict(), dst_node_id=node, message_type=MessageType.QUERY), context)
    assert reply.content["fedlib"]["partition-id"] == context.node_config["partition-id"]
    assert isinstance(context, Context)


def test_ray_simulation_with_two_workers_gives_the_record(ray_if_it_starts):
    """Flower's simulation engine (run_simulation, Ray, 2 actors, on the Ray this test process started, which it
    leaves running): client apps in other processes, state in the engine's node contexts. Equal to 1e-6 relative
    (bitwise here: dense model, one thread; a convolutional model's thread count may differ in an actor); bits and
    counts exactly."""
    import ray

    spec = spec_of("scaffold", uplink=("stc", {"frac": 0.2, "error_feedback": True}),
                   downlink=("uniform", {"bits": 8, "rounding": "stochastic", "payload": "update"}))
    (got,) = run_in_simulation([spec], workers=2)
    assert ray.is_initialized()  # the Ray this test process started, left running
    ref = reference(spec)
    same_records(ref, got, rtol=1e-6)
    for column in ("bits_up", "bits_down", "payload_bits_up", "clients"):
        np.testing.assert_array_equal(ref["rounds"][column], got["rounds"][column])


def test_the_simulation_starts_ray_as_flower_would_retrying_a_start_that_times_out(monkeypatch):
    """Where no Ray runs, run_in_simulation starts it through fedlib.ray_start (retried on a busy machine) with
    the arguments Flower's backend would use (its init_args, no dashboard, this process's import path for the
    actors), before Flower's engine, which then runs on it."""
    ray = pytest.importorskip("ray")
    import sys

    import fedlib.flower.simulation as simulation

    starts = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(simulation, "start_local_ray", lambda **init_args: starts.append(init_args))
    monkeypatch.setattr(simulation, "run_simulation", lambda *args, **kwargs: None)  # an engine that runs nothing
    with pytest.raises(RuntimeError, match="the simulation finished 0 of 1 specs"):
        run_in_simulation([spec_of(rounds=1)], workers=3)
    (init_args,) = starts
    assert init_args["num_cpus"] == 3 and init_args["include_dashboard"] is False
    assert init_args["runtime_env"]["env_vars"]["PYTHONPATH"].split(os.pathsep)[:len(sys.path)] == sys.path


APP_FOLDER = Path(__file__).resolve().parents[1] / "flower-app"


def _app_module():
    """The app folder's own module, imported from the folder as Flower's runtimes import it."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("fedlib_flower_app", APP_FOLDER / "fedlib_flower_app.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _sized(app):
    """`app` behind Flower's own message_size_mod, which reads every record of both messages."""
    from flwr.clientapp.mod import message_size_mod

    return lambda msg, context: message_size_mod(msg, context, app)


def test_the_flower_app_folder_gives_run_federations_record(tmp_path):
    """flower-app/ as `flwr run flower-app` loads it: its pyproject.toml passes Flower's own validation (the
    components importable from the folder), its run config as Flower fuses it (the spec file read from the
    folder, `out` overridden as --run-config does), its ServerApp and ClientApp (behind message_size_mod) on a
    grid in this process; the record tables written equal run_federation's on the folder's spec."""
    import json

    from flwr.cli.config_utils import load_and_validate
    from flwr.common.config import get_fused_config_from_dir

    config, _ = load_and_validate(APP_FOLDER / "pyproject.toml")
    assert config["project"]["dependencies"][-1].startswith("fedlib-companion")
    run_config = get_fused_config_from_dir(APP_FOLDER, {"out": str(tmp_path / "records")})
    module = _app_module()
    spec = RunSpec.from_json(json.loads((APP_FOLDER / str(run_config["spec"])).read_text()))
    grid = InProcessGrid(_sized(module.client_app), spec.split.args["num_clients"], seed=2)
    module.server_app(grid, Context(run_id=1, node_id=0, node_config={}, state=RecordDict(), run_config=run_config))
    ref = reference(spec)
    assert {p.stem for p in (tmp_path / "records").glob("*.csv")} == set(ref)
    for name in ("rounds", "clients"):
        stored = pd.read_csv(tmp_path / "records" / f"{name}.csv")
        np.testing.assert_array_equal(stored["bits_up"], ref[name]["bits_up"])
        np.testing.assert_allclose(stored["loss" if name == "clients" else "test_acc"],
                                   ref[name]["loss" if name == "clients" else "test_acc"], rtol=1e-12)


@pytest.mark.slow
def test_flwr_run_in_local_simulation_gives_run_federations_record(tmp_path):
    """The README's command, as a user types it: `python -m fedlib.flower.local_run flower-app` runs `flwr run
    flower-app local` (a local SuperLink in simulation mode, Ray, 5 SuperNodes) and exits 0 for a completed run;
    the CSV tables it writes equal run_federation's on the folder's spec, written the same way, in every column but
    the timings. Slow (a Ray start, about a minute on an idle 2-core machine; on a busy one Ray's raylet can time
    out starting, docs/flower.md): `pytest -m slow`."""
    import io
    import json
    import subprocess
    import sys

    out = tmp_path / "records"
    done = subprocess.run([sys.executable, "-m", "fedlib.flower.local_run", str(APP_FOLDER), "--timeout", "600",
                           "--federation-config", "num-supernodes=5", "--run-config", f'out="{out}"'],
                          cwd=APP_FOLDER.parent, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0 and "fedlib: quickstart, 3 rounds" in done.stdout, done.stdout + done.stderr
    ref = reference(RunSpec.from_json(json.loads((APP_FOLDER / "spec.json").read_text())))
    assert {p.stem for p in out.glob("*.csv")} == set(ref)
    for name, table in ref.items():
        expected = pd.read_csv(io.StringIO(table.to_csv(index=False)))
        got = pd.read_csv(out / f"{name}.csv")
        pd.testing.assert_frame_equal(got.drop(columns=[c for c in TIMING if c in got]),
                                      expected.drop(columns=[c for c in TIMING if c in expected]), check_exact=True)


def test_the_app_refuses_a_missing_spec_and_a_relative_out_folder(tmp_path):
    from fedlib.flower.app import run_app

    grid = InProcessGrid(client_app, 5)
    for run_config, folder, error in (({}, None, "has no 'spec'"),
                                      ({"spec": str(tmp_path / "none.json")}, None, "no file"),
                                      ({"spec": "none.json"}, tmp_path, f"no file {tmp_path / 'none.json'}"),
                                      ({"spec": str(APP_FOLDER / "spec.json"), "out": "records"}, None,
                                       "give an absolute folder")):
        with pytest.raises(ValueError, match=error):
            run_app(grid, run_config, folder)


@pytest.mark.parametrize("content, problem", [
    ("{not json", "is not a readable JSON file (Expecting property name"),
    ("", "is not a readable JSON file (Expecting value"),
    ("[1, 2]", "is not a run spec (a run spec is a JSON object, this file holds a list"),
    ('{"experiment": "quickstart"}', "is not a run spec (run spec JSON has keys ['experiment']"),
    ('{"experiment": "q", "dataset": "d", "split": 1, "model": 1, "algorithm": 1, "uplink": 1, "downlink": 1, '
     '"rounds": 1, "seed": 0, "local": {}, "loop": {}, "options": {}, "labels": {}, "device": "cpu"}',
     "is not a run spec (TypeError: 'int' object is not subscriptable"),
], ids=["invalid-json", "empty", "a-list", "a-partial-spec", "numbers-for-components"])
def test_the_app_names_a_spec_file_that_is_not_a_run_spec(tmp_path, content, problem):
    """Invalid JSON was a JSONDecodeError naming no file."""
    from fedlib.flower.app import run_app

    path = tmp_path / "spec.json"
    path.write_text(content)
    with pytest.raises(ValueError, match=rf"^run config 'spec': {path} {re.escape(problem)}.*json.dumps\(spec.to_json"):
        run_app(InProcessGrid(client_app, 5), {"spec": "spec.json"}, tmp_path)


def test_flowers_size_mod_accepts_every_fedlib_message():
    """message_size_mod counts the bytes of every ConfigRecord value and raises on an empty string or bytes:
    fedlib's train, query and reply messages carry none, and the record is unchanged behind the mod."""
    spec = spec_of(rounds=2)
    same_records(run_in_process(spec), FedlibStrategy(spec).run(InProcessGrid(_sized(client_app), 5)))


def _freeloader_spec(sampler) -> RunSpec:
    return RunSpec.make("taco", "digits", ("dirichlet", {"num_clients": 5, "alpha": 0.5, "min_size": 10}),
                        ("mlp", {"hidden": [12]}), ("fedavg", {}), 6, 0,
                        local={"lr": 0.05, "batch_size": 16, "steps": 2}, sampler=("uniform", {"clients": sampler}),
                        client_behavior=("freeloaders", {"count": 2}))


def test_previous_update_freeloaders_under_partial_participation_are_warned_on_both_sides():
    """A freeloader that missed the round before has no w_(t-1) in its own context: Flower's record differs from
    run_federation's, and the server and the client app each say so, naming the case; under full participation
    neither warns and the records are equal."""
    from fedlib.flower.caveats import FlowerParityWarning

    partial = _freeloader_spec(2)
    with pytest.warns(FlowerParityWarning) as caught:
        got = run_in_process(partial)
    messages = [str(w.message) for w in caught if issubclass(w.category, FlowerParityWarning)]
    assert any(m.startswith("Flower parity (server): 'previous_update' freeloader(s)") for m in messages)
    assert any(m.startswith("Flower parity (client app): 'previous_update' freeloader(s)") for m in messages)
    with pytest.raises(AssertionError):
        same_records(reference(partial), got)  # the warned difference is real

    full = _freeloader_spec(1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FlowerParityWarning)
        same_records(reference(full), run_in_process(full))


def test_threads_auto_with_a_convolutional_model_is_warned_for_other_processes():
    """threads "auto" resolved to more than one thread here (a convolutional model) is warned; one thread here,
    or a count the spec pins (set in every process), is not."""
    from fedlib.flower.caveats import FlowerParityWarning, warn_thread_count

    conv = RunSpec.make("quickstart", "digits", ("iid", {"num_clients": 2}), ("cnn", {}), ("fedavg", {}), 1, 0,
                        local={"lr": 0.05, "batch_size": 16, "steps": 1})
    with pytest.warns(FlowerParityWarning, match=r"threads 'auto' is 4 threads in this process .* Flower's "
                                                 r"simulation engine .* loop: \{threads: 1\}"):
        warn_thread_count(build_run(conv), 4, "Flower's simulation engine")
    with warnings.catch_warnings():
        warnings.simplefilter("error", FlowerParityWarning)
        warn_thread_count(build_run(conv), 1, "Flower's simulation engine")
        warn_thread_count(build_run(conv.with_(loop=(("threads", 4),))), 4, "Flower's simulation engine")


def test_without_flower_the_import_says_what_to_install(monkeypatch):
    import importlib
    import importlib.util
    import sys

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flwr" else real(name, *a))
    monkeypatch.delitem(sys.modules, "fedlib.flower")
    with pytest.raises(ImportError, match=r"pip install -e \".\[flower\]\""):
        importlib.import_module("fedlib.flower")


def test_the_apps_hyperparameters_are_run_config_keys_equal_to_its_spec_and_an_override_reaches_the_run(tmp_path):
    """flower-app/'s [tool.flwr.app.config] declares the spec's hyper-parameters as Flower's baselines do; as
    declared they leave spec.json as it is, and `--run-config 'num-server-rounds=2 lr=0.1'` (fused as Flower fuses
    it) runs 2 rounds at lr 0.1: the record equals run_federation's on the spec with those two values."""
    import json

    from flwr.common.config import get_fused_config_from_dir

    from fedlib.flower.app import HYPERPARAMETERS, run_app, with_run_config

    spec = RunSpec.from_json(json.loads((APP_FOLDER / "spec.json").read_text()))
    declared = get_fused_config_from_dir(APP_FOLDER, {})
    assert set(HYPERPARAMETERS) <= set(declared) and with_run_config(spec, declared) == spec
    fused = get_fused_config_from_dir(APP_FOLDER, {"num-server-rounds": 2, "lr": 0.1})
    changed = with_run_config(spec, fused)
    assert (changed.rounds, changed.get("local")["lr"]) == (2, 0.1) and changed.with_(rounds=3, local=spec.local) == spec
    grid = InProcessGrid(client_app, spec.split.args["num_clients"], seed=2)
    records = run_app(grid, {**fused, "spec": str(APP_FOLDER / "spec.json")})
    ref = reference(changed)
    assert len(records["rounds"]) == 2
    np.testing.assert_allclose(records["rounds"]["test_acc"], ref["rounds"]["test_acc"], rtol=1e-12)
    np.testing.assert_array_equal(records["rounds"]["bits_up"], ref["rounds"]["bits_up"])


@pytest.mark.parametrize("override, error", [
    ({"lr": "fast"}, "run config 'lr' = 'fast': give a number"),
    ({"num-server-rounds": 2.5}, "run config 'num-server-rounds' = 2.5: give an integer"),
    ({"seed": True}, "run config 'seed' = True: give an integer"),
])
def test_a_hyperparameter_of_the_wrong_type_is_named(override, error):
    import json

    from fedlib.flower.app import with_run_config

    spec = RunSpec.from_json(json.loads((APP_FOLDER / "spec.json").read_text()))
    with pytest.raises(ValueError, match=re.escape(error)):
        with_run_config(spec, override)


def test_clients_per_round_sets_a_uniform_sampler_and_refuses_another_one():
    import json

    from fedlib.flower.app import with_run_config

    spec = RunSpec.from_json(json.loads((APP_FOLDER / "spec.json").read_text()))
    assert with_run_config(spec.with_(sampler=None), {"clients-per-round": 2}).sampler.args == {"clients": 2}
    epochs = spec.with_(local=freeze({"lr": 0.05, "batch_size": 16, "epochs": 1.0}, "local"))
    assert with_run_config(epochs, {"local-steps": 4}).get("local") == {"lr": 0.05, "batch_size": 16, "steps": 4}
    with pytest.raises(ValueError, match="the spec samples with 'stratified'"):
        with_run_config(spec.with_(sampler=Component.of("stratified", {"per_round_inferior": 1})),
                        {"clients-per-round": 2})


def test_a_ray_the_caller_started_outlives_the_simulation_and_one_started_for_it_does_not(monkeypatch):
    """Flower's engine ends with `ray.shutdown()`: skipped while it runs on the caller's Ray, called on a Ray that
    run_in_simulation started (the end-to-end case: test_ray_simulation_with_two_workers_gives_the_record)."""
    ray = pytest.importorskip("ray")
    from fedlib.flower.simulation import _ray_kept

    calls = []
    monkeypatch.setattr(ray, "shutdown", lambda: calls.append("shutdown"))
    with _ray_kept(True):
        ray.shutdown()
    assert calls == [] and ray.shutdown() is None and calls == ["shutdown"]  # restored after the block
    with _ray_kept(False):
        ray.shutdown()
    assert calls == ["shutdown"] * 2
