"""`FedlibStrategy`: a run spec's server side as a Flower 1.42 Message-API `Strategy`.

Flower's own strategies break same-seed parity with fedlib in four places; this one does not:
  sampling     fedlib's sampler on its keyed stream ("sampling", round), not `random.sample`;
  node ids     fedlib client ids are the nodes' `partition-id`s, mapped to node ids once (a query message);
  reply order  replies are sorted by client before anything reads them;
  aggregation  the algorithm's own `aggregate`, in that sorted order.
Each round is `fedlib.engine.federation`'s server phases: `open_round` in `configure_train` (sampling, the downlink
encode with exact bits, the algorithm's client view) and `close_round` in `aggregate_train` (aggregation,
hooks, the downlink publish, central evaluation, the record row). Federated evaluation is not used: the
record's test accuracy is the central one fedlib reports, so `configure_evaluate` sends nothing.
"""
from __future__ import annotations

import time
from collections.abc import Iterable
from pathlib import Path

from flwr.app import ArrayRecord, ConfigRecord, Message, MessageType, MetricRecord, RecordDict
from flwr.serverapp import Grid
from flwr.serverapp.strategy import Strategy

from fedlib.core.contracts import ClientResult
from fedlib.engine.channel import LinkContext
from fedlib.engine.federation import ClientReply, RoundStart, _json, torch_threads
from fedlib.flower.caveats import missed_previous_round, warn_freeloader_memory
from fedlib.flower.client import PARTITION
from fedlib.flower.plans import open_spec, spec_json
from fedlib.flower.wire import from_arrays, from_blob, to_arrays, to_blob
from fedlib.runs import RunSpec
from fedlib.runs.build import records_of
from fedlib.runs.entry import Records

RECORD_METRICS = ("test_acc", "test_loss", "train_loss", "bits_up", "bits_down", "bits_up_extra", "bits_down_extra")


