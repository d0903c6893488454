"""Edge nodes and their tokens."""
from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from app.models import SeedNode
from app.services import tokens
from app.services.errors import Conflict, NotFound

def validate_node_name(name: str) -> str:
    return tokens.check_name(name, "a node name", "bad_node_name")


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
    """The enabled node holding this token, or None (tokens.holder: found by hash, compared in
    constant time)."""
    node = tokens.holder(session, SeedNode.token_hash, token)
    return node if node is not None and node.enabled else None
