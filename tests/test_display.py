"""Claims and theory tables shown whole with coloured verdicts, and the scorecard line at a notebook's top."""
from __future__ import annotations

import pandas as pd

from fedlib.display import VERDICT_COLOURS, Scorecard, full_table, scorecard_html, verdict_style
from fedlib.report import COLUMNS, NOT_REPRODUCED, NOT_TESTABLE, REPRODUCED, VERDICTS


def test_every_verdict_has_a_colour():
    assert set(VERDICT_COLOURS) == set(VERDICTS)
    assert verdict_style("not a verdict") == ""


def test_full_table_shows_long_text_whole_and_colours_verdicts():
    long = "criterion " + "word " * 80  # far beyond pandas' display.max_colwidth (50)
    table = pd.DataFrame([["c1", "1", "2", long, "e", REPRODUCED], ["c2", "1", "2", "short", "e", NOT_REPRODUCED]],
                         columns=COLUMNS)
    page = full_table(table).to_html()
    assert long.strip() in page and "..." not in page
    assert page.count(f"background-color: {VERDICT_COLOURS[REPRODUCED]}") == 1
    assert page.count(f"background-color: {VERDICT_COLOURS[NOT_REPRODUCED]}") == 1
    assert "white-space: pre-wrap" in page
    assert full_table(table).to_html() == page  # the same table, the same HTML (no random ids)


def test_full_table_of_a_table_without_verdicts():
    page = full_table(pd.DataFrame({"statement": ["x " * 60], "value": [0.123456789]})).to_html()
    assert ("x " * 60).strip() in page and "0.1235" in page and "background-color" not in page


def test_scorecard_counts_each_verdict_and_links_to_the_claims():
    line = scorecard_html(pd.Series([REPRODUCED, NOT_TESTABLE, REPRODUCED]), "Claims")
    assert '<a href="#Claims">' in line
    assert f">2 {REPRODUCED}</span>" in line and f">1 {NOT_TESTABLE}</span>" in line
    assert "no claims" in scorecard_html(pd.Series([], dtype=str), "Claims")


def test_scorecard_outside_a_kernel_prints_the_final_line(capsys):
    scorecard = Scorecard("Claims")
    scorecard.show(pd.DataFrame({"verdict": [REPRODUCED]}))
    assert "IPython.core.display.HTML" in capsys.readouterr().out

