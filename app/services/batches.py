"""Batches: checked at the door, stored by ingest into the catalog tables, retried by beat.

A batch goes accepted -> stored -> gathered. Each step is idempotent by construction: it runs
under a row lock on the batch and only from the state before it, and moves the state in the same
transaction, so a redelivered task finds the work done and does nothing. Rows that
legitimately recur across batches (files and releases spanning batches) go through staging and
INSERT ... ON CONFLICT DO NOTHING.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import datetime, timezone

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
    """Ask a worker to store the batch; False when the broker is unreachable (beat requeues it)."""
    from app.tasks.ingest import store_batch

    try:
        store_batch.apply_async((batch_id,), retry=False)
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


# Staging tables for what recurs across batches (files and releases spanning batches) or
# needs converting in SQL (unix dates to timestamptz, at C speed instead of per row in Python).
_STAGING = {
    "stage_files": "key bigint, release_key bigint, name text, subject text, poster text, posted bigint,"
                   " file_index int, file_count int, parts int",
    "stage_releases": "key bigint, name text, poster text, file_count int",
    "stage_release_chunks": "release_key bigint, files int, fragments int, bytes bigint, first_post bigint,"
                            " last_post bigint",
}


def _fragment_columns(fragments: dict, group_id: int) -> list[tuple[str, list]]:
    articles = fragments["article"]
    return [("int", articles), ("int", fragments["file"]), ("int", fragments["part"]),
            ("int", fragments["bytes"]), ("text", fragments["message_id"]), ("int", [group_id] * len(articles))]


def load_catalog(session: Session, group_id: int, range_id: int, batch: dict) -> None:
    """Files, fragments, releases, release chunks and rule counts of one batch, in bulk."""
    conn = session.connection().connection.driver_connection  # psycopg, for COPY
    batch_from = batch["first"]
    files, releases, chunks = batch["files"], batch["releases"], batch["release_chunks"]
    with conn.cursor() as cur:
        for table, columns in _STAGING.items():
            cur.execute(f"CREATE TEMP TABLE IF NOT EXISTS {table} ({columns}) ON COMMIT DELETE ROWS")
        _copy_fragments(cur, group_id, batch["fragments"])
        copy_columns(cur, "COPY stage_files FROM STDIN", [
            ("int", files["key"]), ("int", files["release"]), ("text", files["name"]), ("text", files["subject"]),
            ("text", files["poster"]), ("int", files["date"]), ("int", files["index"]), ("int", files["count"]),
            ("int", files["parts"])])
        copy_columns(cur, "COPY stage_releases FROM STDIN", [
            ("int", releases["key"]), ("text", releases["name"]), ("text", releases["poster"]),
            ("int", releases["file_count"])])
        copy_columns(cur, "COPY stage_release_chunks FROM STDIN", [
            ("int", chunks["release"]), ("int", chunks["files"]), ("int", chunks["fragments"]),
            ("int", chunks["bytes"]), ("int", chunks["first_date"]), ("int", chunks["last_date"])])
        params = {"g": group_id, "b": batch_from, "r": range_id}
        cur.execute(
            "INSERT INTO files (group_id, key, release_key, name, subject, poster, posted_at, file_index,"
            " file_count, parts) SELECT %(g)s, key, release_key, coalesce(name, ''), subject, poster,"
            " to_timestamp(posted), file_index, file_count, parts FROM stage_files ON CONFLICT DO NOTHING",
            params,
        )
        cur.execute(
            "INSERT INTO releases (group_id, key, name, poster, file_count)"
            " SELECT %(g)s, key, name, poster, file_count FROM stage_releases ON CONFLICT DO NOTHING",
            params,
        )
        cur.execute(
            "INSERT INTO release_chunks (group_id, release_key, batch_from, range_id, files, fragments, bytes,"
            " first_post, last_post) SELECT %(g)s, release_key, %(b)s, %(r)s, files, fragments, bytes,"
            " to_timestamp(first_post), to_timestamp(last_post) FROM stage_release_chunks"
            " ON CONFLICT DO NOTHING",
            params,
        )
        cur.executemany(
            "INSERT INTO rule_counts (range_id, batch_from, rule, group_id, releases, files, fragments, bytes)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING",
            [(range_id, batch_from, rule, group_id, *counts) for rule, counts in batch["rules"].items()],
        )


def _copy_fragments(cur, group_id: int, fragments: dict) -> None:
    """Fragments straight into the group's partition: a batch's articles are its own (ranges and
    batches never overlap, and the batch lock keeps a redelivery out), so the plain COPY is safe;
    should an article already be there, the savepoint falls back to staging + ON CONFLICT."""
    columns = _fragment_columns(fragments, group_id)
    table = partition_name("fragments", group_id)
    cur.execute("SAVEPOINT fragments_copy")
    try:
        copy_columns(cur, f'COPY "{table}" (article, file_key, part, bytes, message_id, group_id) FROM STDIN',
                     columns)
        cur.execute("RELEASE SAVEPOINT fragments_copy")
        return
    except Exception as exc:
        if getattr(exc, "sqlstate", None) != "23505":  # unique_violation
            raise
        cur.execute("ROLLBACK TO SAVEPOINT fragments_copy")
    cur.execute(
        "CREATE TEMP TABLE IF NOT EXISTS stage_fragments (article bigint, file_key bigint, part int,"
        " bytes int, message_id text, group_id int) ON COMMIT DELETE ROWS"
    )
    copy_columns(cur, "COPY stage_fragments FROM STDIN", columns)
    cur.execute(
        "INSERT INTO fragments (group_id, article, file_key, part, bytes, message_id)"
        " SELECT group_id, article, file_key, part, bytes, message_id FROM stage_fragments ON CONFLICT DO NOTHING"
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
