"""`python -m fedlib COMMAND ...`: the application's commands (`fedlib.app.commands`)."""
import sys

from fedlib.app.commands import main

if __name__ == "__main__":  # a worker process started by spawn imports this module again: it must not run
    sys.exit(main())
