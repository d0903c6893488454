"""API keys: the credential of the catalog's users and their tools (search, NZB downloads), with
their daily limits and use."""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta, timezone
from typing import Any, Literal

from psycopg.rows import namedtuple_row
from sqlalchemy import Date, and_, cast, func, select, text
from sqlalchemy.orm import Session
from sqlalchemy.orm.attributes import set_committed_value

from app.db import UNFLUSHED_SQL, driver_connection, driver_sql
from app.models import ApiKey
from app.models.apikeys import LIMIT_MAX, LIMIT_MIN, ApiKeyDay
from app.services import credentials
from app.services.errors import Conflict, NotFound, ServiceError


# A key's use is counted per UTC day, whatever the server's or the client's time zone: the
# window every user of the key sees is the same, and it frees at 00:00 UTC.
_TODAY = cast(func.timezone("UTC", func.now()), Date)


class Keep(enum.Enum):
    """set_limits: the limit stays as it is."""

    KEEP = "keep"


KEEP = Keep.KEEP


@dataclass(frozen=True)
class Usage:
    """A key's use on the current UTC day, and its limits."""

    requests: int  # requests counted today (UTC), this one included
    grabs: int  # NZB downloads counted today, this one included
    requests_max: int | None  # the key's limit, None = unlimited
    grabs_max: int | None
    requests_oldest: datetime | None  # the first counted request of today's window
    grabs_oldest: datetime | None


class LimitReached(ServiceError):
    """The key has made as many requests (kind "requests") or NZB downloads (kind "grabs") today
    as its limit allows; nothing was counted. retry_after: whole seconds until the window frees
    (the next 00:00 UTC), at least 1; usage: the key's use then, without the refused request."""

    status = 429
    code = "api_limit_reached"

    def __init__(self, kind: Literal["requests", "grabs"], retry_after: int, usage: Usage):
        limit = usage.requests_max if kind == "requests" else usage.grabs_max
        what = "requests" if kind == "requests" else "NZB downloads"
        super().__init__(
            f"the API key's limit of {limit} {what} a day (UTC) is reached; it frees at 00:00 UTC, in {retry_after} s",
            code="request_limit_reached" if kind == "requests" else "grab_limit_reached",
        )
        self.kind = kind
        self.retry_after = retry_after
        self.usage = usage


def create_key(
    session: Session, name: str, *, requests_per_day: int | None = None, grabs_per_day: int | None = None
) -> tuple[ApiKey, str]:
    """A new key and its secret; the secret is returned once and only its hash is stored. The
    limits are per UTC day, None for unlimited."""
    credentials.check_name(name, "an API key name", "bad_api_key_name")
    _check_limit(requests_per_day, "requests per day")
    _check_limit(grabs_per_day, "grabs per day")
    # A revoked key keeps its name: its counts stay readable under it, and a new key is not
    # mistaken for the old one in the list.
    if session.scalar(select(ApiKey.id).where(ApiKey.name == name)) is not None:
        raise Conflict(f"API key name already in use: {name}", code="api_key_exists")
    secret = credentials.new_api_key()
    key = ApiKey(
        name=name,
        key_hash=credentials.hash_token(secret),
        requests_per_day=requests_per_day,
        grabs_per_day=grabs_per_day,
    )
    session.add(key)
    session.flush()
    return key, secret


def set_limits(
    session: Session, name: str, *, requests_per_day: int | None | Keep = KEEP, grabs_per_day: int | None | Keep = KEEP
) -> ApiKey:
    """Changes a key's daily limits (None: unlimited; KEEP: as it is). They apply from the key's
    next request on, to today's use so far: a limit lowered below it refuses until 00:00 UTC."""
    if requests_per_day is not KEEP:
        _check_limit(requests_per_day, "requests per day")
    if grabs_per_day is not KEEP:
        _check_limit(grabs_per_day, "grabs per day")
    key = session.scalar(select(ApiKey).where(ApiKey.name == name).with_for_update())
    if key is None:
        raise NotFound(f"no such API key: {name}", code="unknown_api_key")
    if not isinstance(requests_per_day, Keep):
        key.requests_per_day = requests_per_day
    if not isinstance(grabs_per_day, Keep):
        key.grabs_per_day = grabs_per_day
    session.flush()
    return key


def _check_limit(value: int | None, what: str) -> None:
    # bool is an int to Python, and never meant as a limit.
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or not LIMIT_MIN <= value <= LIMIT_MAX:
        raise ServiceError(
            f"not a limit of {what}: {value!r} (a whole number from {LIMIT_MIN} to {LIMIT_MAX}, or none for unlimited)",
            code="bad_api_key_limit",
        )


