"""Operator keys: the credential of people and tools that see the whole seed."""
from __future__ import annotations

import re

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.models import OperatorKey
from app.services import tokens
from app.services.errors import Conflict, NotFound, ServiceError

# Named like a node: what a person types and a table shows.
_KEY_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,63}$")


def create_key(session: Session, name: str) -> tuple[OperatorKey, str]:
    """A new key and its secret; the secret is returned once and only its hash is stored."""
    if not _KEY_NAME.match(name):
        raise ServiceError(f"not an operator key name: {name!r} (letters, digits, '.', '_', '-'; at most 64)",
                           code="bad_operator_key_name")
    if session.scalar(select(OperatorKey.id).where(OperatorKey.name == name)) is not None:
        raise Conflict(f"operator key already exists: {name}", code="operator_key_exists")
    secret = tokens.new_operator_key()
    key = OperatorKey(name=name, key_hash=tokens.hash_token(secret))
    session.add(key)
    session.flush()
    return key, secret


def list_keys(session: Session) -> list[OperatorKey]:
    return list(session.scalars(select(OperatorKey).order_by(OperatorKey.name)))


def revoke_key(session: Session, name: str) -> None:
    """The key stops working at once: its row is deleted."""
    key = session.scalar(select(OperatorKey).where(OperatorKey.name == name))
    if key is None:
        raise NotFound(f"no such operator key: {name}", code="unknown_operator_key")
    session.delete(key)


def authenticate(session: Session, secret: str) -> OperatorKey | None:
    """The operator key with this secret, or None.

    The look-up is by the secret's hash (unique index); the stored hash is then compared in
    constant time, so timing tells nothing about how much of a guess was right.
    """
    if not secret or len(secret) > tokens.MAX_CREDENTIAL_LENGTH:
        return None
    key = session.scalar(select(OperatorKey).where(OperatorKey.key_hash == tokens.hash_token(secret)))
    if key is None or not tokens.token_matches(secret, key.key_hash):
        return None
    # Last use, written at most once a minute per key.
    session.execute(
        text("UPDATE operator_keys SET last_used_at = now() WHERE id = :id"
             " AND (last_used_at IS NULL OR last_used_at < now() - interval '1 minute')"),
        {"id": key.id},
    )
    return key
