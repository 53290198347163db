"""Codecs: quantizers and compressors with exact bit accounting. Every codec registers itself
(`register_codec`), so `make_codec(name)` builds it and the conformance battery tests it."""
from fedlib.codecs.base import CODECS, FLOAT_BITS, Codec, Identity, Message, id_bits, make_codec, register_codec, roundtrip
from fedlib.codecs.kmeans import KMeansQuantizer, weight_quantizer
from fedlib.codecs.mucsc import MUCSC, BMUCSC
from fedlib.codecs.qsgd import QSGD, SignSGD
from fedlib.codecs.sparse import STC, TopK
from fedlib.codecs.uniform import AdaQuantFL, FedAQQuantizer, UniformQuantizer

__all__ = ["CODECS", "FLOAT_BITS", "Codec", "Identity", "Message", "id_bits", "make_codec", "register_codec",
           "roundtrip", "MUCSC", "BMUCSC", "QSGD", "SignSGD", "STC", "TopK", "AdaQuantFL", "FedAQQuantizer",
           "UniformQuantizer", "KMeansQuantizer", "weight_quantizer"]
