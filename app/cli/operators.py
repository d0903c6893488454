"""`flask seed operators create|list|revoke`: the keys that see the whole seed."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.cli.output import json_option, print_json, print_table, report, service_call
from app.services import operators as operator_service

operators = AppGroup("operators", help="Operator keys: the whole status over the API (a node sees only its own).")

_COLUMNS = ("id", "name", "created_at", "last_used_at", "revoked_at")


def _row(key) -> dict:
    return {c: getattr(key, c) for c in _COLUMNS}


@operators.command("create")
@click.argument("name")
@json_option
def create(name: str, as_json: bool) -> None:
    """Create an operator key and print it once (only a hash is kept)."""
    with service_call() as session:
        key, secret = operator_service.create_key(session, name)
        row = _row(key)
    if as_json:
        print_json({**row, "key": secret})
    else:
        click.echo(f"created operator key {name} (id {row['id']})")
        click.echo("the key, shown only this once (send it as Authorization: Bearer <key>):")
        click.echo(secret)


@operators.command("list")
@json_option
def list_(as_json: bool) -> None:
    """List the operator keys (their names; the keys themselves are not kept)."""
    with service_call() as session:
        rows = [_row(k) for k in operator_service.list_keys(session)]
    if as_json:
        print_json(rows)
    else:
        print_table(_COLUMNS, [[r[c] for c in _COLUMNS] for r in rows])


@operators.command("revoke")
@click.argument("name")
@json_option
def revoke(name: str, as_json: bool) -> None:
    """Revoke the key: it stops working at once; its name stays in the list."""
    with service_call() as session:
        key = operator_service.revoke_key(session, name)
        session.refresh(key)
        row = {**_row(key), "revoked": True}
    report(as_json, row, f"revoked operator key {name}")
