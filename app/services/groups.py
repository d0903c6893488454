"""Newsgroups the seed covers."""
from __future__ import annotations

import re

from sqlalchemy import select
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from app.db import ensure_group_partitions
from app.models import Group
from app.services.errors import Conflict, NotFound, ServiceError

# RFC 3977 newsgroup names: printable, no whitespace, no wildcards or commas.
_GROUP_NAME = re.compile(r"^[a-z0-9][a-z0-9+_\-]*(\.[a-z0-9+_\-]+)*$")


def validate_group_name(name: str) -> str:
    cleaned = name.strip().lower()
    if not cleaned or len(cleaned) > 255 or not _GROUP_NAME.match(cleaned):
        raise ServiceError(f"not a newsgroup name: {name!r}", code="bad_group_name")
    return cleaned


def add_groups(session: Session, names: list[str]) -> list[Group]:
    """Add groups (with their partitions); refuses the whole call if any already exists."""
    cleaned = [validate_group_name(n) for n in names]
    if len(set(cleaned)) != len(cleaned):
        raise ServiceError("a group name is given twice", code="duplicate_group")
    existing = session.scalars(select(Group.name).where(Group.name.in_(cleaned))).all()
    if existing:
        raise Conflict(f"group already exists: {', '.join(sorted(existing))}", code="group_exists")
    rows = session.execute(
        insert(Group).values([{"name": n} for n in cleaned]).on_conflict_do_nothing().returning(Group)
    ).scalars().all()
    if len(rows) != len(cleaned):
        raise Conflict("a group was added concurrently; try again", code="group_exists")
    for group in rows:
        ensure_group_partitions(session, group.id)
    return sorted(rows, key=lambda g: cleaned.index(g.name))


def list_groups(session: Session) -> list[Group]:
    return list(session.scalars(select(Group).order_by(Group.name)))


def get_group(session: Session, name: str) -> Group:
    group = session.scalar(select(Group).where(Group.name == validate_group_name(name)))
    if group is None:
        raise NotFound(f"no such group: {name}", code="unknown_group")
    return group
