"""The results table (`fedlib.ledger.results`) on hand-made evidence: each headline claim's row, columns read by
name (columns added to the cpu record or the judged tables change nothing), the runs counted only where a claim
is not testable, the claims' short words, and the markers of the pages that hold it. The committed pages against
the committed evidence: tests/test_ledger.py."""
from __future__ import annotations

import pandas as pd
import pytest

from fedlib.display import VERDICT_COLOURS, VERDICT_SYMBOLS, verdict_symbol
from fedlib.ledger.cpu_record import REBUILD, TO_BE_REBUILT, CpuVerdicts
from fedlib.ledger.results import (BEGIN, END, HeadlineResult, headline_results, results_block, scales,
                                   short_claim, shortened, with_block)
from fedlib.ledger.status import HeadlineStatus
from fedlib.paper import Headline
from fedlib.papers.quickstart import QuickstartParams
from fedlib.report import INCONCLUSIVE, NOT_COMPUTED, NOT_REPRODUCED, REPRODUCED, VERDICTS

STAMP = "profile `cpu`, commit `abc1234`, 2026-11-27 19:10 UTC, vm (x86_64, 2 CPUs, no GPU), no -p overrides"


def cpu_record(**extra: str) -> CpuVerdicts:
    """Q1 judged on the cpu profile, Q2 absent; `extra`: columns a later record adds, placed first."""
    rows = pd.DataFrame({**{k: [v] for k, v in extra.items()}, "scale": ["mnist5k, cnn"], "stamp": [STAMP],
                         "measured": ["0.852 vs 0.810 (+0.042)"], "verdict": [INCONCLUSIVE], "claim_id": ["Q1"],
                         "notebook": ["quickstart"]})
    return CpuVerdicts("evidence/cpu/verdicts.csv", rows)


def judged(**extra: str) -> pd.DataFrame:
    """The quickstart's headline claims as the ledger's judge gives them, with `extra` columns first."""
    return pd.DataFrame({**{k: [v, v] for k, v in extra.items()},
                         "verdict": [REPRODUCED, NOT_COMPUTED], "measured": ["0.9 vs 0.8", "-"],
                         "claim": ["Q1 SCAFFOLD is non-inferior to FedAvg under label skew: no more than 1 point less accurate",
                                   "Q2 FedProx with small mu (=0.01) stays close to FedAvg"],
                         "paper_value": ["SCAFFOLD > FedAvg", "|gap| small"]})


def statuses(q1: tuple[int, int], q2: tuple[int, int]) -> list[HeadlineStatus]:
    """Headline statuses with (present, declared) run counts; the runs stand in as numbers (only counted)."""
    return [HeadlineStatus("quickstart", Headline(claim, {}), tuple(range(n)), tuple(range(k)),  # type: ignore[arg-type]
                           ("CPU",) * k) for claim, (k, n) in (("Q1", q1), ("Q2", q2))]


def test_every_verdict_has_a_symbol_of_its_colour():
    assert set(VERDICT_SYMBOLS) == set(VERDICTS)
    for verdict, colour in VERDICT_COLOURS.items():
        assert {v for v, c in VERDICT_COLOURS.items() if c == colour} == \
            {v for v, s in VERDICT_SYMBOLS.items() if s == VERDICT_SYMBOLS[verdict]}
    assert (verdict_symbol(REPRODUCED), verdict_symbol(NOT_REPRODUCED)) == ("✅", "❌")
    with pytest.raises(ValueError, match="'mostly fine' is not one of the judge's verdicts"):
        verdict_symbol("mostly fine")


def test_rows_read_columns_by_name_and_count_runs_only_where_a_claim_is_not_testable():
    params = {"quickstart": QuickstartParams()}
    plain = headline_results(params, {"quickstart": judged()}, statuses((6, 6), (3, 6)), cpu_record())
    wider = headline_results(params, {"quickstart": judged(p_value="0.01", seeds="3", criterion="a rule")},
                             statuses((6, 6), (3, 6)), cpu_record(criterion="x", p_value="0.2", seeds="3"))
    assert plain == wider
    q1, q2 = plain
    assert q1 == HeadlineResult("quickstart", "Q1", "SCAFFOLD is non-inferior to FedAvg under label skew: no more "
                                "than 1 point less accurate", "SCAFFOLD > FedAvg (tested: SCAFFOLD - FedAvg > -0.01)", (INCONCLUSIVE, "0.852 vs 0.810 (+0.042)"),
                                (REPRODUCED, "0.9 vs 0.8"), "")
    assert q2.cpu is None and q2.gpu == (NOT_COMPUTED, "-") and q2.gpu_runs == "3 of 6 runs computed"
    # judged although its headline lacks runs (a claim reading part of them): its value, not a count
    assert headline_results(params, {"quickstart": judged()}, statuses((2, 6), (3, 6)), cpu_record())[0].gpu_runs == ""


