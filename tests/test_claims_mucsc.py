"""MUCSC's claims table on hand-built tables: each verdict follows from its rule, absent runs are not testable."""
from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
import pytest

from fedlib import report
from fedlib.claims.mucsc import claims
from fedlib.papers.mucsc import METHODS, setting_label, table2, traffic_tables

PARAMS = {"seeds": [0, 1, 2], "rounds": 2, "methods": list(METHODS), "partitions": ["iid", "noniid"], "zu": 16,
          "z_sweep": [4, 8, 16], "mc_draws": 100, "partial_rounds": 50, "target_frac": 0.97, "level_search": "descent"}
# Final accuracy per seed: MUCSC and QSGD within 0.003 of NC on every seed (equivalent within 0.02 by TOST), the others below it.
ACC = {"nc": [0.90, 0.91, 0.89], "mucsc": [0.901, 0.909, 0.892], "qsgd": [0.899, 0.911, 0.889], "ssgd": [0.80, 0.81, 0.79],
       "bmucsc": [0.85, 0.86, 0.84], "dgc": [0.86, 0.87, 0.85], "stc": [0.87, 0.88, 0.86]}
# (traffic %, total time % of NC's, seeds reaching the target): MUCSC < 20%, B-MUCSC < 5%, DGC > NC, B-MUCSC fastest.
TARGET = {"nc": (100.0, 100.0, 3), "mucsc": (15.0, 60.0, 3), "qsgd": (20.0, 70.0, 3), "ssgd": (5.0, 50.0, 3),
          "bmucsc": (4.0, 40.0, 3), "dgc": (120.0, 90.0, 3), "stc": (6.0, 45.0, 3)}
LEVELS = {"MUCSC descent": [0.90, 0.91, 0.905], "MUCSC uniform": [0.88, 0.885, 0.89], "QSGD": [0.899, 0.912, 0.903]}
C10_IID = "C10 DGC needs more total traffic than NC, iid"
CLAIMS = ["Table II rates", "Tables III-V", "C1 ", "B-MUCSC is biased", "C2 ", "C2b ", "C3 ", "C3' ", "C3b ", "C3c ",
          "C4 ", "C6 ", *(c + p for p in ("iid", "noniid") for c in ("C5 traffic to target, ", "C7 accuracy, ",
                                                                     "C10 DGC needs more total traffic than NC, ",
                                                                     "C9 total time to target, ")),
          "C8 ", "Thm 2 proof"]


def rounds(finals: dict[tuple[str, ...], list[float]], keys: tuple[str, ...]) -> pd.DataFrame:
    """Two rounds per run (keys + seed); round 2 carries `finals[key][seed]`."""
    return pd.DataFrame([{**dict(zip(keys, key)), "seed": s, "round": r, "test_acc": 0.5 if r == 1 else acc,
                          "train_loss": 1.0, "test_loss": 1.0}
                         for key, accs in finals.items() for s, acc in enumerate(accs) for r in (1, 2)])


def target_table(rows: dict[str, tuple[float, float, int]], partitions: list[str]) -> pd.DataFrame:
    return pd.DataFrame([{"partition": p, "method": m, "target": 0.9, "traffic_pct_of_NC": traffic,
                          "total_pct_of_NC": total, "seeds_reached": reached}
                         for p in partitions for m, (traffic, total, reached) in rows.items()])


