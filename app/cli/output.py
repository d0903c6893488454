"""Output for the CLI: readable tables for people, JSON for scripts."""
from __future__ import annotations

import json
from contextlib import contextmanager
from datetime import datetime
from typing import Any, Iterator, Sequence

import click

from app.db import session_scope
from app.services.errors import ServiceError


@contextmanager
def service_call() -> Iterator:
    """A session for one command; a refused request becomes a clear ClickException."""
    try:
        with session_scope() as session:
            yield session
    except ServiceError as exc:
        raise click.ClickException(exc.message) from None


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


json_option = click.option("--json", "as_json", is_flag=True, help="Print JSON for scripts.")
