"""Rows for tests, made through the services where one exists."""

from __future__ import annotations

from sqlalchemy.orm import Session

from app.models import SeedPlan, SeedRange
from app.services.groups import add_groups
from app.services.nodes import create_node

BIG = 2**32 + 1_000  # article numbers past 2^32, as on real ("boneless") servers


def make_group(session: Session, name: str = "alt.binaries.test"):
    return add_groups(session, [name])[0]


def make_node(session: Session, name: str = "edge-1"):
    return create_node(session, name)  # (node, token)


def make_plan(session: Session, group, spans: list[tuple[int, int]]) -> list[SeedRange]:
    plan = SeedPlan(group_id=group.id, first_id=min(a for a, _ in spans), last_id=max(b for _, b in spans))
    session.add(plan)
    session.flush()
    ranges = [SeedRange(plan_id=plan.id, group_id=group.id, first_id=a, last_id=b, next_id=a) for a, b in spans]
    session.add_all(ranges)
    session.flush()
    return ranges


def lease_one_range(first: int, last: int):
    """A group planned as the one range first..last, leased by a new node: (node, range id)."""
    from app.db import session_scope
    from app.services import leases

    with session_scope() as session:
        (seed_range,) = make_plan(session, make_group(session), [(first, last)])
        node, _ = make_node(session)
        leases.lease(session, node, max_leases=1)
        return node, seed_range.id


def group_of_range(range_id: int) -> int:
    from app.db import session_scope
    from app.models import SeedRange

    with session_scope() as session:
        return session.get(SeedRange, range_id).group_id


def accept(node, range_id: int, batch: dict, encoded: tuple | None = None) -> int:
    """The batch accepted for the range as the API accepts it, encoded as the edge posts it unless
    `encoded` (body, content type, content encoding) is given; its id."""
    from app.db import session_scope
    from app.services.ingest import accept as acceptance
    from edge.digest.batch import encode_batch

    body, content_type, content_encoding = encoded or encode_batch(batch)
    with session_scope() as session:
        return acceptance.accept_batch(
            session,
            node,
            range_id,
            batch_from=batch["first"],
            batch_to=batch["last"],
            body=body,
            content_type=content_type,
            content_encoding=content_encoding or "",
        ).batch_id


# Releases whose aggregates are not the sums of their rows (release chunks and files): what a
# repair would change. The store keeps it at 0.
RELEASES_OFF_THEIR_ROWS = """
    SELECT count(*) FROM releases r
      LEFT JOIN (SELECT group_id, release_key, sum(fragments) AS fragments, sum(bytes) AS bytes
                   FROM release_chunks GROUP BY 1, 2) c ON c.group_id = r.group_id AND c.release_key = r.key
      LEFT JOIN (SELECT group_id, release_key, count(*) AS files, sum(parts) AS parts
                   FROM files GROUP BY 1, 2) f ON f.group_id = r.group_id AND f.release_key = r.key
     WHERE r.parts_seen <> coalesce(c.fragments, 0) OR r.bytes <> coalesce(c.bytes, 0)
        OR r.files_seen <> coalesce(f.files, 0) OR r.parts_expected <> coalesce(f.parts, 0)"""

# Ranges whose counts are not what their stored batches hold: every article of what they cover
# is kept (a fragment, or dropped by a rule) or missing, once; the rule counts add up to the kept
# articles; no count is negative, and each rule count holds releases <= files <= fragments.
RANGES_OFF_THEIR_ROWS = """
    SELECT count(*) FROM seed_ranges s
     WHERE s.articles + s.missing <> s.next_id - s.first_id
        OR least(s.articles, s.missing, s.rejected, s.files, s.releases, s.dropped) < 0 OR s.releases > s.files
        OR s.articles <> s.dropped + (SELECT count(*) FROM fragments f WHERE f.group_id = s.group_id
                                         AND f.article BETWEEN s.first_id AND s.last_id)
        OR s.articles <> coalesce((SELECT sum(c.fragments) FROM rule_counts c WHERE c.range_id = s.id), 0)
        OR EXISTS (SELECT FROM rule_counts c WHERE c.range_id = s.id
                      AND NOT (0 <= c.releases AND c.releases <= c.files AND c.files <= c.fragments
                               AND 0 <= c.bytes))"""
