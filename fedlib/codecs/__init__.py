"""Codecs: quantizers and compressors with exact bit accounting. Every codec registers itself
(`@CODECS.register`, fedlib.registry), so `make_codec(name)` builds it and the conformance battery tests it.
Codec policies (a codec per client or per round) are in `fedlib.codecs.policies`."""
from fedlib.codecs.base import FLOAT_BITS, Codec, Identity, Message, id_bits, make_codec, roundtrip
from fedlib.codecs.kmeans import KMeansQuantizer, weight_quantizer
from fedlib.codecs.mucsc import MUCSC, BMUCSC
from fedlib.codecs.policies import AdaQuantFL, PerClient
from fedlib.codecs.qsgd import QSGD, SignSGD
from fedlib.codecs.sparse import STC, TopK
from fedlib.codecs.uniform import FedAQQuantizer, UniformQuantizer
from fedlib.registry import CODECS

__all__ = ["CODECS", "FLOAT_BITS", "Codec", "Identity", "Message", "id_bits", "make_codec", "roundtrip", "MUCSC",
           "BMUCSC", "QSGD", "SignSGD", "STC", "TopK", "AdaQuantFL", "PerClient", "FedAQQuantizer", "UniformQuantizer",
           "KMeansQuantizer", "weight_quantizer"]
