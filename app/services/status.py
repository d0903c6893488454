"""What the seed is doing: per group and range, nodes, batches waiting, rates."""
from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session

RATE_WINDOW_SECONDS = 300


def seed_status(session: Session) -> dict:
    groups = [dict(r._mapping) for r in session.execute(text(
        """
        SELECT g.name AS group,
               count(r.id) AS ranges,
               count(r.id) FILTER (WHERE r.status = 'planned') AS planned,
               count(r.id) FILTER (WHERE r.status = 'leased') AS leased,
               count(r.id) FILTER (WHERE r.status = 'done') AS done,
               coalesce(sum(r.last_id - r.first_id + 1), 0)::bigint AS span,
               coalesce(sum(r.next_id - r.first_id), 0)::bigint AS covered,
               coalesce(sum(r.articles), 0)::bigint AS articles,
               coalesce(sum(r.missing), 0)::bigint AS missing,
               coalesce(sum(r.rejected), 0)::bigint AS rejected,
               coalesce(sum(r.files), 0)::bigint AS files,
               (SELECT count(*) FROM releases rel WHERE rel.group_id = g.id) AS releases,
               coalesce(sum(r.dropped), 0)::bigint AS dropped
          FROM groups g LEFT JOIN seed_ranges r ON r.group_id = g.id
         GROUP BY g.id, g.name ORDER BY g.name
        """
    ))]
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
    ranges = [dict(r._mapping) for r in session.execute(text(
        """
        SELECT r.id, g.name AS group, r.first_id, r.last_id, r.next_id, r.status, n.name AS node,
               r.batches, r.articles, r.files, r.releases, r.dropped, r.touched_at
          FROM seed_ranges r JOIN groups g ON g.id = r.group_id LEFT JOIN seed_nodes n ON n.id = r.node_id
         WHERE r.status = 'leased' ORDER BY r.id
        """
    ))]
    # Ranges nodes gave back as failed and not done since: an operator looks at why.
    failed_ranges = [dict(r._mapping) for r in session.execute(text(
        """
        SELECT r.id, g.name AS group, r.first_id, r.next_id, r.last_id, r.status, r.failures, r.last_failure
          FROM seed_ranges r JOIN groups g ON g.id = r.group_id
         WHERE r.failures > 0 AND r.status <> 'done' ORDER BY r.failures DESC, r.id LIMIT 20
        """
    ))]
    nodes = [dict(r._mapping) for r in session.execute(text(
        """
        SELECT n.name, n.enabled, n.last_seen_at,
               (SELECT count(*) FROM seed_ranges r WHERE r.node_id = n.id) AS leases
          FROM seed_nodes n ORDER BY n.name
        """
    ))]
    batches = dict(session.execute(text(
        """
        SELECT count(*) FILTER (WHERE state = 'accepted') AS pending,
               count(*) FILTER (WHERE state = 'stored') AS stored,
               count(*) FILTER (WHERE state = 'gathered') AS gathered,
               count(*) FILTER (WHERE state = 'failed') AS failed,
               coalesce(sum(batch_to - batch_from + 1) FILTER (
                   WHERE accepted_at > now() - make_interval(secs => :window)), 0)::bigint AS recent_span
          FROM seed_batches
        """
    ), {"window": RATE_WINDOW_SECONDS}).one()._mapping)
    failed = [dict(r._mapping) for r in session.execute(text(
        "SELECT id, range_id, batch_from, attempts, error FROM seed_batches"
        " WHERE state = 'failed' ORDER BY id LIMIT 20"
    ))]
    recent_span = batches.pop("recent_span")
    return {
        "groups": groups,
        "leased_ranges": ranges,
        "failed_ranges": failed_ranges,
        "nodes": nodes,
        "batches": {**batches, "failed_examples": failed},
        "rates": {"window_seconds": RATE_WINDOW_SECONDS,
                  "articles_per_second": round(recent_span / RATE_WINDOW_SECONDS, 1)},
    }
