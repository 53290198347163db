"""A claims bundle saved as evidence and read back: exact values and types, and every broken folder an error
naming the file (never a class a data file chooses)."""
from __future__ import annotations

import json
import math
import re
import sys
import types
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import pandas as pd
import pytest

from fedlib import report
from fedlib.claims import evidence
from fedlib.claims.evidence import EvidenceError
from fedlib.paper.bundle import Bundle
from fedlib.papers.quickstart import QuickstartParams
from fedlib.papers.quickstart import claims as quickstart


@dataclass(frozen=True)
class Detail:
    frame: pd.DataFrame
    count: int


@dataclass(frozen=True)
class RichBundle(Bundle):
    table: pd.DataFrame
    series: pd.Series
    labels: np.ndarray
    detail: Detail
    tables_by_key: Mapping[tuple[bool, int], pd.DataFrame]
    rows: tuple[tuple[str, report.Judgement], ...]
    best_at: Mapping[float, str | None]
    pairs: Mapping[tuple[str, int], float]
    sizes: tuple[int, ...]
    flag: bool


@pytest.fixture(autouse=True)
def rich_bundle_in_a_papers_folder(monkeypatch):
    """RichBundle as if a paper's claims module defined it (load only accepts bundle classes of the papers' folders,
    `fedlib.papers`)."""
    module = types.ModuleType("fedlib.papers.rich")
    module.RichBundle, module.Detail = RichBundle, Detail
    monkeypatch.setitem(sys.modules, "fedlib.papers.rich", module)
    for cls in (RichBundle, Detail):
        monkeypatch.setattr(cls, "__module__", "fedlib.papers.rich")


def rich() -> RichBundle:
    runs = pd.DataFrame({"algorithm": ["A", "A", "B"], "seed": [0, 1, 0], "round": [1, 1, 1],
                         "test_acc": [0.1 + 0.2, math.inf, np.nan], "diverged": [False, True, False]})
    table = pd.DataFrame({"x": [1 / 3, -0.0], "ok": [True, False]},
                         index=pd.MultiIndex.from_tuples([("p", "m"), ("p", "n")], names=["partition", "method"]))
    params = QuickstartParams(seeds=[0, 1], lr=1e-3, model_kwargs={"hidden": [8, 4], "bias": False})
    return RichBundle(params=params, records={"runs": runs}, num_classes=10,
                      table=table, series=pd.Series([1.5, math.nan], index=["u", "v"], name="acc"),
                      labels=np.array([3, 1, 2], dtype=np.int64), detail=Detail(runs.head(1), 7),
                      tables_by_key={(True, 0): runs, (False, 1): table},
                      rows=(("Theorem 1", report.not_testable(report.NOT_COMPUTED, "here")),),
                      best_at={0.5: "fixed-8", 0.9: None}, pairs={("a", 1): 0.25}, sizes=(3, 4), flag=True)


def test_a_bundle_comes_back_exactly(tmp_path):
    original = rich()
    evidence.save(original, tmp_path, "quickstart")
    module, back = evidence.load(tmp_path)
    assert module == "quickstart" and type(back) is RichBundle
    pd.testing.assert_frame_equal(back.records["runs"], original.records["runs"])
    pd.testing.assert_frame_equal(back.table, original.table)
    pd.testing.assert_series_equal(back.series, original.series)
    unnamed = RichBundle(**{**original.__dict__, "series": original.series.rename(None)})
    evidence.save(unnamed, tmp_path, "quickstart")
    assert evidence.load(tmp_path)[1].series.name is None
    assert back.params == original.params and back.best_at == original.best_at and back.pairs == original.pairs
    assert back.sizes == (3, 4) and back.flag is True and back.num_classes == 10
    np.testing.assert_array_equal(back.labels, original.labels)
    # a Judgement's p-values are NaN where no test ran, and NaN != NaN: the rows compare by their text
    assert back.labels.dtype == np.int64 and repr(back.rows) == repr(original.rows) and back.detail.count == 7
    pd.testing.assert_frame_equal(back.detail.frame, original.detail.frame)
    assert list(back.tables_by_key) == [(True, 0), (False, 1)]
    pd.testing.assert_frame_equal(back.tables_by_key[(False, 1)], original.table)
    assert back.records["runs"]["test_acc"].iloc[0] == 0.1 + 0.2  # floats written exactly


def test_saving_again_replaces_the_evidence_and_leaves_no_temporaries(tmp_path):
    evidence.save(rich(), tmp_path, "quickstart")
    evidence.save(rich(), tmp_path, "quickstart")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["evidence"]


