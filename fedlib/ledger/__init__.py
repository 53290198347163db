"""Paper-scale evidence that accumulates: a committed ledger of runs (`evidence/gpu/`), filled piece by piece.

`priority` orders a profile's runs by the headline claims each paper declares; `piece` computes the next ones
within a time budget and exports them, `claims` keeping pieces at once on one ledger from computing a run twice;
`entries` checks the ledger's folder and writes and verifies its entries, each against its line in the committed
index that `index` reads and writes (`python -m fedlib.ledger index`: `cli`); `status` tells, from the
ledger alone, how much of each headline's evidence exists; `verdicts` judges the headline claims on the ledger's
runs, beside the cpu profile's verdicts that `cpu_record` keeps.
"""
