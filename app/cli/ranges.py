"""`flask seed range ID` and `flask seed spool ID`: fetching in the data center."""

from __future__ import annotations

import click
from flask import current_app
from flask.cli import with_appcontext

from app.cli.output import json_option, print_json, report
from app.services.datacenter_fetch import run_range_here, spool_range
from app.services.errors import ServiceError
from edge.digest.nntp import NNTPError


@click.command("range")
@with_appcontext
@click.argument("range_id", type=click.IntRange(min=1))
@json_option
def range_(range_id: int, as_json: bool) -> None:
    """Run one range here with the digest library, straight into the tables (no HTTP)."""
    settings = current_app.config["SETTINGS"]

    def show(state):
        if not as_json:
            click.echo(
                f"range {range_id}: at {state.next_id} of {state.last_id}, {state.batches} batches,"
                f" {state.lines} lines, {state.lines_per_second:,.0f} lines/s",
                err=True,
            )

    try:
        state = run_range_here(settings, range_id, progress=show)
    except ServiceError as exc:
        raise click.ClickException(exc.message) from None
    except (NNTPError, OSError) as exc:
        raise click.ClickException(f"NNTP: {exc} (the range was given back at its resume point)") from None
    result = {
        "range_id": range_id,
        "next_id": state.next_id,
        "batches": state.batches,
        "lines": state.lines,
        "rejected": state.rejected,
        "lines_per_second": round(state.lines_per_second),
    }
    if as_json:
        print_json(result)
    else:
        click.echo(f"range {range_id} done: {state.batches} batches, {state.lines} lines")


@click.command("spool")
@with_appcontext
@click.argument("range_id", type=click.IntRange(min=1))
@json_option
def spool(range_id: int, as_json: bool) -> None:
    """Fetch a range's raw chunks into the spool, for nodes to stream instead of asking NNTP."""
    settings = current_app.config["SETTINGS"]
    try:
        lines = spool_range(
            settings, range_id, progress=lambda at, n: click.echo(f"spooled to {at}: {n} lines", err=True)
        )
    except ServiceError as exc:
        raise click.ClickException(exc.message) from None
    except (NNTPError, OSError) as exc:
        raise click.ClickException(f"NNTP: {exc}") from None
    report(as_json, {"range_id": range_id, "spooled": True, "lines": lines}, f"range {range_id} spooled: {lines} lines")
