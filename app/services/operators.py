"""Operator keys: the credential of people and tools that see the whole seed (app.services.credentials
holds the policy they share with node tokens and API keys)."""

from __future__ import annotations

from sqlalchemy import select
from sqlalchemy.orm import Session

from app.models import OperatorKey
from app.services import credentials
from app.services.errors import Conflict


def create_key(session: Session, name: str) -> tuple[OperatorKey, str]:
    """A new key and its secret; the secret is returned once and only its hash is stored. A name
    is never given twice (a revoked key keeps its own)."""
    credentials.check_name(name, "an operator key name", "bad_operator_key_name")
    if session.scalar(select(OperatorKey.id).where(OperatorKey.name == name)) is not None:
        raise Conflict(f"operator key name already in use: {name}", code="operator_key_exists")
    secret = credentials.new_operator_key()
    key = OperatorKey(name=name, key_hash=credentials.hash_token(secret))
    session.add(key)
    session.flush()
    return key, secret


def list_keys(session: Session) -> list[OperatorKey]:
    return list(session.scalars(select(OperatorKey).order_by(OperatorKey.name)))


def revoke_key(session: Session, name: str) -> OperatorKey:
    """The key stops working at once; its row stays (credentials.revoke)."""
    return credentials.revoke(session, OperatorKey, name, what="operator key", code="unknown_operator_key")


def authenticate(session: Session, secret: str) -> OperatorKey | None:
    """The working operator key with this secret, or None (credentials.holder: found by hash,
    compared in constant time), its last use noted."""
    key = credentials.holder(session, OperatorKey, OperatorKey.key_hash, secret)
    if key is not None:
        credentials.note_use(session, OperatorKey.last_used_at, key.id)
    return key
