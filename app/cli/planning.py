"""`flask seed plan` (backfill, or --live) and `flask seed status`."""
from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext

from app.cli.output import json_option, print_json, print_table, service_call
from app.services.errors import ServiceError
from app.services.planner import PlanResult, groups_to_plan, plan_groups, plan_live, summary
from app.services.status import seed_status


@click.command("plan")
@with_appcontext
@click.argument("groups", nargs=-1)
@click.option("--days", type=click.IntRange(min=1), help="How far back to plan (default: PLAN_DAYS).")
@click.option("--live", is_flag=True, help="Plan the new articles instead (what beat's plan.live does).")
@json_option
def plan(groups: tuple[str, ...], days: int | None, live: bool, as_json: bool) -> None:
    """Plan ranges for GROUPS (default: every active group) down to N days back; with --live,
    up from the highest article covered to the server's high-water mark less LIVE_LAG.

    Each group is planned on its own: one that fails is reported and the others are planned;
    the command exits 1 after trying every group, with a summary."""
    if live and days is not None:
        raise click.UsageError("--days is for backfill planning; --live plans up to the newest articles")
    settings = current_app.config["SETTINGS"]
    with service_call() as session:
        names = groups_to_plan(session, groups)  # unknown or disabled names fail before any NNTP work
    if not names:
        raise click.ClickException("no groups to plan: add one with `flask seed groups add NAME`"
                                   " (or enable one with `flask seed groups enable NAME`)")
    results = []
    each = plan_live(settings, names) if live else plan_groups(settings, names, days=days)
    try:
        for result in each:
            results.append(result)
            if not as_json:
                click.echo(_plan_line(result))
    except ServiceError as exc:
        raise click.ClickException(exc.message) from None
    if as_json:
        print_json([r.as_dict() for r in results])
    if any(r.error is not None for r in results):
        raise click.ClickException(summary(results))


def _plan_line(result: PlanResult) -> str:
    expired = f"; {result.expired} expired article numbers marked" if result.expired else ""
    if result.error is not None:
        return f"{result.group}: FAILED: {result.error}"
    if result.plan_id is None:
        return f"{result.group}: nothing to plan ({result.reason}){expired}"
    kind = "live " if result.kind == "live" else ""
    return (f"{result.group}: planned {kind}{result.first_id}-{result.last_id} in {result.ranges}"
            f" ranges (plan {result.plan_id}){expired}")


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
    columns = ("group", "ranges", "planned", "leased", "done", "expired_ranges", "articles", "missing", "expired",
               "files", "releases", "dropped", "live_next")
    print_table(columns, [[g[c] for c in columns] for g in data["groups"]])
    for g in data["groups"]:
        if not g["active"]:
            click.echo(f"  {g['group']}: disabled (neither planned nor leased)")
        if g["expired_ranges"] or g["expired"]:
            click.echo(f"  {g['group']}: {g['expired']} article numbers expired on the server before a node"
                       f" read them ({g['expired_ranges']} ranges wholly)")
        if g["plan_failures"]:
            times = "once" if g["plan_failures"] == 1 else f"{g['plan_failures']} times in a row"
            click.echo(f"  {g['group']}: planning failed {times}; last at {g['plan_error_at']:%Y-%m-%d %H:%M:%S}:"
                       f" {g['plan_error']}")
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