def test_a_notebook_the_ledger_holds_nothing_of_reads_not_testable_with_its_count():
    rows = headline_results({"quickstart": QuickstartParams()}, {"quickstart": "the ledger holds none of its runs"},
                            statuses((0, 6), (0, 6)), cpu_record())
    assert [(r.claim_id, r.gpu, r.gpu_runs) for r in rows] == [("Q1", (NOT_COMPUTED, "-"), "0 of 6 runs computed"),
                                                               ("Q2", (NOT_COMPUTED, "-"), "0 of 6 runs computed")]


def test_the_block_counts_symbols_links_from_its_page_and_names_the_cpu_run():
    rows = headline_results({"quickstart": QuickstartParams()}, {"quickstart": judged()}, statuses((6, 6), (3, 6)),
                            cpu_record())
    block = results_block(rows, cpu_record(), {"quickstart": "paper: no single setting"}, prefix="../")
    assert block.startswith(BEGIN) and block.endswith(END)
    assert "**2 headline claims.** cpu profile (small-scale analogues): 1 ⚠️. " in block
    assert "from the ledger): 1 ✅ 1 ·; 1 of 2 testable" in block
    assert "| Q1 SCAFFOLD is non-inferior to FedAvg under label skew: no more than 1 point less accurate | SCAFFOLD > " \
           "FedAvg (tested: SCAFFOLD - FedAvg > -0.01) | ⚠️ inconclusive: 0.852 vs 0.810 (+0.042) | ✅ reproduced: 0.9 " \
           "vs 0.8 |" in block
    assert "| - (no cpu verdict) | · not testable: runs not computed yet: 3 of 6 runs computed |" in block
    assert "(../notebooks/expected-results-gpu.md#quickstart)" in block and STAMP in block


def test_a_record_before_the_current_rules_reads_to_be_rebuilt_in_every_cpu_cell():
    """The gpu verdicts stand; every cpu cell, the summary, the scales and the footer say the record is to be
    rebuilt, and how."""
    stale = CpuVerdicts.to_be_rebuilt("evidence/cpu/verdicts.csv", "evidence/cpu/verdicts.csv: predates ...")
    params = {"quickstart": QuickstartParams()}
    rows = headline_results(params, {"quickstart": judged()}, statuses((6, 6), (3, 6)), stale)
    block = results_block(rows, stale, scales(params, stale), prefix="")
    assert [r.cpu for r in rows] == [None, None]
    assert "cpu profile (small-scale analogues): record to be rebuilt. gpu profile" in block
    assert f"| SCAFFOLD > FedAvg (tested: SCAFFOLD - FedAvg > -0.01) | {TO_BE_REBUILT} | ✅ reproduced: 0.9 vs 0.8 |" \
        in block
    assert f"| {TO_BE_REBUILT} | · not testable: runs not computed yet: 3 of 6 runs computed |" in block
    assert "cpu: record to be rebuilt." in block and "(no cpu verdict)" not in block
    assert f"cpu verdicts: `evidence/cpu/verdicts.csv` predates the current verdict rules; rebuild it with " \
           f"`{REBUILD}`. gpu verdicts:" in block


@pytest.mark.parametrize("statement, short", [
    ("Joint FedAQ needs less energy than fixed 8-bit (Table II; the paper's row: 52.2%)",
     "Joint FedAQ needs less energy than fixed 8-bit"),
    ("saves energy vs fixed 8-bit (beta = alpha/sqrt(2n)) (Table IV; row: 17.6%)", "saves energy vs fixed 8-bit"),
    ("TACO reaches the target (70%) in fewer rounds than FedAvg",
     "TACO reaches the target (70%) in fewer rounds than FedAvg"),
    ("(ours): the gain comes from compensating quantization", "(ours): the gain comes from compensating quantization"),
    ("(only a parenthesis)", "(only a parenthesis)"),
])
def test_a_claims_short_words_drop_only_the_parentheses_that_close_it(statement, short):
    assert short_claim(statement) == short


def test_a_long_measured_value_is_cut_at_a_word():
    assert shortened("a b c", 10) == "a b c"
    assert shortened("alpha beta, gamma delta", 13) == "alpha beta …"
    assert shortened("x" * 5, 3) == "xxx …"  # one word longer than the limit: cut inside it


def test_the_block_replaces_what_stands_between_its_markers_and_needs_them_once_each():
    page = f"# Title\n\n{BEGIN}\nold table\n{END}\n\nafter\n"
    assert with_block(page, f"{BEGIN}\nnew\n{END}", "README.md") == f"# Title\n\n{BEGIN}\nnew\n{END}\n\nafter\n"
    for broken in ("# no markers\n", f"{END}\n{BEGIN}\n", f"{BEGIN}\n{BEGIN}\n{END}\n"):
        with pytest.raises(ValueError, match="README.md: needs the results table's markers once each, in order"):
            with_block(broken, "x", "README.md")
