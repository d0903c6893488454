"""``python -m edge``: the `edge` program."""

import sys

from edge.node.cli import main

sys.exit(main())
