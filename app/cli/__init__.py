"""`flask seed ...`: the operator's commands."""
from flask.cli import AppGroup

from app.cli.groups import groups
from app.cli.nodes import nodes

seed = AppGroup("seed", help="Plan, run and watch the seed (the distributed backfill).")
seed.add_command(groups)
seed.add_command(nodes)
