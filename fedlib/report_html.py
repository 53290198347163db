"""REPORT.html beside REPORT.md: the same report as a page a browser opens, verdicts coloured, followed by every
rendered notebook's figures (the PNG outputs of `<profile>/<notebook>/<notebook>.ipynb`), embedded so that the one
file carries them.

    write_report_html(results / "REPORT.md", results / "cpu")   # -> results/REPORT.html
"""
from __future__ import annotations

import html
import re
from pathlib import Path

import nbformat

from fedlib.display import VERDICT_COLOURS

STYLE = """body { font-family: sans-serif; max-width: 80em; margin: 2em auto; line-height: 1.4; }
table { border-collapse: collapse; margin: 1em 0; }
th, td { border: 1px solid #bbb; padding: 0.3em 0.5em; text-align: left; vertical-align: top; white-space: pre-wrap; }
figure { display: inline-block; margin: 0.5em; max-width: 48%; }
figure img { max-width: 100%; }
figcaption { font-size: 0.85em; color: #444; }"""


def markdown_html(text: str) -> str:
    """Markdown (with tables) as HTML, the cells whose whole text is a verdict coloured as in the notebooks."""
    import mistune

    body = mistune.create_markdown(plugins=["table"])(text)
    for verdict, colour in VERDICT_COLOURS.items():
        body = body.replace(f"<td>{html.escape(verdict, quote=False)}</td>",
                            f'<td style="background-color: {colour}; font-weight: bold">'
                            f"{html.escape(verdict, quote=False)}</td>")
    return body


def notebook_figures(notebook: Path) -> list[tuple[str, str]]:
    """(caption, base64 PNG) of every figure an executed notebook shows, captioned by the heading above it."""
    figures, heading = [], notebook.stem
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type == "markdown":
            headings = re.findall(r"^#+\s+(.+)$", cell.source, flags=re.MULTILINE)
            heading = headings[-1] if headings else heading
        for output in cell.get("outputs", []) if cell.cell_type == "code" else []:
            png = output.get("data", {}).get("image/png")
            if png:
                figures.append((heading, png.replace("\n", "")))
    return figures


def report_html(report_md: Path, profile_dir: Path) -> str:
    """The page: REPORT.md's text, then one section of figures per notebook rendered under `profile_dir`."""
    parts = [markdown_html(report_md.read_text())]
    for notebook in sorted(profile_dir.glob("*/*.ipynb")):
        if notebook.stem != notebook.parent.name:
            continue  # only the rendered notebook itself, <notebook>/<notebook>.ipynb
        figures = notebook_figures(notebook)
        parts.append(f"<h2>Figures: {html.escape(notebook.stem)}</h2>")
        link = html.escape(notebook.resolve().relative_to(report_md.parent.resolve()).as_posix()
                           if notebook.resolve().is_relative_to(report_md.parent.resolve()) else notebook.as_uri())
        parts.append(f'<p>{len(figures)} figure(s) from <a href="{link}">{link}</a>.</p>')
        parts += [f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{png}">'
                  f"<figcaption>{html.escape(caption)}</figcaption></figure>" for caption, png in figures]
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Reproduction report</title>'
            f"<style>{STYLE}</style></head>\n<body>\n" + "\n".join(parts) + "\n</body></html>\n")


def write_report_html(report_md: Path, profile_dir: Path) -> Path:
    """Write `report_html` beside `report_md` as REPORT.html; return its path."""
    target = report_md.with_suffix(".html")
    target.write_text(report_html(report_md, profile_dir), encoding="utf-8")
    return target
