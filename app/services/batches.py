"""Batches: checked at the door, stored by ingest into the catalog tables, retried by beat.

A batch goes accepted -> stored -> gathered. Each step is idempotent by construction: it runs
under a row lock on the batch and only from the state before it, and moves the state in the same
transaction, so a redelivered task finds the work done and does nothing. Rows go in by COPY
straight into the group's partitions, less the files and releases already there (they span
batches); should another worker store one of them meanwhile, that table falls back to staging
and INSERT ... ON CONFLICT DO NOTHING. Nothing is stored twice either way.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from itertools import compress

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.db import ensure_group_partitions, partition_name
from app.models import SeedBatch, SeedRange
from app.services.copytext import copy_columns
from app.services.errors import ServiceError
from edge.batch import BatchError, BatchTooLarge, decode_batch

log = logging.getLogger(__name__)

# Columns stored as PostgreSQL integer: the digest's format allows 64 bits everywhere, the
# catalog does not, so a value past 32 bits is refused at the door rather than poison a task.
INT32_COLUMNS = {
    "files": ("index", "count", "parts"),
    "fragments": ("part", "bytes"),
    "releases": ("file_count",),
    "release_chunks": ("files",),
}
INT32 = (-(2**31), 2**31 - 1)


class MalformedBatch(ServiceError):
    status = 400
    code = "malformed_batch"


class BatchBodyTooLarge(ServiceError):
    status = 413
    code = "batch_too_large"


@dataclass(frozen=True)
class BatchHeader:
    batch_from: int
    batch_to: int
    group: str


def check_batch(batch: dict) -> BatchHeader:
    """What the data center needs beyond the format (edge.batch.validate_batch checked that):
    the batch covers first..last with its chunks, and its rows fit the catalog's columns."""
    def bad(message: str):
        raise MalformedBatch(f"malformed batch: {message}")

    first, last = batch["first"], batch["last"]
    chunks = batch["chunks"]
    if not chunks or chunks[0][0] != first or chunks[-1][1] != last or any(
        a[0] > a[1] or a[1] + 1 != b[0] for a, b in zip(chunks, chunks[1:])
    ):
        bad("chunks must cover first..last in order, without gaps")
    if not all(first <= a <= b <= last for a, b in batch["missing"]):
        bad("missing spans must lie inside first..last")
    articles = batch["fragments"]["article"]
    if articles and not (first <= min(articles) and max(articles) <= last):
        bad("a fragment's article number is outside first..last")
    for table, columns in INT32_COLUMNS.items():
        for column in columns:
            values = [v for v in batch[table][column] if v is not None]
            if values and (min(values) < INT32[0] or max(values) > INT32[1]):
                bad(f"{table}.{column} holds a value past 32 bits")
    if any(n < 0 for counts in batch["rules"].values() for n in counts):
        bad("rule counts cannot be negative")
    return BatchHeader(batch_from=first, batch_to=last, group=batch["group"])


def check_body(body: bytes, content_type: str, content_encoding: str, max_decoded: int) -> BatchHeader:
    """Decode and check a posted body (413 too large, 400 malformed)."""
    try:
        batch = decode_batch(body, content_type, content_encoding, max_decoded=max_decoded)
    except BatchTooLarge as exc:
        raise BatchBodyTooLarge(str(exc)) from None
    except BatchError as exc:
        raise MalformedBatch(str(exc)) from None
    return check_batch(batch)


def enqueue_store(batch_id: int) -> bool:
    """Ask a worker to store the batch; False when the broker is unreachable (beat requeues it).

    One connection attempt, no retries: the batch is durable already, and a node waiting on
    an answer while Redis is away must not wait for kombu's reconnection back-off.
    """
    from app.tasks.ingest import store_batch

    try:
        with store_batch.app.connection_for_write() as connection:
            connection.ensure_connection(max_retries=1, interval_start=0, interval_step=0)
            store_batch.apply_async((batch_id,), connection=connection, retry=False)
        return True
    except Exception as exc:  # the batch is durable; the requeue sweep will send it again
        log.warning("could not enqueue batch %s (%s); the requeue sweep will", batch_id, exc)
        return False


@dataclass(frozen=True)
class StoreResult:
    batch_id: int
    stored: bool  # False: found stored already (a redelivery) or gone, nothing done


