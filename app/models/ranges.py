from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger, Boolean, CheckConstraint, DateTime, ForeignKey, Identity, Index, Integer, Text,
    UniqueConstraint, func,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base

RANGE_STATUSES = ("planned", "leased", "done")


class SeedPlan(Base):
    """One planning of a group: the span it covers, split into ranges (leased oldest plan first)."""

    __tablename__ = "seed_plans"

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("groups.id", ondelete="CASCADE"), index=True)
    first_id: Mapped[int] = mapped_column(BigInteger)
    last_id: Mapped[int] = mapped_column(BigInteger)
    days: Mapped[int | None] = mapped_column(Integer)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    __table_args__ = (CheckConstraint("first_id <= last_id", name="span"),)


class SeedRange(Base):
    """A planned span [first_id, last_id] of one group; next_id is the first article not yet accepted."""

    __tablename__ = "seed_ranges"

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    plan_id: Mapped[int] = mapped_column(ForeignKey("seed_plans.id", ondelete="CASCADE"))
    group_id: Mapped[int] = mapped_column(ForeignKey("groups.id", ondelete="CASCADE"))
    first_id: Mapped[int] = mapped_column(BigInteger)
    last_id: Mapped[int] = mapped_column(BigInteger)
    next_id: Mapped[int] = mapped_column(BigInteger)
    status: Mapped[str] = mapped_column(Text, server_default="planned")
    spooled: Mapped[bool] = mapped_column(Boolean, server_default="false")
    node_id: Mapped[int | None] = mapped_column(ForeignKey("seed_nodes.id", ondelete="SET NULL"))
    leased_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Stamped by every accepted batch and heartbeat; lease expiry measures from here.
    touched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    done_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    batches: Mapped[int] = mapped_column(Integer, server_default="0")
    articles: Mapped[int] = mapped_column(BigInteger, server_default="0")
    missing: Mapped[int] = mapped_column(BigInteger, server_default="0")
    rejected: Mapped[int] = mapped_column(BigInteger, server_default="0")
    files: Mapped[int] = mapped_column(BigInteger, server_default="0")
    releases: Mapped[int] = mapped_column(BigInteger, server_default="0")
    dropped: Mapped[int] = mapped_column(BigInteger, server_default="0")
    # Given back by a node that could not work on it (release with "failed"): leased after the others.
    failures: Mapped[int] = mapped_column(Integer, server_default="0")
    last_failure: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint("first_id <= last_id", name="span"),
        CheckConstraint("next_id >= first_id AND next_id <= last_id + 1", name="next_in_span"),
        CheckConstraint("status IN ('planned', 'leased', 'done')", name="status"),
        CheckConstraint("(status = 'leased') = (node_id IS NOT NULL)", name="lease_holder"),
        UniqueConstraint("group_id", "first_id"),
        # Leasing walks planned ranges with the fewest failures first, then oldest plan first.
        Index("ix_seed_ranges_lease_order", "status", "failures", "plan_id", "id"),
        Index("ix_seed_ranges_node_id", "node_id"),
    )
