from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, Boolean, DateTime, Identity, Integer, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class Group(Base):
    """A newsgroup: the server's marks, where live planning started and where it is, the backfill
    pointer, and how planning it last failed."""

    __tablename__ = "groups"

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    active: Mapped[bool] = mapped_column(Boolean, server_default="true")
    # The server's low and high water marks, as last seen.
    low_mark: Mapped[int | None] = mapped_column(BigInteger)
    high_mark: Mapped[int | None] = mapped_column(BigInteger)
    marks_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # First article live planning took on; everything below is backfill's.
    live_first: Mapped[int | None] = mapped_column(BigInteger)
    # The first article live planning has not planned yet: its next plan starts here.
    live_next: Mapped[int | None] = mapped_column(BigInteger)
    # Lowest article the backfill has covered; a seed plan takes over below it.
    backfill_id: Mapped[int | None] = mapped_column(BigInteger)
    # Plannings of this group that failed since the last that did not (411, the server down, a
    # date look-up failing), with the last error and when it came.
    plan_failures: Mapped[int] = mapped_column(Integer, server_default="0")
    plan_error: Mapped[str | None] = mapped_column(Text)
    plan_error_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
