"""The dry run: grids built and run one round on fabricated files, step counts by hand, failures reported."""
from __future__ import annotations

import io
import re
from pathlib import Path

import pytest

from fedlib.dryrun import (
    combination, dry_run, full_size_steps, main, notebook_names, notebooks_folder, one_round,
)
from fedlib.grids import notebook_parameters, notebook_specs
from fedlib.runs import RunSpec
from fedlib.runs.build import build_run


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
    assert "client-steps/s (whole runs measured on one H200)" in text and "FAILED" not in text


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
    assert small.sampler == spec.sampler


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
