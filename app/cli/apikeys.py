"""`flask seed apikeys create|list|limit|revoke`: the keys users of the search and the newznab API
present, and their daily limits."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import click
from flask.cli import AppGroup
from sqlalchemy.orm import Session

from app.cli.output import json_option, print_json, print_table, service_call
from app.models import ApiKey
from app.models.apikeys import LIMIT_MAX, LIMIT_MIN
from app.services import apikeys as apikey_service
from app.services.apikeys import KEEP, Usage

apikeys = AppGroup("apikeys", help="API keys: search and NZB downloads for users and their tools.")

# Never the key: only its hash is kept, and the list is for people and scripts alike. The
# columns of before the limits come first, where scripts reading the table found them.
_COLUMNS = (
    "id",
    "name",
    "created_at",
    "last_used_at",
    "revoked_at",
    "grabs",
    "api_hits",
    "requests_today",
    "requests_per_day",
    "grabs_today",
    "grabs_per_day",
)
_LIMITS = ("requests_per_day", "grabs_per_day")


@dataclass(frozen=True)
class Limit:
    """A limit given on the command line: a number, or None for unlimited ("none")."""

    value: int | None


class LimitType(click.ParamType):
    """N (1 to 10^9) or none. Digits only: Python's int() would also take '1_000', '+5' and
    other scripts' digits, which nobody means here."""

    name = "N|none"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Limit:
        if isinstance(value, Limit):
            return value
        given = str(value).strip().lower()
        if given in ("none", "unlimited"):
            return Limit(None)
        if not re.fullmatch(r"[0-9]+", given, flags=re.ASCII):
            self.fail(f"{value!r} is not a whole number or 'none' (unlimited)", param, ctx)
        number = int(given)
        if not LIMIT_MIN <= number <= LIMIT_MAX:
            self.fail(
                f"{number} is out of range: a limit is {LIMIT_MIN} to {LIMIT_MAX} a day, or 'none' for unlimited",
                param,
                ctx,
            )
        return Limit(number)


_LIMIT = LimitType()
requests_option = click.option(
    "--requests-per-day",
    "requests_per_day",
    type=_LIMIT,
    default=None,
    metavar="N|none",
    help="API requests the key may make per UTC day, NZB downloads included; 'none': unlimited.",
)
grabs_option = click.option(
    "--grabs-per-day",
    "grabs_per_day",
    type=_LIMIT,
    default=None,
    metavar="N|none",
    help="NZB downloads the key may make per UTC day; 'none': unlimited.",
)


def _row(key: ApiKey, usage: Usage) -> dict[str, Any]:
    row: dict[str, Any] = {c: getattr(key, c) for c in _COLUMNS[:7]}
    row.update(
        requests_today=usage.requests,
        requests_per_day=usage.requests_max,
        grabs_today=usage.grabs,
        grabs_per_day=usage.grabs_max,
    )
    return row


def _named(session: Session, name: str) -> dict[str, Any]:
    [(key, usage)] = apikey_service.list_usage(session, name)
    return _row(key, usage)


def _shown(row: dict[str, Any], column: str) -> Any:
    # A table's "-" is "nothing yet"; a limit that is not there means something else.
    return "unlimited" if column in _LIMITS and row[column] is None else row[column]


def _limits_text(row: dict[str, Any]) -> str:
    return ", ".join(f"{_shown(row, c)} {c.split('_')[0]} a day" for c in _LIMITS)


@apikeys.command("create")
@click.argument("name")
@requests_option
@grabs_option
@json_option
def create(name: str, requests_per_day: Limit | None, grabs_per_day: Limit | None, as_json: bool) -> None:
    """Create an API key and print it once (only a hash is kept). Unlimited unless limits are given."""
    with service_call() as session:
        key, secret = apikey_service.create_key(
            session,
            name,
            requests_per_day=requests_per_day.value if requests_per_day else None,
            grabs_per_day=grabs_per_day.value if grabs_per_day else None,
        )
        row = _named(session, key.name)
    if as_json:
        print_json({**row, "key": secret})
    else:
        click.echo(f"created API key {name} (id {row['id']}; {_limits_text(row)})")
        click.echo("the key, shown only this once (give it to the tool as its API key):")
        click.echo(secret)


@apikeys.command("limit")
@click.argument("name")
@requests_option
@grabs_option
@json_option
def limit(name: str, requests_per_day: Limit | None, grabs_per_day: Limit | None, as_json: bool) -> None:
    """Change a key's daily limits (per UTC day; 'none': unlimited). A limit not given stays.
    They apply at once, to today's use so far."""
    if requests_per_day is None and grabs_per_day is None:
        raise click.UsageError("give --requests-per-day N|none, --grabs-per-day N|none, or both")
    with service_call() as session:
        apikey_service.set_limits(
            session,
            name,
            requests_per_day=KEEP if requests_per_day is None else requests_per_day.value,
            grabs_per_day=KEEP if grabs_per_day is None else grabs_per_day.value,
        )
        row = _named(session, name)
    if as_json:
        print_json(row)
    else:
        click.echo(f"API key {name}: {_limits_text(row)} (UTC)")


@apikeys.command("list")
@json_option
def list_(as_json: bool) -> None:
    """List the API keys with their use: in all, and today (UTC) against their limits (their
    names; the keys themselves are not kept)."""
    with service_call() as session:
        rows = [_row(key, usage) for key, usage in apikey_service.list_usage(session)]
    if as_json:
        print_json(rows)
    else:
        print_table(_COLUMNS, [[_shown(r, c) for c in _COLUMNS] for r in rows])


@apikeys.command("revoke")
@click.argument("name")
@json_option
def revoke(name: str, as_json: bool) -> None:
    """Revoke the key: it stops working at once; its name and counts stay in the list."""
    with service_call() as session:
        apikey_service.revoke_key(session, name)
        row = _named(session, name)
    if as_json:
        print_json(row)
    else:
        click.echo(f"revoked API key {name}")
