"""Each paper's claims table, assembled from its runs' records by the rules in `fedlib.report`.

One module per notebook (`claims(...) -> Claims`): the notebook computes its tables from the records and
hands them here, so every verdict's rule and evidence is library code with tests, not notebook code.
These modules only read records: they are not part of the code version that keys the run store.
"""
