"""A fifth paper added by one folder and no other edit: a user's package declaring a `Paper` (its parameters, a
tiny grid on the bundled digits, one claim, a notebook and its profiles), allowed as a user's component module is
(`fedlib.trust`), then run through reproduce, the dry run, the noise and decidability batteries and the ledger."""
from __future__ import annotations

import io
import os
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
import test_claims_battery as claims_battery
import test_decidability as decidability
import test_decidability_battery as decidability_battery
from test_reproduce import load_reproduce

from fedlib.claims import noise
from fedlib.claims.decidability import JUDGING_PROFILES
from fedlib.dryrun import dry_run
from fedlib.ledger.entries import Ledger
from fedlib.paper import PAPERS, paper
from fedlib.trust import ALLOW_VAR

FILES = {
    "__init__.py": '''
        """A toy paper: FedProx stays close to FedAvg on a few rounds of the bundled digits."""
        from pathlib import Path

        from fedlib.paper import Headline, Paper, declare
        from toy_paper.claims import CLAIMS, bundle_from_runs, claims, scale
        from toy_paper.grid import experiments
        from toy_paper.params import ToyParams

        PAPER = declare(Paper(
            name="toy", notebooks=Path(__file__).parent / "notebooks", params=ToyParams, experiments=experiments,
            headlines=(Headline("T1", {"algorithm": ("FedProx", "FedAvg")}),), claims=CLAIMS, judge=claims,
            bundle_from_runs=bundle_from_runs, on_profile=None, scale=scale, paper_scale=None, noise_rules={},
            notes="toy_paper/__init__.py", theory=None))
    ''',
    "params.py": '''
        from dataclasses import dataclass

        from fedlib.paper_params import PaperParams, param


        @dataclass(frozen=True)
        class ToyParams(PaperParams):
            """The toy notebook's parameters (defaults: its quick profile)."""

            dataset: str = param("digits", "dataset name (fedlib.data)")
            rounds: int = param(3, "communication rounds")
            seeds: tuple[int, ...] = param([0, 1, 2], "seeds; one run per seed and algorithm")
    ''',
    "grid.py": '''
        from fedlib.runs import RunSpec

        ALGORITHMS = {"FedAvg": "fedavg", "FedProx": "fedprox"}


        def experiments(p):
            return [RunSpec.make("quickstart", p.dataset, ("iid", {"num_clients": 4}), ("mlp", {"hidden": [16]}),
                                 (name, {}), p.rounds, seed, local={"lr": 0.1, "batch_size": 32, "steps": 5},
                                 labels={"algorithm": label, "paper": "toy"}, device=p.device)
                    for seed in p.seeds for label, name in ALGORITHMS.items()]
    ''',
    "claims.py": '''
        from fedlib.claims.judge import Contrast, judge
        from fedlib.paper.bundle import Bundle
        from fedlib.paper.claim import Claim
        from fedlib.paper.scale import Scale

        CLAIMS = (Claim("T1", "FedProx stays within 5 points of FedAvg", "|gap| < 0.05",
                        Contrast({"algorithm": "FedProx"}, {"algorithm": "FedAvg"}, "equivalent", margin=0.05)),)


        def scale(p):
            return Scale(p.dataset, "mlp", 4, p.rounds, len(p.seeds))


        def bundle_from_runs(params, records, num_classes):
            return Bundle(params, {"runs": records["rounds"]}, num_classes)


        def claims(bundle):
            return judge(CLAIMS, bundle)
    ''',
    "notebooks/toy.py": '''
        # ---
        # jupyter:
        #   kernelspec: {display_name: Python 3, language: python, name: python3}
        # ---

        # %% tags=["parameters"]
        profile = "quick"

        # %%
        from fedlib.notebook_params import check_notebook_parameters
        from fedlib.notebook_runs import notebook_records
        from fedlib.paths import results_dir
        from toy_paper.claims import bundle_from_runs, claims
        from toy_paper.grid import experiments

        params = check_notebook_parameters("toy", globals())
        claims(bundle_from_runs(params, notebook_records(experiments(params), params), 10)).save(
            results_dir("toy", params.results_root))
    ''',
    "notebooks/profiles/toy/quick.yaml": "profile: quick\n",
    **{f"notebooks/profiles/toy/{p}.yaml": f"profile: {p}\nrounds: 3\n" for p in JUDGING_PROFILES},
}


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy paper's one folder, importable here and in the notebooks' kernels, and allowed; undeclared after."""
    for name, text in FILES.items():
        (tmp_path / "toy_paper" / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / "toy_paper" / name).write_text(textwrap.dedent(text).lstrip())
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([str(tmp_path), str(Path(__file__).resolve().parents[1]),
                                                      os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv(ALLOW_VAR, "toy_paper")
    yield paper("toy")
    if "toy" in PAPERS:
        PAPERS.withdraw("toy")
    for name in [m for m in sys.modules if m == "toy_paper" or m.startswith("toy_paper.")]:
        del sys.modules[name]


def test_a_paper_not_allowed_is_not_imported(tmp_path, monkeypatch):
    (tmp_path / "toy_paper").mkdir()
    (tmp_path / "toy_paper" / "__init__.py").write_text("raise SystemExit('imported')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(KeyError, match="unknown paper 'toy'"):
        paper("toy")


def test_the_toy_paper_falls_into_the_batteries_and_the_dry_run(toy, capsys):
    cases = [c for c in noise.noise_cases() if c[0] == "toy"]
    assert [c.id for _, c in cases] == ["T1"]
    for case in cases:
        claims_battery.test_healthy_evidence_passes_every_guard(case)
        for scenario in claims_battery.GUARD_CASES:
            claims_battery.test_claim_never_supported_by_broken_evidence(case, scenario)
        claims_battery.test_declared_rule_on_pure_noise_stays_within_alpha_at_every_profile_seed_count(case)
        for profile in JUDGING_PROFILES:
            decidability_battery.test_a_clear_effect_decides_each_way_at_the_profiles_seeds(case, profile)
            decidability.test_every_headline_claim_of_a_judging_profile_can_decide("toy", profile)
    out = io.StringIO()
    assert dry_run(["toy"], "quick", steps=1, out=out, train_size=300) == 0
    assert "claim T1 (headline), paired equivalence (TOST): decidable at 3 seeds" in out.getvalue()


def test_the_toy_paper_renders_and_its_runs_go_through_the_ledger(toy, tmp_path):
    reproduce = load_reproduce()
    results, ledger = tmp_path / "results", tmp_path / "ledger"
    assert reproduce.main(["--profile", "quick", "--only", "toy", "--results", str(results)]) == 0
    table = pd.read_csv(results / "quick" / "toy" / "claims.csv")
    assert list(table["claim"]) == ["T1 FedProx stays within 5 points of FedAvg"]
    assert reproduce.main(["--profile", "quick", "--only", "toy", "--piece", "--budget", "5m", "--ledger",
                           str(ledger), "--results", str(tmp_path / "piece")]) == 0
    assert len(Ledger(ledger).entries()) == 6
    assert reproduce.main(["--profile", "quick", "--only", "toy", "--from-ledger", "--ledger", str(ledger),
                           "--results", str(tmp_path / "from-ledger")]) == 0
    again = pd.read_csv(tmp_path / "from-ledger" / "quick" / "toy" / "claims.csv")
    assert list(again["verdict"]) == list(table["verdict"])
