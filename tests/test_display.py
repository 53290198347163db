"""Claims and theory tables shown whole with coloured verdicts, and the scorecard line at a notebook's top."""
from __future__ import annotations

import re

import nbformat
import pandas as pd
import papermill
import pytest

from fedlib.display import (PARAMETERS_HIDDEN_CSS, VERDICT_COLOURS, Scorecard, full_table, scorecard_html,
                            show_progress, verdict_style)
from headless_chromium import chromium, needs_chromium

from fedlib.report import COLUMNS, NOT_COMPUTED, NOT_REPRODUCED, REPRODUCED, VERDICTS


def test_every_verdict_has_a_colour():
    assert set(VERDICT_COLOURS) == set(VERDICTS)
    assert verdict_style("not a verdict") == ""


def test_full_table_shows_long_text_whole_and_colours_verdicts():
    long = "criterion " + "word " * 80  # far beyond pandas' display.max_colwidth (50)
    table = pd.DataFrame([["c1", "1", "2", long, "e", "0.01", "3", REPRODUCED],
                          ["c2", "1", "2", "short", "e", "0.9", "3", NOT_REPRODUCED]],
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
    line = scorecard_html(pd.Series([REPRODUCED, NOT_COMPUTED, REPRODUCED]), "Claims")
    assert '<a href="#Claims">' in line
    assert f">2 {REPRODUCED}</span>" in line and f">1 {NOT_COMPUTED}</span>" in line
    assert "no claims" in scorecard_html(pd.Series([], dtype=str), "Claims")


def test_scorecard_counts_errata_checks_apart_from_the_experiments():
    """TACO's Lemma 2 and Corollary 2 rows check formulas the paper prints: their "not reproduced" stands on the
    errata line, not among the experimental verdicts."""
    from fedlib.papers.taco.claims import CLAIMS
    from fedlib.report import Claims, criterion_met

    assert {c.id for c in CLAIMS if c.erratum} == {"L2", "Cor2"}
    claims = Claims()
    claims.add("C5 an experiment", "-", "-", criterion_met("ordered", True))
    claims.add("L2 Lemma 2 as printed", "-", "-", criterion_met("identity holds", False), erratum=True)
    claims.add("Cor2 Corollary 2", "-", "-", criterion_met("gradient differs", False), erratum=True)
    line = scorecard_html(claims.table()["verdict"], "Claims", claims.errata_checks())
    verdicts, errata = line.split("Errata checks")
    assert f">1 {REPRODUCED}</span>" in verdicts and NOT_REPRODUCED not in verdicts
    assert f">2 {NOT_REPRODUCED}</span>" in errata and f">1 {REPRODUCED}<" not in errata
    assert "Errata checks" not in scorecard_html(claims.table()["verdict"][:1], "Claims", claims.errata_checks()[:1])
    with pytest.raises(ValueError, match="errata marks 3 rows of a claims table of 1"):
        scorecard_html(claims.table()["verdict"][:1], "Claims", claims.errata_checks())


def test_scorecard_outside_a_kernel_prints_the_final_line(capsys):
    scorecard = Scorecard("Claims")
    scorecard.show(pd.DataFrame({"verdict": [REPRODUCED]}))
    assert "IPython.core.display.HTML" in capsys.readouterr().out



def test_papermill_output_shows_the_final_scorecard_at_the_top(tmp_path):
    """nbclient applies the last cell's display update to the first cell's output: the executed notebook (and its
    HTML) reads the verdicts at the top."""
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell('from fedlib.display import Scorecard\nscorecard = Scorecard("Claims")'),
        nbformat.v4.new_code_cell('import pandas as pd\nscorecard.show(pd.DataFrame({"verdict": ["reproduced"]}))')],
        metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})
    nbformat.write(nb, tmp_path / "nb.ipynb")
    papermill.execute_notebook(str(tmp_path / "nb.ipynb"), str(tmp_path / "out.ipynb"), kernel_name="python3",
                               progress_bar=False)
    top = nbformat.read(tmp_path / "out.ipynb", as_version=4).cells[0].outputs
    assert len(top) == 1 and ">1 reproduced</span>" in top[0]["data"]["text/html"]


@needs_chromium
def test_nbconvert_html_hides_the_parameters_cells_in_a_browser(tmp_path):
    from nbconvert import HTMLExporter

    style = nbformat.v4.new_output("display_data", data={"text/html": PARAMETERS_HIDDEN_CSS, "text/plain": "<HTML>"})
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("rounds: int = 15  # rounds", metadata={"tags": ["parameters"]}),
        nbformat.v4.new_code_cell("rounds = 3", metadata={"tags": ["injected-parameters"]}),
        nbformat.v4.new_code_cell("hide_parameters_in_html()", outputs=[style])])
    page, _ = HTMLExporter(template_name="lab").from_notebook_node(nb)
    probe = ("<script>document.title = [...document.querySelectorAll('.jp-Cell-inputWrapper')].map("
             "e => getComputedStyle(e).display).join(',');</script></body>")
    (tmp_path / "nb.html").write_text(page.replace("</body>", probe))
    dom = chromium(tmp_path / "nb.html", tmp_path / "profile", "--dump-dom")
    shown = re.search(r"<title>(.*?)</title>", dom).group(1).split(",")
    assert shown[:2] == ["none", "none"] and shown[2] != "none"  # both parameters cells hidden, the others shown


@pytest.mark.parametrize("value, shown", [(None, True), ("", True), ("0", True), ("1", False), ("true", False),
                                          ("YES", False)])
def test_progress_follows_tqdm_s_own_switch(monkeypatch, value, shown):
    if value is None:
        monkeypatch.delenv("TQDM_DISABLE", raising=False)
    else:
        monkeypatch.setenv("TQDM_DISABLE", value)
    assert show_progress() is shown
