"""How fedlib values cross a Flower message: models as `ArrayRecord`s (float32 arrays, exact), everything
else (a client view, extras, a record row, a client's persistent state) as one `torch.save` blob in a
`ConfigRecord`, read back with `torch.load(weights_only=True)` (data, never code)."""
from __future__ import annotations

import io
from typing import Any

import torch
from flwr.app import ArrayRecord

from fedlib.core.params import Params


def to_arrays(params: Params) -> ArrayRecord:
    return ArrayRecord(torch_state_dict={k: v.detach().cpu() for k, v in params.items()})


def from_arrays(record: ArrayRecord, device: torch.device) -> Params:
    return {k: v.to(device) for k, v in record.to_torch_state_dict().items()}


def to_blob(value: Any) -> bytes:
    buf = io.BytesIO()
    torch.save(value, buf)
    return buf.getvalue()


def from_blob(blob: bytes, device: torch.device | str = "cpu") -> Any:
    return torch.load(io.BytesIO(blob), map_location=device, weights_only=True)
