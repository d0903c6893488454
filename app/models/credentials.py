"""The columns every revocable credential has (operator keys, API keys), under the one policy of
app.services.credentials."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import DateTime, LargeBinary, Text, func
from sqlalchemy.orm import Mapped, mapped_column


class RevocableCredential:
    """A credential's holder's name (never given twice), the SHA-256 of its secret (the secret
    itself is never kept), when it was made and last used, and when it was revoked: a revoked
    key keeps its row, and so its name, with revoked_at set; NULL there means the key works."""

    name: Mapped[str] = mapped_column(Text, unique=True)
    key_hash: Mapped[bytes] = mapped_column(LargeBinary, unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
