"""fedlib's papers, one folder each: `<name>/__init__.py`, its glue around the engine (its splits, codec policies,
hooks, bandwidth/energy models, table helpers; the components its runs reach, so their module names key the runs),
and `<name>/claims.py`, its claims and its `Paper`. Importing this package (`fedlib.registry.load_components` imports
its modules) declares each `Paper` (`fedlib.paper.PAPERS`): a new paper of fedlib's is one more line below."""
import fedlib.papers.fedaq.claims
import fedlib.papers.fedshift.claims
import fedlib.papers.mucsc.claims
import fedlib.papers.quickstart.claims
import fedlib.papers.taco.claims
import fedlib.papers.flower  # noqa: F401  (declares a paper without claims)
