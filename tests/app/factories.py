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
            session, node, range_id, batch_from=batch["first"], batch_to=batch["last"], body=body,
            content_type=content_type, content_encoding=content_encoding or "").batch_id
