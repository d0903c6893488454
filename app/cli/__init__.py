"""`flask seed ...`: the operator's commands."""
from flask.cli import AppGroup

from app.cli.batches import batches
from app.cli.bench import bench
from app.cli.groups import groups
from app.cli.nodes import nodes, token
from app.cli.planning import plan, status
from app.cli.ranges import range_, spool
from app.cli.rules import rules

seed = AppGroup("seed", help="Plan, run and watch the seed (the distributed backfill).")
for command in (groups, nodes, rules, batches, plan, status, range_, spool, bench):
    seed.add_command(command)
# `flask seed token NODE` is a short name for `flask seed nodes token NODE`.
seed.add_command(token, "token")
