"""Communication energy from exact bit counts (FedAQ's model, Eq. 10): energy = energy-per-bit x bits.

Uplink: every client's message costs e_up per bit (transmit energy, summed over clients). Downlink: one
broadcast message is received by every receiving client, each paying e_down per bit (receive energy), so
it counts `receivers` times. The paper uses e_up = e_down = 1 pJ/bit and reports mJ (1 mJ = 1e9 pJ).

`add_energy` reads a `RunResult.rounds` frame: bits_up (sum over the round's clients), bits_down (one
broadcast message), receivers, and the full-precision extras bits_up_extra / bits_down_extra when present.
`payload_bits` gives the paper's count (index bits d*b only, side information ignored) from the record's
payload_bits_up / payload_bits_down columns.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

PJ_PER_MJ = 1e9
LINKS = ("up", "down")


def _check_links(links: tuple[str, ...]) -> tuple[str, ...]:
    bad = [x for x in links if x not in LINKS]
    if bad or not links:
        raise ValueError(f"links must be a non-empty subset of {LINKS}, got {links!r}")
    return tuple(links)


def add_energy(rounds: pd.DataFrame, e_up_pj: float = 1.0, e_down_pj: float = 1.0,
               links: tuple[str, ...] = LINKS) -> pd.DataFrame:
    """A copy of `rounds` with energy_up_mJ, energy_down_mJ, energy_mJ and their cumulative cum_* columns.

    Links not in `links` are not counted (zero energy), as in the paper's uplink-only and downlink-only
    experiments, where only the quantized link's energy is reported.
    """
    links = _check_links(links)
    if e_up_pj < 0 or e_down_pj < 0:
        raise ValueError(f"energy per bit must be >= 0, got e_up={e_up_pj}, e_down={e_down_pj}")
    missing = {"bits_up", "bits_down", "receivers"} - set(rounds.columns)
    if missing:
        raise ValueError(f"rounds frame lacks {sorted(missing)}; pass RunResult.rounds")
    out = rounds.copy()
    extra_up = out["bits_up_extra"] if "bits_up_extra" in out else 0
    extra_down = out["bits_down_extra"] if "bits_down_extra" in out else 0
    up = (out["bits_up"] + extra_up) * e_up_pj
    down = (out["bits_down"] + extra_down) * out["receivers"] * e_down_pj
    out["energy_up_mJ"] = (up if "up" in links else 0 * up) / PJ_PER_MJ
    out["energy_down_mJ"] = (down if "down" in links else 0 * down) / PJ_PER_MJ
    out["energy_mJ"] = out["energy_up_mJ"] + out["energy_down_mJ"]
    for col in ("energy_up_mJ", "energy_down_mJ", "energy_mJ"):
        out[f"cum_{col}"] = out[col].cumsum()
    return out


def payload_bits(rounds: pd.DataFrame) -> pd.DataFrame:
    """A copy of `rounds` whose bits_up/bits_down count only the codecs' payload bits (the paper's d*b:
    quantization indices; side information and full-precision extras dropped)."""
    out = rounds.copy()
    out["bits_up"], out["bits_down"] = out["payload_bits_up"], out["payload_bits_down"]
    for col in ("bits_up_extra", "bits_down_extra"):
        if col in out:
            out[col] = 0
    return out


def saving(baseline: float, proposed: float) -> float:
    """(E_base - E_prop) / E_base, the paper's "Energy Saving" (nan when either never reached the target)."""
    if not np.isfinite(baseline) or not np.isfinite(proposed) or baseline <= 0:
        return float("nan")
    return (baseline - proposed) / baseline
