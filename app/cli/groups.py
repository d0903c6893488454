"""`flask seed groups add|list`."""
from __future__ import annotations

import click
from flask.cli import AppGroup

from app.cli.output import json_option, print_json, print_table, service_call
from app.services import groups as group_service

groups = AppGroup("groups", help="Newsgroups the seed covers.")

_COLUMNS = ("id", "name", "active", "low_mark", "high_mark", "live_first", "backfill_id", "created_at")


def _row(group) -> dict:
    return {c: getattr(group, c) for c in _COLUMNS}


@groups.command("add")
@click.argument("names", nargs=-1, required=True)
@json_option
def add(names: tuple[str, ...], as_json: bool) -> None:
    """Add newsgroups (and their catalog partitions)."""
    with service_call() as session:
        added = group_service.add_groups(session, list(names))
        rows = [_row(g) for g in added]
    if as_json:
        print_json(rows)
    else:
        for row in rows:
            click.echo(f"added group {row['name']} (id {row['id']})")


@groups.command("list")
@json_option
def list_(as_json: bool) -> None:
    """List the groups."""
    with service_call() as session:
        rows = [_row(g) for g in group_service.list_groups(session)]
    if as_json:
        print_json(rows)
    else:
        print_table(_COLUMNS, [[r[c] for c in _COLUMNS] for r in rows])
