"""FedAvg (McMahan et al., 2017): local SGD, weighted average of the updates."""
from __future__ import annotations

from fedlib.algorithms.base import Algorithm
from fedlib.registry import ALGORITHMS


@ALGORITHMS.register("fedavg")
class FedAvg(Algorithm):
    name = "fedavg"
