"""Edge nodes and their tokens."""
from __future__ import annotations

import re

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.models import SeedNode
from app.services import tokens
from app.services.errors import Conflict, NotFound, ServiceError

_NODE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,63}$")


def validate_node_name(name: str) -> str:
    if not _NODE_NAME.match(name):
        raise ServiceError(
            f"not a node name: {name!r} (letters, digits, '.', '_', '-'; at most 64)",
            code="bad_node_name",
        )
    return name


def create_node(session: Session, name: str) -> tuple[SeedNode, str]:
    """A new node and its token; the token is returned once and only its hash is stored."""
    validate_node_name(name)
    if session.scalar(select(SeedNode.id).where(SeedNode.name == name)) is not None:
        raise Conflict(f"node already exists: {name}", code="node_exists")
    token = tokens.new_token()
    node = SeedNode(name=name, token_hash=tokens.hash_token(token))
    session.add(node)
    session.flush()
    return node, token


def get_node(session: Session, name: str) -> SeedNode:
    node = session.scalar(select(SeedNode).where(SeedNode.name == name))
    if node is None:
        raise NotFound(f"no such node: {name}", code="unknown_node")
    return node


def list_nodes(session: Session) -> list[SeedNode]:
    return list(session.scalars(select(SeedNode).order_by(SeedNode.name)))


def set_enabled(session: Session, name: str, enabled: bool) -> SeedNode:
    node = get_node(session, name)
    node.enabled = enabled
    return node


def rotate_token(session: Session, name: str) -> tuple[SeedNode, str]:
    node = get_node(session, name)
    token = tokens.new_token()
    node.token_hash = tokens.hash_token(token)
    node.token_rotated_at = func.now()
    return node, token


def authenticate(session: Session, token: str) -> SeedNode | None:
    """The enabled node holding this token, or None.

    The look-up is by the token's hash (unique index); the stored hash is then compared in
    constant time, so timing tells nothing about how much of a guess was right.
    """
    if not token or len(token) > 256:
        return None
    digest = tokens.hash_token(token)
    node = session.scalar(select(SeedNode).where(SeedNode.token_hash == digest))
    if node is None or not tokens.token_matches(token, node.token_hash) or not node.enabled:
        return None
    return node
