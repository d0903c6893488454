"""`flask seed apikeys create|list|revoke`: the keys users of the search and the newznab API present."""
from __future__ import annotations

import click
from flask.cli import AppGroup

from app.cli.output import json_option, print_json, print_table, service_call
from app.services import apikeys as apikey_service

apikeys = AppGroup("apikeys", help="API keys: search and NZB downloads for users and their tools.")

# Never the key: only its hash is kept, and the list is for people and scripts alike.
_COLUMNS = ("id", "name", "created_at", "last_used_at", "revoked_at", "grabs", "api_hits")


def _row(key) -> dict:
    return {c: getattr(key, c) for c in _COLUMNS}


@apikeys.command("create")
@click.argument("name")
@json_option
def create(name: str, as_json: bool) -> None:
    """Create an API key and print it once (only a hash is kept)."""
    with service_call() as session:
        key, secret = apikey_service.create_key(session, name)
        row = _row(key)
    if as_json:
        print_json({**row, "key": secret})
    else:
        click.echo(f"created API key {name} (id {row['id']})")
        click.echo("the key, shown only this once (give it to the tool as its API key):")
        click.echo(secret)


@apikeys.command("list")
@json_option
def list_(as_json: bool) -> None:
    """List the API keys with their use (their names; the keys themselves are not kept)."""
    with service_call() as session:
        rows = [_row(k) for k in apikey_service.list_keys(session)]
    if as_json:
        print_json(rows)
    else:
        print_table(_COLUMNS, [[r[c] for c in _COLUMNS] for r in rows])


@apikeys.command("revoke")
@click.argument("name")
@json_option
def revoke(name: str, as_json: bool) -> None:
    """Revoke the key: it stops working at once; its name and counts stay in the list."""
    with service_call() as session:
        row = _row(apikey_service.revoke_key(session, name))
    if as_json:
        print_json(row)
    else:
        click.echo(f"revoked API key {name}")
