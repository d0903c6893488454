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
