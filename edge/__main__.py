"""``python -m edge``: the `edge` program."""
import sys

from edge.cli import main

sys.exit(main())