def list_keys(session: Session) -> list[ApiKey]:
    return list(session.scalars(select(ApiKey).order_by(ApiKey.name)))


def list_usage(session: Session, name: str | None = None) -> list[tuple[ApiKey, Usage]]:
    """Every key (or the one named) with its use today and its limits, by name."""
    query = (
        select(ApiKey, ApiKeyDay)
        .outerjoin(ApiKeyDay, and_(ApiKeyDay.key_id == ApiKey.id, ApiKeyDay.day == _TODAY))
        .order_by(ApiKey.name)
    )
    if name is not None:
        query = query.where(ApiKey.name == name)
    return [(key, _usage(key.requests_per_day, key.grabs_per_day, day)) for key, day in session.execute(query)]


def _usage(requests_max: int | None, grabs_max: int | None, day: ApiKeyDay | None) -> Usage:
    if day is None:
        return Usage(0, 0, requests_max, grabs_max, None, None)
    return Usage(day.requests, day.grabs, requests_max, grabs_max, day.first_request, day.first_grab)


def revoke_key(session: Session, name: str) -> ApiKey:
    """The key stops working at once; its row stays with its counts (credentials.revoke)."""
    return credentials.revoke(session, ApiKey, name, what="API key", code="unknown_api_key")


def holder(session: Session, presented_key: str) -> ApiKey | None:
    """The working API key with this secret, or None (credentials.holder: found by hash, compared
    in constant time; its last use is written with its count, app.services.apikeys.use)."""
    return credentials.holder(session, ApiKey, ApiKey.key_hash, presented_key)


# The ids of the API keys presented lately, by their secret's hash, as key_id found them: a request
# with a key a process has seen costs no look-up (with the ORM's load of the key, the larger part of
# the CPU a newznab request spent outside its search: docs/benchmarks.md). Only keys that exist are
# kept, so requests cannot grow it past the keys made. A key revoked since is refused by the
# counting statement itself (use), and forgotten here then.
_IDS: dict[bytes, int] = {}


def key_id(session: Session, presented_key: str) -> int | None:
    """The id of the API key with this secret, or None when no working key has it: looked up by
    holder the first time a process sees it, then known. A key revoked since it was looked up is
    still given here: use() refuses it (NotFound), and a caller answers only after use()."""
    if not presented_key or len(presented_key) > credentials.MAX_CREDENTIAL_LENGTH:
        return None
    digest = credentials.hash_token(presented_key)
    found = _IDS.get(digest)
    if found is None:
        key = holder(session, presented_key)
        if key is None:
            return None
        found = _IDS[digest] = key.id
    return found


# One request counted, checked against the key's limits in the same statement: the upsert on the
# key's row of the day takes the row's lock, and PostgreSQL checks its WHERE against the row's
# newest version (a concurrent request's committed count included), so two requests at the
# limit less one cannot both pass. When the WHERE fails nothing is written and `counted` is
# empty: the totals in api_keys are not touched either. The day's first request always fits,
# as a limit is at least 1 (a CHECK on api_keys). The day is the database's: one clock for every
# process. `counted` is read before api_keys is updated (the totals wait on it), so requests
# take the two rows' locks in one order and cannot deadlock each other.
_USE = text(f"""
WITH k AS (
    SELECT id, requests_per_day, grabs_per_day, (now() AT TIME ZONE 'UTC')::date AS day,
           {UNFLUSHED_SQL} AS unflushed  -- see use()
      FROM api_keys WHERE id = :key_id AND (NOT :enforce OR revoked_at IS NULL)
), counted AS (
    INSERT INTO api_key_days AS d (key_id, day, requests, grabs, first_request, first_grab)
    SELECT id, day, 1, :grabs, now(), CASE WHEN :grab THEN now() END FROM k
    ON CONFLICT (key_id, day) DO UPDATE
       SET requests = d.requests + 1,
           grabs = d.grabs + excluded.grabs,
           first_grab = coalesce(d.first_grab, excluded.first_grab)
     WHERE NOT :enforce
        OR (d.requests < coalesce((SELECT requests_per_day FROM k), 9223372036854775807)
            AND (NOT :grab OR d.grabs < coalesce((SELECT grabs_per_day FROM k), 9223372036854775807)))
    RETURNING d.requests, d.grabs, d.first_request, d.first_grab
), totals AS (
    UPDATE api_keys SET api_hits = api_hits + 1, grabs = grabs + :grabs, last_used_at = now()
     WHERE id = :key_id AND EXISTS (SELECT FROM counted)
    RETURNING api_hits, grabs, last_used_at
)
SELECT k.requests_per_day, k.grabs_per_day, k.day, now() AS at,
       c.requests, c.grabs, c.first_request, c.first_grab,
       t.api_hits AS total_requests, t.grabs AS total_grabs, t.last_used_at
  FROM k LEFT JOIN counted c ON true LEFT JOIN totals t ON true
""")