def test_an_unsavable_field_is_an_error_naming_it(tmp_path):
    @dataclass(frozen=True)
    class Odd(Bundle):
        thing: object

    with pytest.raises(TypeError, match="bundle field 'thing': object cannot be saved"):
        evidence.save(Odd(QuickstartParams(), {}, 2, object()), tmp_path, "quickstart")


def _manifest(tmp_path) -> dict:
    return json.loads((tmp_path / "evidence" / "manifest.json").read_text())


@pytest.mark.parametrize("name", ["os:system", "fedlib.runs.store:RunStore", "fedlib.papers.quickstart.claims:claims",
                                  "fedlib.paper.bundle:Bundle.__init__"])
def test_a_manifest_cannot_choose_code_outside_the_bundle_classes(tmp_path, name):
    evidence.save(rich(), tmp_path, "quickstart")
    manifest = _manifest(tmp_path)
    manifest["bundle"] = name
    (tmp_path / "evidence" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(EvidenceError, match="manifest.json"):
        evidence.load(tmp_path)


@pytest.mark.parametrize("name, module", [("subprocess:Popen", "subprocess"),
                                          ("fedlib.runs.__main__:main", "fedlib.runs.__main__")])
def test_a_nested_class_from_a_module_evidence_may_not_name_is_refused_without_importing_it(tmp_path, name, module):
    """A saved class names the module to import it from: only fedlib's modules imported already or the papers'
    and claims' modules; `fedlib.runs.__main__` (the store CLI) would run a command when imported."""
    evidence.save(rich(), tmp_path, "quickstart")
    manifest = _manifest(tmp_path)
    manifest["fields"]["detail"]["class"] = name
    (tmp_path / "evidence" / "manifest.json").write_text(json.dumps(manifest))
    imported = module in sys.modules
    with pytest.raises(EvidenceError, match=f"'{re.escape(name)}' is not one of fedlib's"):
        evidence.load(tmp_path)
    assert (module in sys.modules) == imported


def test_parameters_saved_before_they_were_typed_or_no_longer_valid_are_errors(tmp_path):
    """Evidence whose params are a plain mapping (saved before the parameters dataclasses), or values the
    dataclass now rejects, cannot be judged again: an EvidenceError saying to render again."""
    evidence.save(rich(), tmp_path, "quickstart")
    params = tmp_path / "evidence" / "params"
    (params / "rounds.json").write_text("0")  # QuickstartParams.rounds must be >= 1
    with pytest.raises(EvidenceError, match=r"params: the saved values do not make a QuickstartParams.*rounds"):
        evidence.load(tmp_path)
    manifest = _manifest(tmp_path)
    manifest["fields"]["params"] = {"kind": "json", "file": "old_params.json"}
    (tmp_path / "evidence" / "old_params.json").write_text(json.dumps({"__pairs__": [["seeds", [0, 1]]]}))
    (tmp_path / "evidence" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(EvidenceError, match="manifest.json: the saved values do not make a RichBundle.*got dict"):
        evidence.load(tmp_path)


def test_missing_truncated_and_mismatched_evidence_are_errors_naming_the_file(tmp_path):
    with pytest.raises(EvidenceError, match="no saved evidence"):
        evidence.load(tmp_path)
    evidence.save(rich(), tmp_path, "quickstart")
    runs = tmp_path / "evidence" / "records" / "runs.csv"
    runs.write_text(runs.read_text().splitlines()[0].rsplit(",", 1)[0] + "\n")  # a header cut short
    with pytest.raises(EvidenceError, match="runs.csv"):
        evidence.load(tmp_path)
    evidence.save(rich(), tmp_path, "quickstart")
    manifest = _manifest(tmp_path)
    del manifest["fields"]["flag"]
    (tmp_path / "evidence" / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(EvidenceError, match="differ from RichBundle"):
        evidence.load(tmp_path)
    (tmp_path / "evidence" / "manifest.json").write_text("{not json")
    with pytest.raises(EvidenceError, match="not valid JSON"):
        evidence.load(tmp_path)


def test_judged_claims_save_their_evidence_and_judge_the_same_again(tmp_path):
    rows = [{"algorithm": a, "seed": s, "round": r, "test_acc": acc + 0.01 * s * r, "test_loss": 1.0,
             "train_loss": 1.0} for a, acc in (("FedAvg", 0.7), ("SCAFFOLD", 0.8), ("FedProx", 0.7))
            for s in range(4) for r in (1, 2)]
    table = quickstart.claims(quickstart.bundle(pd.DataFrame(rows), QuickstartParams(seeds=[0, 1, 2, 3], rounds=2), 10))
    table.save(tmp_path)
    module, bundle = evidence.load(tmp_path)
    again = quickstart.claims(bundle).table()
    pd.testing.assert_frame_equal(again, table.table())
    assert module == "quickstart"

