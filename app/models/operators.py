from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, Identity, Integer, LargeBinary, Text, func
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base


class OperatorKey(Base):
    """An operator's key: it sees the whole seed (GET /api/v1/seed/status, /metrics, the web
    page's status), where a node token sees only what concerns its node. Only the SHA-256 of the
    key is kept. A revoked key keeps its row, and so its name, with revoked_at set; NULL there
    means the key works (app.services.credentials)."""

    __tablename__ = "operator_keys"

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    name: Mapped[str] = mapped_column(Text, unique=True)
    key_hash: Mapped[bytes] = mapped_column(LargeBinary, unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