def store_batch(session: Session, batch_id: int) -> StoreResult:
    """Load one accepted batch into the catalog; idempotent (see the module's doc)."""
    batch_row = session.scalar(
        select(SeedBatch).where(SeedBatch.id == batch_id).with_for_update()
        .execution_options(populate_existing=True)
    )
    if batch_row is None or batch_row.state != "accepted":
        # Gone (its range was deleted) or already stored/failed: nothing to do.
        return StoreResult(batch_id, stored=False)
    seed_range = session.get(SeedRange, batch_row.range_id)
    batch = decode_batch(batch_row.body, batch_row.content_type, batch_row.content_encoding)
    check_batch(batch)
    group_id = seed_range.group_id
    ensure_group_partitions(session, group_id)
    load_catalog(session, group_id, seed_range.id, batch)

    chunks = batch["chunks"]
    lines = sum(c[2] for c in chunks)
    rejected = sum(c[3] for c in chunks)
    missing = sum(b - a + 1 for a, b in batch["missing"])
    kept = batch["rules"].get("", [0, 0, 0, 0])
    dropped = sum(v[2] for k, v in batch["rules"].items() if k != "")
    session.execute(
        text(
            "UPDATE seed_ranges SET articles = articles + :articles, missing = missing + :missing,"
            " rejected = rejected + :rejected, files = files + :files, releases = releases + :releases,"
            " dropped = dropped + :dropped WHERE id = :id"
        ),
        {"articles": lines - rejected, "missing": missing, "rejected": rejected, "files": kept[1],
         "releases": kept[0], "dropped": dropped, "id": seed_range.id},
    )
    batch_row.state = "stored"
    batch_row.stored_at = datetime.now(timezone.utc)
    batch_row.error = None
    batch_row.body = None  # the catalog holds it now; the raw body would only take space
    batch_row.release_keys = list(batch["releases"]["key"])
    return StoreResult(batch_id, stored=True)


def fragment_columns(fragments: dict, group_id: int) -> list[tuple[str, list]]:
    articles = fragments["article"]
    return [("int", articles), ("int", fragments["file"]), ("int", fragments["part"]),
            ("int", fragments["bytes"]), ("text", fragments["message_id"]), ("int", [group_id] * len(articles))]


FRAGMENT_COLUMNS = "article, file_key, part, bytes, message_id, group_id"


def _copy_new_rows(cur, table: str, target: str, column_names: str, columns: list[tuple[str, list]]) -> None:
    """COPY rows straight into `target` (the group's partition, or the table itself).

    The caller leaves out rows it knows are there, so the plain COPY nearly always goes through;
    should another worker have stored one of them meanwhile (a unique violation), the savepoint
    is rolled back and the rows go through a staging table and INSERT ... ON CONFLICT DO NOTHING.
    """
    if not columns[0][1]:
        return
    cur.execute("SAVEPOINT copy_new_rows")
    try:
        copy_columns(cur, f'COPY "{target}" ({column_names}) FROM STDIN', columns)
        cur.execute("RELEASE SAVEPOINT copy_new_rows")
        return
    except Exception as exc:
        if getattr(exc, "sqlstate", None) != "23505":  # unique_violation
            raise
        cur.execute("ROLLBACK TO SAVEPOINT copy_new_rows")
    stage = f"stage_{table}"
    cur.execute(f'CREATE TEMP TABLE IF NOT EXISTS "{stage}" (LIKE "{table}") ON COMMIT DELETE ROWS')
    copy_columns(cur, f'COPY "{stage}" ({column_names}) FROM STDIN', columns)
    cur.execute(f'INSERT INTO "{table}" ({column_names}) SELECT {column_names} FROM "{stage}" ON CONFLICT DO NOTHING')


def _known_keys(cur, table: str, group_id: int, keys: list[int]) -> set[int]:
    """Which of these keys the table has for the group already (files and releases that span
    batches, ranges and nodes are stored by the first batch that saw them)."""
    if not keys:
        return set()
    cur.execute(f"SELECT key FROM {table} WHERE group_id = %s AND key = ANY(%s)", (group_id, keys))
    return {key for (key,) in cur.fetchall()}


def _without(known: set[int], keys: list[int], columns: list[tuple[str, list]]) -> list[tuple[str, list]]:
    if not known:
        return columns
    keep = [key not in known for key in keys]
    return [(kind, list(compress(values, keep))) for kind, values in columns]


