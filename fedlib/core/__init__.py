"""What every layer speaks: parameter dicts (`params`, the one representation of a
model's weights), the round's typed contracts (`contracts`: what the round loop, the executors, the algorithms and
the hooks exchange), seeded streams (`seeding`: one master seed, independent named streams) and train-time
augmentation drawn from a client's keyed stream (`augment`).

The components (`fedlib.algorithms`, `fedlib.codecs`, `fedlib.models`) build on it and the engine (`fedlib.engine`)
runs them; it imports neither (of the rest of fedlib, only `fedlib.data`'s `Dataset` type and `fedlib.validate`).
"""
