"""`make reproduce`: `python -m fedlib reproduce` (`fedlib.app.reproduce`), kept for the commands that name this
script; `--help` lists the options."""
import sys

from fedlib.app.reproduce import main

sys.exit(main())
