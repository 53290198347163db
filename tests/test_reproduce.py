"""scripts/reproduce.py end to end on the quickstart notebook: the three phases, what stops it before any run
(bad parameters, selections, missing data, an unanswering Ray address), paths, REPORT.md and its stamps."""
from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import os
import re
import shutil
import socket
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pytest
from test_runs import same_records

from fedlib.app.options import parse_args, parse_overrides
from fedlib.app.plan import NotebookPlan, Plan, count_steps, imported_runs, print_plan
from fedlib.app.render import write_report, write_stamp
from fedlib.grids import notebook_parameters, notebook_specs
from fedlib.runs import Keys, RunStore, run_specs
from fedlib.runs.ray_runner import check_address

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["-p", "rounds", "2", "-p", "num_clients", "4", "-p", "clients_per_round", "2"]


def load_reproduce():
    """reproduce's main module, which `python -m fedlib reproduce` and scripts/reproduce.py run."""
    return importlib.import_module("fedlib.app.reproduce")


@pytest.fixture(scope="module")
def reproduce():
    return load_reproduce()


def quick(results: Path | str, *more: str) -> list[str]:
    return ["--profile", "quick", "--only", "quickstart", "--results", str(results), *SMALL, *more]


def pairs(words: list[str]) -> list[tuple[str, str]]:
    """`-p NAME VALUE ...` as (NAME, VALUE) pairs."""
    return list(zip(words[1::3], words[2::3]))


def stored_entries(results: Path) -> list[Path]:
    runs = results / "runs"
    return [p for p in runs.iterdir() if (p / "spec.json").is_file()] if runs.is_dir() else []


def test_a_bad_parameter_stops_the_plan_naming_notebook_and_parameter(reproduce, tmp_path, capsys):
    assert reproduce.main(quick(tmp_path, "-p", "lr", "-1.0")) == 2
    err = capsys.readouterr().err
    assert "notebook 'quickstart'" in err and "QuickstartParams.lr must be > 0, got -1.0" in err
    assert stored_entries(tmp_path) == [] and not (tmp_path / "REPORT.md").exists()


STAMPED = ["-p", "lr", "1e-1"]  # an override the rendered folder's report stamps (written as 0.1)


@dataclass(frozen=True)
class Rendered:
    """The module's one quick reproduce from an empty store."""
    started_in: Path  # the folder it was started from
    results: Path  # its --results, given relative to `started_in`
    printed: str
    progress: str  # what it wrote to stderr
    data_root: str  # FEDLIB_DATA as its kernels inherited it


@pytest.fixture(scope="module")
def rendered(reproduce, tmp_path_factory) -> Rendered:
    """One quick reproduce (with `STAMPED`) started in a folder of its own, with --results and FEDLIB_DATA relative to
    it, into a results folder that holds an earlier notebook's table and stamp and another profile's table. The
    tests that read a rendered folder read this one or copy it (`copy_of`), so the quickstart renders once for them."""
    started_in = tmp_path_factory.mktemp("rendered")
    results = started_in / "rel"
    earlier = results / "quick" / "taco"
    earlier.mkdir(parents=True)
    (earlier / "claims.csv").write_text("claim,paper_value,measured,criterion,evidence,verdict\n"
                                        "EARLIER CLAIM,x,y,z,w,not reproduced\n")
    (earlier / "stamp.json").write_text(json.dumps({"status": "ok", "seconds": 60.0,
                                                    "stamp": "profile `quick`, commit `abc1234`, -p rounds 9"}))
    other = results / "cpu" / "quickstart"  # another profile's table is never shown
    other.mkdir(parents=True)
    (other / "claims.csv").write_text("claim,paper_value,measured,criterion,evidence,verdict\nOTHER,x,y,z,w,reproduced\n")
    with pytest.MonkeyPatch.context() as monkeypatch:
        monkeypatch.chdir(started_in)
        monkeypatch.setenv("FEDLIB_DATA", "my-data")
        with contextlib.redirect_stdout(io.StringIO()) as out, contextlib.redirect_stderr(io.StringIO()) as err:
            assert reproduce.main(quick("rel", *STAMPED)) == 0
        data_root = os.environ["FEDLIB_DATA"]
    return Rendered(started_in, results, out.getvalue(), err.getvalue(), data_root)


def copy_of(rendered: Rendered, tmp_path: Path) -> Path:
    shutil.copytree(rendered.results, tmp_path, dirs_exist_ok=True)
    return tmp_path


