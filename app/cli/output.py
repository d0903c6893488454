"""Output for the CLI: readable tables for people, JSON for scripts."""

from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Iterator, Sequence

import click
from sqlalchemy.exc import DBAPIError

from app.db import session_scope
from app.services.errors import ServiceError

# Lock waits given up (lock_timeout), deadlocks and serialization failures: the command's work
# was rolled back whole, and running it again is the remedy.
TRY_AGAIN_STATES = frozenset({"55P03", "40P01", "40001"})


@contextmanager
def service_call() -> Iterator:
    """A session for one command; a refused request becomes a clear ClickException, and so does
    a transaction the database gave up on for a concurrent one (all of it undone)."""
    try:
        with session_scope() as session:
            yield session
    except ServiceError as exc:
        raise click.ClickException(exc.message) from None
    except DBAPIError as exc:
        if getattr(exc.orig, "sqlstate", None) not in TRY_AGAIN_STATES:
            raise
        reason = str(exc.orig).strip().splitlines()
        raise click.ClickException(
            f"the database gave up waiting on other work ({reason[0] if reason else type(exc.orig).__name__});"
            " nothing was changed: try again"
        ) from None


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, datetime):
        return value.strftime("%Y-%m-%d %H:%M:%S")
    if isinstance(value, bool):
        return "yes" if value else "no"
    return str(value)


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    cells = [[_cell(v) for v in row] for row in rows]
    widths = [max([len(h)] + [len(r[i]) for r in cells]) for i, h in enumerate(headers)]
    click.echo("  ".join(h.ljust(w) for h, w in zip(headers, widths)).rstrip())
    for row in cells:
        click.echo("  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip())


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, default=lambda v: v.isoformat() if isinstance(v, datetime) else str(v)))


json_option = click.option(
    "--json", "as_json", is_flag=True, help="Print JSON for scripts (an error stays a message on stderr)."
)


def report(as_json: bool, data: Any, text: str) -> None:
    """What a command changed: `data` as one JSON document with --json, else the line(s) `text`."""
    if as_json:
        print_json(data)
    else:
        click.echo(text)
