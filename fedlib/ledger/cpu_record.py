"""The cpu profile's verdicts beside the ledger's: a committed record (`evidence/cpu/verdicts.csv`) of what a real
`reproduce --profile cpu` run judged, read by `fedlib.claims.ledger_verdicts` for the "cpu verdict" column.

`read_cpu_results(folder)` reads the `--results` folder of such a run: for each notebook with declared claims
(its `Paper`'s claims) that has a folder there, `cpu/<notebook>/claims.csv` (`fedlib.report.COLUMNS`),
`stamp.json` (its "stamp": "profile `cpu`, commit ..., date, machine, overrides") and `scale.json` (its "here": the
notebook's scale). Each row carries its reasons, read by name from the claims table: the criterion, the evidence,
the p-value and the seeds. `write_record` writes that as the record; `read_record` reads the record back. Both
readers check what they read the same way (`_checked`) and refuse, naming the file and what to do: a missing folder
or file, a table that is not a whole claims table (a truncated or edited file: a missing column, a row without its
claim or verdict, a verdict the judge never gives, a p-value outside [0, 1], a seed count that is not a positive
whole number), a stamp of another profile or of a failed rendering, a claim id given twice in one notebook. A
record written before the current verdict rules (`FORMER_COLUMNS`: no criterion, evidence, p-value or seeds) is
refused apart (`CpuRecordPredatesRules`), saying how to rebuild it (`REBUILD`): `reproduce --from-ledger` then
shows "cpu record: to be rebuilt" in place of the cpu verdicts (`CpuVerdicts.to_be_rebuilt`). A row's claim id is the longest declared id its claim text starts with ("C5 iid", not "C5"); a row
that names no declared claim (TACO's Theorem 1 rows, which its notebook adds from values it computed) is not
recorded: no headline can name it.
"""
from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from fedlib import report
from fedlib.paper import declared, paper
from fedlib.runs.entry import write_atomic

PROFILE = "cpu"
REASONS = ["criterion", "evidence", "p_value", "seeds"]  # a claims table's columns that say why its verdict
COLUMNS = ["notebook", "claim_id", "verdict", "measured", *REASONS, "stamp", "scale"]
FORMER_COLUMNS = ["notebook", "claim_id", "verdict", "measured", "stamp", "scale"]  # before the current verdict rules
WRITE_IT = ("write it with `python scripts/reproduce.py --profile gpu --from-ledger --write-expected --cpu-results "
            "<the --results folder of a `reproduce --profile cpu` run>`")
REBUILD = ("python scripts/reproduce.py --profile cpu --results results && python scripts/reproduce.py --profile gpu "
           "--from-ledger --write-expected --cpu-results results")
TO_BE_REBUILT = "cpu record: to be rebuilt"  # what stands for a cpu verdict while the record predates the rules


class CpuRecordError(ValueError):
    """A cpu results folder or record that cannot be used: "<file>: <problem>; <what to do>"."""

    def __init__(self, path: str | Path, problem: str) -> None:
        self.path = Path(path)
        super().__init__(f"{path}: {problem}")


