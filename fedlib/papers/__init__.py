"""fedlib's papers: each one's glue around the engine (its splits, codec policies, hooks, bandwidth/energy models,
table helpers) and its claims. Importing this package (`fedlib.registry.load_components` imports its modules)
declares each `Paper` (`fedlib.paper.PAPERS`): a new paper of fedlib's is one more line below."""
import fedlib.claims.fedaq
import fedlib.claims.fedshift
import fedlib.claims.mucsc
import fedlib.claims.quickstart
import fedlib.claims.taco
import fedlib.papers.flower  # noqa: F401  (declares a paper without claims)
