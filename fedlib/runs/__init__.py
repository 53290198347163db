"""Experiments as data: run specs, a resumable content-addressed store, local and Ray execution."""
from fedlib.runs.runner import EXPERIMENTS, RunPlan, build_run, execute, register_experiment, run_specs, tidy
from fedlib.runs.spec import Component, RunSpec, freeze, parse_selection, thaw
from fedlib.runs.entry import DamagedEntryError
from fedlib.runs.fingerprint import code_version
from fedlib.runs.store import DamagedEntryWarning, FileCheckpoint, Records, RunStore

__all__ = ["EXPERIMENTS", "Component", "DamagedEntryError", "DamagedEntryWarning", "FileCheckpoint", "Records",
           "RunPlan", "RunSpec", "RunStore", "build_run", "code_version", "execute", "freeze", "parse_selection",
           "register_experiment", "run_specs", "thaw", "tidy"]
