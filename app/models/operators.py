from __future__ import annotations

from sqlalchemy import Identity, Integer
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base
from app.models.credentials import RevocableCredential


class OperatorKey(RevocableCredential, Base):
    """An operator's key: it sees the whole seed (GET /api/v1/seed/status, /metrics, the web
    page's status), where a node token sees only what concerns its node."""

    __tablename__ = "operator_keys"

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
