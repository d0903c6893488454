"""`flask seed ...`: the operator's commands."""

import click
from flask.cli import AppGroup
from sqlalchemy.exc import OperationalError

from app.cli.apikeys import apikeys
from app.cli.batches import batches
from app.cli.bench import bench
from app.cli.catalog import releases
from app.cli.groups import groups
from app.cli.names import names
from app.cli.nodes import nodes, token
from app.cli.nzb import nzb
from app.cli.operators import operators
from app.cli.planning import plan, status
from app.cli.ranges import range_, spool
from app.cli.rules import rules
from app.config import get_settings, shown_database_url
from app.logs import configure as configure_logging


class SeedGroup(AppGroup):
    """The commands' group: a database that cannot be used is one line naming it (without its
    password) and exit 1, not a traceback. What a command logs goes to stderr in the data
    center's one log format (app/logs.py); stdout keeps the command's own output."""

    def invoke(self, ctx: click.Context):
        configure_logging(get_settings())
        try:
            return super().invoke(ctx)
        except OperationalError as exc:
            reason = (str(exc.orig) if exc.orig is not None else str(exc)).strip().splitlines()
            raise click.ClickException(
                f"the database {shown_database_url(get_settings().database_url)} cannot be used:"
                f" {reason[0] if reason else type(exc).__name__} (is PostgreSQL up, and DATABASE_URL right?)"
            ) from None


seed = SeedGroup("seed", help="Plan, run and watch the seed (the distributed backfill).")
for command in (
    groups,
    nodes,
    operators,
    rules,
    batches,
    plan,
    status,
    range_,
    spool,
    bench,
    releases,
    nzb,
    apikeys,
    names,
):
    seed.add_command(command)
# `flask seed token NODE` is a short name for `flask seed nodes token NODE`.
seed.add_command(token, "token")
