"""The spool: raw overview chunks of ranges fetched in the data center, streamed to nodes."""

from __future__ import annotations

from typing import Iterator

from sqlalchemy import exists, select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from app.db import session_scope
from app.models import SeedRange, SpoolChunk
from edge.digest.frames import CONTENT_TYPE, compress_lines, encode_frame

__all__ = ["CONTENT_TYPE", "has_chunks", "store_chunk", "stream_frames"]


def has_chunks(session: Session, range_id: int) -> bool:
    found: bool = session.execute(select(exists().where(SpoolChunk.range_id == range_id))).scalar_one()
    return found


def store_chunk(session: Session, range_id: int, chunk_from: int, chunk_to: int, raw: bytes) -> int:
    """Keep one chunk's raw CRLF-terminated lines (idempotent: a chunk fetched again is kept once).
    Returns the number of lines."""
    lines = raw.count(b"\r\n")
    session.execute(
        insert(SpoolChunk)
        .values(range_id=range_id, chunk_from=chunk_from, chunk_to=chunk_to, lines=lines, body=compress_lines(raw))
        .on_conflict_do_nothing()
    )
    return lines


def mark_spooled(session: Session, range_id: int) -> None:
    session.get_one(SeedRange, range_id, with_for_update=True).spooled = True


def stream_frames(range_id: int) -> Iterator[bytes]:
    """The range's chunks as frames, one database row in memory at a time."""
    with session_scope() as session:
        rows = session.execute(
            select(SpoolChunk.chunk_from, SpoolChunk.chunk_to, SpoolChunk.lines, SpoolChunk.body)
            .where(SpoolChunk.range_id == range_id)
            .order_by(SpoolChunk.chunk_from)
            .execution_options(yield_per=1)
        )
        for chunk_from, chunk_to, lines, body in rows:
            yield encode_frame(chunk_from, chunk_to, body, lines)
