"""What the seed is doing: per group and range, nodes, batches waiting, rates.

An operator (an operator key, or the CLI) sees the whole seed: every node, every failed range
and the errors of failed batches. A node sees what concerns it: the plan's totals, its own
leased ranges, the ranges it gave back as failed, and its own failed batches; never another
node's name or errors.
"""
from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

from app.models import SeedNode

RATE_WINDOW_SECONDS = 300
# Examples of failed ranges and batches shown: enough to see a pattern, bounded whatever fails.
EXAMPLES = 20


def status_for(session: Session, node: SeedNode | None = None) -> dict:
    """The whole status with no node (an operator), else what concerns that node."""
    return seed_status(session) if node is None else node_status(session, node)


def seed_status(session: Session) -> dict:
    """The whole seed, for an operator."""
    return {
        "scope": "operator",
        "groups": _groups(session, operator=True),
        "leased_ranges": _leased_ranges(session),
        # Ranges nodes gave back as failed and not done since: an operator looks at why.
        "failed_ranges": _failed_ranges(session),
        "nodes": _nodes(session),
        "batches": {**_batch_counts(session), "failed_examples": _failed_batches(session)},
        "rates": _rates(session),
    }


def node_status(session: Session, node: SeedNode) -> dict:
    """The plan's totals and this node's own part of it."""
    return {
        "scope": "node",
        "node": node.name,
        "groups": _groups(session),
        "leased_ranges": _leased_ranges(session, node),
        "failed_ranges": _failed_ranges(session, node),
        "batches": {**_batch_counts(session), "failed_examples": _failed_batches(session, node)},
        "rates": _rates(session),
    }


def _groups(session: Session, operator: bool = False) -> list[dict]:
    """Each group's ranges and counts, where live planning stands, its ranges the server expired
    before they were read, and (for an operator) how planning it last failed."""
    groups = [dict(r._mapping) for r in session.execute(text(
        """
        SELECT g.name AS group, g.active,
               count(r.id) AS ranges,
               count(r.id) FILTER (WHERE r.status = 'planned') AS planned,
               count(r.id) FILTER (WHERE r.status = 'leased') AS leased,
               count(r.id) FILTER (WHERE r.status = 'done') AS done,
               count(r.id) FILTER (WHERE r.status = 'expired') AS expired_ranges,
               count(r.id) FILTER (WHERE r.kind = 'live') AS live_ranges,
               count(r.id) FILTER (WHERE r.kind = 'live' AND r.status IN ('planned', 'leased')) AS live_waiting,
               coalesce(sum(r.last_id - r.first_id + 1), 0)::bigint AS span,
               coalesce(sum(r.next_id - r.first_id), 0)::bigint AS covered,
               coalesce(sum(r.articles), 0)::bigint AS articles,
               coalesce(sum(r.missing), 0)::bigint AS missing,
               coalesce(sum(r.expired), 0)::bigint AS expired,
               coalesce(sum(r.rejected), 0)::bigint AS rejected,
               coalesce(sum(r.files), 0)::bigint AS files,
               (SELECT count(*) FROM releases rel WHERE rel.group_id = g.id) AS releases,
               coalesce(sum(r.dropped), 0)::bigint AS dropped,
               g.low_mark, g.high_mark, g.marks_at, g.live_first, g.live_next,
               g.plan_failures, g.plan_error, g.plan_error_at
          FROM groups g LEFT JOIN seed_ranges r ON r.group_id = g.id
         GROUP BY g.id, g.name ORDER BY g.name
        """
    ))]
    if not operator:
        # The data center's planning errors name its Usenet server: an operator's business.
        for group in groups:
            del group["plan_error"]
    dropped = session.execute(text(
        """
        SELECT g.name AS group, c.rule, sum(c.releases)::bigint AS releases,
               sum(c.files)::bigint AS files, sum(c.fragments)::bigint AS fragments
          FROM rule_counts c JOIN groups g ON g.id = c.group_id
         GROUP BY g.name, c.rule ORDER BY g.name, c.rule
        """
    )).all()
    by_group: dict[str, dict] = {}
    for row in dropped:
        by_group.setdefault(row.group, {})[row.rule] = {
            "releases": row.releases, "files": row.files, "fragments": row.fragments,
        }
    for group in groups:
        group["rules"] = by_group.get(group["group"], {})
    return groups


def _leased_ranges(session: Session, node: SeedNode | None = None) -> list[dict]:
    return [dict(r._mapping) for r in session.execute(text(
        """
        SELECT r.id, g.name AS group, r.first_id, r.last_id, r.next_id, r.status, n.name AS node,
               r.batches, r.articles, r.files, r.releases, r.dropped, r.touched_at
          FROM seed_ranges r JOIN groups g ON g.id = r.group_id LEFT JOIN seed_nodes n ON n.id = r.node_id
         WHERE r.status = 'leased' AND (CAST(:node_id AS integer) IS NULL OR r.node_id = :node_id)
         ORDER BY r.id
        """
    ), {"node_id": None if node is None else node.id})]


def _failed_ranges(session: Session, node: SeedNode | None = None) -> list[dict]:
    # A range's last failure is kept as "<node name>: <reason>" (app/services/leases.py); a node
    # name has neither ':' nor spaces, so the prefix names exactly one node.
    return [dict(r._mapping) for r in session.execute(text(
        """
        SELECT r.id, g.name AS group, r.first_id, r.next_id, r.last_id, r.status, r.failures, r.last_failure
          FROM seed_ranges r JOIN groups g ON g.id = r.group_id
         WHERE r.failures > 0 AND r.status NOT IN ('done', 'expired')
           AND (CAST(:prefix AS text) IS NULL OR starts_with(r.last_failure, :prefix))
         ORDER BY r.failures DESC, r.id LIMIT :examples
        """
    ), {"prefix": None if node is None else f"{node.name}: ", "examples": EXAMPLES})]


def _nodes(session: Session) -> list[dict]:
    return [dict(r._mapping) for r in session.execute(text(
        """
        SELECT n.name, n.enabled, n.last_seen_at,
               (SELECT count(*) FROM seed_ranges r WHERE r.node_id = n.id) AS leases
          FROM seed_nodes n ORDER BY n.name
        """
    ))]


def _batch_counts(session: Session) -> dict:
    return dict(session.execute(text(
        """
        SELECT count(*) FILTER (WHERE state = 'accepted') AS pending,
               count(*) FILTER (WHERE state = 'stored') AS stored,
               count(*) FILTER (WHERE state = 'gathered') AS gathered,
               count(*) FILTER (WHERE state = 'failed') AS failed
          FROM seed_batches
        """
    )).one()._mapping)


def _failed_batches(session: Session, node: SeedNode | None = None) -> list[dict]:
    return [dict(r._mapping) for r in session.execute(text(
        "SELECT id, range_id, batch_from, attempts, error FROM seed_batches"
        " WHERE state = 'failed' AND (CAST(:node_id AS integer) IS NULL OR node_id = :node_id)"
        " ORDER BY id LIMIT :examples"
    ), {"node_id": None if node is None else node.id, "examples": EXAMPLES})]


def _rates(session: Session) -> dict:
    recent_span = session.execute(text(
        "SELECT coalesce(sum(batch_to - batch_from + 1), 0)::bigint FROM seed_batches"
        " WHERE accepted_at > now() - make_interval(secs => :window)"
    ), {"window": RATE_WINDOW_SECONDS}).scalar_one()
    return {"window_seconds": RATE_WINDOW_SECONDS,
            "articles_per_second": round(recent_span / RATE_WINDOW_SECONDS, 1)}