class CpuRecordPredatesRules(CpuRecordError):
    """A record of `FORMER_COLUMNS`, written before the current verdict rules: it is rebuilt, not read."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path, f"predates the current verdict rules (no criterion, evidence, p-value or seeds); "
                               f"rebuild it with `{REBUILD}`")


def predates_rules(path: str | Path) -> bool:
    """Whether the record at `path` has the columns of a record written before the current verdict rules."""
    with Path(path).open(encoding="utf-8", errors="replace") as file:
        return file.readline().strip().split(",") == FORMER_COLUMNS


@dataclass(frozen=True)
class CpuVerdicts:
    """The cpu record read from `source`: one row per (notebook, claim id), `COLUMNS`; `predates`: why the record
    could not be read ('' when it was: `CpuRecordPredatesRules`'s line), its rows then none."""

    source: str
    rows: pd.DataFrame
    predates: str = ""

    @classmethod
    def to_be_rebuilt(cls, source: str, why: str) -> CpuVerdicts:
        """No cpu verdicts: the record `source` predates the current rules (`why`)."""
        return cls(source, pd.DataFrame(columns=COLUMNS, dtype=str), why)

    def verdict(self, notebook: str, claim_id: str) -> str:
        """The cpu profile's verdict on `notebook`'s claim `claim_id`, "-" where the record has none,
        `TO_BE_REBUILT` where it predates the current rules."""
        if self.predates:
            return TO_BE_REBUILT
        found = self.rows[(self.rows["notebook"] == notebook) & (self.rows["claim_id"] == claim_id)]
        return str(found["verdict"].iloc[0]) if len(found) else "-"

    def stamps(self) -> dict[str, list[str]]:
        """Each stamp in the record -> the notebooks rendered under it."""
        out: dict[str, list[str]] = {}
        for notebook, stamp in self.rows[["notebook", "stamp"]].drop_duplicates().itertuples(index=False):
            out.setdefault(stamp, []).append(notebook)
        return out

    def scales(self) -> dict[str, str]:
        """notebook -> its cpu scale."""
        return dict(self.rows[["notebook", "scale"]].drop_duplicates().itertuples(index=False))


def claim_id(notebook: str, claim: str) -> str | None:
    """The id of the claim `notebook`'s paper declares that the claims table's text `claim` ("<id> <statement>")
    names: the longest declared id it starts with, None if none."""
    ids = [c.id for c in paper(notebook).claims]
    named = [i for i in ids if claim == i or claim.startswith(f"{i} ")]
    return max(named, key=len) if named else None


def _json_file(path: Path, key: str, render_again: str) -> dict:
    try:
        info = json.loads(path.read_text())
    except FileNotFoundError:
        raise CpuRecordError(path, f"missing; {render_again}") from None
    except (OSError, ValueError, UnicodeDecodeError) as err:
        raise CpuRecordError(path, f"not readable JSON ({err}); {render_again}") from None
    if not isinstance(info, dict) or not isinstance(info.get(key), str):
        raise CpuRecordError(path, f"has no text \"{key}\"; {render_again}")
    return info


def _csv(path: Path, columns: Sequence[str], required: Sequence[str], fix: str) -> pd.DataFrame:
    """`path` as text cells with exactly `columns`, at least one row, and no cell of `required` empty (a row cut
    short loses its last cells: the verdict); CpuRecordError naming the file otherwise."""
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False)
    except FileNotFoundError:
        raise CpuRecordError(path, f"missing; {fix}") from None
    except (OSError, ValueError, UnicodeDecodeError) as err:  # pandas' ParserError and EmptyDataError are ValueErrors
        raise CpuRecordError(path, f"not a readable CSV table ({str(err).strip()}); {fix}") from None
    if list(frame.columns) != list(columns):
        raise CpuRecordError(path, f"has columns {list(frame.columns)}, not {list(columns)} (truncated or edited?); "
                                   f"{fix}")
    if frame.empty:
        raise CpuRecordError(path, f"no rows (truncated?); {fix}")
    for column in required:
        empty = frame[column].eq("")
        if empty.any():
            raise CpuRecordError(path, f"row {int(empty.to_numpy().argmax()) + 1} has no {column} (truncated?); {fix}")
    return frame


def _known_verdicts(verdicts: pd.Series, names: pd.Series, path: Path, fix: str) -> None:
    """CpuRecordError naming the first row (`names`) whose verdict is not one the judge gives."""
    unknown = ~verdicts.isin(report.VERDICTS)
    if unknown.any():
        raise CpuRecordError(path, f"{names[unknown].iloc[0]}: verdict {verdicts[unknown].iloc[0]!r} is not one the "
                                   f"judge gives (truncated or edited?); {fix}")


def _reasons_read(frame: pd.DataFrame, names: pd.Series, path: Path, fix: str) -> None:
    """CpuRecordError naming the first row (`names`) whose p-value is neither "-" (no test ran) nor a number in
    [0, 1], or whose seeds are neither "-" nor a positive whole number."""
    p = pd.to_numeric(frame["p_value"].where(frame["p_value"] != "-", "0"), errors="coerce")
    seeds = frame["seeds"]
    whole = seeds.str.fullmatch(r"[0-9]+") & (seeds.str.lstrip("0") != "")
    for column, bad, wanted in (("p_value", p.isna() | (p < 0) | (p > 1), "a number in [0, 1]"),
                                ("seeds", (seeds != "-") & ~whole, "a positive whole number")):
        if bad.any():
            raise CpuRecordError(path, f"{names[bad].iloc[0]}: {column} {frame.loc[bad, column].iloc[0]!r} is not "
                                       f"{wanted} or \"-\" (truncated or edited?); {fix}")


def _checked(frame: pd.DataFrame, path: Path, fix: str) -> pd.DataFrame:
    """`frame` (`COLUMNS`) if every verdict is the judge's, every p-value and seed count readable, and no notebook
    names a claim id twice."""
    names = frame["notebook"] + " " + frame["claim_id"]
    _known_verdicts(frame["verdict"], names, path, fix)
    _reasons_read(frame, names, path, fix)
    doubled = frame[frame.duplicated(["notebook", "claim_id"])]
    if len(doubled):
        row = doubled.iloc[0]
        raise CpuRecordError(path, f"{row['notebook']} gives claim {row['claim_id']} twice; {fix}")
    return frame.reset_index(drop=True)


PROFILE_NAMED = re.compile(r"profile `([^`]*)`")