def evidence(*, acc: dict[str, list[float]] = ACC, target: dict[str, tuple[float, float, int]] = TARGET,
             levels: dict[str, list[float]] = LEVELS) -> dict[str, Any]:
    """The keyword arguments of `claims`, every claim's evidence favourable except step (34)'s counterexample."""
    runs = rounds({(p, m): a for p in PARAMS["partitions"] for m, a in acc.items()}, ("partition", "method"))
    level_runs = rounds({(v,): a for v, a in levels.items()}, ("variant",))
    tt = traffic_tables()
    real = pd.DataFrame({"data": "real update (subset)", "Z": [4, 8, 16], "paper_uniform_init": [0.50, 0.40, 0.30],
                         "optimal": [0.49, 0.39, 0.29], "descent": [0.49, 0.39, 0.29]})
    return dict(
        d=1000, num_classes=10, table2=table2(), traffic=tt[~((tt.setting == "femnist") & (tt.method == "qsgd"))],
        traffic_ok=True, update_size=19210,
        rounding={"mean_sq_z": 1.019, "mean_sq_z_se": 0.010, "sum_bias_z": 0.08, "J_empirical": 2.0, "J_analytic": 2.0},
        unbiased=True, bias=pd.DataFrame({"part": ["kept (top by |U|)", "super cluster"], "bias_sq_norm": [0.0, 0.5],
                                          "signal_sq_norm": [1.0, 1.0]}), bias_draws=25,
        convergence=pd.DataFrame({"run": ["NC", "MUCSC Z=4"], "loglog_slope": [-1.0, -0.9], "holds": [True, True]}),
        partial=pd.DataFrame({"measured_gap": [0.1, 0.2], "thm3_measured_psi": [1.0, 1.0], "thm4": [2.0, 2.0],
                              "holds": [True, True]}), partial_clients=3, partial_population=10, partial_seeds=2,
        # A synthetic vector's rows far from the optimum: only the real update's rows may count.
        levels=pd.concat([real, real.assign(data="gaussian", paper_uniform_init=5.0, descent=5.0)], ignore_index=True),
        large_d=pd.DataFrame({"paper": [0.5, 0.4, 0.3], "optimal": [0.5, 0.4, 0.3], "descent": [0.5, 0.4, 0.3]}),
        level_runs=level_runs,
        level_final=level_runs[level_runs["round"] == 2].pivot_table(index="seed", columns="variant", values="test_acc"),
        measured_rates=pd.DataFrame({"method": list(METHODS), "rate_conventionA_paperKN": [1, 10, 8, 32, 60, 20, 25]}),
        runs=runs, to_target=target_table(target, PARAMS["partitions"]),
        z_final=pd.Series([0.90, 0.91, 0.92, 0.5], index=[*(setting_label(z, z, "descent") for z in (4, 8, 16)), "thirds"]),
        jensen={"lhs": 40.70, "paper_rhs_sum_p2": 4.14, "jensen_rhs_sum_p": 41.41, "paper_step_holds": False})


def row(table: pd.DataFrame, prefix: str) -> pd.Series:
    hits = table[table["claim"].str.startswith(prefix)]
    assert len(hits) == 1, (prefix, hits["claim"].tolist())
    return hits.iloc[0]


def verdict(params: dict[str, Any], ev: dict[str, Any], prefix: str) -> str:
    return row(claims(params, **ev).table(), prefix)["verdict"]


def test_favourable_evidence_gives_every_claim_in_order():
    table = claims(PARAMS, **evidence()).table()
    assert [row(table, c).name for c in CLAIMS] == list(range(len(CLAIMS)))
    expected = [report.AGREES, report.AGREES, *[report.REPRODUCED] * 8, report.AGREES, report.AGREES,
                *[report.REPRODUCED] * 9, report.NOT_REPRODUCED]
    assert table["verdict"].tolist() == expected


def test_measured_strings_by_hand():
    table = claims(PARAMS, **evidence()).table()
    # C4/C6: B-MUCSC's measured rate 60 over MUCSC's 10, and 100 (1 - 1/60) = 98.33% of the traffic cut.
    assert row(table, "C4 ")["measured"] == "paper d: 13.5x; this d = 1,000: 6.0x"
    assert row(table, "C6 ")["measured"] == "paper d: 99.49%; this d: 98.33%"
    # C7: seed means of ACC, e.g. MUCSC (0.901 + 0.909 + 0.892) / 3 = 0.9007, QSGD 2.699 / 3 = 0.8997.
    assert row(table, "C7 accuracy, iid")["measured"] == ("NC 0.900, MUCSC 0.901, QSGD 0.900, SSGD 0.800, B-MUCSC 0.850, "
                                                          "DGC 0.860, STC 0.870")
    assert row(table, "C5 traffic to target, noniid")["measured"] == (
        "MUCSC 15.0% (3/3 seeds reached), B-MUCSC 4.0% (3/3 seeds reached) (target acc 0.900)")
    assert row(table, "C9 total time to target, iid")["measured"] == "best: B-MUCSC (40.0% of NC)"
    assert row(table, "C3b ")["measured"] == "final acc MUCSC descent 0.9050 vs MUCSC uniform 0.8850"
    assert row(table, "C2b ")["measured"] == ("2 runs through the round loop, K = 3 of 10: measured / Thm 3 (measured psi) "
                                              "max 2.00e-01, / Thm 4 max 1.00e-01")
    assert row(table, "B-MUCSC is biased")["measured"] == "super-cluster bias^2 = 50.0% of its signal^2, kept part ~ 0"
    assert row(table, "B-MUCSC is biased")["evidence"] == "a real update, 25 draws"  # its own draws, not mc_draws
    assert row(table, "C1 ")["measured"] == ("19,210 elements, 100 draws: mean R(mean-U)^2/J_m = 1.019 ± 0.010 (1 if unbiased), "
                                             "sum bias +0.08 SD; J emp/analytic = 1.0000")
    assert row(table, "C8 ")["measured"] == "Z=4: 0.900, Z=8: 0.910, Z=16: 0.920"


