"""Operator keys: the credential of people and tools that see the whole seed."""

from __future__ import annotations

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.models import OperatorKey
from app.services import tokens
from app.services.errors import Conflict, NotFound


def create_key(session: Session, name: str) -> tuple[OperatorKey, str]:
    """A new key and its secret; the secret is returned once and only its hash is stored."""
    tokens.check_name(name, "an operator key name", "bad_operator_key_name")
    if session.scalar(select(OperatorKey.id).where(OperatorKey.name == name)) is not None:
        raise Conflict(f"operator key already exists: {name}", code="operator_key_exists")
    secret = tokens.new_operator_key()
    key = OperatorKey(name=name, key_hash=tokens.hash_token(secret))
    session.add(key)
    session.flush()
    return key, secret


def list_keys(session: Session) -> list[OperatorKey]:
    return list(session.scalars(select(OperatorKey).order_by(OperatorKey.name)))


def revoke_key(session: Session, name: str) -> OperatorKey:
    """The key stops working at once: its row is deleted (and returned as it was)."""
    key = session.scalar(select(OperatorKey).where(OperatorKey.name == name).with_for_update())
    if key is None:
        raise NotFound(f"no such operator key: {name}", code="unknown_operator_key")
    session.delete(key)
    session.flush()
    return key


def authenticate(session: Session, secret: str) -> OperatorKey | None:
    """The operator key with this secret, or None (tokens.holder: found by hash, compared in
    constant time)."""
    key = tokens.holder(session, OperatorKey, OperatorKey.key_hash, secret)
    if key is None:
        return None
    # Last use, written at most once a minute per key.
    session.execute(
        text(
            "UPDATE operator_keys SET last_used_at = now() WHERE id = :id"
            " AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')"
        ),
        {"id": key.id},
    )
    return key