def test_three_phases_then_a_second_reproduce_computes_nothing_and_writes_the_same_claims(reproduce, rendered, tmp_path,
                                                                                         capsys):
    printed, progress = rendered.printed, rendered.progress
    assert "== plan: profile quick" in printed and "== compute: 3 runs" in printed and "== render: 1" in printed
    assert re.search(r"\[quickstart\] 3 runs: 0 from the store, 3 to compute; [1-9][0-9,]* local SGD steps", printed)
    assert re.search(r"^\[1/3\] .* done; elapsed .*; ETA ", progress, re.M) and "[3/3]" in progress  # a line a run
    copy_of(rendered, tmp_path)
    first = (tmp_path / "quick" / "quickstart" / "claims.csv").read_text()
    assert reproduce.main(quick(tmp_path, *STAMPED)) == 0
    out = capsys.readouterr()
    assert "[quickstart] 3 runs: 3 from the store, 0 to compute" in out.out and "== compute: 0 runs" in out.out
    assert (tmp_path / "quick" / "quickstart" / "claims.csv").read_text() == first
    # one run lost: the plan and the computing step count alike, and the run computed again gives its records
    store, keys = RunStore(tmp_path / "runs"), Keys()  # keyed as reproduce keys them (no data_root given)
    parameters = notebook_parameters("quickstart", "quick", parse_overrides(pairs(SMALL + STAMPED)))
    lost = next(keys(spec) for spec in notebook_specs("quickstart", parameters)
                if store.folder(keys(spec)) == stored_entries(tmp_path)[0])
    before = store.load(lost)
    shutil.rmtree(store.folder(lost))
    assert reproduce.main(quick(tmp_path, *STAMPED, "--select", "experiment=quickstart")) == 0  # no render
    out = capsys.readouterr()
    assert "[quickstart] 3 runs: 2 from the store, 1 to compute" in out.out and "== compute: 1 runs" in out.out
    assert "3 runs: 2 from the store" in out.err
    same_records(store.load(lost), before)


