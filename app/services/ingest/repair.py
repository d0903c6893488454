"""Release repair: the releases a batch in the 'stored' state names recomputed whole from every
batch that saw them (as after an operator put a batch back there, doubting its releases' sums),
joined into their posts, and the batch marked joined. The store keeps releases up to date
itself, so the usual way out of 'stored' is posts.join_batch; the `releases.repair` task runs
this one.
"""

from __future__ import annotations

from typing import Any, Unpack, cast

from sqlalchemy import CursorResult, text
from sqlalchemy.orm import Session

from app.services.ingest.posts import join_posts, locked_stored_batch, mark_joined


def repair_batch(session: Session, batch_id: int) -> int | None:
    """Repair the releases a stored batch names (recomputed whole, then joined into their posts) and
    mark it joined; None when there was nothing to do (not stored yet, or joined already).
    Returns how many releases were updated."""
    stored = locked_stored_batch(session, batch_id)
    if stored is None:
        return None
    row, group_id = stored
    updated = repair_releases(session, group_id, row.release_keys or [])
    left_out: list[str] = []
    join_posts(session, group_id, row.release_keys or [], left_out)
    mark_joined(row, left_out)
    return updated


def repair_releases(session: Session, group_id: int, release_keys: list[int]) -> int:
    """Recompute the aggregates of these releases from every batch that saw them, so releases
    split over batches, ranges and nodes come out whole. Returns how many were updated.

    The files are found by the index of files by release. The rows are locked first (in key
    order), and the sums read
    by the next statement: its snapshot then holds every batch that added to them before (the
    store adds under the same row locks), so no addition is lost between reading and writing."""
    if not release_keys:
        return 0
    params = {"g": group_id, "keys": sorted(set(release_keys))}
    session.execute(
        text("SELECT 1 FROM releases WHERE group_id = :g AND key = ANY(:keys) ORDER BY key FOR UPDATE"), params
    )
    # The sums are numeric in PostgreSQL; each is held at its column's maximum, as the store's
    # additions are (catalog.py), so a repair never fails on a release's totals.
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
               SET files_seen = least(file.files, 2147483647),
                   parts_expected = least(file.parts, 9223372036854775807),
                   parts_seen = least(chunk.fragments, 9223372036854775807),
                   bytes = least(chunk.bytes, 9223372036854775807), first_post = chunk.first_post, last_post = chunk.last_post,
                   completion = CASE WHEN file.parts > 0
                                     THEN least(100.0, 100.0 * chunk.fragments / file.parts) ELSE 0 END,
                   joined_at = now()
              FROM chunk JOIN file USING (release_key)
             WHERE r.group_id = :g AND r.key = chunk.release_key
            """
        ),
        params,
    )
    # An UPDATE's result is a CursorResult (session.execute is typed to give its base, Result).
    return cast("CursorResult[Unpack[tuple[Any, ...]]]", result).rowcount
