"""`flask seed nodes create|list|disable|enable|delete|token`."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.cli.output import json_option, print_json, print_table, report, service_call
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


def _switch(name: str, enabled: bool, as_json: bool) -> None:
    with service_call() as session:
        node, changed = node_service.set_enabled(session, name, enabled)
        row = _row(node)
    word = "enabled" if enabled else "disabled"
    report(as_json, {**row, "changed": changed}, f"{word} node {name}" if changed else f"node {name} is already {word}")


@nodes.command("disable")
@click.argument("name")
@json_option
def disable(name: str, as_json: bool) -> None:
    """Refuse the node's token from now on (its leases expire as usual)."""
    _switch(name, False, as_json)


@nodes.command("enable")
@click.argument("name")
@json_option
def enable(name: str, as_json: bool) -> None:
    """Accept the node's token again."""
    _switch(name, True, as_json)


@nodes.command("delete")
@click.argument("name")
@json_option
def delete(name: str, as_json: bool) -> None:
    """Delete the node: its token stops working, its leased ranges are given back (planned, the next
    node resuming where it stopped, or done when every batch was in); its accepted batches stay."""
    with service_call() as session:
        node, released = node_service.delete_node(session, name)
        row = _row(node)
    text = f"deleted node {name}"
    if released:
        text += f"; {len(released)} leased ranges given back: {', '.join(map(str, released))}"
    report(as_json, {**row, "deleted": True, "released_ranges": released}, text)


@nodes.command("token")
@click.argument("name")
@json_option
def token(name: str, as_json: bool) -> None:
    """Rotate the node's token: the old one stops working, the new one is shown once."""
    with service_call() as session:
        node, new = node_service.rotate_token(session, name)
        node_id = node.id
    if as_json:
        print_json({"id": node_id, "name": name, "token": new})
    else:
        click.echo(f"new token for node {name}, shown only this once (the old one no longer works):")
        click.echo(new)
