"""`flask seed groups add|list|disable|enable|remove`."""

from __future__ import annotations

import click
from flask.cli import AppGroup

from app.cli.output import json_option, print_json, print_table, report, service_call
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
    """List the groups (active no: disabled, neither planned nor leased)."""
    with service_call() as session:
        rows = [_row(g) for g in group_service.list_groups(session)]
    if as_json:
        print_json(rows)
    else:
        print_table(_COLUMNS, [[r[c] for c in _COLUMNS] for r in rows])


def _switch(name: str, active: bool, as_json: bool) -> None:
    with service_call() as session:
        group, changed = group_service.set_active(session, name, active)
        row = _row(group)
        leased = len(group_service.leased_ranges(session, group.id))
    word = "enabled" if active else "disabled"
    text = f"{word} group {row['name']}" if changed else f"group {row['name']} is already {word}"
    if not active and leased:
        text += f" ({leased} leased ranges run to their end)"
    report(as_json, {**row, "changed": changed, "leased_ranges": leased}, text)


@groups.command("disable")
@click.argument("name")
@json_option
def disable(name: str, as_json: bool) -> None:
    """Stop planning and leasing the group (leased ranges run to their end); its catalog stays."""
    _switch(name, False, as_json)


@groups.command("enable")
@click.argument("name")
@json_option
def enable(name: str, as_json: bool) -> None:
    """Plan and lease the group again."""
    _switch(name, True, as_json)


def _show_counts(removal: group_service.GroupRemoval, heading: str, err: bool) -> None:
    """The rows per table (the group's own row under "groups") and the partitions, under `heading`."""
    click.echo(heading, err=err)
    width = max(len(t) for t in removal.counts)
    for table, rows in removal.counts.items():
        click.echo(f"  {table.ljust(width)}  {rows:>12,}", err=err)
    partitions = sorted(p for ps in removal.partitions.values() for p in ps)
    if partitions:
        word = "dropped" if removal.removed else "to drop"
        click.echo(f"  partitions {word}: {', '.join(partitions)}", err=err)


@groups.command("remove")
@click.argument("name")
@click.option("--force", is_flag=True, help="Remove it even while nodes hold leases on its ranges.")
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.option("--dry-run", is_flag=True, help="Only print what would be deleted.")
@json_option
def remove(name: str, force: bool, yes: bool, dry_run: bool, as_json: bool) -> None:
    """Delete the group and everything of it: plans, ranges, batches, its catalog rows and partitions.

    Says what it will delete (rows per table) and asks first (--yes does not ask). Refused while
    nodes hold leases on its ranges, unless --force. One transaction: all of it goes, or nothing.
    """
    with service_call() as session:
        preview = group_service.removal_preview(session, name)
    if dry_run:
        if as_json:
            print_json({**preview.as_dict(), "dry_run": True})
            return
        _show_counts(
            preview,
            f"removing group {preview.group} (id {preview.group_id}) would delete {preview.rows:,} rows:",
            err=False,
        )
        if preview.leased_ranges:
            click.echo(f"  and would be refused without --force: {len(preview.leased_ranges)} leased ranges")
        return
    if preview.leased_ranges and not force:
        raise click.ClickException(group_service.leased_message(preview))
    if not yes:
        # With --json the question goes to stderr, so that stdout stays one JSON document.
        _show_counts(
            preview,
            f"removing group {preview.group} (id {preview.group_id}) deletes {preview.rows:,} rows:",
            err=as_json,
        )
        click.confirm(f"remove group {preview.group} and all of the above?", abort=True, err=as_json)
    with service_call() as session:
        removed = group_service.remove_group(session, name, force=force)
    if as_json:
        print_json({**removed.as_dict(), "dry_run": False})
        return
    if yes:
        _show_counts(
            removed, f"removed group {removed.group} (id {removed.group_id}): {removed.rows:,} rows", err=False
        )
    else:
        click.echo(f"removed group {removed.group} (id {removed.group_id}): {removed.rows:,} rows")
