"""The dry run: grids built and run one round on fabricated files, step counts by hand, failures reported."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from fedlib.dryrun import (
    Estimate, combination, dry_run, full_size_steps, main, notebook_names, notebooks_folder, one_round,
)
from fedlib.engine.federation import run_federation
from fedlib.grids import notebook_parameters, notebook_specs
from fedlib.ledger.piece import Rates
from fedlib.runs import Component, RunSpec
from fedlib.runs.build import build_run
from fedlib.runs.spec import freeze


def test_fast_subset_fedaq_full_grid_runs(tmp_path):
    """FedAQ's full grid (18 runs on each of 3 seeds, 8 combinations: AdaQuantFL's uplink policy is one) on a small
    fabricated Fashion-MNIST."""
    out = io.StringIO()
    assert dry_run(["fedaq"], "full", steps=1, out=out, train_size=300) == 0
    text = out.getvalue()
    assert re.search(r"fedaq \(full\): 54 runs, [\d,]+ local SGD steps; 8 combinations ran one round of 1 steps: ok",
                     text)
    # 10 clients x 5 epochs x ceil(6,000 / 64) = 94 steps x 100 rounds, every client every round, 54 runs
    assert "25,380,000 local SGD steps" in text
    assert "54 run(s) with no measured rate: 25,380,000 steps on one GPU (1.8 h - 12.1 h at 3,877 - 584 " \
           "client-steps/s, the range of whole runs measured on one H200)" in text and "FAILED" not in text


def test_the_total_estimate_is_the_sum_of_the_per_run_lines():
    """At a stated rate every run is estimated: its headline runs' lines and the rest's line add up to the total,
    which is the grid's local SGD steps over the rate (FedAQ's quick grid: 13 runs of 1,500 steps, on the CPU)."""
    out = io.StringIO()
    assert dry_run(["fedaq"], "quick", steps=1, out=out, rate=20.0) == 0
    text = out.getvalue()
    per_run = [float(m) for m in re.findall(r"^ +\d+\. .*: [\d,]+ local SGD steps, ([\d.]+) min at 20 client-steps/s",
                                            text, re.M)]
    rest = re.search(r"then (\d+) runs backing no headline claim: ([\d,]+) local SGD steps, ([\d.]+) min on a CPU",
                     text)
    total = re.search(r"== total: ([\d.]+) min on a CPU for 13 run\(s\)", text)
    assert per_run and rest and total, text
    assert len(per_run) + int(rest[1]) == 13 and total[1] == f"{19_500 / 20 / 60:.1f}"  # 16.25 min, by hand
    assert sum(per_run) + float(rest[3]) == pytest.approx(float(total[1]), abs=0.05 * (len(per_run) + 1))
    assert "fedaq (quick): 13 runs, 19,500 local SGD steps" in text and "16.2 min on a CPU for 13 run(s)" in text


def test_an_estimate_counts_each_run_where_it_runs_and_names_the_runs_without_a_rate():
    gpu = RunSpec.make("quickstart", "digits", ("iid", {"num_clients": 4}), ("mlp", {}), ("fedavg", {}), 2, 0,
                       local={"lr": 0.1, "batch_size": 8, "steps": 1}, device="auto")
    estimate = Estimate()
    assert estimate.add(gpu, 6_000, Rates(100.0)) == 60.0 and estimate.add(gpu.with_(device="cpu"), 600,
                                                                          Rates(10.0)) == 60.0
    assert estimate.add(gpu.with_(seed=1), 7_754, Rates(None)) is None
    # 7,754 steps at 3,877 and at 584 client-steps/s: 2 s = 0.0 min and 13.3 s = 0.2 min
    assert estimate.text() == ("1.0 min on a CPU + 1.0 min on one GPU for 2 run(s) at their client-steps/s (measured, "
                               "or --rate); 1 run(s) with no measured rate: 7,754 steps on one GPU (0.0 min - 0.2 min "
                               "at 3,877 - 584 client-steps/s, the range of whole runs measured on one H200)")


def test_a_grid_that_cannot_build_fails_with_its_spec(tmp_path):
    """quickstart's full grid splits CIFAR-10 over 100 clients by Dirichlet(0.1) with >= 10 samples each: 300
    fabricated images cannot give that, and the dry run says so and exits 1."""
    out = io.StringIO()
    assert dry_run(["quickstart"], "full", out=out, train_size=300) == 1
    text = out.getvalue()
    assert "9 FAILED" in text and "build failed for ('cifar10', 'cnn', 'fedavg', 'fp32', 'fp32')" in text
    assert "min_size=10 per client is impossible with 300 samples and 100 clients" in text


def test_client_steps_by_hand(tmp_path):
    from fedlib.data.fabricate import fabricate

    fabricate("fashion_mnist", tmp_path, 400, 10)
    steps_spec = RunSpec.make("quickstart", "fashion_mnist", ("iid", {"num_clients": 8}), ("mlp", {}), ("fedavg", {}),
                              7, 0, local={"lr": 0.1, "batch_size": 16, "steps": 5},
                              sampler=("uniform", {"clients": 0.5}))
    assert full_size_steps(steps_spec, build_run(steps_spec, tmp_path)) == 7 * 4 * 5
    # epochs: each of 8 clients holds 50 of the 400 fabricated samples = 7,500 of the real 60,000;
    # 2 epochs of ceil(7,500 / 16) = 469 steps; 3 of 8 clients per round
    epochs_spec = steps_spec.with_(local=(("batch_size", 16), ("epochs", 2.0), ("lr", 0.1)),
                                   sampler=steps_spec.sampler.of("uniform", {"clients": 3}))
    assert full_size_steps(epochs_spec, build_run(epochs_spec, tmp_path)) == 7 * 3 * 2 * 469


def test_one_round_keeps_everything_but_the_amount_of_work():
    spec = RunSpec.make("mucsc", "cifar10", ("iid", {"num_clients": 100}), ("allcnn_c", {}), ("fedavg", {}), 1250, 3,
                        local={"lr": 0.5, "batch_size": 8, "epochs": 5.0}, sampler=("uniform", {"clients": 10}),
                        loop={"threads": 8},
                        device="auto")
    small = one_round(spec, 2)
    assert (small.rounds, small.device, small.get("local"), small.get("loop")) == (
        1, "cpu", {"lr": 0.5, "batch_size": 8, "steps": 2}, {"threads": 1})
    assert combination(small) == combination(spec) and small.seed == 3 and small.split == spec.split
    assert small.sampler == Component.of("uniform", {"clients": 2})  # 2 of the 10 it samples a round train


def test_a_one_round_rate_trains_the_first_two_clients_both_whatever_the_algorithm(tmp_path, monkeypatch):
    """A round of the federation's first 2 clients, both training: TACO (which refuses a round without every client)
    runs as FedAvg does, on 2 clients' steps whatever the grid's client count; a failing spec raises its error."""
    import fedlib.dryrun as dryrun

    rounds = []

    def recorded(model_fn, data, **kwargs):
        result = run_federation(model_fn, data, **kwargs)
        rounds.append((data.num_clients, int(result.clients["steps"].sum())))
        return result

    monkeypatch.setattr(dryrun, "run_federation", recorded)
    taco = RunSpec.make("quickstart", "digits", ("iid", {"num_clients": 6}), ("mlp", {"hidden": [8]}), ("taco", {}),
                        5, 0, local={"lr": 0.05, "batch_size": 8, "steps": 3}, sampler=("uniform", {"clients": 6}))
    assert dryrun.one_round_rate(taco, 3, tmp_path) > 0
    assert dryrun.one_round_rate(taco.with_(algorithm=Component.of("fedavg")), 3, tmp_path) > 0
    assert rounds == [(2, 6), (2, 6)]
    with pytest.raises(ValueError, match="batch_size"):
        dryrun.one_round_rate(taco.with_(local=freeze({"lr": 0.05, "batch_size": 0, "steps": 3}, "local")), 3,
                              tmp_path)


def test_unknown_notebook_and_bad_steps():
    with pytest.raises(ValueError, match="unknown notebook"):
        dry_run(["tacos"])
    with pytest.raises(ValueError, match="steps must be >= 1"):
        dry_run(["taco"], steps=0)
    with pytest.raises(SystemExit):
        main(["--only", "tacos"])


def test_the_notebooks_folder_is_given_or_found_or_named_as_missing(tmp_path, monkeypatch, capsys):
    """Outside any checkout (`checkout` finds none) the working folder or its notebooks/ is looked at; a folder
    that is not one, and no folder at all, are usage errors naming what was looked for."""
    import shutil

    import fedlib.dryrun as dryrun

    monkeypatch.setattr(dryrun, "checkout", lambda: None)
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(["--only", "quickstart"])
    assert exit_.value.code == 2
    assert f"no notebooks folder found (looked in {tmp_path}, {tmp_path / 'notebooks'})" in capsys.readouterr().err
    (tmp_path / "notebooks" / "profiles").mkdir(parents=True)
    shutil.copy(Path(__file__).resolve().parents[1] / "notebooks" / "quickstart.py", tmp_path / "notebooks")
    assert notebooks_folder() == tmp_path / "notebooks" and notebook_names(tmp_path / "notebooks") == ("quickstart",)
    with pytest.raises(SystemExit):
        main(["--only", "taco"])
    assert "unknown notebook(s) ['taco'] in" in capsys.readouterr().err
    for both in (["--only", "quickstart", "taco"], ["--only", "quickstart", "--only", "taco"]):  # one convention
        with pytest.raises(SystemExit):
            main(both)
        assert "unknown notebook(s) ['taco'] in" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["--notebooks", str(tmp_path)])
    assert f"--notebooks {tmp_path}: not a notebooks folder" in capsys.readouterr().err


@pytest.mark.slow
def test_whole_full_dry_run_exits_zero():
    """Every spec of all five notebooks' full grids builds and every combination runs one round (minutes)."""
    out = io.StringIO()
    code = dry_run(notebook_names(notebooks_folder()), "full", out=out)
    print(out.getvalue())
    assert code == 0, out.getvalue()
    for notebook in notebook_names(notebooks_folder()):
        runs = len(notebook_specs(notebook, notebook_parameters(notebook, "full")))
        assert f"{notebook} (full): {runs:,} runs" in out.getvalue()


def test_a_cells_other_seeds_count_the_steps_their_own_build_counts(tmp_path):
    """The dry run builds each grid cell once and draws only the split of its other seeds: their steps are those a
    whole build of each gives (the quickstart's cpu grid: 3 cells x 3 seeds, Dirichlet splits, epochs over each
    client's share, so the steps differ by seed)."""
    from fedlib.dryrun import dry_run_notebook

    report = dry_run_notebook("quickstart", "cpu", tmp_path, 1)
    assert not report.failures and len(report.steps_of) == report.runs == 9
    first_seed = {}
    for spec in report.steps_of:
        first_seed.setdefault(spec.with_(seed=0), spec.seed)
    others = [s for s in report.steps_of if s.seed != first_seed[s.with_(seed=0)]]
    assert len(others) == 6
    assert [report.steps_of[s] for s in others] == [full_size_steps(s, build_run(s, tmp_path)) for s in others]
    assert len({report.steps_of[s] for s in others}) > 1
