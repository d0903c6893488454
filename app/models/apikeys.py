from __future__ import annotations

from datetime import datetime

from sqlalchemy import BigInteger, DateTime, Identity, Integer, LargeBinary, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class ApiKey(Base):
    """A user's API key: search and NZB downloads for a person or their tool (NZBHydra2, Sonarr).
    Only the SHA-256 of the key is kept. A revoked key keeps its row, and so its name and its
    counts, with revoked_at set; NULL there means the key works."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    key_hash: Mapped[bytes] = mapped_column(LargeBinary, unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Every request made with the key, NZB downloads included; grabs counts the downloads alone.
    grabs: Mapped[int] = mapped_column(BigInteger, server_default="0")
    api_hits: Mapped[int] = mapped_column(BigInteger, server_default="0")
