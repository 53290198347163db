"""`InProcessGrid`: a Flower `Grid` that calls a client app directly, in this process, one `Context` per node.

Node ids are random 64-bit integers as Flower's are, each node's `partition-id` is its fedlib client id, and
replies come back in a shuffled order: the three things a strategy must not lean on. For tests and for
running a spec through the Flower adapters without the simulation engine.
"""
from __future__ import annotations

import random
import uuid
from collections.abc import Iterable

from flwr.app import Context, Message, RecordDict
from flwr.clientapp import ClientApp
from flwr.serverapp import Grid
from flwr.supercore.task_identity import TaskIdentity

from fedlib.flower.client import PARTITION


class InProcessGrid(Grid):
    def __init__(self, client_app: ClientApp, num_nodes: int, seed: int = 0) -> None:
        rng = random.Random(seed)
        self.client_app, self._rng, self._pending = client_app, rng, {}
        self.contexts = {rng.getrandbits(63) + 1: Context(run_id=1, node_id=0, node_config={
            PARTITION: p, "num-partitions": num_nodes}, state=RecordDict(), run_config={}) for p in range(num_nodes)}
        for node_id, context in self.contexts.items():
            context.node_id = node_id
        self._run = None
        # A Message takes its run and sender from the process's task identity, which Flower's runtime sets
        # for a ServerApp; set it here when no runtime did.
        for field, value in (("run_id", 1), ("node_id", 0), ("task_id", 0)):
            if getattr(TaskIdentity, f"_{field}") is None:
                setattr(TaskIdentity, field, value)

    def set_run(self, run) -> None:  # type: ignore[no-untyped-def]
        self._run = run

    @property
    def run(self):  # type: ignore[no-untyped-def]
        return self._run

    def create_message(self, content: RecordDict, message_type: str, dst_node_id: int, group_id: str,
                       ttl: float | None = None) -> Message:
        return Message(content, dst_node_id=dst_node_id, message_type=message_type, group_id=group_id, ttl=ttl)

    def get_node_ids(self) -> Iterable[int]:
        return list(self.contexts)

    def push_messages(self, messages: Iterable[Message]) -> Iterable[str]:
        ids = []
        for msg in messages:
            ids.append(uuid.uuid4().hex)
            self._pending[ids[-1]] = self.client_app(msg, self.contexts[msg.metadata.dst_node_id])
        return ids

    def pull_messages(self, message_ids: Iterable[str]) -> Iterable[Message]:
        return [self._pending.pop(i) for i in message_ids]

    def send_and_receive(self, messages: Iterable[Message], *, timeout: float | None = None) -> Iterable[Message]:
        replies = list(self.pull_messages(self.push_messages(messages)))
        self._rng.shuffle(replies)
        return replies
