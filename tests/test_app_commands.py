"""`python -m fedlib`: its commands listed, an unknown one refused in one line, every command's --help, and each
command doing what its older entry point does (scripts/reproduce.py, python -m fedlib.runs, reproduce --piece)."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from fedlib.app import reproduce
from fedlib.app.commands import COMMANDS, main
from fedlib.runs import cli as store_cli

ROOT = Path(__file__).resolve().parents[1]


def test_help_lists_every_command():
    done = subprocess.run([sys.executable, "-m", "fedlib", "--help"], capture_output=True, text=True, cwd=ROOT)
    assert done.returncode == 0
    listed = [line.split()[0] for line in done.stdout.splitlines() if line.startswith("  ")]
    assert listed == ["reproduce", "dry-run", "piece", "from-ledger", "store", "ledger"] == list(COMMANDS)


def test_no_command_prints_the_list_and_fails(capsys):
    assert main([]) == 2
    assert "from-ledger" in capsys.readouterr().err


@pytest.mark.parametrize("given", ["reproduc", "--profile"])
def test_an_unknown_command_is_refused_in_one_line_naming_it(given, capsys):
    assert main([given, "--only", "quickstart"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"unknown command '{given}'" in err and "reproduce, dry-run" in err


@pytest.mark.parametrize("command", list(COMMANDS))
def test_every_command_has_its_help(command, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: python -m fedlib {command} ")


def test_piece_and_from_ledger_take_only_their_own_options(capsys):
    for command, foreign in (("piece", "--select"), ("from-ledger", "--budget"), ("piece", "--piece")):
        with pytest.raises(SystemExit):
            main([command, foreign, "x"])
        assert f"unrecognized arguments: {foreign}" in capsys.readouterr().err


def test_piece_is_reproduce_piece(tmp_path, capsys):
    ledger = ["--ledger", str(tmp_path / "ledger")]
    assert reproduce.main(["--profile", "gpu", "--piece", "--budget", "-5m", *ledger]) == 2
    old = capsys.readouterr()
    assert main(["piece", "--profile", "gpu", "--budget", "-5m", *ledger]) == 2
    assert capsys.readouterr() == old and "--budget '-5m' is not a positive" in old.err
    assert main(["piece", "--profile", "gpu", *ledger]) == 2  # no budget: refused as reproduce --piece refuses it
    assert "--piece needs --budget" in capsys.readouterr().err


def test_store_prints_what_python_m_fedlib_runs_prints(tmp_path):
    store = tmp_path / "runs"
    store.mkdir()
    assert store_cli.main(["mark", "--root", str(store)]) == 0
    outputs = [subprocess.run([sys.executable, "-m", *program, "ls", "--root", str(store)], capture_output=True,
                              text=True, cwd=ROOT) for program in (["fedlib.runs"], ["fedlib", "store"])]
    assert outputs[0].returncode == outputs[1].returncode == 0
    assert outputs[0].stdout == outputs[1].stdout and "0 entries in" in outputs[0].stdout


def test_scripts_reproduce_is_python_m_fedlib_reproduce():
    helps = [subprocess.run([sys.executable, *program, "--help"], capture_output=True, text=True, cwd=ROOT).stdout
             for program in (["scripts/reproduce.py"], ["-m", "fedlib", "reproduce"])]
    assert helps[0].replace("reproduce.py", "python -m fedlib reproduce", 1).split() == helps[1].split()
