"""The headline claims judged on the ledger's runs alone, on any CPU (`reproduce --from-ledger`).

A paper's `bundle_from_runs` (`fedlib.paper.Paper`) builds what its notebook derives from the runs, the tables
the notebook computes on the CPU (theory, Monte Carlo) left empty; the judge then decides the claims its headlines
name (with those they require, on the profile's cells where it has `on_profile`), every guard included: a claim
whose runs the ledger lacks reads "not testable", naming them. A paper without that builder gets one line saying
so. Beside each verdict stands the cpu profile's, from the committed cpu record (`fedlib.ledger.cpu_record`).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

import pandas as pd

from fedlib.claims.judge import judge
from fedlib.data import load_dataset
from fedlib.display import verdict_symbol
from fedlib.ledger.cpu_record import TO_BE_REBUILT, CpuVerdicts, cpu_column, cpu_note
from fedlib.ledger.entries import LedgerEntry, held_records
from fedlib.paper import paper
from fedlib.paper_params import PaperParams
from fedlib.report import NOT_COMPUTED, markdown_row
from fedlib.runs.spec import RunSpec
from fedlib.runs.store import Records


def judged_headlines(notebook: str, params: PaperParams, records: Records, root: str | None) -> pd.DataFrame | str:
    """The claims table of `notebook`'s headline claims judged on `records` (the ledger's runs of its plan; the
    dataset, under the data root `root`, gives the class count the chance guard reads), or why they are not judged."""
    declared = paper(notebook)
    if declared.bundle_from_runs is None:
        return (f"paper {notebook!r} builds no bundle from runs alone yet (`bundle_from_runs`); its claims are judged "
                "where its notebook runs")
    if "rounds" not in records:
        return "the ledger holds none of its runs"
    bundle = declared.bundle_from_runs(params, records, load_dataset(params.dataset, root=root).num_classes)
    return judge([declared.on(claim, params) for claim in declared.headline_claims()], bundle).table()


def ledger_verdicts(params: Mapping[str, PaperParams], specs: Mapping[str, Sequence[RunSpec]],
                    entries: Sequence[LedgerEntry], root: str | None) -> dict[str, pd.DataFrame | str]:
    """Per notebook that declares headlines (`params` and `specs`: its parameters and its plan), `judged_headlines`
    on the runs of the ledger's `entries` (`Ledger.entries()`, read once by the caller)."""
    return {name: judged_headlines(name, params[name], held_records(entries, specs[name]), root) for name in params
            if paper(name).headlines}


def verdicts_summary(tables: Mapping[str, pd.DataFrame | str]) -> str:
    """One line: how many headline claims got each verdict on the ledger's runs (a notebook not judged: each of its
    headline claims not testable, its runs not computed yet), with the verdicts' symbols."""
    verdicts = [v for name, table in tables.items()
                for v in (table["verdict"] if isinstance(table, pd.DataFrame)
                          else [NOT_COMPUTED] * len(paper(name).headline_claims()))]
    counts = Counter(verdicts)
    return (f"**Summary**: {len(verdicts)} headline claims judged on the ledger's runs: "
            + ", ".join(f"{n} {verdict_symbol(v)} {v}" for v, n in counts.most_common()) + ".")


def verdicts_markdown(tables: Mapping[str, pd.DataFrame | str], profile: str, cpu: CpuVerdicts) -> str:
    """Markdown: a summary line (`verdicts_summary`), then per notebook (a heading of its name) its headline claims
    judged on the ledger (claim, the paper's value, the value measured here, verdict, the cpu profile's verdict on the
    same claim from the record `cpu`, criterion, evidence, p-value and seeds; verdicts with their symbols), or why
    they are not;
    above them, once, which cpu run the cpu verdicts come from."""
    lines = [f"## Headline claims judged on the ledger's runs ({profile} profile)", "", verdicts_summary(tables), "",
             *cpu_note(cpu, tables)]
    for notebook, table in tables.items():
        lines += [f"### {notebook}", ""]
        if isinstance(table, str):
            lines += [f"Not judged from the ledger: {table}.", ""]
            continue
        lines += ["| claim | paper | measured | verdict | cpu verdict | criterion | evidence | p-value | seeds |",
                  "|---|---|---|---|---|---|---|---|---|"]
        lines += [markdown_row([r.claim, r.paper_value, r.measured, with_symbol(r.verdict), with_symbol(on_cpu),
                                r.criterion, r.evidence, r.p_value, r.seeds])
                  for r, on_cpu in zip(table.itertuples(), cpu_column(notebook, list(table["claim"]), cpu))]
        lines.append("")
    return "\n".join(lines)


def with_symbol(verdict: str) -> str:
    """`verdict` after its symbol ("✅ reproduced"); "-" (no verdict) and `TO_BE_REBUILT` as they are."""
    return verdict if verdict in ("-", TO_BE_REBUILT) else f"{verdict_symbol(verdict)} {verdict}"
