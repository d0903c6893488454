"""The seed orchestrator: leases and their expiry."""
from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session


def expire_leases(session: Session, timeout_seconds: int) -> list[int]:
    """Leases with no batch or heartbeat for `timeout_seconds` go back to planned.

    The next node to lease such a range resumes at its next_id. Returns the expired range ids.
    """
    rows = session.execute(
        text(
            "UPDATE seed_ranges SET status = 'planned', node_id = NULL, leased_at = NULL"
            " WHERE status = 'leased'"
            " AND coalesce(touched_at, leased_at) < now() - make_interval(secs => :timeout)"
            " RETURNING id"
        ),
        {"timeout": timeout_seconds},
    ).scalars().all()
    return sorted(rows)
