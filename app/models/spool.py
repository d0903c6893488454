from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, ForeignKey, Integer, LargeBinary, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class SpoolChunk(Base):
    """Raw overview of one chunk of a range fetched in the data center (gzip), for nodes to stream."""

    __tablename__ = "spool_chunks"

    range_id: Mapped[int] = mapped_column(ForeignKey("seed_ranges.id", ondelete="CASCADE"), primary_key=True)
    chunk_from: Mapped[int] = mapped_column(BigInteger, primary_key=True)
    chunk_to: Mapped[int] = mapped_column(BigInteger)
    lines: Mapped[int] = mapped_column(Integer)
    body: Mapped[bytes] = mapped_column(LargeBinary)
    fetched_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
