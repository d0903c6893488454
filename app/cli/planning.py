"""`flask seed plan` and `flask seed status`."""
from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext

from app.cli.output import json_option, print_json, print_table, service_call
from app.services.errors import ServiceError
from app.services.planner import groups_to_plan, plan_groups
from app.services.status import seed_status
from edge.digest.nntp import NNTPError


@click.command("plan")
@with_appcontext
@click.argument("groups", nargs=-1)
@click.option("--days", type=click.IntRange(min=1), help="How far back to plan (default: PLAN_DAYS).")
@json_option
def plan(groups: tuple[str, ...], days: int | None, as_json: bool) -> None:
    """Plan ranges for GROUPS (default: every active group) down to N days back."""
    settings = current_app.config["SETTINGS"]
    with service_call() as session:
        names = groups_to_plan(session, groups)  # unknown names fail before any NNTP work
    if not names:
        raise click.ClickException("no groups to plan: add one with `flask seed groups add NAME`")
    results = []
    try:
        for result in plan_groups(settings, names, days=days):
            results.append(result.as_dict())
            if not as_json:
                if result.plan_id is None:
                    click.echo(f"{result.group}: nothing to plan ({result.reason})")
                else:
                    click.echo(f"{result.group}: planned {result.first_id}-{result.last_id} in {result.ranges}"
                               f" ranges (plan {result.plan_id})")
    except ServiceError as exc:
        raise click.ClickException(exc.message) from None
    except (NNTPError, OSError) as exc:
        raise click.ClickException(f"NNTP server {settings.nntp.address}: {exc}") from None
    if as_json:
        print_json(results)


@click.command("status")
@with_appcontext
@json_option
def status(as_json: bool) -> None:
    """Plans, ranges, nodes, batches and rates."""
    with service_call() as session:
        data = seed_status(session)
    if as_json:
        print_json(data)
        return
    columns = ("group", "ranges", "planned", "leased", "done", "articles", "missing", "files", "releases", "dropped")
    print_table(columns, [[g[c] for c in columns] for g in data["groups"]])
    for g in data["groups"]:
        for rule, counts in sorted(g["rules"].items()):
            label = "kept" if rule == "" else f"dropped by {rule}"
            click.echo(f"  {g['group']}: {label}: {counts['releases']} releases, {counts['files']} files,"
                       f" {counts['fragments']} articles")
    if data["leased_ranges"]:
        click.echo()
        columns = ("id", "group", "node", "first_id", "next_id", "last_id", "batches", "articles", "touched_at")
        print_table(columns, [[r[c] for c in columns] for r in data["leased_ranges"]])
    if data["failed_ranges"]:
        click.echo()
    for r in data["failed_ranges"]:
        times = "once" if r["failures"] == 1 else f"{r['failures']} times"
        click.echo(f"range {r['id']} ({r['group']}, {r['first_id']}-{r['last_id']}, {r['status']}) failed"
                   f" {times} on a node; last: {r['last_failure']}")
    if data["nodes"]:
        click.echo()
        print_table(("node", "enabled", "leases", "last_seen_at"),
                    [[n["name"], n["enabled"], n["leases"], n["last_seen_at"]] for n in data["nodes"]])
    b = data["batches"]
    click.echo()
    click.echo(f"batches: {b['gathered']} done, {b['pending']} to store, {b['stored']} to gather,"
               f" {b['failed']} failed;"
               f" {data['rates']['articles_per_second']} articles/s over the last"
               f" {data['rates']['window_seconds'] // 60} min")
    for failed in b["failed_examples"]:
        click.echo(f"  failed batch {failed['id']} (range {failed['range_id']}, from {failed['batch_from']},"
                   f" {failed['attempts']} attempts): {failed['error']}")