def _set(frame: str, column: str, values: list[Any]) -> Any:
    """A change to `evidence()`: `frame`'s `column` replaced by `values`."""
    return lambda ev: ev.update({frame: ev[frame].assign(**{column: values})})


def _put(frame: str, index: int, column: str, value: float) -> Any:
    """A change to `evidence()`: one cell of `frame` set to `value`."""
    def change(ev: dict[str, Any]) -> None:
        ev[frame].loc[index, column] = value
    return change


@pytest.mark.parametrize("prefix, change, expected", [
    ("C1 ", lambda ev: ev.update(unbiased=False), report.NOT_REPRODUCED),
    ("B-MUCSC is biased", _set("bias", "bias_sq_norm", [0.0, 0.05]), report.NOT_REPRODUCED),
    ("C2 ", _set("convergence", "loglog_slope", [-1.0, -0.3]), report.NOT_REPRODUCED),
    ("C2 ", _set("convergence", "holds", [True, False]), report.NOT_REPRODUCED),
    ("C2b ", _set("partial", "holds", [True, False]), report.NOT_REPRODUCED),
    ("C2b ", _set("partial", "measured_gap", [1e-4, 2e-4]), report.VACUOUS),  # quick: gap / bound <= 3e-4
    ("C3 ", _set("large_d", "paper", [0.9, 0.8, 0.7]), report.PARTLY),  # below uniform, not near the optimum
    ("C3 ", _set("large_d", "paper", [1.0, 1.0, 1.0]), report.NOT_REPRODUCED),
    ("C3' ", _put("levels", 2, "descent", 0.35), report.PARTLY),  # the real update's Z = 16 at 1.21 x the optimum
    ("C3' ", _set("large_d", "descent", [0.5, 0.4, 0.4]), report.NOT_REPRODUCED),
    ("Table II rates", _put("table2", 0, "rate_conventionA", 15.0), report.DISAGREES),
    ("Tables III-V", lambda ev: ev.update(traffic=ev["traffic"].assign(MB=ev["traffic"]["MB"] + 0.1)), report.DISAGREES),
    ("C8 ", lambda ev: ev.update(z_final=ev["z_final"] * [1, 0.98, 1.01, 1]), report.NOT_REPRODUCED),  # drops at Z = 8
    ("Thm 2 proof", lambda ev: ev["jensen"].update(paper_step_holds=True), report.REPRODUCED),
])
def test_each_rule_can_fail(prefix, change, expected):
    ev = evidence()
    assert verdict(PARAMS, ev, prefix) != expected
    change(ev)
    assert verdict(PARAMS, ev, prefix) == expected


@pytest.mark.parametrize("prefix, changes, expected", [
    ("C3b ", {"levels": {**LEVELS, "MUCSC uniform": [0.91, 0.925, 0.912]}}, report.NOT_REPRODUCED),
    ("C3c ", {"levels": {**LEVELS, "QSGD": [0.88, 0.89, 0.88]}}, report.NOT_REPRODUCED),
    ("C5 traffic to target, iid", {"target": {**TARGET, "mucsc": (30.0, 60.0, 3)}}, report.PARTLY),
    ("C5 traffic to target, iid", {"target": {**TARGET, "mucsc": (30.0, 60.0, 3), "bmucsc": (np.inf, np.inf, 2)}},
     report.NOT_REPRODUCED),
    ("C7 accuracy, iid", {"acc": {**ACC, "stc": [0.95, 0.95, 0.95]}}, report.PARTLY),
    ("C7 accuracy, iid", {"acc": {**ACC, "mucsc": [0.85, 0.865, 0.84]}}, report.NOT_REPRODUCED),
    ("C7 accuracy, iid", {"acc": {**ACC, "mucsc": [0.905, 0.90, 0.91]}}, report.INCONCLUSIVE),  # 3 noisy seeds
    ("C7 accuracy, iid", {"acc": {**ACC, "mucsc": [0.901, np.nan, 0.892]}}, report.NOT_TESTABLE),  # a missing run
    (C10_IID, {"target": {**TARGET, "dgc": (90.0, 90.0, 3)}}, report.NOT_REPRODUCED),
    ("C9 total time to target, noniid", {"target": {**TARGET, "stc": (6.0, 30.0, 3)}}, report.NOT_REPRODUCED),
])
def test_federated_claims_can_fail(prefix, changes, expected):
    assert verdict(PARAMS, evidence(), prefix) != expected
    assert verdict(PARAMS, evidence(**changes), prefix) == expected


