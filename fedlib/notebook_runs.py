"""The runs a notebook reads: computed into the run store, or, with its `ledger` parameter, served from an evidence
ledger (`fedlib.ledger`) with none computed.

    records = notebook_records(specs, params)      # every notebook's run stage
    records["rounds"]                              # tidy tables, as `run_specs` returns them
    records.table("rounds", ["round", "test_acc"])  # the same, or empty with these columns where no run is held
    if records.complete(table_specs, "Table II"):  # a section reads its runs only when all are there; else it
        ...                                        # shows which runs it lacks, and the notebook goes on
    if records.shown(figure_specs, "Fig. 3"):      # a section drawn from the runs held, naming those it lacks

Served from a ledger, the records hold the runs the ledger has; a run it lacks is named where a table needs it,
never computed, and the claims read "not testable", naming it, as they do for any missing run. A table of which no
run is held is absent from the records (`"rounds" not in records`); `table` gives it empty, with named columns.
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence

import pandas as pd

from fedlib.ledger.entries import Ledger, LedgerEntry, NotALedgerError, held_records
from fedlib.ledger.status import stale_lines, stale_notes
from fedlib.paper_params import PaperParams, ParameterError
from fedlib.runs.runner import run_specs
from fedlib.runs.spec import RunSpec, named_runs
from fedlib.runs.fingerprint import Keys
from fedlib.runs.store import RunStore

class NotebookRecords(dict[str, pd.DataFrame]):
    """Tidy records (table name -> frame, `fedlib.runs.runner.tidy`) of the runs `held` out of those asked for."""

    def __init__(self, tables: Mapping[str, pd.DataFrame], asked: Iterable[RunSpec], keys: Mapping[RunSpec, str],
                 source: str) -> None:
        super().__init__(tables)
        self.asked = tuple(dict.fromkeys(asked))
        self.keys = dict(keys)  # each held run's spec -> the key its rows carry as `run`
        self.source = source

    @property
    def held(self) -> frozenset[RunSpec]:
        return frozenset(self.keys)

    def select(self, specs: Iterable[RunSpec]) -> dict[str, pd.DataFrame]:
        """Every table's rows of the held runs of `specs`."""
        keys = {self.keys[s] for s in specs if s in self.keys}
        return {name: frame[frame["run"].isin(keys)] for name, frame in self.items()}

    def table(self, name: str, columns: Sequence[str]) -> pd.DataFrame:
        """Table `name` of the held runs; where no held run has it (the ledger holds none of them), an empty frame
        with the asked runs' id columns (labels, seed, run) and `columns`, so that what reads it computes empty
        (the claims judged on it name every run missing) rather than failing."""
        if name in self:
            return self[name]
        ids = dict.fromkeys(k for s in self.asked for k in s.get("labels"))
        return pd.DataFrame(columns=[*ids, "seed", "run", *columns])

    def lacking(self, specs: Iterable[RunSpec]) -> list[RunSpec]:
        """Those of `specs` whose runs these records do not hold, in order, each once."""
        return [s for s in dict.fromkeys(specs) if s not in self.held]

    def complete(self, specs: Iterable[RunSpec], what: str) -> bool:
        """True when every run of `specs` is held; else False, after showing that `what` (a table, a figure) is
        not shown and which of its runs `self.source` lacks."""
        specs = list(dict.fromkeys(specs))
        missing = self.lacking(specs)
        if missing:
            _note(f"**{what}: not shown.** Of its {len(specs)} runs, {self.source} holds "
                  f"{len(specs) - len(missing)}; missing: {named_runs(missing)}.")
        return not missing

    def shown(self, specs: Iterable[RunSpec], what: str) -> bool:
        """True when a run of `specs` is held, after showing, where some are not, that `what` is drawn from part of
        its runs and which it lacks; False, as `complete` says, when none is."""
        specs = list(dict.fromkeys(specs))
        missing = self.lacking(specs)
        if len(missing) == len(specs):
            return self.complete(specs, what)
        if missing:
            _note(f"**{what}: from {len(specs) - len(missing)} of its {len(specs)} runs**; {self.source} lacks "
                  f"{named_runs(missing)}.")
        return True


def _note(markdown: str) -> None:
    from IPython.display import Markdown, display

    display(Markdown(markdown))


def notebook_records(specs: Sequence[RunSpec], params: PaperParams, *, progress: bool = True) -> NotebookRecords:
    """The records of `specs`: computed into the run store where `params.ledger` is None (those not yet there;
    `runs_root`, `runner`, `ray_address`, `data_root` as the parameters say), else read from that ledger, computing
    none (each ledger entry verified as it is read; `fedlib.ledger.LedgerError` names a damaged one; a `ledger`
    that is no ledger folder, `Ledger.require`, is a `ParameterError`)."""
    specs = list(dict.fromkeys(specs))
    if params.ledger is None:
        store, keys = RunStore.at(params.runs_root), Keys(params.data_root)
        tables = run_specs(specs, store=store, keys=keys, executor=params.runner, ray_address=params.ray_address,
                           progress=progress)
        return NotebookRecords(tables, specs, {s: keys(s).key for s in specs}, f"the run store ({store.root})")
    asked = set(specs)
    try:
        entries = [e for e in Ledger(params.ledger).entries() if e.spec in asked]
    except NotALedgerError as err:
        raise ParameterError(f"{type(params).__name__}.ledger: {err}") from None
    show_stale(entries, params.data_root)
    keys = {e.spec: e.key for e in entries}
    held = [s for s in specs if s in keys]
    source = f"the ledger {params.ledger}"
    missing = [s for s in specs if s not in keys]
    print(f"{len(specs)} runs: {len(held)} from {source}, {len(missing)} not in it (none computed)"
          + (f": {named_runs(missing)}" if missing else ""), file=sys.stderr, flush=True)
    return NotebookRecords(held_records(entries, held), specs, {s: keys[s] for s in held}, source)


def show_stale(entries: Sequence[LedgerEntry], root: str | None) -> None:
    """Shows which of `entries` were computed by code that has changed since (`fedlib.ledger.status.stale_notes`,
    today's code version read with the data under `root`): their numbers stand as computed then, said so."""
    notes = stale_notes(entries, lambda _: root)
    if notes:
        count = f"{len(notes)} ledger {'entry was' if len(notes) == 1 else 'entries were'}"
        _note(f"**{count} computed by code that has changed since**; the tables and claims below read them as "
              "they were computed:\n\n" + "\n".join(f"- {line}" for line in stale_lines(notes)))
