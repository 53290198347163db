"""Which modules a run spec may import: only those the user allowed, or imported already.

A spec's `imports` names modules that register its components. Specs also come from files, stores, archives and
ledgers written elsewhere, so a module named there is imported (`fedlib.registry.load_components`) only when

* it is imported in this process already (the user imported it: nothing new runs), or
* the user allowed it: `FEDLIB_ALLOW_IMPORTS=mod1,mod2`, `fedlib.allow_imports("mod1")`, or `--allow-import mod1`
  on `scripts/reproduce.py` and `python -m fedlib.runs`.

Allowing a package allows its submodules (importing `pkg.sub` runs `pkg` first anyway, and both are the same
user's code); allowing `pkg.sub` allows neither `pkg` nor `pkg.other`. Anything else raises `ImportNotAllowedError`,
one line naming the module, the spec and how to allow it.

`allow_imports` keeps the allowance in `FEDLIB_ALLOW_IMPORTS`, so every process started from this one (a notebook
kernel, Flower's simulation) inherits it; fedlib's worker processes and Ray tasks are also handed it explicitly
(`worker_allowance`), with the spec modules this process imported itself.
"""
from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Iterable

ALLOW_VAR = "FEDLIB_ALLOW_IMPORTS"


class ImportNotAllowedError(ValueError):
    """A spec names a module the user has not allowed: it is not imported."""

    def __init__(self, module: str, spec: str) -> None:
        self.module, self.spec = module, spec
        super().__init__(f"{spec} imports module {module!r}, which is not allowed here (a spec's imports run only when "
                         f"you allow them): if you trust it, pass --allow-import {module}, set {ALLOW_VAR}={module} "
                         f"or call fedlib.allow_imports({module!r}) before running the spec")

    def __reduce__(self) -> tuple[type, tuple[str, str]]:  # raised in a worker process, read in its caller
        return ImportNotAllowedError, (self.module, self.spec)

    def skipped(self, consequence: str) -> str:
        """Why a command that reads the spec without running it left it be: "its spec imports X (not allowed):
        <consequence>; if you trust it, ..."."""
        return (f"its spec imports {self.module} (not allowed): {consequence}; if you trust it, allow it with "
                f"--allow-import {self.module}")


def module_name(name: object, where: str) -> str:
    """`name` if it is a dotted module name (`pkg.sub`), else a ValueError naming `where`."""
    if not isinstance(name, str) or not name or not all(part.isidentifier() for part in name.split(".")):
        raise ValueError(f"{where}: {name!r} is not a module name (Python identifiers joined by dots, e.g. "
                         "'my_components' or 'mypkg.components')")
    return name


def module_option(text: str) -> str:
    """An `--allow-import` value (argparse's `type`): a module name, else argparse's one-line usage error."""
    try:
        return module_name(text, "--allow-import")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def allowed_imports() -> tuple[str, ...]:
    """The modules the user allowed (`FEDLIB_ALLOW_IMPORTS`, which `allow_imports` extends)."""
    listed = (m.strip() for m in os.environ.get(ALLOW_VAR, "").split(","))
    return tuple(module_name(m, f"environment variable {ALLOW_VAR}") for m in listed if m)


def allow_imports(*modules: str) -> None:
    """Allow run specs to import `modules` (and their submodules), here and in every process started from here."""
    names = [module_name(m, "allow_imports") for m in modules]
    os.environ[ALLOW_VAR] = ",".join(dict.fromkeys([*allowed_imports(), *names]))


def is_allowed(module: str) -> bool:
    """True if a spec may import `module`: imported here already, or allowed (itself or a package holding it)."""
    return module in sys.modules or any(module == a or module.startswith(a + ".") for a in allowed_imports())


def require_allowed(module: str, spec: str) -> None:
    """Raise `ImportNotAllowedError` unless `is_allowed(module)`; `spec` names the spec that imports it."""
    if not is_allowed(module):
        raise ImportNotAllowedError(module, spec)


def worker_allowance(modules: Iterable[str]) -> tuple[str, ...]:
    """What a worker process must be allowed to import `modules` as this process does: the user's allowance and
    those of `modules` imported here (the user imported them; the worker has not)."""
    return tuple(dict.fromkeys([*allowed_imports(), *(m for m in modules if m in sys.modules)]))
