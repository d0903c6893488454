"""`flask seed nodes create|list|disable|enable`."""
from __future__ import annotations

import click
from flask.cli import AppGroup

from app.cli.output import json_option, print_json, print_table, service_call
from app.services import nodes as node_service

nodes = AppGroup("nodes", help="Edge nodes and their tokens.")

_COLUMNS = ("id", "name", "enabled", "created_at", "token_rotated_at", "last_seen_at")


def _row(node) -> dict:
    return {c: getattr(node, c) for c in _COLUMNS}


@nodes.command("create")
@click.argument("name")
@json_option
def create(name: str, as_json: bool) -> None:
    """Create a node and print its token once (only a hash is kept)."""
    with service_call() as session:
        node, token = node_service.create_node(session, name)
        row = _row(node)
    if as_json:
        print_json({**row, "token": token})
    else:
        click.echo(f"created node {name} (id {row['id']})")
        click.echo("its token, shown only this once (give it to the node as NODE_TOKEN):")
        click.echo(token)


@nodes.command("list")
@json_option
def list_(as_json: bool) -> None:
    """List the nodes."""
    with service_call() as session:
        rows = [_row(n) for n in node_service.list_nodes(session)]
    if as_json:
        print_json(rows)
    else:
        print_table(_COLUMNS, [[r[c] for c in _COLUMNS] for r in rows])


@nodes.command("disable")
@click.argument("name")
def disable(name: str) -> None:
    """Refuse the node's token from now on (its leases expire as usual)."""
    with service_call() as session:
        node_service.set_enabled(session, name, False)
    click.echo(f"disabled node {name}")


@nodes.command("enable")
@click.argument("name")
def enable(name: str) -> None:
    """Accept the node's token again."""
    with service_call() as session:
        node_service.set_enabled(session, name, True)
    click.echo(f"enabled node {name}")


@nodes.command("token")
@click.argument("name")
@json_option
def token(name: str, as_json: bool) -> None:
    """Rotate the node's token: the old one stops working, the new one is shown once."""
    with service_call() as session:
        _, new = node_service.rotate_token(session, name)
    if as_json:
        print_json({"name": name, "token": new})
    else:
        click.echo(f"new token for node {name}, shown only this once (the old one no longer works):")
        click.echo(new)
