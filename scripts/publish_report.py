"""`make report`: a profile's rendered results as pages a reader opens without running anything, for committing.

    python scripts/publish_report.py --results results --profile cpu          # -> docs/report/cpu/
    python scripts/publish_report.py --results /tmp/x --profile quick --out /tmp/pages

From the `--results` folder of a `reproduce` run it writes, into `--out` (default docs/report/<profile>/):
`REPORT.html` (REPORT.md as a page, verdicts coloured, each notebook named with a link to its page; its figures are
in those pages, not copied) and `<notebook>.html` for every notebook rendered under `<results>/<profile>/`: the
executed notebook through nbconvert's lab template, every table and figure in it, the parameters cells hidden.
Files of an earlier publication that this one does not write are removed, so the folder is exactly one run's.
A missing REPORT.md or a profile folder without a rendered notebook stops it, naming the path and what to run.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


class PublishError(ValueError):
    """A results folder that holds no report of the profile; the message names the path and the command to run."""


def rendered_notebooks(results: Path, profile: str) -> list[Path]:
    """`<results>/<profile>/<notebook>/<notebook>.ipynb` of every rendered notebook, by name."""
    found = sorted(p for p in (results / profile).glob("*/*.ipynb") if p.stem == p.parent.name)
    if not found:
        raise PublishError(f"{results / profile}: no rendered notebook (<notebook>/<notebook>.ipynb); render them with "
                           f"`python scripts/reproduce.py --profile {profile} --results {results}`")
    return found


def notebook_page(notebook: Path) -> str:
    """The executed notebook as one HTML page (nbconvert's lab template: figures embedded, the cells' tags as
    classes, which the notebooks' own style uses to hide their parameters cells)."""
    import nbformat
    from nbconvert import HTMLExporter

    body, _ = HTMLExporter(template_name="lab").from_notebook_node(nbformat.read(notebook, as_version=4))
    return body


def report_page(report_md: Path, notebooks: list[Path]) -> str:
    """REPORT.md as a page (`fedlib.report_html.markdown_html`), then a link to each notebook's page."""
    import html

    from fedlib.report_html import STYLE, markdown_html

    links = "".join(f'<li><a href="{html.escape(n.stem)}.html">{html.escape(n.stem)}</a>: every table and figure '
                    "of the rendered notebook</li>" for n in notebooks)
    return ('<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>Reproduction report</title>'
            f"<style>{STYLE}</style></head>\n<body>\n<h2>The notebooks</h2>\n<ul>{links}</ul>\n"
            + markdown_html(report_md.read_text()) + "\n</body></html>\n")


def publish(results: Path, profile: str, out: Path) -> list[Path]:
    """Write the pages of `results`' `profile` into `out`; return the files written."""
    report = results / "REPORT.md"
    if not report.is_file():
        raise PublishError(f"{report}: missing; run `python scripts/reproduce.py --profile {profile} --results "
                           f"{results}` first")
    notebooks = rendered_notebooks(results, profile)
    pages = {out / "REPORT.html": report_page(report, notebooks),
             **{out / f"{n.stem}.html": notebook_page(n) for n in notebooks}}
    out.mkdir(parents=True, exist_ok=True)
    for stale in set(out.glob("*.html")) - set(pages):
        stale.unlink()
    for path, text in pages.items():
        path.write_text(text, encoding="utf-8")
    return list(pages)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=Path("results"), help="the --results folder of a reproduce run")
    parser.add_argument("--profile", default="cpu", help="the profile whose rendering is published (default: cpu)")
    parser.add_argument("--out", type=Path, default=None, help="the folder to write (default: docs/report/<profile>)")
    args = parser.parse_args(argv)
    out = args.out or ROOT / "docs" / "report" / args.profile
    try:
        written = publish(args.results.expanduser().resolve(), args.profile, out)
    except PublishError as err:
        print(f"publish_report: error: {err}", file=sys.stderr)
        return 2
    for path in written:
        print(f"wrote {path} ({path.stat().st_size / 2**20:.1f} MiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
