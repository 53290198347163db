"""What the ledger holds of a profile's plan, per headline claim, computed from the ledger alone (no run, no data).

`headline_status` counts each headline's runs present in the ledger (matched by spec: a machine without the
dataset cannot recompute its fingerprint, so the entry's recorded one stands); a headline whose runs are not all
there reads "not testable: k of n runs computed", naming the missing runs. `expected_results` is that as the
markdown committed in `notebooks/expected-results-gpu.md`, rebuilt whenever the ledger grows (a test checks the
committed file against the ledger). `stale_notes` says, per entry computed by other code than today's, "computed at
commit X; changed since: <definitions>".
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from fedlib.ledger.entries import LedgerEntry, changed_today
from fedlib.ledger.priority import REST, prioritized
from fedlib.paper import Headline, paper
from fedlib.runs.spec import RunSpec, named_runs, run_name
from fedlib.trust import ImportNotAllowedError


@dataclass(frozen=True)
class HeadlineStatus:
    """A `headline`'s runs in the plan, those of them the ledger holds (`present`) and the device each of those was
    computed on (`devices`, in the order of `present`)."""

    notebook: str
    headline: Headline
    runs: tuple[RunSpec, ...]
    present: tuple[RunSpec, ...]
    devices: tuple[str, ...]

    @property
    def claims(self) -> str:
        return self.headline.claims

    def of_claim(self, claim_id: str) -> HeadlineStatus:
        """The status of the runs `claim_id` reads: those of the headline's first part (`Headline.first`) that
        names it, else all the headline's."""
        part = next((p for p in self.headline.first if claim_id in p.claim_ids()), None)
        return self if part is None else self.of_part(part)

    def of_part(self, part: Headline) -> HeadlineStatus:
        """The status of the runs of the headline's `part` (one of its `first`)."""
        kept = [i for i, spec in enumerate(self.present) if part.matches(spec)]
        return HeadlineStatus(self.notebook, part, tuple(s for s in self.runs if part.matches(s)),
                              tuple(self.present[i] for i in kept), tuple(self.devices[i] for i in kept))

    def verdict_input(self, stale: Mapping[RunSpec, str] | None = None) -> str:
        """"all n runs computed" or "not testable: k of n runs computed (missing: ...)"; then, for each of its runs
        in `stale` (spec -> "computed at commit X; changed since: ..."), that note."""
        k, n = len(self.present), len(self.runs)
        shown = named_runs([s for s in self.runs if s not in self.present], shown=4)
        said = f"all {n} runs computed" if k == n else f"not testable: {k} of {n} runs computed (missing: {shown})"
        notes = [f"{run_name(s)} {stale[s]}" for s in self.present if stale and s in stale]
        return said + "".join(f"; {note}" for note in notes)


def headline_status(grids: Mapping[str, Sequence[RunSpec]], held: Mapping[RunSpec, str]) -> list[HeadlineStatus]:
    """One status per declared headline of each notebook of `grids` (notebook -> its specs), in declaration order,
    its runs in the order a piece computes them (its `first` parts first); `held`: the specs the ledger holds, each
    with the device it was computed on (`held_devices`)."""
    out = []
    for notebook, specs in grids.items():
        for headline in paper(notebook).headlines:
            runs = tuple(sorted((s for s in specs if headline.matches(s)), key=headline.part))
            present = tuple(s for s in runs if s in held)
            out.append(HeadlineStatus(notebook, headline, runs, present, tuple(held[s] for s in present)))
    return out


def held_devices(entries: Sequence[LedgerEntry]) -> dict[RunSpec, str]:
    """Each spec the ledger's `entries` hold -> the name of the device its entry was computed on."""
    return {e.spec: str(e.provenance.get("device_name")) for e in entries}


