"""Each paper's glue around the engine: its splits, codec policies, hooks, bandwidth/energy models and
table helpers (`fedlib.papers.fedshift`, `.taco`, `.fedaq`, `.mucsc`)."""
