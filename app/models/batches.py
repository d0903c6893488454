from __future__ import annotations

from datetime import datetime
from enum import StrEnum

from sqlalchemy import (
    ARRAY,
    BigInteger,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    LargeBinary,
    Text,
    TypeDecorator,
    UniqueConstraint,
    func,
    text,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class BatchState(StrEnum):
    """Where a batch is in its life cycle (app.services.ingest)."""

    ACCEPTED = "accepted"  # durable, not stored yet
    STORED = "stored"  # in the catalog, its releases up to date, not joined into their posts yet
    JOINED = "joined"  # done: in the catalog, its releases joined into their posts
    FAILED = "failed"  # gave up after its attempts (a poison batch, shown in status)


class BatchStateColumn(TypeDecorator):
    """BatchState in the column's plain text, so the table stays as its migrations make it (text
    with a check constraint)."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value, dialect):
        return None if value is None else BatchState(value).value

    def process_result_value(self, value, dialect):
        return None if value is None else BatchState(value)


class SeedBatch(Base):
    """A batch as accepted: its raw body is durable here before the node hears 2xx.

    One per range and start article, so a batch sent again is recognised, never stored twice.
    """

    __tablename__ = "seed_batches"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    range_id: Mapped[int] = mapped_column(ForeignKey("seed_ranges.id", ondelete="CASCADE"))
    node_id: Mapped[int | None] = mapped_column(ForeignKey("seed_nodes.id", ondelete="SET NULL"))
    batch_from: Mapped[int] = mapped_column(BigInteger)
    batch_to: Mapped[int] = mapped_column(BigInteger)
    body: Mapped[bytes | None] = mapped_column(LargeBinary)
    content_type: Mapped[str] = mapped_column(Text)
    content_encoding: Mapped[str] = mapped_column(Text, server_default="")
    body_bytes: Mapped[int] = mapped_column(Integer)
    state: Mapped[BatchState] = mapped_column(BatchStateColumn, server_default=BatchState.ACCEPTED.value)
    attempts: Mapped[int] = mapped_column(Integer, server_default="0")
    error: Mapped[str | None] = mapped_column(Text)
    # Releases a batch in 'stored' holds, kept until they are joined into their posts
    # (app.services.ingest.posts; a lost task is found and sent again by the requeue sweep).
    release_keys: Mapped[list[int] | None] = mapped_column(ARRAY(BigInteger))
    accepted_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    stored_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))

    __table_args__ = (
        UniqueConstraint("range_id", "batch_from"),
        CheckConstraint("batch_from <= batch_to", name="span"),
        CheckConstraint("state IN ('accepted', 'stored', 'joined', 'failed')", name="state"),
        # The requeue sweep looks only at batches not done yet.
        Index("ix_seed_batches_pending", "accepted_at", postgresql_where=text("state IN ('accepted', 'stored')")),
        # The status page's chart: the batches stored in the last hours (migration 0023).
        Index("ix_seed_batches_stored_at", "stored_at", postgresql_where=text("stored_at IS NOT NULL")),
        # The status: the failed batches counted and shown, the rate's latest batches (migration 0024).
        Index("ix_seed_batches_failed", "id", postgresql_where=text("state = 'failed'")),
        Index("ix_seed_batches_accepted_at", "accepted_at"),
    )


class StoredFragments(Base):
    """A batch whose fragments are in the catalog: added in the transaction that stores them, so a
    retry of a batch that failed after that commit leaves them as they are (the fragments keep no
    key that would refuse them a second time: migration 0008, docs/store.md).

    The store holds its batch's row FOR NO KEY UPDATE, which lets this row's foreign key check
    (FOR KEY SHARE), made on the fragments' own connection, go through."""

    __tablename__ = "stored_fragments"

    batch_id: Mapped[int] = mapped_column(ForeignKey("seed_batches.id", ondelete="CASCADE"), primary_key=True)
