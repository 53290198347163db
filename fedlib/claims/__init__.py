"""The claims machinery every paper shares: the judge (`judge`) and its guards, the saved evidence, the batteries
(`noise`, `decidability`) and the ledger's verdicts, over the claims the papers declare (`fedlib.paper.claim`).

Each paper's own claims (`claims(bundle) -> Claims`) are in its folder, `fedlib/papers/<name>/claims.py`: the notebook
computes its tables from the records and hands them there, so every verdict's rule and evidence is library code with
tests, not notebook code. These modules only read records: they are not part of the code version that keys the run
store.
"""
