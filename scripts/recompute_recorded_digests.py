"""The per-definition digests a GPU machine recorded for the ledger's corrected entries, recomputed from the source,
and the correction checked (evidence/gpu/CORRECTIONS.md).

    python scripts/recompute_recorded_digests.py --python312 PATH [--ledger evidence/gpu] [--write]

For each entry whose provenance was corrected (`corrected` in its provenance.json), at its commit C (`git archive`):
1. this Python (3.11), fedlib at C: the definitions its run reaches (`fedlib.runs.fingerprint`) and where each is
   defined; their digests and code version must be the entry's (corrected) `definitions` and `code_version`;
2. Python 3.12 (PATH; no torch needed: it only parses C's source) dumps each with its own `ast.dump`, as C's
   fingerprint did on the GPU machine: their code version must be the manifest context's `code`, which is hashed
   into the entry's key and was never corrected. Their digests are then the ones the machine recorded.
With --write, evidence/gpu/recorded-definitions.json holds those digests (per context code: its entries and
digests); without, they are compared with it. Exit 0 when every check holds, 1 otherwise.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RECORD = "recorded-definitions.json"


def reached(tree: str, specs: list[dict]) -> list[dict]:
    """Run by this Python with fedlib at C first on its path: per spec, its code version, digests and definitions
    reached as (module, name, file under `tree`, the line of each statement defining it)."""
    import importlib

    from fedlib.data.fabricate import fabricate_for
    from fedlib.ledger.entries import definition_digests
    from fedlib.runs import fingerprint
    from fedlib.runs.spec import RunSpec

    out = []
    with tempfile.TemporaryDirectory() as data:
        for spec_json in specs:
            spec = RunSpec.from_json(spec_json)
            fabricate_for({spec.dataset}, Path(data))
            packages = fingerprint.hashed_packages(spec)
            found = fingerprint.reached_definitions(fingerprint.code_roots(spec, data), packages)
            out.append({"code": fingerprint.code_version(spec, data),
                        "digests": definition_digests(spec, data),
                        "where": [[m, n, str(Path(importlib.import_module(m).__file__).relative_to(tree)),
                                   [s.lineno for s in fingerprint._module(m, packages).definitions[n]]]
                                  for m, n in sorted(found)]})
    return out


def dumped(tree: str, where: list) -> dict:
    """Run by Python 3.12: the code version and digests of the definitions `where` lists, each dumped as C's
    fingerprint dumped it (its own `_without_docs_and_annotations`, then this Python's `ast.dump`)."""
    source = (Path(tree) / "fedlib" / "runs" / "fingerprint.py").read_text()
    strip = next(n for n in ast.parse(source).body if isinstance(n, ast.FunctionDef)
                 and n.name == "_without_docs_and_annotations")
    strip.returns, namespace = None, {"ast": ast}
    for arg in strip.args.args:
        arg.annotation = None
    exec(compile(ast.Module([strip], []), "fingerprint.py", "exec"), namespace)  # C's own function, this Python's ast
    parsed: dict[str, dict[int, ast.stmt]] = {}
    code, digests = hashlib.sha256(), {}
    for module, name, file, lines in where:
        if file not in parsed:
            parsed[file] = {s.lineno: s for s in ast.parse((Path(tree) / file).read_text()).body}
        dump = "\n".join(ast.dump(namespace["_without_docs_and_annotations"](parsed[file][line])) for line in lines)
        code.update(f"{module}.{name}\n{dump}\n".encode())
        digests[f"{module}.{name}"] = hashlib.sha256(dump.encode()).hexdigest()[:12]
    return {"code": code.hexdigest()[:16], "digests": digests, "python": sys.version.split()[0]}


def corrected_entries(ledger: Path) -> dict[str, list]:
    """Commit -> [(archive, spec, provenance, manifest context)] of the entries whose provenance was corrected."""
    from fedlib.ledger.entries import Ledger, read_entry_archive  # here, not at the top: Python 3.12 runs this file
    from fedlib.runs.archive import unpack
    from fedlib.runs.entry import read_manifest

    by_commit: dict[str, list] = {}
    for path in Ledger(ledger).paths():
        entry = read_entry_archive(path)
        if "corrected" in entry.provenance:
            with tempfile.TemporaryDirectory() as tmp:
                unpack(path, Path(tmp))
                context = json.loads(read_manifest(next(Path(tmp).iterdir()))["context"])
            by_commit.setdefault(entry.commit, []).append((path.name, entry.spec.to_json(), entry.provenance, context))
    return by_commit


def role(python: str, name: str, tree: str, payload: object) -> object:
    """This script's `name` function run by `python` with fedlib at `tree` first on its path."""
    run = subprocess.run([python, __file__, "--role", name, tree], input=json.dumps(payload), text=True,
                         capture_output=True, cwd=tree, env={**os.environ, "PYTHONPATH": tree}, check=False)
    if run.returncode:
        raise SystemExit(f"recompute_recorded_digests: {name} at {tree} failed:\n{run.stderr}")
    return json.loads(run.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--python312", help="a Python 3.12 interpreter (as the GPU machine ran)")
    parser.add_argument("--ledger", type=Path, default=ROOT / "evidence" / "gpu")
    parser.add_argument("--write", action="store_true", help=f"write {RECORD} beside the ledger")
    parser.add_argument("--role", choices=["reached", "dumped"], help=argparse.SUPPRESS)
    parser.add_argument("tree", nargs="?", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role:
        print(json.dumps({"reached": reached, "dumped": dumped}[args.role](args.tree, json.loads(sys.stdin.read()))))
        return 0
    if not args.python312:
        parser.error("--python312 is required")
    record, failures = {}, 0
    for commit, entries in corrected_entries(args.ledger).items():
        with tempfile.TemporaryDirectory(prefix=f"fedlib-{commit[:7]}-") as tree:
            archive = subprocess.run(["git", "-C", str(ROOT), "archive", commit], capture_output=True, check=True)
            subprocess.run(["tar", "x", "-C", tree], input=archive.stdout, check=True)
            here = role(sys.executable, "reached", tree, [spec for _, spec, _, _ in entries])
            for (name, _, prov, context), found in zip(entries, here):
                then = role(args.python312, "dumped", tree, found["where"])
                checks = {f"3.11 at {commit[:7]} gives the corrected definitions and code_version":
                              found["digests"] == prov["definitions"] and found["code"] == prov["code_version"],
                          f"{then['python']}'s dumps hash to the manifest context's code {context['code']}":
                              then["code"] == context["code"]}
                for said, held in checks.items():
                    print(f"{name}: {'ok' if held else 'FAILED'}: {said}")
                    failures += not held
                kept = record.setdefault(context["code"], {"commit": commit, "python": then["python"], "entries": [],
                                                           "definitions": then["digests"]})
                kept["entries"].append(name)
    target = args.ledger / RECORD
    text = json.dumps(record, indent=1, sort_keys=True) + "\n"
    if args.write:
        target.write_text(text)
        print(f"wrote {target}")
    elif not target.exists() or target.read_text() != text:
        print(f"{target}: differs from the digests recomputed now (or is missing)")
        failures += 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
