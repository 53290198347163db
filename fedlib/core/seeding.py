"""One master seed, independent named streams.

Every random draw in a run comes from a stream keyed by (master seed, purpose, *key), e.g.
`seeds.numpy("batches", round, client)`. Streams do not depend on the order in which clients
are processed, so the sequential and the vmap executors draw the same batches.
"""
from __future__ import annotations

import zlib

import numpy as np
import torch


class Seeds:
    def __init__(self, seed: int) -> None:
        if not isinstance(seed, (int, np.integer)) or seed < 0:
            raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
        self.seed = int(seed)

    def sequence(self, purpose: str, *key: int) -> np.random.SeedSequence:
        return np.random.SeedSequence([self.seed, zlib.crc32(purpose.encode()), *(int(k) for k in key)])

    def numpy(self, purpose: str, *key: int) -> np.random.Generator:
        return np.random.default_rng(self.sequence(purpose, *key))

    def torch(self, purpose: str, *key: int, device: torch.device | str = "cpu") -> torch.Generator:
        """A generator on `device` seeded from the keyed stream (CUDA generators draw other numbers than CPU
        ones from the same seed: same distributions, not the same values)."""
        gen = torch.Generator(device=device)
        gen.manual_seed(int(self.sequence(purpose, *key).generate_state(1, np.uint64)[0] >> 1))
        return gen

    def int(self, purpose: str, *key: int) -> int:
        return int(self.sequence(purpose, *key).generate_state(1, np.uint32)[0])
