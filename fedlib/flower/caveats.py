"""The two known cases where a spec run in Flower gives another record than `run_federation`, as warnings.

* A "previous_update" freeloader (TACO's client behaviour) uploads 2 w_t - w_{t-1}: it needs the model of the
  round before. fedlib's loop keeps that model for every round; in Flower a freeloader's memory lives in its own
  node context and holds only the rounds it took part in. When it missed round t-1 (partial participation), it
  has no w_{t-1} and uploads w_t (Delta = 0), so the records differ from that round on. Under full
  participation (TACO's setting) they agree. Warned by the server (`FedlibStrategy`, when it selects such a
  freeloader) and by the client app (when such a freeloader trains without the previous round's model).
* `threads: "auto"` with a convolutional model resolves to torch's default thread count (the core count) in
  fedlib's loop, but to the client process's own count in a client app: one in a Ray actor of Flower's
  simulation engine, whatever a SuperNode's machine gives in a deployment. The sums then differ in the last bits
  (up to 5e-7 measured); `loop: {threads: 1}` or any fixed count restores bitwise parity. Warned by
  `run_in_simulation` and the `flwr run` app.
"""
from __future__ import annotations

import warnings
from collections.abc import Iterable

from fedlib.core.contracts import ClientBehavior
from fedlib.papers.taco import Freeloaders
from fedlib.runs import RunPlan


class FlowerParityWarning(UserWarning):
    """A spec whose Flower record is known to differ from `run_federation`'s (fedlib.flower.caveats)."""


def _remembering_freeloaders(behavior: ClientBehavior | None) -> set[int]:
    """The clients whose uploads depend on the model of the round before (none for other behaviours)."""
    if isinstance(behavior, Freeloaders) and behavior.mode == "previous_update":
        return behavior.clients
    return set()


def missed_previous_round(behavior: ClientBehavior | None, selected: Iterable[int],
                          previous: Iterable[int] | None, round_: int) -> list[int]:
    """The "previous_update" freeloaders selected in `round_` (0-based) that were not selected in the round before
    (`previous`: its selected clients; None before the first round)."""
    if round_ == 0 or previous is None:
        return []
    return sorted(_remembering_freeloaders(behavior) & ({int(c) for c in selected} - {int(c) for c in previous}))


def forgets_previous_round(behavior: ClientBehavior | None, client: int, round_: int) -> list[int]:
    """[client] when it is a "previous_update" freeloader whose memory (its own node's) lacks the model of the
    round before `round_` (0-based), else []."""
    if round_ > 0 and client in _remembering_freeloaders(behavior) and round_ - 1 not in behavior.state_dict():
        return [client]
    return []


def warn_freeloader_memory(clients: list[int], round_: int, side: str) -> None:
    """Warn that `clients`, "previous_update" freeloaders, train in `round_` (0-based) without that round's
    predecessor in their memory; `side` says who noticed ("server" or "client app")."""
    if clients:
        warnings.warn(
            f"Flower parity ({side}): 'previous_update' freeloader(s) {clients} take part in round {round_ + 1} "
            f"but not in round {round_}: in Flower a freeloader remembers only the models of the rounds it took "
            f"part in, so it uploads the received model (Delta = 0) where run_federation's loop uploads "
            f"2 w_t - w_(t-1); the record differs from run_federation's from this round on. Full participation "
            f"(sampler 1.0, TACO's setting) keeps them equal.", FlowerParityWarning, stacklevel=3)


def warn_thread_count(plan: RunPlan, threads: int, where: str) -> None:
    """Warn when the spec's `threads: "auto"` resolved to `threads` > 1 here (a convolutional model): client apps
    in other processes (`where`) resolve it to their own thread count."""
    if plan.kwargs.get("threads", "auto") == "auto" and threads > 1:
        warnings.warn(
            f"Flower parity ({plan.spec.experiment}, {plan.spec.model.name}): threads 'auto' is {threads} threads "
            f"in this process but each client app in {where} picks its own (one in a Ray actor), so the record "
            f"may differ from run_federation's in the last bits (up to 5e-7 measured); set the spec's "
            f"loop: {{threads: 1}} (or any fixed count) for bitwise parity.", FlowerParityWarning, stacklevel=3)
