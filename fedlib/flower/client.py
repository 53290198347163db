"""The client app: fedlib's local training and uplink encode for one client per message.

A train message carries the run spec (JSON), the round, the fedlib client id, the model the client holds
after the downlink (and the model's buffers), the algorithm's declared view and the record rows so far (a
loss-driven codec policy reads them). The client trains with its own keyed streams, encodes its upload with
the link's codec and its stream ("uplink", round, client) and replies with the decoded update, its extras
and its record row with the exact bits of the message the codec produced. What it keeps between rounds is
the client side's `state_dict()` (the same state a checkpoint saves: the algorithm's client state, its
error-feedback residual, a client behaviour's memory), held in its Flower `Context.state` (kept per node by
a SuperNode, and by the simulation engine between rounds), one entry per run spec, so one ServerApp may run
several specs on the same nodes.
"""
from __future__ import annotations

import hashlib
import json
import time

import numpy as np
from flwr.app import ConfigRecord, Context, Message, RecordDict
from flwr.clientapp import ClientApp

from fedlib.core.contracts import RoundContext
from fedlib.engine.federation import RoundStart, torch_threads
from fedlib.flower.caveats import forgets_previous_round, warn_freeloader_memory
from fedlib.flower.plans import client_federation
from fedlib.flower.wire import from_arrays, from_blob, to_arrays, to_blob

client_app = ClientApp()

STATE_PREFIX = "fedlib/"  # the client's persistent state in Context.state, one entry per run spec
PARTITION = "partition-id"  # the node config key holding the fedlib client id


def partition_id(context: Context) -> int:
    if PARTITION not in context.node_config:
        raise ValueError(f"node {context.node_id}: its node config has no {PARTITION!r}; start each SuperNode with "
                         f"--node-config 'partition-id=<fedlib client id> num-partitions=<clients>'")
    return int(context.node_config[PARTITION])


@client_app.query()
def report_partition(msg: Message, context: Context) -> Message:
    """The server maps fedlib client ids to node ids once, from these replies."""
    return Message(RecordDict({"fedlib": ConfigRecord({PARTITION: partition_id(context)})}), reply_to=msg)


@client_app.train()
def train(msg: Message, context: Context) -> Message:
    cfg = msg.content["fedlib"]
    client, r = int(cfg["client"]), int(cfg["round"])
    if client != partition_id(context):
        raise ValueError(f"node {context.node_id} holds partition {partition_id(context)} but was sent the work of "
                         f"client {client}")
    plan, fed, fresh = client_federation(str(cfg["spec"]), str(cfg["root"]) if "root" in cfg else None)
    side, device = fed.clients, fed.server.device
    key = STATE_PREFIX + hashlib.sha256(str(cfg["spec"]).encode()).hexdigest()[:16]
    side.load_state_dict(from_blob(context.state[key]["blob"] if key in context.state else fresh))
    warn_freeloader_memory(forgets_previous_round(side.behavior, client, r), r, "client app")
    received = from_arrays(msg.content["model"], device)
    start = RoundStart(RoundContext(r, plan.num_clients, device=device), np.array([client]), received,
                       from_blob(cfg["view"], device), time.perf_counter())
    with torch_threads(fed.threads):
        t_train = time.perf_counter()
        jobs, outcomes = side.train(start, from_arrays(msg.content["buffers"], device))
        t_train = time.perf_counter() - t_train
        (reply,) = side.replies(start, jobs, outcomes, json.loads(str(cfg["history"])))
    context.state[key] = ConfigRecord({"blob": to_blob(side.state_dict())})  # this client's state only: all it loaded
    res = reply.result
    content = RecordDict({
        "update": to_arrays(res.update), "buffers": to_arrays(reply.buffers),
        "fedlib": ConfigRecord({"reply": to_blob({"n_samples": res.n_samples, "steps": res.steps, "loss": res.loss,
                                                  "extras": res.extras, "row": reply.row,
                                                  "layers": reply.layers}),
                                "client": client, "train_s": t_train}),
    })
    return Message(content, reply_to=msg)
