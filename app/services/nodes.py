"""Edge nodes and their credentials."""

from __future__ import annotations

from typing import Any

import psycopg
from psycopg.rows import dict_row
from sqlalchemy import func, select, text
from sqlalchemy.orm import Session

from app.db import UNFLUSHED_SQL, driver_sql
from app.models import SeedNode, SeedRange
from app.services import credentials, leases
from app.services.ingest import backlog
from app.services.errors import Conflict, NotFound


def validate_node_name(name: str) -> str:
    return credentials.check_name(name, "a node name", "bad_node_name")


def create_node(session: Session, name: str) -> tuple[SeedNode, str]:
    """A new node and its token; the token is returned once and only its hash is stored."""
    validate_node_name(name)
    if session.scalar(select(SeedNode.id).where(SeedNode.name == name)) is not None:
        raise Conflict(f"node already exists: {name}", code="node_exists")
    token = credentials.new_token()
    node = SeedNode(name=name, token_hash=credentials.hash_token(token))
    session.add(node)
    session.flush()
    return node, token


def get_node(session: Session, name: str, *, lock: bool = False) -> SeedNode:
    query = select(SeedNode).where(SeedNode.name == validate_node_name(name))
    node = session.scalar(query.with_for_update() if lock else query)
    if node is None:
        raise NotFound(f"no such node: {name}", code="unknown_node")
    return node


def list_nodes(session: Session) -> list[SeedNode]:
    return list(session.scalars(select(SeedNode).order_by(SeedNode.name)))


def set_enabled(session: Session, name: str, enabled: bool) -> tuple[SeedNode, bool]:
    """Enable or disable the node; (the node, whether it changed)."""
    node = get_node(session, name, lock=True)
    changed = node.enabled != enabled
    node.enabled = enabled
    session.flush()
    return node, changed


def delete_node(session: Session, name: str) -> tuple[SeedNode, list[int]]:
    """Delete the node; (the node as it was, the ids of the ranges it held).

    Its leased ranges are given back first, as if it had released them (planned, the next node
    resuming at their next_id, or done when every batch was in): a range's holder is cleared by the foreign key on delete, but a leased range
    must have one. Its batches stay, without their node (the batches' key is ON DELETE SET NULL).
    The node's row is locked first, so that it takes no new lease meanwhile (a lease locks it too)."""
    node = get_node(session, name, lock=True)
    held = session.scalars(
        select(SeedRange.id).where(SeedRange.node_id == node.id, SeedRange.status == "leased").order_by(SeedRange.id)
    ).all()
    released = []
    for range_id in held:
        try:
            leases.release(session, node, range_id)
        except (leases.NotYourLease, NotFound):
            continue  # it expired and passed on, or its group was removed, meanwhile
        released.append(range_id)
    session.delete(node)
    session.flush()
    return node, released


def rotate_token(session: Session, name: str) -> tuple[SeedNode, str]:
    node = get_node(session, name)
    token = credentials.new_token()
    node.token_hash = credentials.hash_token(token)
    node.token_rotated_at = func.now()
    return node, token


# A node found by its token's hash, its last contact noted (at most once in
# credentials.LAST_USE_SECONDS, to keep the hot path cheap) in the same statement, and the batches
# waiting for the workers counted up to :bound (0: not counted; a batch's call refuses itself when
# the data center is behind: app.services.ingest.backlog): one round trip, outside any
# transaction; its commit does not wait for the WAL flush (a last contact lost in a crash is
# noted again by the next call).
NODE_BY_TOKEN = text(f"""
    WITH found AS (SELECT id, name, enabled, token_hash, token_rotated_at, last_seen_at,
                          {UNFLUSHED_SQL} AS unflushed
                     FROM seed_nodes WHERE token_hash = :hash),
         seen AS (UPDATE seed_nodes n SET last_seen_at = now() FROM found f
                   WHERE n.id = f.id AND f.enabled
                     AND (f.last_seen_at IS NULL OR f.last_seen_at < now() - {credentials.LAST_USE_INTERVAL_SQL}))
    SELECT id, name, enabled, token_hash, token_rotated_at, last_seen_at, ({backlog.WAITING_SQL}) AS waiting
      FROM found
""")


def authenticate_call(
    connection: psycopg.Connection[Any], token: str, backlog_bound: int = 0
) -> tuple[SeedNode, int] | None:
    """The enabled node holding this token, or None, for a call of the node API: found by the
    token's hash, compared in constant time, its last contact noted; on psycopg's connection in
    autocommit (app.db.autocommit_driver_connection: one round trip, and psycopg's own execution,
    as every node call makes it). With it, the batches waiting for the workers, counted up to
    `backlog_bound` (0: not counted). The node returned is not attached to a session: its columns
    are read."""
    if not token or len(token) > credentials.MAX_CREDENTIAL_LENGTH:
        return None
    columns = (
        connection.cursor(row_factory=dict_row)
        .execute(driver_sql(NODE_BY_TOKEN.text), {"hash": credentials.hash_token(token), "bound": backlog_bound})
        .fetchone()
    )
    if columns is None or not credentials.token_matches(token, columns["token_hash"]) or not columns["enabled"]:
        return None
    waiting: int = columns.pop("waiting")
    return SeedNode(**columns), waiting


def authenticate(session: Session, token: str) -> SeedNode | None:
    """The enabled node holding this token, or None (credentials.holder: found by hash, compared in
    constant time)."""
    node = credentials.holder(session, SeedNode, SeedNode.token_hash, token)
    return node if node is not None and node.enabled else None
