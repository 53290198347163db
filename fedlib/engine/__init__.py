"""The engine: what a federated run executes, round by round, whatever the paper.

- `federation`: the round loop (sample, downlink, local training, uplink, aggregate, hooks, evaluate);
- `executors`: the selected clients' local training for one round (sequential, batched, captured);
- `seed_batch`: a cell's seeds trained as one batched federation;
- `channel`: links, a parameter dict crossing the network through a codec with exact bit counts.

It runs the components a run names (`fedlib.algorithms`, `fedlib.codecs`, `fedlib.models`, `fedlib.data`), which
speak `fedlib.core`'s types; `fedlib.runs` builds a run from its spec and files its records in the store.
"""
