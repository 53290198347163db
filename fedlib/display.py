"""What a notebook shows beside its code, in Lab, in papermill's output and in its HTML: tables whole (every cell's
text wrapped instead of cut with "..." at pandas' `display.max_colwidth`) with a claims table's verdicts coloured,
a one-line scorecard of the verdicts at the top, the parameters cells hidden in HTML, and progress bars unless
tqdm's own switch turns them off.

    full_table(claims.table())      # a claims table: the "verdict" column coloured by kind
    full_table(theory_rows)         # any other table: wrapped, numbers at `precision` digits
"""
from __future__ import annotations

import hashlib
import html
import os

import pandas as pd
from pandas.io.formats.style import Styler

from fedlib.report import (AGREES, AT_THIS_SCALE, DISAGREES, DIVERGED, ILLUSTRATIVE, INCONCLUSIVE, NOT_REPRODUCED,
                           NOT_TESTABLE, NOTHING_TO_TEST, PARTLY, REPRODUCED, VACUOUS)

GREEN, AMBER, RED, GREY = "#c8e6c9", "#ffe9a8", "#ffcdd2", "#e6e6e6"
# A verdict's colour says how it reads: supported (green), mixed or undecided (amber), contradicted (red),
# not a test of the claim (grey).
VERDICT_COLOURS: dict[str, str] = {
    REPRODUCED: GREEN, AGREES: GREEN,
    PARTLY: AMBER, INCONCLUSIVE: AMBER, VACUOUS: AMBER, AT_THIS_SCALE[INCONCLUSIVE]: AMBER,
    NOT_REPRODUCED: RED, DIVERGED: RED, DISAGREES: RED, AT_THIS_SCALE[NOT_REPRODUCED]: RED,
    **{cause: GREY for cause in NOT_TESTABLE}, NOTHING_TO_TEST: GREY, ILLUSTRATIVE: GREY,
}
# The same four kinds where markdown shows no colour (README.md, docs/results.md, the expected results).
SYMBOLS = {GREEN: "✅", AMBER: "⚠️", RED: "❌", GREY: "·"}
VERDICT_SYMBOLS: dict[str, str] = {verdict: SYMBOLS[colour] for verdict, colour in VERDICT_COLOURS.items()}


def verdict_symbol(verdict: str) -> str:
    """The symbol of `verdict`'s kind (`VERDICT_SYMBOLS`); ValueError for a text that is not one of the judge's
    verdicts (`fedlib.report.VERDICTS`)."""
    if verdict not in VERDICT_SYMBOLS:
        raise ValueError(f"{verdict!r} is not one of the judge's verdicts (fedlib.report.VERDICTS): give it a colour "
                         "in fedlib.display.VERDICT_COLOURS")
    return VERDICT_SYMBOLS[verdict]


# Lab collapses the parameters cell by its `jupyter.source_hidden` metadata, which nbconvert's HTML ignores; nbconvert's
# lab template gives each cell its tags as classes (celltag_<tag>), so this rule, shown as an output near the top of
# the notebook, hides the code of the parameters cell and of papermill's injected copy in the rendered HTML.
PARAMETERS_HIDDEN_CSS = ("<style>.celltag_parameters .jp-Cell-inputWrapper, "
                         ".celltag_injected-parameters .jp-Cell-inputWrapper { display: none; }</style>")


def hide_parameters_in_html() -> None:
    """Show `PARAMETERS_HIDDEN_CSS` (invisible itself): the notebook's HTML rendering hides its parameters cells."""
    from IPython.display import HTML, display

    display(HTML(PARAMETERS_HIDDEN_CSS))


def verdict_style(verdict: object) -> str:
    """The CSS of a verdict cell: its colour, or none for a value that is not a verdict."""
    colour = VERDICT_COLOURS.get(str(verdict))
    return f"background-color: {colour}; font-weight: bold" if colour else ""