def _notebook_rows(folder: Path, notebook: str) -> pd.DataFrame:
    render_again = (f"render it again (`python scripts/reproduce.py --profile {PROFILE} --only {notebook} "
                    f"--results {folder.parent.parent}`) or remove {folder}")
    stamp = _json_file(folder / "stamp.json", "stamp", render_again)
    profiles = set(PROFILE_NAMED.findall(stamp["stamp"]))
    if profiles != {PROFILE}:
        raise CpuRecordError(folder / "stamp.json", f"stamped by profile(s) {sorted(profiles) or 'none named'}, not "
                                                    f"`{PROFILE}`: give the --results folder of a `reproduce "
                                                    f"--profile {PROFILE}` run")
    if stamp.get("status") != "ok":
        raise CpuRecordError(folder / "stamp.json", f"status {stamp.get('status')!r}, not 'ok'; {render_again}")
    scale = _json_file(folder / "scale.json", "here", render_again)["here"]
    claims = _csv(folder / "claims.csv", report.COLUMNS, ["claim", "verdict"], render_again)
    _known_verdicts(claims["verdict"], notebook + " " + claims["claim"].str[:50], folder / "claims.csv", render_again)
    ids = pd.Series([claim_id(notebook, text) for text in claims["claim"]], index=claims.index)
    named = claims[ids.notna()]
    rows = pd.DataFrame({"notebook": notebook, "claim_id": ids[ids.notna()], "verdict": named["verdict"],
                         "measured": named["measured"], **{column: named[column] for column in REASONS},
                         "stamp": stamp["stamp"], "scale": scale}, columns=COLUMNS)
    return _checked(rows, folder / "claims.csv", render_again)


def read_cpu_results(results: str | Path) -> pd.DataFrame:
    """The record's rows (`COLUMNS`) from the `--results` folder of a `reproduce --profile cpu` run: every
    notebook with declared claims that has a folder in `<results>/cpu/`."""
    base = Path(results) / PROFILE
    if not base.is_dir():
        raise CpuRecordError(base, f"not a folder: give --cpu-results the --results folder of a `reproduce --profile "
                                   f"{PROFILE}` run (the folder holding {PROFILE}/<notebook>/claims.csv)")
    with_claims = declared()
    notebooks = sorted(p.name for p in base.iterdir() if p.is_dir() and p.name in with_claims)
    if not notebooks:
        raise CpuRecordError(base, f"holds no folder of a notebook with claims ({', '.join(sorted(with_claims))}): "
                                   f"render them with `python scripts/reproduce.py --profile {PROFILE} --results "
                                   f"{results}`")
    return pd.concat([_notebook_rows(base / name, name) for name in notebooks], ignore_index=True)


def write_record(rows: pd.DataFrame, path: str | Path) -> Path:
    """`rows` (`read_cpu_results`) as the record at `path`, written whole or not at all."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, rows[COLUMNS].to_csv(index=False, lineterminator="\n"))
    return path


def read_record(path: str | Path, shown: str | None = None) -> CpuVerdicts:
    """The record at `path` (named `shown` in what it is rendered into), checked as the results it was written from;
    `CpuRecordPredatesRules` where it was written before the current verdict rules."""
    path = Path(path)
    if path.is_file() and predates_rules(path):
        raise CpuRecordPredatesRules(path)
    rows = _checked(_csv(path, COLUMNS, ["notebook", "claim_id", "verdict", "stamp"], WRITE_IT), path, WRITE_IT)
    return CpuVerdicts(shown or str(path), rows)


def read_current(path: str | Path, shown: str | None = None) -> CpuVerdicts:
    """`read_record`, or `CpuVerdicts.to_be_rebuilt` where the record predates the current verdict rules (the
    ledger's verdicts need no cpu record; any other fault of the record is still refused)."""
    try:
        return read_record(path, shown)
    except CpuRecordPredatesRules as err:
        return CpuVerdicts.to_be_rebuilt(shown or str(path), str(err))


def cpu_column(notebook: str, claims: Sequence[str], cpu: CpuVerdicts) -> list[str]:
    """The cpu verdict of each of `notebook`'s claims table rows (their claim texts), "-" where the record has none."""
    return [cpu.verdict(notebook, found) if (found := claim_id(notebook, text)) else "-" for text in claims]


def cpu_note(cpu: CpuVerdicts, notebooks: Mapping[str, object]) -> list[str]:
    """Markdown lines stating which cpu run the "cpu verdict" column reads, and at which scale (or that the record
    is to be rebuilt, and how)."""
    if cpu.predates:
        return [f"Column **cpu verdict**: \"{TO_BE_REBUILT}\": `{cpu.source}` predates the current verdict rules; "
                f"rebuild it with `{REBUILD}`.", ""]
    stamps = cpu.stamps()
    runs = "; ".join(f"{stamp} ({', '.join(names)})" for stamp, names in stamps.items())
    without = sorted(set(notebooks) - set(cpu.rows["notebook"]))
    scales = "; ".join(f"{name}: {scale}" for name, scale in cpu.scales().items())
    return [f"Column **cpu verdict**: the cpu profile's verdict on the same claim, from `{cpu.source}`, written from "
            f"the results of the `reproduce` {'run' if len(stamps) == 1 else 'runs'} stamped {runs}."
            + (f" It holds none of {', '.join(without)}." if without else "")
            + " \"-\": the cpu record has no verdict on that claim.", "",
            f"The cpu verdicts are small-scale analogues, not the paper's scale ({scales}).", ""]
