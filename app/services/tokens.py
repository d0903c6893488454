"""Bearer credentials (node tokens, operator keys): random, shown once, stored as SHA-256,
compared in constant time."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from typing import TypeVar

from sqlalchemy import select
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.services.errors import ServiceError

TOKEN_PREFIX = "seed_"
# A key says what it is, so that one pasted in the wrong place is recognised at a glance.
OPERATOR_KEY_PREFIX = "seedop_"
# Longer than any credential made here: a longer one is refused before it is hashed.
MAX_CREDENTIAL_LENGTH = 256
# What a person types and a table shows, for nodes and operator keys alike.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,63}$")

# A model holding credentials by their hash (SeedNode, OperatorKey, ApiKey).
_Holder = TypeVar("_Holder")


def new_token(prefix: str = TOKEN_PREFIX) -> str:
    return prefix + secrets.token_urlsafe(32)


def new_operator_key() -> str:
    return new_token(OPERATOR_KEY_PREFIX)


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def token_matches(token: str, stored_hash: bytes) -> bool:
    return hmac.compare_digest(hash_token(token), stored_hash)


def check_name(name: str, what: str, code: str) -> str:
    """The name of a credential's holder (a node, an operator key), or a ServiceError saying why not."""
    if not _NAME.match(name):
        raise ServiceError(f"not {what}: {name!r} (letters, digits, '.', '_', '-'; at most 64)", code=code)
    return name


def holder(
    session: Session, model: type[_Holder], hash_column: InstrumentedAttribute[bytes], token: str
) -> _Holder | None:
    """The row of model whose hash_column (a column of model) holds this credential's hash, or None.

    The look-up is by the credential's hash (unique index); the stored hash is then compared in
    constant time, so timing tells nothing about how much of a guess was right.
    """
    if not token or len(token) > MAX_CREDENTIAL_LENGTH:
        return None
    row = session.scalar(select(model).where(hash_column == hash_token(token)))
    if row is None or not token_matches(token, getattr(row, hash_column.key)):
        return None
    return row
