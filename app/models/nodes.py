from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, DateTime, Identity, Integer, LargeBinary, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class SeedNode(Base):
    """An edge node; only the SHA-256 of its bearer token is kept."""

    __tablename__ = "seed_nodes"

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    token_hash: Mapped[bytes] = mapped_column(LargeBinary, unique=True)
    enabled: Mapped[bool] = mapped_column(Boolean, server_default="true")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    token_rotated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    last_seen_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
