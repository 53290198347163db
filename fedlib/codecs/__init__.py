"""Codecs: quantizers and compressors with exact bit accounting."""
from fedlib.codecs.base import FLOAT_BITS, Codec, Identity, Message, roundtrip
from fedlib.codecs.mucsc import MUCSC, BMUCSC
from fedlib.codecs.qsgd import QSGD, SignSGD
from fedlib.codecs.sparse import STC, TopK
from fedlib.codecs.stochastic import AdaQuantFL, FedAQQuantizer, StochasticUniform
from fedlib.codecs.weight_quant import KMeansQuantizer, UniformQuantizer, weight_quantizer

__all__ = ["FLOAT_BITS", "Codec", "Identity", "Message", "roundtrip", "MUCSC", "BMUCSC", "QSGD", "SignSGD", "STC", "TopK", "AdaQuantFL", "FedAQQuantizer", "StochasticUniform", "KMeansQuantizer", "UniformQuantizer", "weight_quantizer"]
