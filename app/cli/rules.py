"""`flask seed rules add|list|enable|disable|remove`: operator rules handed to nodes with each lease."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.cli.output import json_option, print_json, print_table, report, service_call
from app.services import rules as rule_service

rules = AppGroup("rules", help="Operator rules (the executable rule is built in).")


def _row(rule) -> dict:
    return {**rule_service.rule_data(rule), "enabled": rule.enabled}


@rules.command("add")
@click.argument("name")
@click.option(
    "--field",
    type=click.Choice(["subject", "poster", "message_id", "flag"]),
    required=True,
    help="What the pattern is searched in: a file's subject, poster or message-id (applied by the"
    " nodes), or what an inspection flagged a post (flag: executable, password, password_url,"
    " encrypted_headers; applied by the data center).",
)
@click.option("--pattern", required=True, help="A regular expression, searched case-insensitively.")
@click.option("--action", type=click.Choice(["drop", "keep"]), default="drop", show_default=True)
@click.option("--groups", help="Only for groups matching this glob, e.g. 'alt.binaries.e-book.*'.")
@json_option
def add(name: str, field: str, pattern: str, action: str, groups: str | None, as_json: bool) -> None:
    """Add a rule; nodes apply a header rule from their next lease, the data center a flag rule
    to the inspections it stores from then on."""
    with service_call() as session:
        rule = rule_service.add_rule(
            session, {"name": name, "field": field, "pattern": pattern, "action": action, "groups": groups}
        )
        row = _row(rule)
    report(as_json, row, f"added rule {name}")


@rules.command("list")
@json_option
def list_(as_json: bool) -> None:
    """List the rules in the order they are applied, the built-in flag rule last; a flag rule
    with the posts it dropped for what their inspections found."""
    with service_call() as session:
        rows = [_row(r) for r in rule_service.list_rules(session)]
        dropped = rule_service.posts_dropped(session)
    rows.append(
        {
            "name": rule_service.INSPECTED_EXECUTABLE_RULE,
            "field": "flag",
            "pattern": "executable",
            "action": "drop",
            "groups": None,
            "enabled": True,
            "builtin": True,
        }
    )
    for row in rows:
        if row["field"] == "flag":
            row["posts_dropped"] = dropped.get(row["name"], 0)
    if as_json:
        print_json(rows)
    else:
        columns = ("name", "field", "pattern", "action", "groups", "enabled", "posts_dropped")
        print_table(columns, [[r.get(c, "") for c in columns] for r in rows])


def _switch(name: str, enabled: bool, as_json: bool) -> None:
    with service_call() as session:
        rule, changed = rule_service.set_enabled(session, name, enabled)
        row = _row(rule)
    word = "enabled" if enabled else "disabled"
    report(
        as_json,
        {**row, "changed": changed},
        f"{word} rule {name} (from each node's next lease)" if changed else f"rule {name} is already {word}",
    )


@rules.command("enable")
@click.argument("name")
@json_option
def enable(name: str, as_json: bool) -> None:
    """Hand the rule to nodes again, from their next lease."""
    _switch(name, True, as_json)


@rules.command("disable")
@click.argument("name")
@json_option
def disable(name: str, as_json: bool) -> None:
    """Keep the rule but stop handing it to nodes, from their next lease."""
    _switch(name, False, as_json)


@rules.command("remove")
@click.argument("name")
@json_option
def remove(name: str, as_json: bool) -> None:
    """Remove a rule."""
    with service_call() as session:
        row = {**_row(rule_service.remove_rule(session, name)), "removed": True}
    report(as_json, row, f"removed rule {name}")
