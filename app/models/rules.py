from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, CheckConstraint, DateTime, Identity, Integer, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class SeedRule(Base):
    """An operator rule, handed to nodes with every lease (format: edge.digest.rules.Rule.from_data)."""

    __tablename__ = "seed_rules"

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    field: Mapped[str] = mapped_column(Text)
    pattern: Mapped[str] = mapped_column(Text)
    action: Mapped[str] = mapped_column(Text, server_default="drop")
    groups: Mapped[str | None] = mapped_column(Text)
    enabled: Mapped[bool] = mapped_column(Boolean, server_default="true")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())

    __table_args__ = (
        CheckConstraint("field IN ('subject', 'poster', 'message_id', 'flag')", name="field"),
        CheckConstraint("action IN ('drop', 'keep')", name="action"),
    )
