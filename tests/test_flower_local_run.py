"""`python -m fedlib.flower.local_run` (the README's way to run flower-app/ in Flower's local simulation): a run
that fails exits non-zero, and nothing it started keeps running (`flwr run` itself exits 0 on a failed run and its
local SuperLink detaches, with Ray's processes and client apps when a run fails). fedlib.processes finds what a
command started by a mark in the environment; the checks here look for leftovers with psutil where it is
installed (independently of fedlib.processes), else with fedlib.processes itself."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from fedlib.processes import marked_processes, require_proc, stop_marked

ROOT = Path(__file__).resolve().parent.parent
TEST_MARK = "FEDLIB_TEST_MARK"


def remaining(mark: str) -> list[int]:
    """The live processes whose environment sets TEST_MARK to `mark`."""
    try:
        import psutil
    except ImportError:
        return marked_processes(mark, TEST_MARK)
    found = []
    for proc in psutil.process_iter():
        try:
            if proc.pid != os.getpid() and proc.status() != psutil.STATUS_ZOMBIE \
                    and proc.environ().get(TEST_MARK) == mark:
                found.append(proc.pid)
        except (psutil.NoSuchProcess, psutil.AccessDenied, psutil.ZombieProcess):
            continue
    return found


def kept_flower_home(stderr: str) -> Path:
    """The Flower home a failed run kept, as its last line names it (deleted here: a test's litter)."""
    home = Path(re.search(r"the local SuperLink's log: (\S+)/local-superlink/superlink\.log", stderr).group(1))
    shutil.rmtree(home)
    return home


@pytest.fixture
def mark():
    """A fresh mark; whatever still carries it after the test is stopped (and failed the test's assertion)."""
    require_proc()
    value = uuid.uuid4().hex
    yield value
    stop_marked(value, variable=TEST_MARK)


def test_a_marked_process_is_found_and_stopped_even_detached(mark):
    env = {**os.environ, TEST_MARK: mark}
    detached = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"], env=env,
                                start_new_session=True)
    unmarked = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(300)"])
    try:
        assert remaining(mark) == [detached.pid] == marked_processes(mark, TEST_MARK)
        assert stop_marked(mark, grace_s=5.0, variable=TEST_MARK) == [detached.pid]
        detached.wait(timeout=10)
        assert remaining(mark) == [] and unmarked.poll() is None  # an unmarked process is left alone
    finally:
        unmarked.kill()
        unmarked.wait()


def test_a_failing_flwr_run_exits_non_zero_and_leaves_no_process(mark, tmp_path):
    """The app's spec is missing: the run fails after Flower's local SuperLink, its simulation process and Ray
    have started (Ray may even time out starting on a busy machine: a failure all the same). One Ray CPU, one
    client app actor: the least Ray the run can start."""
    pytest.importorskip("flwr")
    env = {**os.environ, TEST_MARK: mark}
    done = subprocess.run([sys.executable, "-m", "fedlib.flower.local_run", "flower-app", "--timeout", "300",
                           "--federation-config", "num-supernodes=5 init-args-num-cpus=1 client-resources-num-cpus=1",
                           "--run-config", f'spec="{tmp_path / "missing.json"}"'],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "fedlib.flower.local_run: FAILED: " in done.stderr, done.stdout + done.stderr
    assert kept_flower_home(done.stderr).name.startswith("fedlib-flwr-home-")
    assert remaining(mark) == []


def test_a_run_past_its_timeout_is_stopped_with_what_it_started(mark):
    pytest.importorskip("flwr")
    done = subprocess.run([sys.executable, "-m", "fedlib.flower.local_run", "flower-app", "--timeout", "3",
                           "--federation-config", "num-supernodes=5"], cwd=ROOT,
                          env={**os.environ, TEST_MARK: mark}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "fedlib.flower.local_run: FAILED: the run did not end within 3 s (--timeout)" in done.stderr, done.stderr
    kept_flower_home(done.stderr)
    assert remaining(mark) == []


@pytest.mark.parametrize("args, error", [
    (["no-such-folder"], "app folder 'no-such-folder': no pyproject.toml there"),
    (["flower-app", "--timeout", "0"], "--timeout 0: give a positive number of seconds"),
])
def test_a_wrong_command_is_one_line_naming_it(args, error, capsys, monkeypatch):
    pytest.importorskip("flwr")
    from fedlib.flower.local_run import main

    monkeypatch.chdir(ROOT)
    with pytest.raises(SystemExit) as stopped:
        main(args)
    assert stopped.value.code == 2 and error in capsys.readouterr().err.splitlines()[-1]
