"""`python -m fedlib COMMAND ...`: the application's commands (`fedlib.app.commands`)."""
import sys

from fedlib.app.commands import main

sys.exit(main())
