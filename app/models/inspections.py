"""Inspections: posts whose few small files (.par2 index, .nfo, the first archive volume) an
edge node reads to tell what headers cannot (app.services.inspections, docs/api.md)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    DateTime,
    PrimaryKeyConstraint,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    SmallInteger,
    Text,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class InspectionState:
    QUEUED = "queued"  # waiting for a node, newest post first
    LEASED = "leased"  # a node reads it; back to the queue when its lease expires
    DONE = "done"  # its result is stored
    FAILED = "failed"  # nothing to read, or given up after MAX_ATTEMPTS leases


class PostInspection(Base):
    """One post to inspect, and what its inspection found: one row a post (its group and key),
    queued again when the post has grown since it was read; id names it in the node API."""

    __tablename__ = "post_inspections"
    __table_args__ = (
        UniqueConstraint("group_id", "post_key", name="uq_post_inspections_post"),
        # The queue, newest post first; leased rows by when their lease ends (taken back then).
        Index(
            "ix_post_inspections_queue",
            text("priority DESC NULLS LAST"),
            "id",
            postgresql_where=text("state = 'queued'"),
        ),
        Index("ix_post_inspections_leased", "expires_at", postgresql_where=text("state = 'leased'")),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    group_id: Mapped[int] = mapped_column(Integer)
    post_key: Mapped[int] = mapped_column(BigInteger)
    state: Mapped[str] = mapped_column(Text, server_default=InspectionState.QUEUED)
    # Why it was queued: hashed, misc, posters, single (app.services.inspections.REASONS).
    reason: Mapped[str] = mapped_column(Text)
    priority: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    node_id: Mapped[int | None] = mapped_column(Integer, ForeignKey("seed_nodes.id", ondelete="SET NULL"))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    attempts: Mapped[int] = mapped_column(SmallInteger, server_default="0")
    queued_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    # When the join last changed the post while it was queued (a lease waits INSPECT_SETTLE
    # seconds after it: a post still being posted is read once it is whole), the post's files
    # when it was last leased (it is queued again once it has more), and the times it was queued.
    changed_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    files_seen: Mapped[int | None] = mapped_column(Integer)
    rounds: Mapped[int] = mapped_column(SmallInteger, server_default="1")
    done_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # What the node read: articles asked for, read, missing (430), bytes.
    articles_read: Mapped[int | None] = mapped_column(Integer)
    articles_missing: Mapped[int | None] = mapped_column(Integer)
    bytes_read: Mapped[int | None] = mapped_column(BigInteger)
    # What it found: newznab's password (0 none, 1 passworded, 2 an archive inside), flags (executable,
    # password_url), the release name its files tell, the files inside (name, size, where told),
    # the NFO's text (zlib), the ids the NFO gives.
    password: Mapped[int | None] = mapped_column(SmallInteger)
    flags: Mapped[str | None] = mapped_column(Text)
    inner_name: Mapped[str | None] = mapped_column(Text)
    files: Mapped[Any | None] = mapped_column(JSONB)
    nfo: Mapped[bytes | None] = mapped_column(LargeBinary)
    imdb: Mapped[int | None] = mapped_column(Integer)
    tvdb: Mapped[int | None] = mapped_column(Integer)
    tvmaze: Mapped[int | None] = mapped_column(Integer)
    tmdb: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)
    # The rule that dropped the post for what this found (app.services.rules.flag_verdict): the
    # join keeps such a post out of posts (migration 0020).
    dropped_by: Mapped[str | None] = mapped_column(Text)


class PostFileHash(Base):
    """A file's MD5 of its first 16 KiB and its size (PAR2's hash16k): as a post's par2 set lists
    it (listed), or as a node read it from the file's first article. A read file whose hash a
    par2 set of another post lists belongs to that post (app.services.inspections)."""

    __tablename__ = "post_file_hashes"
    __table_args__ = (PrimaryKeyConstraint("group_id", "hash16k", "size", "listed", "post_key"),)

    group_id: Mapped[int] = mapped_column(Integer)
    hash16k: Mapped[bytes] = mapped_column(LargeBinary)
    size: Mapped[int] = mapped_column(BigInteger)
    listed: Mapped[bool] = mapped_column(Boolean)
    post_key: Mapped[int] = mapped_column(BigInteger)


class InspectionJoin(Base):
    """A release joined into the post of the par2 set that lists its file: the post of the
    release `anchor` (the par2 set's post key when joined). The join of posts
    (app.services.ingest.posts) keeps it there."""

    __tablename__ = "inspection_joins"
    __table_args__ = (Index("ix_inspection_joins_anchor", "group_id", "anchor"),)

    group_id: Mapped[int] = mapped_column(Integer, primary_key=True)
    release_key: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    anchor: Mapped[int] = mapped_column(BigInteger)
