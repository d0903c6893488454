"""`flask seed rules add|list|remove`: operator rules handed to nodes with each lease."""
from __future__ import annotations

import click
from flask.cli import AppGroup

from app.cli.output import json_option, print_json, print_table, service_call
from app.services import rules as rule_service

rules = AppGroup("rules", help="Operator rules (the executable rule is built in).")


@rules.command("add")
@click.argument("name")
@click.option("--field", type=click.Choice(["subject", "poster", "message_id"]), required=True)
@click.option("--pattern", required=True, help="A regular expression, searched case-insensitively.")
@click.option("--action", type=click.Choice(["drop", "keep"]), default="drop", show_default=True)
@click.option("--groups", help="Only for groups matching this glob, e.g. 'alt.binaries.e-book.*'.")
def add(name: str, field: str, pattern: str, action: str, groups: str | None) -> None:
    """Add a rule; nodes apply it from their next lease."""
    with service_call() as session:
        rule_service.add_rule(session, {"name": name, "field": field, "pattern": pattern,
                                        "action": action, "groups": groups})
    click.echo(f"added rule {name}")


@rules.command("list")
@json_option
def list_(as_json: bool) -> None:
    """List the rules in the order they are applied."""
    with service_call() as session:
        rows = [{**rule_service.rule_data(r), "enabled": r.enabled} for r in rule_service.list_rules(session)]
    if as_json:
        print_json(rows)
    else:
        columns = ("name", "field", "pattern", "action", "groups", "enabled")
        print_table(columns, [[r.get(c) for c in columns] for r in rows])


@rules.command("remove")
@click.argument("name")
def remove(name: str) -> None:
    """Remove a rule."""
    with service_call() as session:
        rule_service.remove_rule(session, name)
    click.echo(f"removed rule {name}")
