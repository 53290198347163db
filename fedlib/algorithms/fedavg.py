"""FedAvg (McMahan et al., 2017): local SGD, weighted average of the updates."""
from __future__ import annotations

from fedlib.algorithms.base import Algorithm


class FedAvg(Algorithm):
    name = "fedavg"