def load_catalog(session: Session, group_id: int, range_id: int, batch: dict) -> None:
    """Files, fragments, releases, release chunks and rule counts of one batch, in bulk."""
    conn = session.connection().connection.driver_connection  # psycopg, for COPY
    batch_from = batch["first"]
    files, releases, chunks = batch["files"], batch["releases"], batch["release_chunks"]
    with conn.cursor() as cur:
        _copy_new_rows(cur, "fragments", partition_name("fragments", group_id), FRAGMENT_COLUMNS,
                       fragment_columns(batch["fragments"], group_id))

        group = [group_id] * len(files["key"])
        _copy_new_rows(
            cur, "files", partition_name("files", group_id),
            "key, release_key, name, subject, poster, posted_at, file_index, file_count, parts, group_id",
            _without(_known_keys(cur, "files", group_id, files["key"]), files["key"], [
                ("int", files["key"]), ("int", files["release"]),
                ("text", [name or "" for name in files["name"]]), ("text", files["subject"]),
                ("text", files["poster"]), ("epoch", files["date"]), ("int", files["index"]),
                ("int", files["count"]), ("int", files["parts"]), ("int", group)]))

        group = [group_id] * len(releases["key"])
        _copy_new_rows(
            cur, "releases", "releases", "key, name, poster, file_count, group_id",
            _without(_known_keys(cur, "releases", group_id, releases["key"]), releases["key"], [
                ("int", releases["key"]), ("text", releases["name"]), ("text", releases["poster"]),
                ("int", releases["file_count"]), ("int", group)]))

        count = len(chunks["release"])
        _copy_new_rows(
            cur, "release_chunks", partition_name("release_chunks", group_id),
            "release_key, files, fragments, bytes, first_post, last_post, group_id, batch_from, range_id",
            [("int", chunks["release"]), ("int", chunks["files"]), ("int", chunks["fragments"]),
             ("int", chunks["bytes"]), ("epoch", chunks["first_date"]), ("epoch", chunks["last_date"]),
             ("int", [group_id] * count), ("int", [batch_from] * count), ("int", [range_id] * count)])

        cur.executemany(
            "INSERT INTO rule_counts (range_id, batch_from, rule, group_id, releases, files, fragments, bytes)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [(range_id, batch_from, rule, group_id, *counts) for rule, counts in batch["rules"].items()],
        )


def gather_batch(session: Session, batch_id: int) -> int | None:
    """Gather the releases a stored batch touched and mark it gathered; None when there was
    nothing to do (not stored yet, or gathered already). Returns how many releases were updated."""
    row = session.scalar(
        select(SeedBatch).where(SeedBatch.id == batch_id).with_for_update()
        .execution_options(populate_existing=True)
    )
    if row is None or row.state != "stored":
        return None
    group_id = session.scalar(select(SeedRange.group_id).where(SeedRange.id == row.range_id))
    updated = gather_releases(session, group_id, row.release_keys or [])
    row.state = "gathered"
    row.release_keys = None
    return updated


def gather_releases(session: Session, group_id: int, release_keys: list[int]) -> int:
    """Recompute the aggregates of these releases from every batch that saw them, so releases
    split over batches, ranges and nodes come out whole. Returns how many were updated."""
    if not release_keys:
        return 0
    result = session.execute(
        text(
            """
            WITH chunk AS (
                SELECT release_key, sum(fragments) AS fragments, sum(bytes) AS bytes,
                       min(first_post) AS first_post, max(last_post) AS last_post
                  FROM release_chunks WHERE group_id = :g AND release_key = ANY(:keys)
                 GROUP BY release_key),
            file AS (
                SELECT release_key, count(*) AS files, coalesce(sum(parts), 0) AS parts
                  FROM files WHERE group_id = :g AND release_key = ANY(:keys)
                 GROUP BY release_key)
            UPDATE releases r
               SET files_seen = file.files, parts_expected = file.parts, parts_seen = chunk.fragments,
                   bytes = chunk.bytes, first_post = chunk.first_post, last_post = chunk.last_post,
                   completion = CASE WHEN file.parts > 0
                                     THEN least(100.0, 100.0 * chunk.fragments / file.parts) ELSE 0 END,
                   gathered_at = now()
              FROM chunk JOIN file USING (release_key)
             WHERE r.group_id = :g AND r.key = chunk.release_key
            """
        ),
        {"g": group_id, "keys": list(release_keys)},
    )
    return result.rowcount


def record_failure(session: Session, batch_id: int, error: str, max_attempts: int) -> str:
    """Count a failed attempt; after max_attempts the batch is 'failed' (a poison batch, shown
    in status with its error) and no longer retried. Returns the batch's state."""
    row = session.get(SeedBatch, batch_id, with_for_update=True)
    if row is None or row.state != "accepted":
        return row.state if row else "unknown"
    row.attempts += 1
    row.error = error[:2000]
    if row.attempts >= max_attempts:
        row.state = "failed"
    return row.state


def pending_batches(session: Session, older_than_seconds: int, limit: int = 1000) -> dict[str, list[int]]:
    """Batches not stored or not gathered after a while, by state: their task was lost (Redis
    down, a worker died)."""
    rows = session.execute(text(
        "SELECT id, state FROM seed_batches WHERE state IN ('accepted', 'stored')"
        " AND coalesce(stored_at, accepted_at) < now() - make_interval(secs => :age) ORDER BY id LIMIT :limit"
    ), {"age": older_than_seconds, "limit": limit})
    found: dict[str, list[int]] = {"accepted": [], "stored": []}
    for batch_id, state in rows:
        found[state].append(batch_id)
    return found


def retry_failed(session: Session) -> list[int]:
    """Failed (poison) batches back to accepted with fresh attempts, for an operator's retry."""
    return list(session.scalars(text(
        "UPDATE seed_batches SET state = 'accepted', attempts = 0 WHERE state = 'failed' RETURNING id"
    )))
