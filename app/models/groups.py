from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, DateTime, Identity, Integer, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class Group(Base):
    """A newsgroup: the server's marks, where live indexing started, and the backfill pointer."""

    __tablename__ = "groups"

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    active: Mapped[bool] = mapped_column(Boolean, server_default="true")
    # The server's low and high water marks, as last seen.
    low_mark: Mapped[int | None] = mapped_column(BigInteger)
    high_mark: Mapped[int | None] = mapped_column(BigInteger)
    marks_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # First article live indexing fetched; everything below is backfill's or the seed's.
    live_first: Mapped[int | None] = mapped_column(BigInteger)
    # Lowest article the backfill has covered; a seed plan takes over below it.
    backfill_id: Mapped[int | None] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
