"""`flask seed plan` (backfill, or --live) and `flask seed status`."""

from __future__ import annotations

from datetime import datetime

import click
from flask import current_app
from flask.cli import with_appcontext

from app.cli.output import json_option, print_json, service_call
from app.formatting import ago, duration, utc
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
        raise click.ClickException(
            "no groups to plan: add one with `flask seed groups add NAME`"
            " (or enable one with `flask seed groups enable NAME`)"
        )
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
    return (
        f"{result.group}: planned {kind}{result.first_id}-{result.last_id} in {result.ranges}"
        f" ranges (plan {result.plan_id}){expired}"
    )


@click.command("status")
@with_appcontext
@json_option
def status(as_json: bool) -> None:
    """Plans, ranges, progress and time left, the catalog's counts, nodes, batches and rates.

    Files, releases and posts are counted in the catalog (estimated for a very big group, and
    marked so); the rate is over the last minutes that saw batches; times are UTC."""
    with service_call() as session:
        data = seed_status(session).as_json()
    if as_json:
        print_json(data)
        return
    now = data["as_of"]
    click.echo(f"as of {utc(now)}")
    click.echo()
    groups = data["groups"]
    _table(
        (
            "group",
            "ranges",
            "planned",
            "leased",
            "done",
            "expired",
            "covered",
            "span",
            "% done",
            "numbers/s",
            "ETA",
            "last batch",
        ),
        [
            [
                g["group"],
                g["ranges"],
                g["planned"],
                g["leased"],
                g["done"],
                g["expired_ranges"],
                g["covered"],
                g["span"],
                _percent(g["percent_done"]),
                g["article_numbers_per_second"],
                _eta(g),
                _moment(g["last_batch_at"]),
            ]
            for g in groups
        ],
    )
    click.echo()
    _table(
        ("group", "articles", "missing", "expired", "rejected", "dropped", "files", "releases", "posts", "live_next"),
        [
            [
                g["group"],
                g["articles"],
                g["missing"],
                g["expired"],
                g["rejected"],
                g["dropped"],
                *(_counted(g, c) for c in ("files", "releases", "posts")),
                g["live_next"],
            ]
            for g in groups
        ],
    )
    if any(g["counted"] == "estimated" for g in groups):
        click.echo("  ~: the planner's estimate (a group too big to count its catalog on each look)")
    for g in groups:
        if not g["active"]:
            click.echo(f"  {g['group']}: disabled (neither planned nor leased)")
        if g["expired_ranges"] or g["expired"]:
            click.echo(
                f"  {g['group']}: {g['expired']:,} article numbers expired on the server before a node"
                f" read them ({g['expired_ranges']:,} ranges wholly)"
            )
        if g["plan_failures"]:
            times = "once" if g["plan_failures"] == 1 else f"{g['plan_failures']} times in a row"
            click.echo(f"  {g['group']}: planning failed {times}; last at {utc(g['plan_error_at'])}: {g['plan_error']}")
    for g in groups:
        for rule, counts in sorted(g["rules"].items()):
            label = "kept" if rule == "" else f"dropped by {rule}"
            # Summed per batch: a file or release that several batches saw counts in each.
            click.echo(
                f"  {g['group']}: {label}: {counts['fragments']:,} articles ({counts['files']:,} files and"
                f" {counts['releases']:,} releases as the batches saw them)"
            )
    if data["leased_ranges"]:
        click.echo()
        _table(
            ("range", "group", "node", "first_id", "next_id", "last_id", "batches", "articles", "touched"),
            [
                [
                    _Right(r["id"]),
                    r["group"],
                    r["node"],
                    r["first_id"],
                    r["next_id"],
                    r["last_id"],
                    r["batches"],
                    r["articles"],
                    _moment(r["touched_at"]),
                ]
                for r in data["leased_ranges"]
            ],
        )
    if data["failed_ranges"]:
        click.echo()
    for r in data["failed_ranges"]:
        times = "once" if r["failures"] == 1 else f"{r['failures']} times"
        click.echo(
            f"range {r['id']} ({r['group']}, {r['first_id']:,}-{r['last_id']:,}, {r['status']}) failed"
            f" {times} on a node; last: {r['last_failure']}"
        )
    if data["nodes"]:
        click.echo()
        _table(
            ("node", "enabled", "leases", "last seen", "ago"),
            [
                [n["name"], n["enabled"], n["leases"], _moment(n["last_seen_at"]), ago(n["last_seen_at"], now)]
                for n in data["nodes"]
            ],
        )
    b, rates = data["batches"], data["rates"]
    click.echo()
    click.echo(
        f"batches: {b['joined']:,} done, {b['pending']:,} to store, {b['stored']:,} to join, {b['failed']:,} failed"
    )
    oldest = b["oldest_unstored"]
    if oldest is not None:
        click.echo(
            f"  oldest not stored: batch {oldest['id']} (range {oldest['range_id']}, {oldest['group']}),"
            f" accepted {utc(oldest['accepted_at'])}, waiting {duration(oldest['age_seconds'])},"
            f" {oldest['attempts']} attempts"
        )
    if rates["last_batch_at"] is None:
        click.echo("rate: no batch accepted yet")
    else:
        click.echo(
            f"rate: {rates['article_numbers_per_second']:,.1f} article numbers/s over the last"
            f" {duration(rates['rate_seconds'])} that saw batches; last batch {utc(rates['last_batch_at'])}"
            f" ({ago(rates['last_batch_at'], now)})"
        )
    for failed in b["failed_examples"]:
        click.echo(
            f"  failed batch {failed['id']} (range {failed['range_id']}, from {failed['batch_from']:,},"
            f" {failed['attempts']} attempts): {failed['error']}"
        )


class _Right(str):
    """A cell aligned right as written: an id (no thousands separators), a percentage, a time left."""


def _percent(value: float | None):
    return None if value is None else _Right(f"{value:.1f} %")


def _eta(group: dict):
    if group["span"] and not group["remaining"]:
        return _Right("done")
    return None if group["eta_seconds"] is None else _Right(duration(group["eta_seconds"]))


def _moment(value: datetime | None):
    return None if value is None else utc(value)


def _counted(group: dict, column: str):
    return _Right(f"~{group[column]:,}") if group["counted"] == "estimated" else group[column]


def _cell(value) -> tuple[str, bool]:
    """A value as a cell's text, and whether it is aligned right (numbers)."""
    if value is None:
        return "-", False
    if isinstance(value, bool):
        return ("yes" if value else "no"), False
    if isinstance(value, _Right):
        return str(value), True
    if isinstance(value, int):
        return f"{value:,}", True
    if isinstance(value, float):
        return f"{value:,.1f}", True
    return str(value), False


def _table(headers: tuple[str, ...], rows: list[list]) -> None:
    """A table for people: numbers with thousands separators, aligned right (headers over them too)."""
    cells = [[_cell(v) for v in row] for row in rows]
    right = [any(row[i][1] for row in cells) for i in range(len(headers))]
    widths = [max([len(h)] + [len(row[i][0]) for row in cells]) for i, h in enumerate(headers)]

    def line(texts: list[str]) -> str:
        return "  ".join(t.rjust(w) if r else t.ljust(w) for t, w, r in zip(texts, widths, right)).rstrip()

    click.echo(line(list(headers)))
    for row in cells:
        click.echo(line([text for text, _ in row]))
