from __future__ import annotations

from datetime import datetime

from sqlalchemy import (
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    ForeignKey,
    Identity,
    Index,
    Integer,
    Text,
    UniqueConstraint,
    func,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base

# expired: the server's low-water mark passed the range's numbers before a node read them; its
# next_id was moved up past them and they are counted in `expired` (never an accepted article).
RANGE_STATUSES = ("planned", "leased", "done", "expired")
# backfill plans go down from the lowest article covered, live plans up from the highest.
PLAN_KINDS = ("backfill", "live")


class SeedPlan(Base):
    """One planning of a group: the span it covers, split into ranges (leased oldest plan first,
    live before backfill: app/services/leases.py)."""

    __tablename__ = "seed_plans"

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    group_id: Mapped[int] = mapped_column(ForeignKey("groups.id", ondelete="CASCADE"), index=True)
    first_id: Mapped[int] = mapped_column(BigInteger)
    last_id: Mapped[int] = mapped_column(BigInteger)
    days: Mapped[int | None] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(Text, server_default="backfill")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    __table_args__ = (
        CheckConstraint("first_id <= last_id", name="span"),
        CheckConstraint("kind IN ('backfill', 'live')", name="kind"),
    )


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
    # Its plan's kind, kept on the range for the lease order's index.
    kind: Mapped[str] = mapped_column(Text, server_default="backfill")
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
    # Article numbers skipped because the server expired them before a node read them:
    # articles + missing + expired = next_id - first_id.
    expired: Mapped[int] = mapped_column(BigInteger, server_default="0")
    # Given back by a node that could not work on it (release with "failed"): leased after the others.
    failures: Mapped[int] = mapped_column(Integer, server_default="0")
    last_failure: Mapped[str | None] = mapped_column(Text)

    __table_args__ = (
        CheckConstraint("first_id <= last_id", name="span"),
        CheckConstraint("next_id >= first_id AND next_id <= last_id + 1", name="next_in_span"),
        CheckConstraint("status IN ('planned', 'leased', 'done', 'expired')", name="status"),
        CheckConstraint("kind IN ('backfill', 'live')", name="kind"),
        CheckConstraint("(status = 'leased') = (node_id IS NOT NULL)", name="lease_holder"),
        UniqueConstraint("group_id", "first_id"),
        # Leasing walks one kind's planned ranges with the fewest failures first, then oldest
        # plan first.
        Index("ix_seed_ranges_lease_order", "status", "kind", "failures", "plan_id", "id"),
        Index("ix_seed_ranges_node_id", "node_id"),
    )
