"""REPORT.html: REPORT.md's text with coloured verdicts and every rendered notebook's figures, in one file that a real
browser (headless Chromium, where installed) displays."""
from __future__ import annotations

import base64
import io

import matplotlib
import nbformat
import numpy as np
import pytest
from headless_chromium import chromium, needs_chromium

from fedlib.display import VERDICT_COLOURS
from fedlib.report import NOT_REPRODUCED, REPRODUCED
from fedlib.report_html import notebook_figures, write_report_html

matplotlib.use("Agg")
RED = (255, 0, 0)


def _red_png() -> str:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(3, 2), dpi=50)
    fig.patch.set_facecolor("red")
    ax.set_axis_off()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", facecolor="red")
    plt.close(fig)
    return base64.b64encode(buffer.getvalue()).decode()


@pytest.fixture
def results(tmp_path):
    """A results folder as `reproduce` leaves it: REPORT.md and cpu/<notebook>/<notebook>.ipynb with a figure."""
    (tmp_path / "REPORT.md").write_text(
        "# Reproduction report\n\n## quickstart\n\n| claim | verdict |\n|---|---|\n"
        f"| SCAFFOLD beats FedAvg | {REPRODUCED} |\n| FedProx close to FedAvg | {NOT_REPRODUCED} |\n")
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("## Runs\nthe curves"),
        nbformat.v4.new_code_cell("plot()", outputs=[nbformat.v4.new_output(
            "display_data", data={"image/png": _red_png(), "text/plain": "<Figure>"})]),
        nbformat.v4.new_code_cell("print(1)", outputs=[nbformat.v4.new_output("stream", text="1\n")])])
    (tmp_path / "cpu" / "quickstart").mkdir(parents=True)
    nbformat.write(notebook, tmp_path / "cpu" / "quickstart" / "quickstart.ipynb")
    return tmp_path


def test_report_html_holds_the_report_coloured_and_the_figures(results):
    page = write_report_html(results / "REPORT.md", results / "cpu")
    assert page == results / "REPORT.html"
    text = page.read_text()
    assert "<table>" in text and "SCAFFOLD beats FedAvg" in text
    assert f'<td style="background-color: {VERDICT_COLOURS[REPRODUCED]}; font-weight: bold">{REPRODUCED}</td>' in text
    assert f"background-color: {VERDICT_COLOURS[NOT_REPRODUCED]}" in text
    assert text.count("data:image/png;base64,") == 1 and "<figcaption>Runs</figcaption>" in text
    assert '<a href="cpu/quickstart/quickstart.ipynb">' in text  # relative: the folder can move


def test_notebook_figures_are_captioned_by_the_heading_above(results):
    figures = notebook_figures(results / "cpu" / "quickstart" / "quickstart.ipynb")
    assert [caption for caption, _ in figures] == ["Runs"]


@needs_chromium
def test_chromium_shows_the_report_and_its_figure(results, tmp_path):
    from PIL import Image

    page = write_report_html(results / "REPORT.md", results / "cpu")
    dom = chromium(page, tmp_path / "profile", "--dump-dom")
    assert "SCAFFOLD beats FedAvg" in dom and "data:image/png;base64," in dom
    shot = tmp_path / "report.png"
    chromium(page, tmp_path / "profile", f"--screenshot={shot}", "--window-size=1000,1400")
    pixels = np.asarray(Image.open(shot).convert("RGB")).reshape(-1, 3)
    red = (pixels == RED).all(axis=1).sum()
    green = (pixels == tuple(int(VERDICT_COLOURS[REPRODUCED][i:i + 2], 16) for i in (1, 3, 5))).all(axis=1).sum()
    assert red > 1000, "the embedded figure (a red 150x100 image) is not drawn"
    assert green > 100, "the reproduced verdict's cell is not coloured"
