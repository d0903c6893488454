"""Newsgroups the seed covers."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from graphlib import CycleError, TopologicalSorter

from sqlalchemy import select, text
from sqlalchemy.dialects.postgresql import insert
from sqlalchemy.orm import Session

from app.db import ensure_group_partitions
from app.models import Group, SeedBatch, SeedRange
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
    rows = (
        session.execute(insert(Group).values([{"name": n} for n in cleaned]).on_conflict_do_nothing().returning(Group))
        .scalars()
        .all()
    )
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


def set_active(session: Session, name: str, active: bool) -> tuple[Group, bool]:
    """Enable or disable a group; (the group, whether it changed). Planning and leasing read the
    flag, so a disabled group is neither planned nor leased from the next plan or lease on; ranges
    already leased run to their end."""
    group = session.scalar(select(Group).where(Group.name == validate_group_name(name)).with_for_update())
    if group is None:
        raise NotFound(f"no such group: {name}", code="unknown_group")
    changed = group.active != active
    group.active = active
    session.flush()
    return group, changed


def leased_ranges(session: Session, group_id: int) -> list[int]:
    return list(
        session.scalars(
            select(SeedRange.id)
            .where(SeedRange.group_id == group_id, SeedRange.status == "leased")
            .order_by(SeedRange.id)
        )
    )


# Removing a group: every row of it goes, in every table that has one, including tables added
# after this code. The tables are read from the database's catalog rather than from the models,
# so a new table is covered as soon as its migration runs:
#  - every table (plain or partitioned, not a partition, not a view) with a group_id column;
#  - every table whose foreign key points at rows of those (or at the group's own row) and would
#    go with them or stop them going (ON DELETE CASCADE, NO ACTION, RESTRICT), recursively;
#    rows whose key is set to NULL or a default (ON DELETE SET NULL) stay.
# A partitioned table's partition for the group alone (FOR VALUES IN (id)) is dropped instead of
# deleted from: one catalog change rather than a delete of every row of a big group.

_GROUP_ID_TABLES = text(
    "SELECT c.relname::text AS name, c.relkind = 'p' AS partitioned FROM pg_class c"
    " JOIN pg_namespace n ON n.oid = c.relnamespace"
    " JOIN pg_attribute a ON a.attrelid = c.oid AND a.attname = 'group_id' AND NOT a.attisdropped"
    " WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'p') AND NOT c.relispartition"
    " ORDER BY c.relname"
)

# Foreign keys between tables of the schema, each once (a partitioned table's key, not its copies
# on the partitions: conparentid = 0), with their columns in key order.
_FOREIGN_KEYS = text(
    "SELECT child.relname::text AS child, parent.relname::text AS parent, con.confdeltype::text AS on_delete,"
    "  ARRAY(SELECT a.attname::text FROM unnest(con.conkey) WITH ORDINALITY AS k(num, i)"
    "        JOIN pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.num ORDER BY k.i) AS child_columns,"
    "  ARRAY(SELECT a.attname::text FROM unnest(con.confkey) WITH ORDINALITY AS k(num, i)"
    "        JOIN pg_attribute a ON a.attrelid = con.confrelid AND a.attnum = k.num ORDER BY k.i) AS parent_columns"
    " FROM pg_constraint con"
    " JOIN pg_class child ON child.oid = con.conrelid"
    " JOIN pg_class parent ON parent.oid = con.confrelid"
    " JOIN pg_namespace n ON n.oid = child.relnamespace"
    " WHERE con.contype = 'f' AND con.conparentid = 0 AND n.nspname = current_schema()"
    " AND NOT child.relispartition AND child.relkind IN ('r', 'p')"
    " ORDER BY child.relname, con.conname"
)

# The partition of a partitioned table that holds exactly one group.
_GROUP_PARTITION = text(
    "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
    " JOIN pg_class p ON p.oid = i.inhparent JOIN pg_namespace n ON n.oid = p.relnamespace"
    " WHERE n.nspname = current_schema() AND p.relname = :parent"
    " AND pg_get_expr(c.relpartbound, c.oid) = :bound"
)

# ON DELETE actions that take the referring rows along or stop the delete: those rows are the group's too.
_FOLLOWED = {"c", "a", "r"}  # CASCADE, NO ACTION, RESTRICT

# How long the removal waits for a lock (a batch of the group being stored, the catalog's tables
# for the partitions' drop) before it gives up and says to try again; all of it is undone then.
REMOVAL_LOCK_TIMEOUT = "30s"


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


@dataclass
class GroupRemoval:
    """What removing a group deletes: rows per table (the group's own row under "groups"), the
    partitions dropped, and the ranges nodes hold leases on."""

    group: str
    group_id: int
    counts: dict[str, int]
    partitions: dict[str, list[str]]  # partitioned table -> the group's partitions of it
    leased_ranges: list[int]
    removed: bool = False
    # How to delete: each table's condition for the group's rows, the tables in a safe order
    # (children first), the partitioned ones, and the tables whose keys point at others of these.
    _scopes: dict[str, str] = field(default_factory=dict, repr=False)
    _order: list[str] = field(default_factory=list, repr=False)
    _partitioned: set[str] = field(default_factory=set, repr=False)
    _referring: set[str] = field(default_factory=set, repr=False)

    @property
    def rows(self) -> int:
        return sum(self.counts.values())

    def as_dict(self) -> dict[str, object]:
        return {
            "group": self.group,
            "id": self.group_id,
            "removed": self.removed,
            "rows": self.rows,
            "counts": dict(self.counts),
            "partitions": sorted(p for ps in self.partitions.values() for p in ps),
            "leased_ranges": list(self.leased_ranges),
        }


def _removal(session: Session, group: Group) -> GroupRemoval:
    """Which rows of which tables are the group's, and how many (read in the session's transaction)."""
    partitioned = set()
    # Each table's rows of the group, as a condition on the table (parameter :g, the group's id).
    scopes: dict[str, str] = {"groups": "id = :g"}
    for name, is_partitioned in session.execute(_GROUP_ID_TABLES):
        scopes[name] = "group_id = :g"
        if is_partitioned:
            partitioned.add(name)
    keys = session.execute(_FOREIGN_KEYS).all()
    # Tables without a group_id column whose rows hang on the group's rows by a foreign key.
    added = True
    while added:
        added = False
        for key in keys:
            if key.child in scopes or key.parent not in scopes or key.on_delete not in _FOLLOWED:
                continue
            columns = ", ".join(map(_ident, key.child_columns))
            parent_columns = ", ".join(map(_ident, key.parent_columns))
            scopes[key.child] = (
                f"({columns}) IN (SELECT {parent_columns} FROM {_ident(key.parent)} WHERE {scopes[key.parent]})"
            )
            added = True
    # Children before their parents, so that no key stops a delete whatever its ON DELETE says.
    graph = TopologicalSorter({table: set() for table in scopes})
    for key in keys:
        if key.child in scopes and key.parent in scopes and key.child != key.parent:
            graph.add(key.parent, key.child)
    try:
        order = list(graph.static_order())
    except CycleError:
        order = sorted(scopes, key=lambda t: t == "groups")  # the cascades take care of a cycle
    counts = {
        table: session.execute(
            text(f"SELECT count(*) FROM {_ident(table)} WHERE {scopes[table]}"), {"g": group.id}
        ).scalar_one()
        for table in sorted(scopes)
    }
    bound = f"FOR VALUES IN ({int(group.id)})"
    partitions = {
        table: list(session.scalars(_GROUP_PARTITION, {"parent": table, "bound": bound}))
        for table in sorted(partitioned)
    }
    referring = {key.child for key in keys if key.child in scopes and key.parent in scopes}
    return GroupRemoval(
        group=group.name,
        group_id=group.id,
        counts=counts,
        partitions=partitions,
        leased_ranges=leased_ranges(session, group.id),
        _scopes=scopes,
        _order=order,
        _partitioned=partitioned,
        _referring=referring,
    )


def removal_preview(session: Session, name: str) -> GroupRemoval:
    """What removing the group would delete now; nothing is changed or locked."""
    return _removal(session, get_group(session, name))


def remove_group(session: Session, name: str, *, force: bool = False) -> GroupRemoval:
    """Delete the group and every row of it, in the session's transaction (all or nothing).

    Refused while nodes hold leases on its ranges, unless `force` (their next call is refused as
    for a range that does not exist). The group's batches, then its ranges, are locked first, in
    the order the store takes them, so that a batch being stored finishes before its rows go, and
    no range of the group is leased meanwhile. The partitions are dropped last: dropping one locks
    its whole table for a moment."""
    session.execute(text(f"SET LOCAL lock_timeout = '{REMOVAL_LOCK_TIMEOUT}'"))
    group = session.scalar(select(Group).where(Group.name == validate_group_name(name)).with_for_update())
    if group is None:
        raise NotFound(f"no such group: {name}", code="unknown_group")
    ranges = select(SeedRange.id).where(SeedRange.group_id == group.id)
    session.execute(select(SeedBatch.id).where(SeedBatch.range_id.in_(ranges)).with_for_update())
    session.execute(ranges.with_for_update())
    removal = _removal(session, group)
    if removal.leased_ranges and not force:
        raise Conflict(leased_message(removal), code="group_leased")
    # A partitioned table that refers to none of the group's rows is dropped from last.
    last = [t for t in removal._order if t in removal._partitioned and t not in removal._referring]
    for table in [t for t in removal._order if t not in last] + last:
        if table in removal._partitioned:
            for partition in removal.partitions.get(table, ()):
                session.execute(text(f"DROP TABLE {_ident(partition)}"))
        # Partitioned: rows of the group in some other partition (a default one), if any.
        session.execute(text(f"DELETE FROM {_ident(table)} WHERE {removal._scopes[table]}"), {"g": group.id})
    removal.removed = True
    return removal


def leased_message(removal: GroupRemoval) -> str:
    ids = ", ".join(map(str, removal.leased_ranges[:10])) + (", ..." if len(removal.leased_ranges) > 10 else "")
    return (
        f"group {removal.group} has {len(removal.leased_ranges)} leased ranges ({ids}): nodes are fetching"
        " them; wait for them, or remove it anyway with --force"
    )
