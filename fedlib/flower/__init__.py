"""fedlib's algorithms, links and seed streams in Flower (1.42, Message API): `FedlibStrategy` is the server
side of a run spec, `client_app` its client side, both adapters over `fedlib.engine.federation`'s round phases.

Install with `pip install -e ".[flower]"`. See docs/flower.md.
"""
from __future__ import annotations

import importlib.util

if importlib.util.find_spec("flwr") is None:
    raise ImportError("fedlib.flower needs Flower 1.42: install the extra with `pip install -e \".[flower]\"` "
                      "(or `make setup`)")

from fedlib.flower.client import client_app
from fedlib.flower.grid import InProcessGrid
from fedlib.flower.simulation import run_in_process, run_in_simulation
from fedlib.flower.strategy import FedlibStrategy

__all__ = ["FedlibStrategy", "InProcessGrid", "client_app", "run_in_process", "run_in_simulation"]
