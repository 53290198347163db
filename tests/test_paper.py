"""A paper is one declared `Paper` (fedlib.paper): every field required at import, registered once, and found by
every layer through `PAPERS`, never by a module named after it."""
from __future__ import annotations

import ast
import dataclasses
from pathlib import Path

import pytest

from fedlib.paper import PAPERS, Paper, declare, paper, papers

ROOT = Path(__file__).resolve().parents[1]


def test_fedlibs_papers_are_declared():
    assert {p.name for p in papers()} == {"fedaq", "fedshift", "flower", "mucsc", "quickstart", "taco"}
    assert paper("taco").params.__name__ == "TacoParams" and paper("taco").experiments(paper("taco").params())


def test_where_each_paper_lives_exists():
    """One place answers 'where does TACO live?': its notebook, profiles, reading notes and theory module."""
    for p in papers():
        assert (p.notebooks / f"{p.name}.py").is_file() and (p.notebooks / "profiles" / p.name).is_dir(), p.name
        assert all((ROOT / where).is_file() for where in (p.notes, p.theory) if where is not None), p.name



def test_each_of_fedlibs_papers_with_claims_is_one_folder():
    """A paper's components (`fedlib/papers/<name>/__init__.py`, the module name its runs' keys hash) and its claims
    and `Paper` (`<name>/claims.py`) sit in one folder; the generic claims package holds no paper's module."""
    for p in papers():
        if p.judge is not None and p.judge.__module__.startswith("fedlib."):
            assert (p.params.__module__, p.judge.__module__) == (f"fedlib.papers.{p.name}",
                                                                 f"fedlib.papers.{p.name}.claims"), p.name
            assert (ROOT / "fedlib" / "papers" / p.name / "claims.py").is_file(), p.name
        assert not (ROOT / "fedlib" / "claims" / f"{p.name}.py").exists(), p.name

def test_a_missing_or_misspelled_field_is_an_error_at_declaration():
    fields = {f.name: getattr(paper("quickstart"), f.name) for f in dataclasses.fields(Paper)}
    missing = {k: v for k, v in fields.items() if k != "bundle_from_runs"}
    with pytest.raises(TypeError, match="bundle_from_runs"):
        Paper(**missing)
    with pytest.raises(TypeError, match="bundle_from_run"):
        Paper(**missing, bundle_from_run=fields["bundle_from_runs"])


def test_a_name_declared_twice_is_refused_and_an_unknown_one_lists_the_declared():
    with pytest.raises(ValueError, match="paper 'quickstart' is registered twice"):
        declare(paper("quickstart"))
    with pytest.raises(KeyError, match="unknown paper 'nope'; registered: fedaq, fedshift"):
        paper("nope")
    assert PAPERS["quickstart"] is paper("quickstart")


def _imports(path: Path) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
    return found


def test_no_module_finds_a_paper_by_its_name_or_a_scan():
    """No f-string import, package scan or subclass scan: a paper is found in `PAPERS` alone. The registry's scan
    imports the modules that register components (fedlib.papers' included), not papers; every run's key hashes it
    (`fedlib.runs.fingerprint`), so it stays as the ledger's runs were computed."""
    found = {f"{p.relative_to(ROOT)}: {word}" for p in [*ROOT.glob("fedlib/**/*.py"), *ROOT.glob("scripts/*.py")]
             for word in ("import_module(f", "iter_modules", "__subclasses__") if word in p.read_text()}
    assert found == {"fedlib/registry.py: iter_modules"}


def test_the_ledger_imports_nothing_of_the_claims_layer_above_it():
    """The ledger stores and orders runs; judging them (fedlib.claims.ledger_verdicts) sits above it."""
    found = {f"{p.name}: {m}" for p in ROOT.glob("fedlib/ledger/*.py") for m in _imports(p)
             if m.startswith(("fedlib.claims", "fedlib.papers"))}
    assert not found
