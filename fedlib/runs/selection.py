"""`--select key=value,...` checked against the runs it selects from, the same way in every command
(`reproduce --select`, `python -m fedlib.runs export --select`): a key or value that matches no run is an error
listing the valid ones (a value holding a comma double-quoted, as `--select` takes it), never an empty selection
that passes silently."""
from __future__ import annotations

import difflib
from collections.abc import Mapping, Sequence

from fedlib.runs.spec import RunSpec, SelectionError, selection_value


def check_selection(selection: Mapping[str, Sequence[str]], specs: Sequence[RunSpec]) -> None:
    """Raise SelectionError for a key no spec has, or a value no spec has for its key, listing the valid ones."""
    known: dict[str, set[str]] = {}
    for spec in specs:
        for key, value in spec.fields_for_selection().items():
            known.setdefault(key, set()).add(value)
    problems = []
    for key, values in selection.items():
        if key not in known:
            close = difflib.get_close_matches(key, known, n=1)
            problems.append(f"unknown key {key!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                            + f"; keys: {', '.join(sorted(known)) or 'none (no runs)'}")
            continue
        valid = {v.casefold(): v for v in known[key]}
        for value in values:
            if value.casefold() not in valid:
                close = difflib.get_close_matches(value.casefold(), valid, n=1)
                shown = [selection_value(v) for v in sorted(known[key])]
                listing = ", ".join(shown[:40]) + (f", ... ({len(shown)} in all)" if len(shown) > 40 else "")
                problems.append(f"{key}={selection_value(value)} matches no run" + (
                    f" (did you mean {selection_value(valid[close[0]])!r}?)" if close else "")
                    + f"; values of {key}: {listing}")
    if problems:
        raise SelectionError("--select: " + "; ".join(problems))
    if not any(spec.matches(selection) for spec in specs):
        raise SelectionError(f"--select: no run has all of {dict(selection)} at once")
