"""`make reproduce`: `python -m fedlib reproduce` (`fedlib.app.reproduce`), kept for the commands that name this
script; `--help` lists the options."""
import sys

from fedlib.app.reproduce import main

if __name__ == "__main__":  # a worker process started by spawn imports this module again: it must not run
    sys.exit(main())