def full_table(table: pd.DataFrame, verdict_column: str = "verdict", precision: int = 4) -> Styler:
    """`table` styled to show every cell whole (text wrapped, left-aligned, top-aligned), numbers at `precision`
    digits, and the `verdict_column` (if `table` has one) coloured by `VERDICT_COLOURS`."""
    styler = table.style.format(precision=precision, na_rep="–")
    styler = styler.set_properties(**{"white-space": "pre-wrap", "text-align": "left", "vertical-align": "top",
                                      "max-width": "32em"})
    styler = styler.set_table_styles([{"selector": "th", "props": "text-align: left; vertical-align: top;"}])
    if verdict_column in table.columns:
        styler = styler.map(verdict_style, subset=[verdict_column])
    # CSS ids from the content, not random: a rebuilt notebook differs only where its tables do
    return styler.set_uuid(hashlib.sha1(table.to_csv().encode()).hexdigest()[:10])


def _counted(verdicts: pd.Series) -> str:
    counts = verdicts.astype(str).value_counts()
    return " · ".join(f'<span style="{verdict_style(v)}; padding: 0 0.3em">{n} {html.escape(v)}</span>'
                      for v, n in counts.items())


def scorecard_html(verdicts: pd.Series, anchor: str, errata: pd.Series | None = None) -> str:
    """One line: how many claims got each verdict (coloured as in the claims table), linking to `#anchor`; the rows
    `errata` marks (checks of a formula the paper prints, `fedlib.report.Claims.errata_checks`) counted apart, where
    their "not reproduced" confirms an erratum rather than a failed experiment."""
    marked = errata.to_numpy(dtype=bool) if errata is not None else None
    if marked is not None and len(marked) != len(verdicts):
        raise ValueError(f"errata marks {len(marked)} rows of a claims table of {len(verdicts)}: pass "
                         "claims.errata_checks() of the same claims")
    checks = verdicts[marked] if marked is not None else verdicts.iloc[:0]
    experiments = verdicts[~marked] if marked is not None else verdicts
    line = (f'<p><b>Verdicts</b> (<a href="#{html.escape(anchor)}">claims table</a>): '
            f"{_counted(experiments) or 'no claims'}")
    if len(checks):
        line += (f"<br><b>Errata checks</b> (formulas the paper prints, checked; <i>not reproduced</i> confirms an "
                 f"erratum): {_counted(checks)}")
    return line + "</p>"


class Scorecard:
    """A notebook's one-line verdict count near its top, filled in when its claims are judged at the end.

    It is one IPython display (`display_id`) that `show` replaces: Lab updates it live, and papermill (nbclient)
    rewrites that output in the executed notebook, so its HTML rendering shows the final line at the top too."""

    def __init__(self, anchor: str) -> None:
        from IPython.display import HTML, display

        self.anchor = anchor
        self._handle = display(HTML(f'<p><b>Verdicts</b>: judged at the end of the notebook (<a href="#{anchor}">'
                                    f"claims table</a>) once its runs have computed.</p>"), display_id=True)

    def show(self, claims_table: pd.DataFrame, errata: pd.Series | None = None) -> None:
        """Replace the line with the counts of `claims_table["verdict"]`, the rows `errata` marks counted apart."""
        from IPython.display import HTML, display

        line = HTML(scorecard_html(claims_table["verdict"], self.anchor, errata))
        if self._handle is None:  # outside a kernel (a plain Python script) there is no display to update
            display(line)
        else:
            self._handle.update(line)


def show_progress() -> bool:
    """False where tqdm's own switch `TQDM_DISABLE` is set (1, true, yes), else True: `run_specs(progress=...)` passes
    tqdm an explicit `disable`, which that variable does not override. `make notebooks` sets it, so that the
    committed outputs carry no bars."""
    return os.environ.get("TQDM_DISABLE", "").strip().lower() not in ("1", "true", "yes")
