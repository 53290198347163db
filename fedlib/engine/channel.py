"""Links: how a parameter dict crosses the network through a codec, with exact bit counts.

A `Link` is the configuration of one direction. Its codec is a codec object, a registered codec name, or
a policy `ctx -> codec`, which gives per-client codecs (mixed precision) and per-round codecs (adaptive
bits) with one mechanism. `granularity="layer"` encodes each tensor separately (side information per
layer); `"model"` encodes the flattened model as one vector.

`Uplink` and `Downlink` are a link's state during a run: they own the error-feedback residuals and (for
the downlink "update" payload) the model the clients hold, and do encode -> count bits -> decode. They
are given values, never the algorithm. A codec that declares `device_generic = True` encodes on the
training device with a generator of that device seeded from the run's keyed stream (on a GPU its noise
differs from a CPU run's, its distribution does not); any other codec gets CPU tensors and a CPU
generator, and its decoded values are moved back.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Union

import torch

from fedlib.codecs.base import Codec, Identity, make_codec
from fedlib.core import params as P
from fedlib.core.contracts import MODEL, LayerDiagnostics
from fedlib.core.params import Params
from fedlib.core.seeding import Seeds


@dataclass(frozen=True)
class LinkContext:
    round: int
    client: int | None  # None on the downlink
    history: Sequence[dict[str, Any]]  # record rows of the rounds so far (for loss-driven policies)


CodecPolicy = Callable[[LinkContext], Codec]


@dataclass
class Link:
    """One direction of the channel.

    payload: uplink "update" (trained - received) or "weights" (the trained weights themselves);
             downlink "weights" (the model itself, every round; the server keeps its full-precision
             copy) or "update" (the change since what clients hold, sent right after aggregation;
             without error feedback the server then adopts the clients' model, so that everyone holds
             the same weights).
    error_feedback: keep the compression residual (per client on the uplink) and add it to the
             next message.
    """

    codec: Union[Codec, CodecPolicy, str] = field(default_factory=Identity)
    granularity: str = "layer"
    payload: str = "update"
    error_feedback: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.codec, str):
            self.codec = make_codec(self.codec)
        if not (hasattr(self.codec, "encode") or callable(self.codec)):
            raise ValueError(f"Link codec must be a codec object, a registered codec name or a policy "
                             f"ctx -> codec; got {self.codec!r}")
        if self.granularity not in ("layer", "model"):
            raise ValueError(f"granularity must be 'layer' or 'model', got {self.granularity!r}")
        if self.payload not in ("update", "weights"):
            raise ValueError(f"payload must be 'update' or 'weights', got {self.payload!r}")
        if not isinstance(self.error_feedback, bool):
            raise ValueError(f"error_feedback must be True or False, got {self.error_feedback!r}")

    def codec_for(self, ctx: LinkContext) -> Codec:
        codec = self.codec
        if hasattr(codec, "encode"):
            return codec  # type: ignore[return-value]
        return codec(ctx)  # type: ignore[operator,union-attr]


@dataclass
class Transmission:
    decoded: Params
    payload_bits: int
    side_bits: int
    codec: Codec
    info: LayerDiagnostics  # each message's codec diagnostics: key -> {layer (MODEL on a model-granularity link): value}

    @property
    def bits(self) -> int:
        return self.payload_bits + self.side_bits


def transmit(codec: Codec, x: Params, granularity: str, gen: torch.Generator | None) -> Transmission:
    """Encode and decode a parameter dict; bits are summed over the messages actually sent."""
    if granularity == "model":
        msg = codec.encode(P.flatten(x), gen)
        info = {key: {MODEL: value} for key, value in msg.info.items()}
        return Transmission(P.unflatten(codec.decode(msg), x), msg.payload_bits, msg.side_bits, codec, info)
    decoded, payload_bits, side_bits, info = {}, 0, 0, {}
    for name, t in x.items():
        msg = codec.encode(t.reshape(-1), gen)
        decoded[name] = codec.decode(msg).view_as(t)
        payload_bits += msg.payload_bits
        side_bits += msg.side_bits
        for key, value in msg.info.items():
            info.setdefault(key, {})[name] = value
    return Transmission(decoded, payload_bits, side_bits, codec, info)


class _LinkState:
    """A link during a run: codec choice per (round, client), keyed noise streams and the device hop."""

    def __init__(self, link: Link, purpose: str, seeds: Seeds, device: torch.device) -> None:
        self.link, self.purpose, self.seeds, self.device = link, purpose, seeds, device

    def _send(self, x: Params, round_: int, client: int | None, history: Sequence[dict[str, Any]]) -> Transmission:
        codec = self.link.codec_for(LinkContext(round=round_, client=client, history=history))
        key = (self.purpose, round_) if client is None else (self.purpose, round_, client)
        on_device = self.device.type == "cpu" or getattr(codec, "device_generic", False)
        # A deterministic codec never draws (the battery checks it ignores the generator): no stream to seed.
        gen = None
        if not getattr(codec, "deterministic", False):
            gen = self.seeds.torch(*key, device=self.device if on_device else "cpu")
        if on_device:
            return transmit(codec, x, self.link.granularity, gen)
        tx = transmit(codec, {k: v.cpu() for k, v in x.items()}, self.link.granularity, gen)
        tx.decoded = {k: v.to(self.device) for k, v in tx.decoded.items()}
        return tx


class Uplink(_LinkState):
    """The uplink: each client's upload becomes the update the server decodes; with error feedback each
    client keeps its residual e_i and sends C(x + e_i), e_i <- x + e_i - decoded."""

    def __init__(self, link: Link, seeds: Seeds, device: torch.device) -> None:
        super().__init__(link, "uplink", seeds, device)
        self.residuals: dict[int, Params] = {}

    def upload(self, weights: Params, received: Params, round_: int, client: int,
               history: Sequence[dict[str, Any]]) -> tuple[Params, Transmission]:
        """(decoded update = what the server reconstructs minus `received`, the transmission)."""
        by_update = self.link.payload == "update"
        x = P.sub(weights, received) if by_update else weights
        if self.link.error_feedback and client in self.residuals:
            x = P.add(x, self.residuals[client])
        tx = self._send(x, round_, client, history)
        if self.link.error_feedback:
            self.residuals[client] = P.sub(x, tx.decoded)
        return (tx.decoded if by_update else P.sub(tx.decoded, received)), tx


class Downlink(_LinkState):
    """The server's side of the downlink and the model the clients hold.

    payload "weights": `receive` sends the model every round; clients hold the decoded copy.
    payload "update": `publish` sends the change since what clients hold right after aggregation (so the
    model evaluated is the one the clients hold); `receive` only sends a first message if the round-0
    broadcast differs from the initial model the clients share by construction. Error feedback here means
    the server keeps its own model: the held model lags, and the next message carries the difference.
    """

    def __init__(self, link: Link, seeds: Seeds, device: torch.device, initial: Params) -> None:
        if link.payload == "weights" and link.error_feedback:
            raise ValueError("error feedback on a downlink needs payload='update' (a 'weights' downlink resends "
                             "the whole model every round, so there is no residual to carry)")
        super().__init__(link, "downlink", seeds, device)
        self.held = P.clone(initial)
        self.sent: list[Transmission] = []  # this round's messages

    def receive(self, broadcast: Params, server: Params, round_: int,
                history: Sequence[dict[str, Any]]) -> tuple[Params, Params]:
        """Start of a round: (what the clients hold now, the server model after any adoption)."""
        self.sent = []
        if self.link.payload == "weights":
            tx = self._send(broadcast, round_, None, history)
            self.sent, self.held = [tx], tx.decoded
        elif round_ == 0 and not all(torch.equal(broadcast[k], self.held[k]) for k in broadcast):
            server = self.publish(broadcast, server, round_, history)
        return self.held, server

    def publish(self, broadcast: Params, server: Params, round_: int, history: Sequence[dict[str, Any]]) -> Params:
        """Payload "update": send broadcast - held; clients add the decoded change. Without error feedback the
        server adopts the clients' model (returned); with it, the server keeps its model and the compression
        error goes into the next message. Payload "weights": nothing to do here."""
        if self.link.payload == "weights":
            return server
        tx = self._send(P.sub(broadcast, self.held), round_, None, history)
        self.sent.append(tx)
        self.held = P.add(self.held, tx.decoded)
        return server if self.link.error_feedback else P.add(server, P.sub(self.held, broadcast))

    def clients_model(self, server: Params) -> Params:
        """The model to evaluate at the end of a round: what the clients hold under payload "update" (with
        error feedback it differs from the server's), the server's model under "weights"."""
        return self.held if self.link.payload == "update" else server