# The same as psycopg runs it: through SQLAlchemy's execution it cost the API 0.3 - 0.45 ms more of
# CPU a call (docs/benchmarks.md, "A search's statements through psycopg").
_USE_SQL = driver_sql(_USE.text)


def use(session: Session, key: ApiKey | int, grab: bool) -> Usage:
    """Count one request with the key (a row, or its id from key_id) and one NZB download when
    grab, or raise LimitReached without counting when the key is at its limit (requests first,
    then grabs), NotFound when it is revoked or gone.

    Two statements when the request fits, one more when it is refused (today's use read after the
    refusal, for LimitReached.usage). The limits are read from the database in the counting
    statement, so a limit changed by `flask seed apikeys limit` applies at once. Today's row of
    the key (and, when counted, its api_keys row) stays locked until the caller's transaction
    ends: concurrent requests with one key wait from here until that commit. It expects a READ
    COMMITTED transaction (the default): under REPEATABLE READ, a count of the same key committed
    since the transaction's snapshot makes PostgreSQL fail the upsert (a serialization failure)
    instead of checking the limit against it.

    The counts are usage figures, not catalog data: the transaction's commit does not wait for the
    disk (synchronous_commit off), so a request does not wait a WAL flush for them, and a crash can
    lose the last fraction of a second of counts (and let as many requests past a limit)."""
    return _count(session, key, grab, enforce=True)


def record_use(session: Session, key_row: ApiKey, grab: bool) -> None:
    """Counts one request made with the key, and one NZB download when grab is true, and never
    refuses one: for callers that do not enforce the key's limits (the web page). What it counts
    is in today's use all the same, which use() checks."""
    _count(session, key_row, grab, enforce=False)


def _count(session: Session, key: ApiKey | int, grab: bool, *, enforce: bool) -> Usage:
    key_row = key if isinstance(key, ApiKey) else None
    key_id = key.id if isinstance(key, ApiKey) else key
    session.flush()  # what the session holds of keys, written first, as its own execution would
    with driver_connection(session) as connection:  # psycopg's own execution: every API call counts
        cursor = connection.cursor(row_factory=namedtuple_row)
        params = {"key_id": key_id, "grab": grab, "grabs": 1 if grab else 0, "enforce": enforce}
        row: Any = cursor.execute(_USE_SQL, params).fetchone()
    if row is None:
        for digest in [d for d, i in _IDS.items() if i == key_id]:
            _IDS.pop(digest, None)
        raise NotFound(f"no such API key: id {key_id}", code="unknown_api_key")
    # The caller's copy of the key is given what the statement read and wrote, as loaded (no
    # change to flush): else it would show the totals and limits it was loaded with.
    if key_row is not None:
        set_committed_value(key_row, "requests_per_day", row.requests_per_day)
        set_committed_value(key_row, "grabs_per_day", row.grabs_per_day)
    if row.requests is not None:
        if key_row is not None:
            set_committed_value(key_row, "api_hits", row.total_requests)
            set_committed_value(key_row, "grabs", row.total_grabs)
            set_committed_value(key_row, "last_used_at", row.last_used_at)
        return Usage(
            row.requests, row.grabs, row.requests_per_day, row.grabs_per_day, row.first_request, row.first_grab
        )
    # Refused. Read after the upsert locked the row, this is its newest version: the one the
    # limits were checked against (a plain read in the upsert's statement could see an older one).
    current = session.execute(
        select(ApiKeyDay)
        .where(ApiKeyDay.key_id == key_id, ApiKeyDay.day == row.day)
        .execution_options(populate_existing=True)
    ).scalar_one()
    usage = _usage(row.requests_per_day, row.grabs_per_day, current)
    kind: Literal["requests", "grabs"] = (
        "requests" if usage.requests_max is not None and usage.requests >= usage.requests_max else "grabs"
    )
    raise LimitReached(kind, retry_after(row.day, row.at), usage)


def retry_after(day: date, at: datetime) -> int:
    """Whole seconds from `at` until the window of the UTC day `day` frees (the next 00:00 UTC),
    rounded up and at least 1, so that a client that waits that long finds it freed."""
    frees = datetime.combine(day + timedelta(days=1), time(0), tzinfo=timezone.utc)
    return max(1, math.ceil((frees - at).total_seconds()))