def test_a_seed_that_never_reaches_the_target():
    never = {**TARGET, "dgc": (np.inf, 95.0, 2), "bmucsc": (np.inf, 30.0, 2)}
    table = claims(PARAMS, **evidence(target=never)).table()
    assert row(table, C10_IID)["verdict"] == report.REPRODUCED  # never reaching counts as more traffic than NC
    assert row(table, C10_IID)["measured"] == "not reached on every seed of NC's traffic"
    assert row(table, "C5 traffic to target, iid")["verdict"] == report.PARTLY  # MUCSC alone
    c9 = row(table, "C9 total time to target, iid")  # B-MUCSC's 30% does not count: not every seed reached it
    assert (c9["measured"], c9["verdict"]) == ("best: STC (45.0% of NC)", report.NOT_REPRODUCED)


def test_only_mucsc_run_leaves_the_other_claims_not_testable():
    params = {**PARAMS, "methods": ["mucsc"]}
    ev = evidence(acc={"mucsc": ACC["mucsc"]}, levels={"MUCSC descent": LEVELS["MUCSC descent"], "QSGD": LEVELS["QSGD"]})
    # What the notebook computes without NC: no target table, measured rates of MUCSC only.
    ev.update(to_target=pd.DataFrame(columns=["partition", "method"]),
              measured_rates=ev["measured_rates"][ev["measured_rates"].method == "mucsc"])
    table = claims(params, **ev).table()
    federated = table[table["claim"].str.match("C(5|7|9|10) ")]
    assert len(federated) == 8 and (federated["verdict"] == report.NOT_TESTABLE).all()
    assert (federated["measured"] == "-").all()
    assert row(table, "C5 traffic to target, iid")["criterion"] == "needs the runs of NC, B-MUCSC (`methods` = ['mucsc'])"
    assert row(table, C10_IID)["criterion"].startswith("needs the runs of NC, DGC ")
    assert row(table, "C4 ")["measured"] == "paper d: 13.5x; this d: not run"
    assert row(table, "C6 ")["measured"] == "paper d: 99.49%; this d: not run"
    assert row(table, "C3b ")["verdict"] == report.NOT_TESTABLE and row(table, "C3b ")["measured"] == "-"
    assert row(table, "C3c ")["verdict"] == report.REPRODUCED  # descent and QSGD were run
    assert row(table, "C8 ")["verdict"] == report.REPRODUCED
    no_descent = evidence(levels={"MUCSC uniform": LEVELS["MUCSC uniform"], "QSGD": LEVELS["QSGD"]})
    assert verdict(PARAMS, no_descent, "C3c ") == report.NOT_TESTABLE


def test_one_seed_is_not_testable_for_the_paired_level_claims():
    ev = evidence(levels={v: a[:1] for v, a in LEVELS.items()})
    table = claims({**PARAMS, "seeds": [0]}, **ev).table()
    assert row(table, "C3b ")["verdict"] == report.NOT_TESTABLE
    assert row(table, "C3c ")["verdict"] == report.NOT_TESTABLE


def test_a_diverged_run_overrides_the_rule():
    ev = evidence()
    runs = ev["runs"]
    runs.loc[(runs.partition == "iid") & (runs.method == "mucsc") & (runs.seed == 1), "train_loss"] = np.nan
    level_runs = ev["level_runs"]  # MUCSC uniform's seed 2 ends at chance (1/10 + 0.02)
    level_runs.loc[(level_runs.variant == "MUCSC uniform") & (level_runs.seed == 2) & (level_runs["round"] == 2),
                   "test_acc"] = 0.11
    ev["level_final"] = level_runs[level_runs["round"] == 2].pivot_table(index="seed", columns="variant", values="test_acc")
    table = claims(PARAMS, **ev).table()
    assert row(table, "C7 accuracy, iid")["verdict"] == report.DIVERGED
    assert "method=mucsc seed=1" in row(table, "C7 accuracy, iid")["evidence"]
    assert row(table, "C7 accuracy, noniid")["verdict"] == report.REPRODUCED
    assert row(table, "C3b ")["verdict"] == report.DIVERGED

