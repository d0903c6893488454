"""How often each post's NZB was downloaded (the newznab API's "grabs")."""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

RECORD = text(
    "INSERT INTO post_grabs (group_id, post_key, grabs) VALUES (:g, :k, 1)"
    " ON CONFLICT (group_id, post_key) DO UPDATE SET grabs = post_grabs.grabs + 1"
)
COUNTS = text(
    "SELECT g.group_id, g.post_key, g.grabs FROM post_grabs g"
    " JOIN unnest(CAST(:groups AS int[]), CAST(:keys AS bigint[])) AS w(group_id, post_key)"
    " ON w.group_id = g.group_id AND w.post_key = g.post_key"
)


def record(session: Session, group_id: int, post_key: int) -> None:
    session.execute(RECORD, {"g": group_id, "k": post_key})


def counts(session: Session, posts: list[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """(group id, post key) -> grabs, for those of these posts grabbed at least once."""
    if not posts:
        return {}
    rows = session.execute(COUNTS, {"groups": [g for g, _ in posts], "keys": [k for _, k in posts]})
    return {(g, k): n for g, k, n in rows}
