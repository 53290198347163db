"""The application: `python -m fedlib` and its jobs (reproduce, a ledger piece, the ledger's view, claims only)."""
