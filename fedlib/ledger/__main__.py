"""`python -m fedlib.ledger index ...`: a ledger's index (`fedlib.ledger.cli`)."""
import sys

from fedlib.ledger.cli import main

sys.exit(main())
