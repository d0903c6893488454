"""How often each post's NZB was downloaded (the newznab API's "grabs"; a post's summary reads its
count, app.services.search)."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

RECORD = text(
    "INSERT INTO post_grabs (group_id, post_key, grabs) VALUES (:g, :k, 1)"
    " ON CONFLICT (group_id, post_key) DO UPDATE SET grabs = post_grabs.grabs + 1"
)


def record(session: Session, group_id: int, post_key: int) -> None:
    session.execute(RECORD, {"g": group_id, "k": post_key})