class FedlibStrategy(Strategy):
    """Run `spec` (any registered algorithm, codec, hook, sampler, client behaviour) through a Flower grid.

    `start(grid, ...)` is Flower's round loop; `run(grid)` calls it with the spec's rounds and returns fedlib's
    tidy record (the tables `fedlib.runs.execute` stores: "rounds", "clients", "layers" and the spec's collectors')."""

    def __init__(self, spec: RunSpec, root: str | Path | None = None, timeout: float = 3600) -> None:
        self.spec, self.root, self.timeout = spec, root, timeout
        self.plan, self.fed = open_spec(spec, root)
        self.nodes: dict[int, int] = {}  # fedlib client id -> Flower node id
        self._start: RoundStart | None = None
        self._previous_ids: list[int] | None = None  # the clients of the round before (caveats)

    def run(self, grid: Grid) -> Records:
        """All the spec's rounds on `grid`; the record as `fedlib.runs.execute` would store it."""
        self.start(grid, to_arrays(self.fed.server.w), num_rounds=self.spec.rounds, timeout=self.timeout)
        return self.records()

    def records(self) -> Records:
        """The record of the rounds run so far: "rounds", "clients", "layers" and the spec's collectors' tables."""
        return records_of(self.plan, self.fed.result())

    # ---- Flower's Strategy -----------------------------------------------------------------------------
    def configure_train(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                        grid: Grid) -> Iterable[Message]:
        """The round's clients and their messages. `arrays` (Flower's copy of the global model) is not what
        clients receive: the downlink's codec decides that, so the server side sends the decoded model."""
        nodes = self._node_ids(grid)
        server = self.fed.server
        r = server_round - 1
        if r != len(server.history):
            raise ValueError(f"FedlibStrategy: Flower asked for round {server_round}, but the record holds "
                             f"{len(server.history)} rounds; rounds run in order from 1")
        with torch_threads(self.fed.threads):
            self._start = start = server.open_round(r)
        warn_freeloader_memory(missed_previous_round(self.fed.clients.behavior, start.ids, self._previous_ids, r),
                               r, "server")
        self._previous_ids = [int(i) for i in start.ids]
        # no empty value: Flower's size mods (message_size_mod) refuse an empty string in a ConfigRecord
        shared = {"spec": spec_json(self.spec), **({"root": str(self.root)} if self.root else {}), "round": r,
                  "view": to_blob(start.view), "history": _json(server.history)}
        model, buffers = to_arrays(start.received), to_arrays(server.buffers)
        return [Message(RecordDict({"model": model, "buffers": buffers,
                                    "fedlib": ConfigRecord({**shared, "client": int(i)})}),
                        dst_node_id=nodes[int(i)], message_type=MessageType.TRAIN, group_id=str(server_round))
                for i in start.ids]

    def aggregate_train(self, server_round: int,
                        replies: Iterable[Message]) -> tuple[ArrayRecord | None, MetricRecord | None]:
        start, self._start = self._start, None
        if start is None or start.ctx.round != server_round - 1:
            raise ValueError(f"FedlibStrategy: aggregate_train for round {server_round} without its configure_train")
        got, train_s = [], 0.0
        for msg in replies:
            if msg.has_error():
                raise RuntimeError(f"round {server_round}: node {msg.metadata.src_node_id} failed: {msg.error}")
            reply = self._reply(msg, start)
            got.append(reply)
            train_s += float(msg.content["fedlib"]["train_s"])
        with torch_threads(self.fed.threads):
            row = self.fed.server.close_round(start, got, train_s)
        return to_arrays(self.fed.server.w), MetricRecord({k: float(row[k]) for k in RECORD_METRICS})

    def configure_evaluate(self, server_round: int, arrays: ArrayRecord, config: ConfigRecord,
                           grid: Grid) -> Iterable[Message]:
        return []  # central evaluation happens in aggregate_train, as in fedlib's loop

    def aggregate_evaluate(self, server_round: int, replies: Iterable[Message]) -> MetricRecord | None:
        return None

    def summary(self) -> None:
        pass  # `start` calls it to log; the record is the summary

    # ---- helpers -----------------------------------------------------------------------------------------
    def _node_ids(self, grid: Grid) -> dict[int, int]:
        """fedlib client id -> node id, asked once of every node (its `partition-id`)."""
        if self.nodes:
            return self.nodes
        n = self.plan.num_clients
        node_ids = self._wait_for_nodes(grid, n)
        queries = [Message(RecordDict(), dst_node_id=node, message_type=MessageType.QUERY) for node in node_ids]
        for msg in grid.send_and_receive(queries, timeout=self.timeout):
            if msg.has_error():
                raise RuntimeError(f"node {msg.metadata.src_node_id} did not report its partition: {msg.error}")
            self.nodes[int(msg.content["fedlib"][PARTITION])] = msg.metadata.src_node_id
        if sorted(self.nodes) != list(range(n)):
            raise ValueError(f"the spec has {n} clients but the nodes hold partitions {sorted(self.nodes)}; run "
                             f"{n} SuperNodes with partition-id 0..{n - 1} (num-supernodes = {n} in simulation)")
        return self.nodes

    def _wait_for_nodes(self, grid: Grid, n: int) -> list[int]:
        deadline = time.monotonic() + self.timeout
        while len(node_ids := list(grid.get_node_ids())) < n:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{len(node_ids)} of the spec's {n} nodes connected in {self.timeout} s")
            time.sleep(1)
        if len(node_ids) > n:
            raise ValueError(f"{len(node_ids)} nodes for a spec with {n} clients: one node per fedlib client")
        return node_ids

    def _reply(self, msg: Message, start: RoundStart) -> ClientReply:
        """A client's reply as fedlib's loop holds it; the codec object is the link's for (round, client)."""
        cfg = msg.content["fedlib"]
        device = self.fed.server.device
        body = from_blob(cfg["reply"], device)
        client = int(cfg["client"])
        if self.nodes.get(client) != msg.metadata.src_node_id:
            raise ValueError(f"round {start.ctx.round + 1}: node {msg.metadata.src_node_id} replied for client {client}")
        result = ClientResult(client, body["n_samples"], body["steps"], from_arrays(msg.content["update"], device),
                              body["loss"], body["extras"])
        codec = self.fed.clients.up.link.codec_for(LinkContext(start.ctx.round, client, self.fed.server.history))
        return ClientReply(result, from_arrays(msg.content["buffers"], device), codec, body["row"], body["layers"])
