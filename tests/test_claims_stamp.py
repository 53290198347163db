"""The stamp beside a claims table: the evidence hashed at rendering, a re-judge that says when the evidence changed
since, and never nests the stamp text."""
from __future__ import annotations

import json

import pandas as pd

from fedlib.app.render import judge_again, write_stamp
from fedlib.claims import evidence
from fedlib.papers.quickstart import QuickstartParams
from fedlib.papers.quickstart.claims import bundle, claims


def _rendered(folder) -> None:
    """A quickstart table saved with its evidence, as a rendering leaves it."""
    rows = [{"algorithm": a, "seed": s, "round": r, "test_acc": acc, "test_loss": 1.0, "train_loss": 1.0}
            for a, accs in {"FedAvg": [0.8, 0.82, 0.81], "SCAFFOLD": [0.86, 0.87, 0.89],
                            "FedProx": [0.801, 0.819, 0.812]}.items() for s, acc in enumerate(accs) for r in (1, 2)]
    claims(bundle(pd.DataFrame(rows), QuickstartParams(seeds=(0, 1, 2), rounds=2), 10)).save(folder)


def test_digest_changes_with_any_byte_of_the_evidence(tmp_path):
    assert evidence.digest(tmp_path) is None
    _rendered(tmp_path)
    first = evidence.digest(tmp_path)
    assert first == evidence.digest(tmp_path) and len(first) == 64
    records = tmp_path / "evidence" / "records" / "runs.csv"
    records.write_text(records.read_text().replace("0.86", "0.66"))
    assert evidence.digest(tmp_path) != first


def test_a_re_judge_keeps_the_rendering_stamp_and_says_when_the_evidence_changed(tmp_path):
    _rendered(tmp_path)
    write_stamp(tmp_path, "ok", 3.0, "profile `cpu`, commit `abc1234`")
    stamp = json.loads((tmp_path / "stamp.json").read_text())
    assert stamp["evidence_sha256"] == evidence.digest(tmp_path) and stamp["rendered"] == stamp["stamp"]
    for _ in range(2):  # judged again twice: the rendering's stamp is quoted once, never nested
        assert judge_again("quickstart", tmp_path, "re-judge") == "ok"
    stamp = json.loads((tmp_path / "stamp.json").read_text())
    assert stamp["stamp"] == ("claims judged again (re-judge) from the evidence rendered profile `cpu`, commit "
                              "`abc1234`")
    assert stamp["rendered"] == "profile `cpu`, commit `abc1234`"
    records = tmp_path / "evidence" / "records" / "runs.csv"
    records.write_text(records.read_text().replace("0.86", "0.66"))
    assert judge_again("quickstart", tmp_path, "re-judge") == "ok"
    stamp = json.loads((tmp_path / "stamp.json").read_text())
    assert "THE EVIDENCE CHANGED since it was rendered" in stamp["stamp"]
    assert stamp["stamp"].count("claims judged again") == 1


def test_a_re_judge_without_a_readable_stamp_fails_naming_it(tmp_path):
    """A stamp.json deleted, emptied or stripped of the evidence's hash would hide that the evidence changed since it
    was rendered: the notebook fails, the file named, its claims table left as it was, and it keeps failing."""
    _rendered(tmp_path)
    write_stamp(tmp_path, "ok", 3.0, "profile `cpu`, commit `abc1234`")
    claims = (tmp_path / "claims.csv").read_text()
    records = tmp_path / "evidence" / "records" / "runs.csv"
    records.write_text(records.read_text().replace("0.86", "0.66"))
    stamp = tmp_path / "stamp.json"
    without_hash = {k: v for k, v in json.loads(stamp.read_text()).items() if k != "evidence_sha256"}
    for broken, said in ((lambda: stamp.write_text(""), "is unreadable (empty or not a stamp)"),
                         (stamp.unlink, "is missing"),
                         (lambda: stamp.write_text(json.dumps(without_hash)), "records no hash of the evidence")):
        broken()
        for _ in range(2):  # the stamp written on failure fails again
            assert judge_again("quickstart", tmp_path, "re-judge") == \
                f"FAILED: {stamp} {said}: the evidence cannot be checked against its rendering; render quickstart again"
            said = "records no hash of the evidence"
        assert json.loads(stamp.read_text())["status"].startswith("FAILED")
        assert (tmp_path / "claims.csv").read_text() == claims


def test_notebooks_render_as_many_at_a_time_as_there_are_cores_their_statuses_in_order(monkeypatch, tmp_path):
    import threading
    import time

    from fedlib.app import render as rendering

    running, most, lock, last_started = [], [0], threading.Lock(), threading.Event()

    def one(name, params, out_dir, note):
        with lock:
            running.append(name)
            most[0] = max(most[0], len(running))
        if name == "d":
            last_started.set()
        if name == "a" and rendering.os.cpu_count() > 1:  # the first job the longest: the others overtake it
            assert last_started.wait(timeout=30), "the other renders never ran beside the first"
        time.sleep(0.05)
        with lock:
            running.remove(name)
        return ("ok" if name != "c" else "FAILED: c", 1.0)

    monkeypatch.setattr(rendering, "render", one)
    jobs = [(n, {}, tmp_path / n) for n in "abcd"]
    monkeypatch.setattr(rendering.os, "cpu_count", lambda: 2)
    assert rendering.render_all(jobs, "note") == ["ok", "ok", "FAILED: c", "ok"] and most[0] == 2
    most[0] = 0
    monkeypatch.setattr(rendering.os, "cpu_count", lambda: 1)
    assert rendering.render_all(jobs, "note") == ["ok", "ok", "FAILED: c", "ok"] and most[0] == 1
