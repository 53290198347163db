"""`python -m fedlib.runs ...`: the run store command (`fedlib.runs.cli`)."""
import sys

from fedlib.runs.cli import main

sys.exit(main())