def test_make_report_publishes_the_report_and_each_rendered_notebook_as_a_page(rendered, tmp_path, capsys):
    """`make report` (scripts/publish_report.py) from a rendered folder: REPORT.html linking each notebook's page,
    every figure and the claims table in the notebook's page, an earlier publication's other pages removed; a folder
    without REPORT.md is named, with the command that renders it."""
    spec = importlib.util.spec_from_file_location("publish_report", ROOT / "scripts" / "publish_report.py")
    publish = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(publish)
    from fedlib.report_html import notebook_figures

    out = tmp_path / "pages"
    out.mkdir()
    (out / "taco.html").write_text("an earlier publication's page")
    assert publish.main(["--results", str(rendered.results), "--profile", "quick", "--out", str(out)]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["REPORT.html", "quickstart.html"]
    claims = pd.read_csv(rendered.results / "quick" / "quickstart" / "claims.csv")
    report, page = (out / "REPORT.html").read_text(), (out / "quickstart.html").read_text()
    assert '<a href="quickstart.html">' in report and "<table>" in report
    figures = notebook_figures(rendered.results / "quick" / "quickstart" / "quickstart.ipynb")
    assert figures and all(png[:200] in page for _, png in figures)
    assert all(claim.split()[0] in page for claim in claims["claim"]) and "celltag_parameters" in page
    assert publish.main(["--results", str(tmp_path / "none"), "--profile", "quick", "--out", str(out)]) == 2
    assert f"{tmp_path / 'none' / 'REPORT.md'}: missing; run `python scripts/reproduce.py --profile quick" in \
        capsys.readouterr().err


def test_claims_only_judges_the_saved_evidence_again_without_runs_or_notebooks(reproduce, rendered, tmp_path, capsys):
    copy_of(rendered, tmp_path)
    folder = tmp_path / "quick" / "quickstart"
    first = (folder / "claims.csv").read_text()
    (folder / "claims.csv").write_text("stale")
    notebook_mtime = (folder / "quickstart.ipynb").stat().st_mtime
    capsys.readouterr()
    only = ["--profile", "quick", "--only", "quickstart", "--results", str(tmp_path), "--claims-only"]
    assert reproduce.main(only) == 0
    out = capsys.readouterr().out
    assert "[quickstart] claims only: ok" in out and "== compute" not in out and "== render" not in out
    assert (folder / "claims.csv").read_text() == first
    assert (folder / "quickstart.ipynb").stat().st_mtime == notebook_mtime  # not executed again
    assert "claims judged again" in json.loads((folder / "stamp.json").read_text())["stamp"]
    assert "## quickstart" in (tmp_path / "REPORT.md").read_text()
    shutil.rmtree(folder / "evidence")
    assert reproduce.main(only) == 1
    assert "no saved evidence" in capsys.readouterr().out
    assert reproduce.main([*only, "-p", "lr", "0.1"]) == 2
    assert "--claims-only judges the saved evidence as it is" in capsys.readouterr().err


def test_claims_only_without_only_judges_the_notebooks_that_declare_claims(reproduce, tmp_path, capsys):
    for notebook in (ROOT / "notebooks").glob("*.py"):  # rendered once, no evidence saved
        (tmp_path / "quick" / notebook.stem).mkdir(parents=True)
    assert reproduce.main(["--profile", "quick", "--results", str(tmp_path), "--claims-only"]) == 1  # no evidence yet
    out = capsys.readouterr().out
    assert "[quickstart] claims only: FAILED" in out and "[taco] claims only" in out
    assert "[flower]" not in out  # no claims module: its notebook ends with a parity table


def test_relative_results_and_data_paths_are_taken_from_the_invoking_folder(reproduce, rendered, monkeypatch):
    assert len(stored_entries(rendered.results)) == 3
    assert (rendered.results / "quick" / "quickstart" / "claims.csv").is_file()
    report = (rendered.results / "REPORT.md").read_text()
    assert "no claims tables" not in report and "## quickstart" in report
    assert not (ROOT / "notebooks" / "rel").exists()
    assert rendered.data_root == str(rendered.started_in / "my-data")  # what the kernels inherited
    monkeypatch.chdir(rendered.started_in)
    assert parse_overrides([("data_root", "d")])["data_root"] == str(rendered.started_in / "d")


def test_report_stamps_overrides_and_keeps_earlier_notebooks_with_their_own_stamp(rendered):
    report = (rendered.results / "REPORT.md").read_text()
    assert "-p rounds 2, -p num_clients 4, -p clients_per_round 2, -p lr 0.1" in report.splitlines()[2]
    assert "| quickstart | ok |" in report and "by this invocation |" in report
    assert "| taco | ok | 1.0 | earlier: profile `quick`, commit `abc1234`, -p rounds 9 |" in report
    assert "EARLIER CLAIM" in report and "OTHER" not in report


@pytest.mark.parametrize("argv, message", [
    (["--select", ","], "selects nothing"),
    (["--select", ""], "selects nothing"),
    (["--select", "algo=FedAvg"], "unknown key 'algo' (did you mean 'algorithm'?)"),
    (["--select", "algorithm=fedav"], "algorithm=fedav matches no run (did you mean 'FedAvg'?); values of algorithm: "
                                      "FedAvg, FedProx, SCAFFOLD"),
    (["--select", "seed=0,seed=5"], "seed=5 matches no run"),
    (["--select", "seed"], "key=value pairs"),
    (["-p", "runs_root", "/elsewhere"], "runs_root is set by reproduce itself (use --results)"),
    (["-p", "runner", "ray"], "runner is set by reproduce itself (use --executor)"),
    (["-p", "lrr", "0.1"], "lrr (did you mean lr?)"),
    (["--workers", "0"], "--workers must be a positive integer"),
])
def test_usage_errors_stop_before_any_run(reproduce, tmp_path, capsys, argv, message):
    assert reproduce.main(quick(tmp_path, *argv)) == 2
    assert message in capsys.readouterr().err
    assert stored_entries(tmp_path) == []


def test_select_is_case_insensitive_computes_only_its_runs_and_renders_nothing(reproduce, tmp_path, capsys):
    assert reproduce.main(quick(tmp_path, "--select", "algorithm=fedavg,algorithm=scaffold")) == 0
    assert "[quickstart] 2 runs: 0 from the store, 2 to compute" in capsys.readouterr().out
    labels = sorted(json.loads((p / "spec.json").read_text())["labels"]["algorithm"] for p in stored_entries(tmp_path))
    assert labels == ["FedAvg", "SCAFFOLD"] and not (tmp_path / "REPORT.md").exists()


def test_a_missing_dataset_stops_the_plan_naming_it_and_where_it_goes(reproduce, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("FEDLIB_DATA", str(tmp_path / "empty"))
    assert reproduce.main(quick(tmp_path, "-p", "dataset", "cifar10")) == 2
    err = capsys.readouterr().err
    assert "nothing was computed" in err and "cifar10 (read by quickstart)" in err and "data/README.md" in err
    assert "load_dataset('cifar10', download=True)" in err and "pass download=True" not in err  # not an option here
    assert "bundled data only (digits, mnist5k, synthetic)" in err
    assert stored_entries(tmp_path) == []


def _unused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_a_ray_address_that_does_not_answer_is_an_error_naming_it(reproduce, tmp_path, capsys):
    address = f"127.0.0.1:{_unused_port()}"
    with pytest.raises(ConnectionError, match="does not answer"):
        check_address(address)
    with pytest.raises(ValueError, match="not host:port"):
        check_address("head-node")
    assert reproduce.main(quick(tmp_path, "--executor", "ray", "--ray-address", address)) == 2
    assert f"the Ray cluster at '{address}' does not answer" in capsys.readouterr().err


def test_a_ray_running_here_serves_a_ray_address_only_if_it_is_that_cluster(monkeypatch):
    """A Ray already running in this process (a notebook's kernel, a test process) is used for no address or its
    own; another address is refused, naming both, never passed over (the dead address: the test above)."""
    ray = pytest.importorskip("ray")
    from fedlib.runs import ray_runner

    monkeypatch.setattr(ray_runner, "check_address", lambda address: None)  # both answer
    monkeypatch.setattr(ray, "get_runtime_context", lambda: type("Context", (), {"gcs_address": "10.0.0.5:6380"}))
    for address in (None, "auto", "local", "127.0.0.1:6380"):
        ray_runner.check_running_ray(address)
    with pytest.raises(ConnectionError, match=r"Ray already runs in this process, on the cluster at '10.0.0.5:6380', "
                                              r"not at '127.0.0.1:6379'"):
        ray_runner.check_running_ray("127.0.0.1:6379")


def test_two_worker_processes_give_the_records_of_one(tmp_path):
    params = notebook_parameters("quickstart", "quick", {"rounds": 2, "num_clients": 4, "clients_per_round": 2,
                                                         "seeds": [0, 1]})
    specs = notebook_specs("quickstart", params)
    one = run_specs(specs, store=RunStore(tmp_path / "one"), progress=False)
    two = run_specs(specs, store=RunStore(tmp_path / "two"), progress=False, workers=2)
    assert len(list((tmp_path / "two").glob("*/spec.json"))) == len(specs) == 6
    clocks = ["train_s", "wall_s"]
    for table in ("rounds", "clients"):
        pd.testing.assert_frame_equal(one[table].drop(columns=clocks, errors="ignore"),
                                      two[table].drop(columns=clocks, errors="ignore"), check_exact=True)


def test_dry_run_builds_a_full_grid_on_fabricated_files(reproduce, tmp_path, capsys):
    """The full profile's runs are meant for a GPU: every spec built, no combination run a round on this CPU; the
    quick profile's are meant for a CPU: each combination runs one round, its minutes estimated here."""
    assert reproduce.main(["--profile", "full", "--only", "fedaq", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"fedaq \(full\): 54 runs, [\d,]+ local SGD steps; 0 combinations ran one round of 2 steps "
                     r"\(8 more, of runs meant for a GPU, built only;", out)
    assert "on this CPU (its one-round rates" not in out
    assert reproduce.main(["--profile", "quick", "--only", "quickstart", "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"quickstart \(quick\): \d+ runs, [\d,]+ local SGD steps; [1-9]\d* combinations ran one round "
                     r"of 2 steps: ok", out) and "built only" not in out and "on this CPU (its one-round rates" in out
    assert reproduce.main(["--profile", "full", "--only", "fedaq", "--dry-run", "-p", "rounds", "3"]) == 2


def test_the_data_root_option_is_the_root_runs_are_computed_from(reproduce, tmp_path, capsys, monkeypatch):
    """-p data_root A with FEDLIB_DATA=B: keyed with A and computed from A (before: keyed with A, computed from B)."""
    from fedlib.data import datasets
    from fedlib.data.fabricate import fabricate

    a, b = tmp_path / "a", tmp_path / "b"
    fabricate("fashion_mnist", a, n_train=200, n_test=50, seed=1)
    fabricate("fashion_mnist", b, n_train=200, n_test=50, seed=2)
    monkeypatch.setenv("FEDLIB_DATA", str(b))
    argv = quick(tmp_path / "results", "-p", "dataset", "fashion_mnist", "-p", "data_root", str(a),
                 "--select", "algorithm=fedavg")
    assert reproduce.main(argv) == 0
    (entry,) = stored_entries(tmp_path / "results")
    params = notebook_parameters("quickstart", "quick", {"rounds": 2, "num_clients": 4, "clients_per_round": 2,
                                                         "dataset": "fashion_mnist", "data_root": str(a)})
    (spec,) = [s for s in notebook_specs("quickstart", params) if s.matches({"algorithm": ["fedavg"]})]
    expected = run_specs([spec], store=RunStore(tmp_path / "fresh"), root=a, progress=False)
    assert entry.name == Keys(a)(spec).key
    stored = pd.read_csv(entry / "rounds.csv")
    assert stored["test_loss"].tolist() == expected["rounds"]["test_loss"].tolist()
    datasets._load_cached.cache_clear()


def test_a_broken_earlier_stamp_is_named_and_skipped(reproduce, tmp_path, capsys):
    profile = tmp_path / "cpu"
    for name, text in (("taco", ""), ("fedaq", "{not json"), ("mucsc", json.dumps({"status": "ok", "seconds": 6.0,
                                                                                   "stamp": "earlier stamp"}))):
        (profile / name).mkdir(parents=True)
        (profile / name / "stamp.json").write_text(text)
    report = write_report(tmp_path, profile, "this header", [])
    text = report.read_text()
    err = capsys.readouterr().err
    assert f"{profile / 'taco' / 'stamp.json'} is not a readable stamp" in err and "fedaq" in err
    assert f"| taco | unknown: unreadable {profile / 'taco' / 'stamp.json'} | - |" in text  # no "nan" minutes
    assert "| mucsc | ok | 0.1 | earlier: earlier stamp |" in text


def test_a_stamp_is_written_whole_or_not_at_all(reproduce, tmp_path, monkeypatch):
    import errno
    import os

    write_stamp(tmp_path, "ok", 60.0, "first")

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)  # the disk fills while the new stamp is written
    with pytest.raises(OSError, match=f"cannot write {tmp_path / 'stamp.json'} .No space left"):
        write_stamp(tmp_path, "ok", 1.0, "second")
    assert json.loads((tmp_path / "stamp.json").read_text())["stamp"] == "first"
    assert [p.name for p in tmp_path.iterdir()] == ["stamp.json"]


def test_claims_only_for_a_notebook_never_rendered_gives_a_failed_row_naming_the_folder(reproduce, tmp_path, capsys):
    assert reproduce.main(["--profile", "quick", "--results", str(tmp_path), "--claims-only"]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in err and "[quickstart] claims only: FAILED" in out
    report = (tmp_path / "REPORT.md").read_text()
    assert f"| quickstart | FAILED: {tmp_path / 'quick' / 'quickstart' / 'evidence' / 'manifest.json'}: no saved " \
           "evidence" in report


@pytest.mark.parametrize("argv, message", [
    (["-p", "rounds", "010"], "-p rounds '010', line 1, column 1: '010' is read differently by YAML versions"),
    (["-p", "rounds", "1:5"], "-p rounds '1:5', line 1, column 1: '1:5' is read differently"),
    (["-p", "seeds", "[0, 1"], "-p seeds '[0, 1', line 1, column 6"),
    (["-p", "seeds", "[&a [1], *a]"], "anchors and aliases (& and *) are not accepted"),
])
def test_yaml_values_are_read_strictly_naming_the_option(reproduce, tmp_path, capsys, argv, message):
    assert reproduce.main(quick(tmp_path, *argv)) == 2
    err = capsys.readouterr().err
    assert message in err and "<unicode string>" not in err and "Traceback" not in err
    assert stored_entries(tmp_path) == []


def test_more_threads_than_the_machine_runs_is_a_usage_error(reproduce, tmp_path, capsys):
    argv = ["--profile", "quick", "--only", "fedaq", "--results", str(tmp_path), "-p", "threads", "100000"]
    assert reproduce.main(argv) == 2
    err = capsys.readouterr().err
    assert "notebook 'fedaq': threads 100000 is more than this machine runs" in err and "-p threads" in err
    assert stored_entries(tmp_path) == []


def test_workers_are_capped_by_the_runs_and_the_cores_with_a_message(reproduce, tmp_path, capsys):
    assert reproduce.main(quick(tmp_path, "--workers", "1000", "--select", "algorithm=fedavg")) == 0
    out = capsys.readouterr().out
    assert "--workers 1000: 1 started (1 runs" in out and "== compute: 1 runs (local, 1 worker(s))" in out


def test_local_workers_follow_each_runs_threads_on_a_cpu(reproduce, tmp_path, monkeypatch):
    """Without --workers, a CPU runs one-thread runs one per core and runs on every core one at a time; a given
    --workers, a GPU or Ray leave the runs in one group."""
    import fedlib.app.reproduce as app
    from fedlib.runs import pool

    params = notebook_parameters("quickstart", "quick", {"rounds": 2, "num_clients": 4, "clients_per_round": 2})
    specs = notebook_specs("quickstart", params)
    plan = Plan([NotebookPlan("quickstart", params, specs)])
    store = RunStore(tmp_path / "runs")
    run_specs(specs[:1], store=store, progress=False)  # one of them in the store already
    monkeypatch.setattr(pool.os, "cpu_count", lambda: 2)
    monkeypatch.setattr(app, "run_threads", lambda spec, root: 2 if spec == specs[0] else 1)
    groups = app._worker_groups(parse_args(["--profile", "quick"]), plan, store, gpus=0)
    # (threads, workers) -> (runs, runs to compute): two one-thread runs on 2 workers, the stored run's group idle
    assert {key[1:]: (len(all_), len(todo)) for key, (all_, todo) in groups.items()} == {(2, 1): (1, 0), (1, 2): (2, 2)}
    for given, gpus in ((["--workers", "3"], 0), ([], 1), (["--executor", "ray"], 0)):
        one = app._worker_groups(parse_args(["--profile", "quick", *given]), plan, store, gpus=gpus)
        assert [(all_, todo) for all_, todo in one.values()] == [(specs, specs[1:])], given


def test_store_counts_name_runs_shared_with_another_notebook_of_the_plan(reproduce, tmp_path, capsys):
    params = notebook_parameters("quickstart", "quick", {"rounds": 2, "num_clients": 4, "clients_per_round": 2})
    specs = notebook_specs("quickstart", params)
    plan = Plan([NotebookPlan("first", params, specs),
                           NotebookPlan("second", params, [*specs[:2], specs[0].with_(seed=9)])])
    store = RunStore(tmp_path / "runs")
    store.save(Keys()(specs[1]), {"rounds": pd.DataFrame({"round": [0]})})
    count_steps(plan, store)
    print_plan(plan, "quick")
    out = capsys.readouterr().out
    assert f"[first] {len(specs)} runs: 1 from the store, {len(specs) - 1} to compute" in out
    assert "[second] 3 runs: 1 from the store, 1 shared with first (computed there), 1 to compute" in out


def test_a_ray_address_that_accepts_connections_but_is_no_ray_times_out(tmp_path):
    """Something listens at the port (no Ray): ray.init would wait minutes; the probe gives up after its timeout."""
    pytest.importorskip("ray")
    from fedlib.runs.ray_runner import init_ray

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        address = f"127.0.0.1:{server.getsockname()[1]}"
        with pytest.raises(ConnectionError, match=f"Ray at '{address}' did not answer within 5 s"):
            init_ray(address, timeout=5)


def test_the_report_says_which_notebooks_rest_on_imported_runs(reproduce, tmp_path):
    from fedlib.runs.archive import export_entries, import_entries

    params = notebook_parameters("quickstart", "quick", {"rounds": 2, "num_clients": 4, "clients_per_round": 2})
    specs = notebook_specs("quickstart", params)
    elsewhere, here = RunStore(tmp_path / "elsewhere"), RunStore(tmp_path / "runs")
    run = Keys()(specs[0])
    elsewhere.save(run, {"rounds": pd.DataFrame({"round": [0]})})
    export_entries(elsewhere, [elsewhere.folder(run)], tmp_path / "grid.tar")
    import_entries(here, tmp_path / "grid.tar")
    plan = Plan([NotebookPlan("quickstart", params, specs)])
    lines = imported_runs(plan, here)
    assert lines == [f"Runs imported from another machine: [quickstart] 1 of {len(specs)} (from grid.tar); its claims "
                     "rest on them."]
    report = write_report(tmp_path, tmp_path / "quick", "header", [], lines).read_text()
    assert lines[0] in report


def test_only_takes_names_after_it_and_repeated(reproduce):
    """--only a b and --only a --only b name the same notebooks (a repeated --only used to keep only the last)."""
    for argv in (["--only", "taco", "fedaq"], ["--only", "taco", "--only", "fedaq"], ["--only", "taco", "fedaq", "taco"]):
        assert parse_args(argv).only[:2] == ["taco", "fedaq"]
    with pytest.raises(SystemExit):
        parse_args(["--only"])  # a name is required after it
