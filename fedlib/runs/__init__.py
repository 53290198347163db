"""Experiments as data: run specs, a resumable content-addressed store, local, process-pool and Ray execution."""
from fedlib.runs.build import RunPlan, build_run, records_of
from fedlib.runs.entry import DamagedEntryError
from fedlib.runs.execute import execute
from fedlib.runs.fingerprint import Keys, code_version
from fedlib.runs.runner import run_specs, tidy
from fedlib.runs.spec import Component, KeyedRun, RunSpec, freeze, parse_selection, thaw
from fedlib.runs.store import DamagedEntryWarning, FileCheckpoint, Records, RunStore

__all__ = ["Component", "DamagedEntryError", "DamagedEntryWarning", "FileCheckpoint", "KeyedRun", "Keys", "Records",
           "RunPlan", "RunSpec", "RunStore", "build_run", "code_version", "execute", "freeze", "parse_selection",
           "records_of", "run_specs", "thaw", "tidy"]
