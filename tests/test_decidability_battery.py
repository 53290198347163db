"""The decidability battery beside the noise battery (tests/test_claims_battery.py): every declared claim the
batteries can feed (`fedlib.claims.noise.noise_cases`: contrasts and claims that declare a `Battery`), at the seeds
each profile that judges gives it (cpu, gpu, full; not quick: `noise.QUICK_EXCLUDED`), reads "reproduced" on a clear
effect in the claimed direction and "not reproduced" on a clear effect the other way (or, where the claim declares
why it cannot, anything but a positive verdict). A profile that gives a claim fewer seeds than its rule needs reads
"not testable: too few seeds" both ways, and the dry run's decidability says the same. The large-draw noise battery
(every `NOISE_KINDS`: the null's edge, targets rarely reached, a noisier arm on a plateau) is marked slow;
scripts/noise_battery.py prints both tables."""
from __future__ import annotations

import pytest

from fedlib import report as R
from fedlib.claims import noise
from fedlib.claims.decidability import JUDGING_PROFILES, decidability
from fedlib.grids import notebook_parameters

CASES = noise.noise_cases()


def _id(case) -> str:
    return f"{case[0]}:{case[1].id}"


@pytest.mark.parametrize("profile", JUDGING_PROFILES)
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_a_clear_effect_decides_each_way_at_the_profiles_seeds(case, profile):
    paper, claim = case
    n = noise.judging_seed_counts(paper, claim.reads[0].seeds)[profile]
    found = {e: noise.effect_verdict(paper, claim, e, list(range(n))) for e in (1, -1)}
    judged = decidability(noise.declared()[paper], notebook_parameters(paper, profile), set())  # and what it requires
    decides = next(d for d in judged if d.claim == claim.id)
    if n < claim.min_seeds:
        assert set(found.values()) == {R.TOO_FEW_SEEDS} and not decides.decides, (found, decides.line())
        return
    assert found[1] == R.REPRODUCED, found
    if noise.expected(claim, -1) == R.NOT_REPRODUCED:
        assert found[-1] == R.NOT_REPRODUCED, found
    else:
        assert found[-1] not in R.POSITIVE, found


def test_the_quick_profile_is_excluded_because_it_runs_one_seed():
    assert "quick" not in JUDGING_PROFILES and "1 seed" in noise.QUICK_EXCLUDED
    assert {len(notebook_parameters(p, "quick").seeds) for p in ("fedaq", "mucsc", "quickstart", "taco")} == {1}


def test_the_edge_of_an_ordering_puts_each_step_at_its_floor_and_a_best_of_at_its_highest_floor():
    """By hand: mucsc C8 (Z 16 > 8 > 4, each step above 0.005) climbs 0, 0.005, 0.01; TACO C2' (TACO above SCAFFOLD
    by 0.002 and above FedAvg by 0.01) sits 0.01 above both."""
    cases = {_id(c): c[1] for c in CASES}
    c8 = {tuple(cell.items()): lift for cell, lift, _ in noise.arms(cases["mucsc:C8"], 0)}
    assert c8 == pytest.approx({(("Z", 8),): 0.005, (("Z", 16),): 0.01})
    assert [(dict(c), lift) for c, lift, _ in noise.arms(cases["taco:C2'"], 0)] == [({"algorithm": "TACO"}, 0.01)]
    assert [pace for _, _, pace in noise.arms(cases["taco:C3"], 0)] == [pytest.approx(1 - cases["taco:C3"].rule.margin)]


@pytest.mark.slow
@pytest.mark.parametrize("kind", noise.NOISE_KINDS)
@pytest.mark.parametrize("case", CASES, ids=_id)
def test_declared_rule_on_noise_of_every_kind_stays_within_alpha(case, kind):
    """400 draws: the bound is 8.3%; a true rate of 15% is caught with probability 0.9999 (binomial)."""
    paper, claim = case
    draws = 400
    for n in sorted(set(noise.judging_seed_counts(paper, claim.reads[0].seeds).values())):
        if n < claim.min_seeds:
            continue
        rate = noise.positive_rate(lambda rng: noise.declared_verdict(paper, claim, rng, list(range(n)), kind), draws)
        assert rate <= noise.bound(draws), f"{paper} {claim.id} ({kind}) at {n} seeds: positive on {rate:.1%}"
