"""README.md and docs/*.md as a reader uses them: the README short, its times the latest measured ones, every
shell command of their ```bash blocks checked (not run: each names a make target and variables the Makefile has,
a script or module that exists with every option its --help lists, and files that exist), every link to a file of
the repository resolving, and every `fedlib.<module>.<name>` they or a parameter's doc name importable."""
from __future__ import annotations

import csv
import dataclasses
import functools
import importlib
import importlib.util
import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from fedlib.paper import params_class

ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), *sorted((ROOT / "docs" / "report").glob("*.md"))]
REPO_DIRS = ("notebooks/", "scripts/", "evidence/", "docs/", "fedlib/", "tests/", "benchmarks/", "flower-app")


def test_the_readme_is_read_in_five_minutes():
    assert len((ROOT / "README.md").read_text().splitlines()) <= 200


def test_the_readme_states_the_latest_measured_time_of_each_command():
    """One line per command of evidence/timings.csv, from its latest row (the dates are ISO, so they sort)."""
    with open(ROOT / "evidence" / "timings.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    latest = {r["command"]: r for r in sorted(rows, key=lambda r: r["date"])}
    readme = (ROOT / "README.md").read_text()
    block = readme[readme.index("<!-- timings:"):readme.index("<!-- end of the timings -->")]
    for command, r in latest.items():
        assert (f"- `{command}`: {r['wall']} on {r['machine']}, {r['date']}, commit {r['commit']}: {r['conditions']}."
                in block), f"README.md: state {command}'s latest time from evidence/timings.csv"
    assert block.count("\n- ") == len(latest)


def shell_commands(page: Path) -> list[str]:
    """The commands of `page`'s ```bash blocks, continuation lines joined, comments dropped."""
    blocks = re.findall(r"```bash\n(.*?)```", page.read_text(), flags=re.DOTALL)
    joined = "\n".join(blocks).replace("\\\n", " ")
    return [line.split("  #")[0].strip() for line in joined.splitlines() if line.strip()
            and not line.strip().startswith("#")]


COMMANDS = [(page.relative_to(ROOT).as_posix(), command) for page in PAGES for command in shell_commands(page)]


def makefile_targets_and_variables() -> tuple[set[str], set[str]]:
    text = (ROOT / "Makefile").read_text()
    targets = set(re.findall(r"^([a-z][\w-]*):", text, flags=re.MULTILINE))
    return targets, set(re.findall(r"\$\((\w+)\)", text)) | set(re.findall(r"^(\w+) \?=", text, flags=re.MULTILINE))


# Prints what `python <program> --help` prints for each program of a JSON list, as a JSON list: each run as Python
# runs it (runpy, `__main__`), one after the other in one fresh process (one interpreter start for them all).
HELP_DRIVER = """
import contextlib, io, json, runpy, sys
texts = []
for program in json.loads(sys.argv[1]):
    out = io.StringIO()
    sys.argv = [program[1] if program[0] == "-m" else program[0], *program[2 if program[0] == "-m" else 1:], "--help"]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out), contextlib.suppress(SystemExit):
        if program[0] == "-m":
            runpy.run_module(program[1], run_name="__main__", alter_sys=True)
        else:
            runpy.run_path(program[0], run_name="__main__")
    texts.append(out.getvalue())
print(json.dumps(texts))
"""


ASSIGNMENT = r"[A-Z_]+=\S*"  # VAR=value before a command


def program_of(words: list[str]) -> tuple[tuple[str, ...], list[str]] | None:
    """The Python program a command runs (("-m", module) or (script,)) whose --help lists its options, and the words
    after it; None for other commands (make, and `fedlib.flower.local_run`, which hands its options to `flwr run`)."""
    if words[0] in (".venv/bin/python", "python") and words[1] == "-m" and words[2] != "fedlib.flower.local_run":
        return ("-m", words[2]), words[3:]
    if words[0] in (".venv/bin/python", "python") and words[1].endswith(".py"):
        return (words[1],), words[2:]
    if words[0] == ".venv/bin/papermill":
        return ("-m", "papermill"), words[1:]
    return None


def first_positional(words: list[str]) -> str | None:
    return next((w for w in words if not w.startswith("-")), None)


def documented_programs() -> list[tuple[str, ...]]:
    """Every (program, [its first positional word]) whose --help a documented command's check may read."""
    programs: list[tuple[str, ...]] = []
    for _, command in COMMANDS:
        found = program_of([w for w in shlex.split(command) if not re.fullmatch(ASSIGNMENT, w)])
        if found is not None:
            program, rest = found
            positional = first_positional(rest)
            programs += [program] + ([(*program, positional)] if positional is not None else [])
    return list(dict.fromkeys(programs))


@functools.cache
def help_texts() -> dict[tuple[str, ...], str]:
    programs = documented_programs()
    done = subprocess.run([sys.executable, "-c", HELP_DRIVER, json.dumps(programs)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)
    assert done.returncode == 0, done.stderr
    texts = dict(zip(programs, json.loads(done.stdout.splitlines()[-1])))
    failed = [" ".join(program) for program, text in texts.items() if "usage:" not in text.lower()]
    assert not failed, f"no usage printed by --help of: {failed}"
    return texts


def check_options(words: list[str], program: tuple[str, ...]) -> None:
    shown = help_texts()[program]
    positional = first_positional(words)
    for option in (w.split("=")[0] for w in words if w.startswith("--")):
        if option not in shown and positional is not None:
            shown += help_texts()[(*program, positional)]  # a subcommand's own options
        assert option in shown, f"{' '.join(program)} has no option {option}"


def check_files(words: list[str]) -> None:
    for word in words:
        if word.startswith(REPO_DIRS) and "<" not in word and "*" not in word:
            assert (ROOT / word).exists(), f"{word} does not exist"


def test_there_are_commands_to_check():
    assert len(COMMANDS) > 25 and {page for page, _ in COMMANDS} >= {"README.md", "docs/notebooks.md"}


@pytest.mark.parametrize("page, command", COMMANDS)
def test_every_documented_command_names_what_exists(page, command):
    words = shlex.split(command)
    assignments = [w.split("=")[0] for w in words if re.fullmatch(ASSIGNMENT, w)]
    words = [w for w in words if not re.fullmatch(ASSIGNMENT, w)]
    check_files(words)
    if words[0] == "make":
        targets, variables = makefile_targets_and_variables()
        assert set(words[1:]) <= targets, f"{page}: {command}: no such make target"
        assert set(assignments) <= variables | {"OMP_WAIT_POLICY", "TQDM_DISABLE"}, f"{page}: {command}"
        return
    if words[0] in (".venv/bin/python", "python") and words[1] == "-m":
        assert importlib.util.find_spec(words[2]) is not None, f"{page}: no module {words[2]}"
        if words[2] == "fedlib.flower.local_run":  # it hands the options after the app's folder to `flwr run`
            flwr = Path(sys.executable).parent / "flwr"
            if not flwr.exists():
                pytest.skip("Flower is not installed (the .[flower] extra)")
            shown = subprocess.run([flwr, "run", "--help"], capture_output=True, text=True).stdout
            assert all(w.split("=")[0] in shown for w in words[4:] if w.startswith("--")), f"{page}: {command}"
    if (found := program_of(words)) is not None:
        program, rest = found
        check_options(rest, program)


def markdown_links(page: Path) -> list[str]:
    return [target for target in re.findall(r"\]\(([^)\s]+)\)", page.read_text())
            if not target.startswith(("http://", "https://", "#", "mailto:"))]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_link_to_a_file_of_the_repository_resolves(page):
    for target in markdown_links(page):
        assert (page.parent / target.split("#")[0]).resolve().exists(), f"{page.name}: {target} does not exist"


def resolves(dotted: str) -> bool:
    """Whether `dotted` (fedlib.a.b.C.d) is a module, or an attribute path below the longest importable prefix."""
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            thing = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for name in parts[cut:]:
                thing = getattr(thing, name)
        except AttributeError:
            return False
        return True
    return False


FEDLIB_NAME = re.compile(r"\bfedlib(?:\.[A-Za-z_]\w*)+")


def named_in_docs() -> list[tuple[str, str]]:
    found = [(page.relative_to(ROOT).as_posix(), name) for page in PAGES
             for code in re.findall(r"`([^`\n]+)`", page.read_text()) for name in FEDLIB_NAME.findall(code)]
    for notebook in sorted(p.stem for p in (ROOT / "notebooks").glob("*.py")):
        for field in dataclasses.fields(params_class(notebook)):
            found += [(f"{notebook}.{field.name}'s doc", name) for name in FEDLIB_NAME.findall(field.metadata["doc"])]
    return sorted(set(found))


def test_every_fedlib_name_the_docs_and_parameter_docs_give_resolves():
    names = named_in_docs()
    assert len(names) > 50
    missing = [(where, name) for where, name in names if not resolves(name.rstrip("."))]
    assert missing == [], f"names that do not resolve (where, name): {missing}"


def test_the_run_specs_snippet_of_the_runs_page_runs(tmp_path, monkeypatch, capsys):
    """docs/runs.md's `run_specs(..., store=...)` snippet, executed as written (its store in a temporary folder)."""
    snippet = next(b for b in re.findall(r"```python\n(.*?)```", (ROOT / "docs" / "runs.md").read_text(), re.DOTALL)
                   if "run_specs(" in b)
    monkeypatch.chdir(tmp_path)
    exec(compile(snippet, "docs/runs.md", "exec"), {})  # noqa: S102 - the repository's own documentation
    printed = capsys.readouterr().out
    assert all(name in printed for name in ("FedAvg", "FedProx", "SCAFFOLD")) and (tmp_path / "my-runs").is_dir()
