"""Every claim that reads runs can decide at the seeds the profiles that judge give it (`fedlib.claims.decidability`):
a claim of the cpu, gpu or full profile that cannot decide fails here, whatever the reason (shown); the dry run
prints the same lines."""
from __future__ import annotations

import io
from dataclasses import replace

import pytest

from fedlib import report
from fedlib.claims.decidability import JUDGING_PROFILES, decidability, notebook_decidability
from fedlib.dryrun import print_decidability
from fedlib.grids import notebook_parameters
from fedlib.notebook_params import NOTEBOOKS
from fedlib.paper import declared
from fedlib.papers.fedaq import claims as fedaq
from fedlib.papers.fedaq import FedAQParams

@pytest.mark.parametrize("profile", JUDGING_PROFILES)
@pytest.mark.parametrize("paper", list(declared()))  # a paper falls in by being declared
def test_every_headline_claim_of_a_judging_profile_can_decide(paper, profile):
    found = notebook_decidability(paper, notebook_parameters(paper, profile))
    assert any(d.headline for d in found)
    short = [f"{d.claim}: {d.line()}" for d in found if d.headline and not d.decides]
    assert not short, short


@pytest.mark.parametrize("profile", JUDGING_PROFILES)
@pytest.mark.parametrize("paper", list(declared()))
def test_every_run_based_claim_of_a_judging_profile_can_decide(paper, profile):
    found = notebook_decidability(paper, notebook_parameters(paper, profile))
    assert not [f"{d.claim}: {d.line()}" for d in found if not d.decides]


def test_a_claim_below_its_rules_seeds_cannot_decide_and_says_why():
    params = FedAQParams(seeds=(1, 2))
    found = {d.claim: d for d in decidability(fedaq.CLAIMS, params, {"C2"})}
    assert found["C2"].line() == "cannot decide: 2 seed(s); its rule needs >= 3 (smallest p with 2: 1)"
    three = {d.claim: d for d in decidability(fedaq.CLAIMS, replace(params, seeds=(1, 2, 3)), set())}
    assert three["C2"].line() == "decidable at 3 seeds" and three["C2"].smallest_p == 0.0
    sign = {d.claim: d for d in decidability((replace(fedaq.CLAIMS[1], test="sign", min_seeds=report.SIGN_SEEDS),),
                                             params, set())}
    assert sign["C2"].smallest_p == 0.25 and "needs >= 5" in sign["C2"].why
    # a claim made at another scale says so, whatever its seeds
    elsewhere = replace(fedaq.CLAIMS[0], setting=lambda p: "the paper's row is another")
    found = {d.claim: d for d in decidability((elsewhere,), replace(params, seeds=(1, 2, 3)), {"C1"})}
    assert found["C1"].line() == "cannot decide: claim made at another scale (the paper's row is another)"


def test_a_claim_whose_prerequisite_cannot_decide_cannot_either():
    fedshift_quick = notebook_decidability("fedshift", notebook_parameters("fedshift", "quick"))
    g2 = next(d for d in fedshift_quick if d.claim == "G2")
    assert not g2.decides


def test_the_dry_run_prints_one_line_per_claim():
    out = io.StringIO()
    print_decidability("quickstart", "gpu", NOTEBOOKS, out)
    assert out.getvalue().splitlines() == [
        "  claim Q1 (headline), paired gain (t): decidable at 3 seeds",
        "  claim Q2 (headline), paired equivalence (TOST): decidable at 3 seeds"]
    out = io.StringIO()
    print_decidability("quickstart", "quick", NOTEBOOKS, out)
    assert "cannot decide: 1 seed(s); its rule needs >= 3" in out.getvalue()
