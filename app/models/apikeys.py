from __future__ import annotations

from datetime import date, datetime

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Date,
    DateTime,
    ForeignKey,
    Identity,
    Integer,
)
from sqlalchemy.orm import Mapped, mapped_column

from app.db import Base
from app.models.credentials import RevocableCredential

# The bounds of a daily limit, kept by the CLI, the service and a CHECK alike. A limit of 0 is
# refused: a key that may do nothing is a revoked key, and the counting statement relies on a
# day's first request always fitting (app/services/apikeys.py).
LIMIT_MIN = 1
LIMIT_MAX = 10**9


class ApiKey(RevocableCredential, Base):
    """A user's API key: search and NZB downloads for a person or their tool (NZBHydra2, Sonarr).
    A revoked key keeps its counts too."""

    __tablename__ = "api_keys"

    id: Mapped[int] = mapped_column(Integer, Identity(), primary_key=True)
    # Every request made with the key since it was made, NZB downloads included; grabs counts
    # the downloads alone. The counts of each UTC day are in api_key_days.
    grabs: Mapped[int] = mapped_column(BigInteger, server_default="0")
    api_hits: Mapped[int] = mapped_column(BigInteger, server_default="0")
    # Requests and NZB downloads allowed per UTC day; NULL means unlimited.
    requests_per_day: Mapped[int | None] = mapped_column(Integer)
    grabs_per_day: Mapped[int | None] = mapped_column(Integer)

    __table_args__ = (
        CheckConstraint(f"requests_per_day BETWEEN {LIMIT_MIN} AND {LIMIT_MAX}", name="requests_per_day"),
        CheckConstraint(f"grabs_per_day BETWEEN {LIMIT_MIN} AND {LIMIT_MAX}", name="grabs_per_day"),
    )


class ApiKeyDay(Base):
    """A key's use on one UTC day: what its daily limits are checked against. One row per key
    and day it was used; the rows of past days stay as a history of use (a few hundred bytes a
    key a day)."""

    __tablename__ = "api_key_days"

    key_id: Mapped[int] = mapped_column(ForeignKey("api_keys.id", ondelete="CASCADE"), primary_key=True)
    day: Mapped[date] = mapped_column(Date, primary_key=True)
    requests: Mapped[int] = mapped_column(BigInteger)
    grabs: Mapped[int] = mapped_column(BigInteger)
    # The day's first request and first NZB download: newznab's apioldesttime and graboldesttime.
    first_request: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    first_grab: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