def expected_results(grids: Mapping[str, Sequence[RunSpec]], entries: Sequence[LedgerEntry], ledger_name: str,
                     profile: str = "gpu", stale: Mapping[RunSpec, str] | None = None, verdicts: str = "") -> str:
    """Markdown: the headline claims judged on the ledger (`verdicts`, `fedlib.claims.ledger_verdicts`)
    first, then the bookkeeping: the ledger's devices, commits and minutes per notebook, and every headline's runs
    computed in the `profile`'s plan (`grids`), then each of its parts' (`Headline.first`, in the order a piece
    computes them), each headline naming its runs in `stale` with their notes (REPORT.md
    gives them; the committed expected results, which must not change with unrelated code, do not)."""
    plan = list(dict.fromkeys(s for specs in grids.values() for s in specs))
    held = held_devices(entries)
    statuses = headline_status(grids, held)
    complete = [s for s in statuses if len(s.present) == len(s.runs)]
    lines = [f"# Expected results of the {profile} profile, from the ledger", "",
             f"Generated from `{ledger_name}` by `python scripts/reproduce.py --profile {profile} --from-ledger "
             "--write-expected` (`make ledger-expected`); a test checks it against the ledger. Rebuild it whenever "
             f"the ledger grows. The ledger holds {sum(s in held for s in plan)} of the plan's {len(plan)} runs; "
             f"headlines with all their runs: {len(complete)} of {len(statuses)} "
             "([what the ledger holds](#what-the-ledger-holds)).", ""]
    if verdicts:
        lines += [verdicts.strip("\n"), ""]
    lines += ["## What the ledger holds", ""]
    if not entries:
        lines += [f"The ledger is empty: none of the plan's {len(plan)} runs has been computed yet, so every "
                  "headline claim is not testable.", ""]
    else:
        devices = sorted({str(e.provenance.get("device_name")) for e in entries})
        commits = sorted({e.commit[:10] for e in entries})
        lines += [f"The ledger holds {len(entries)} entries: {sum(s in held for s in plan)} of the plan's "
                  f"{len(plan)} runs. Devices: {', '.join(devices)}. Commits: {', '.join(commits)}.", "",
                  "| notebook | runs in the ledger | minutes computed |", "|---|---|---|"]
        for notebook, specs in grids.items():
            mine = [e for e in entries if e.spec in set(specs)]
            minutes = sum(float(e.provenance.get("wall_s") or 0) for e in mine) / 60
            lines.append(f"| {notebook} | {len(mine)} of {len(specs)} | {minutes:.1f} |")
        lines.append("")
    lines += ["| notebook | claims | runs computed | status |", "|---|---|---|---|"]
    for status in statuses:
        parts = [(f"{status.claims}: its part {part.claims}", status.of_part(part)) for part in status.headline.first]
        for claims, shown in [(status.claims, status), *parts]:
            lines.append(f"| {status.notebook} | {claims} | {len(shown.present)} of {len(shown.runs)}"
                         f"{devices_note(shown.devices)} | {shown.verdict_input(stale)} |")
    rest = [r.spec for r in prioritized(grids) if r.rank == REST]
    lines += ["", f"Runs backing no headline claim: {sum(s in held for s in rest)} of {len(rest)} computed."]
    return "\n".join(lines) + "\n"


def devices_note(devices: Sequence[str], of: str = "") -> str:
    """What a row says of the devices its runs were computed on: " (<of>k on <device>, m on <other>)" where runs of
    more than one device are read together, else nothing (the ledger's devices head the file)."""
    counts = Counter(devices)
    return f" ({of}{', '.join(f'{n} on {d}' for d, n in sorted(counts.items()))})" if len(counts) > 1 else ""


def stale_notes(entries: Sequence[LedgerEntry], root_of: Callable[[RunSpec], str | Path | None]
                ) -> list[tuple[LedgerEntry, str]]:
    """(entry, "computed at commit X; changed since: <definitions>") for every entry whose code version differs
    from today's for its spec (`root_of(spec)`: where its run is built from, for today's code version) by more than
    definitions moved unchanged between modules (`changed_since`), and
    (entry, "its spec imports X (not allowed): ...") for one whose spec imports a module that is not allowed."""
    notes = []
    for entry in entries:
        root = root_of(entry.spec)
        try:
            changed = changed_today(entry, root)
        except ImportNotAllowedError as err:  # told only by importing it: never done unasked
            notes.append((entry, err.skipped("not imported, so not compared with today's code")))
            continue
        if changed:
            notes.append((entry, f"computed at commit {entry.commit[:10]}; changed since: {', '.join(changed)}"))
    return notes


def stale_lines(notes: Sequence[tuple[LedgerEntry, str]]) -> list[str]:
    """One line per stale entry: its notebook's experiment, the run's name, its file and the note."""
    return [f"{entry.spec.experiment} {run_name(entry.spec)} ({entry.path.name}): {note}" for entry, note in notes]
