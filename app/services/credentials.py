"""Credentials: node tokens, operator keys and API keys, under one policy.

- A secret is random (32 bytes, URL-safe) behind a prefix that says its kind (`seed_` a node's
  token, `seedop_` an operator key, `seedapi_` an API key, so that one pasted in the wrong place
  is recognised at a glance), shown once; only its SHA-256 is kept, the row is found by it and
  the hash compared in constant time (`holder`).
- Its holder's name is what a person types and a table shows (letters, digits, '.', '_', '-', at
  most 64), and is never given to another: a revoked credential keeps its row.
- Revoking stops a credential at once and keeps its row, with when it was made and last used
  (and an API key's counts): an operator or API key gets `revoked_at` (`revoke`); a node is
  disabled, which enabling undoes, or its token replaced (the old secret stops at once).
- Its last use is written when it is used, at most once in LAST_USE_SECONDS: a node's call and an
  operator's look stay reads most of the time. An API key's use is counted at each request for
  its limits anyway, and its last use with it.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import datetime
from typing import Any, TypeVar, cast

from sqlalchemy import Select, bindparam, func, or_, select, text, update
from sqlalchemy.orm import InstrumentedAttribute, Session

from app.models import ApiKey, OperatorKey
from app.models.credentials import RevocableCredential
from app.services.errors import NotFound, ServiceError

TOKEN_PREFIX = "seed_"
OPERATOR_KEY_PREFIX = "seedop_"
API_KEY_PREFIX = "seedapi_"
# Longer than any credential made here: a longer one is refused before it is hashed.
MAX_CREDENTIAL_LENGTH = 256
# What a person types and a table shows, for nodes and keys alike.
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-]{0,63}$")
# A credential's last use is written at most once in this many seconds.
LAST_USE_SECONDS = 10
LAST_USE_INTERVAL_SQL = f"interval '{LAST_USE_SECONDS} seconds'"

# A model holding credentials by their hash (SeedNode, OperatorKey, ApiKey).
_Holder = TypeVar("_Holder")
# A key revoked by keeping its row (revoked_at).
_Revocable = TypeVar("_Revocable", OperatorKey, ApiKey)


def new_token(prefix: str = TOKEN_PREFIX) -> str:
    return prefix + secrets.token_urlsafe(32)


def new_operator_key() -> str:
    return new_token(OPERATOR_KEY_PREFIX)


def new_api_key() -> str:
    return new_token(API_KEY_PREFIX)


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def token_matches(token: str, stored_hash: bytes) -> bool:
    return hmac.compare_digest(hash_token(token), stored_hash)


def check_name(name: str, what: str, code: str) -> str:
    """The name of a credential's holder (a node, a key), or a ServiceError saying why not."""
    if not _NAME.match(name):
        raise ServiceError(f"not {what}: {name!r} (letters, digits, '.', '_', '-'; at most 64)", code=code)
    return name


def holder(
    session: Session, model: type[_Holder], hash_column: InstrumentedAttribute[bytes], token: str
) -> _Holder | None:
    """The row of model whose hash_column (a column of model) holds this credential's hash, or None
    (None too for a revoked key).

    The look-up is by the credential's hash (unique index); the stored hash is then compared in
    constant time, so timing tells nothing about how much of a guess was right.
    """
    if not token or len(token) > MAX_CREDENTIAL_LENGTH:
        return None
    found = session.scalar(_by_hash(model, hash_column.key), {"credential_hash": hash_token(token)})
    row = cast("_Holder | None", found)
    if row is None or not token_matches(token, getattr(row, hash_column.key)):
        return None
    if isinstance(row, RevocableCredential) and row.revoked_at is not None:  # a revoked key is no one's
        return None
    return row


# The look-up of a holder by its hash, built once a model: every API call makes one, and building
# the statement cost as much CPU as running it.
_BY_HASH: dict[tuple[type, str], Select[Any]] = {}


def _by_hash(model: type, column: str) -> Select[Any]:
    statement = _BY_HASH.get((model, column))
    if statement is None:
        statement = _BY_HASH[model, column] = select(model).where(
            getattr(model, column) == bindparam("credential_hash")
        )
    return statement


def revoke(session: Session, model: type[_Revocable], name: str, *, what: str, code: str) -> _Revocable:
    """The key of that name stops working at once; its row stays (a revoked key keeps its name,
    its times and counts). Revoking it again keeps the first revocation's time. NotFound (`code`)
    for no such key."""
    key = session.scalar(select(model).where(model.name == name).with_for_update())
    if key is None:
        raise NotFound(f"no such {what}: {name}", code=code)
    if key.revoked_at is None:
        key.revoked_at = func.now()
        session.flush()
    return key


def note_use(session: Session, column: InstrumentedAttribute[datetime | None], row_id: int) -> None:
    """The holder's last use (`column`, of a model with an integer `id`) set to now, unless it was
    written less than LAST_USE_SECONDS ago."""
    model = column.class_
    session.execute(
        update(model)
        .where(model.id == row_id, or_(column.is_(None), column < func.now() - text(LAST_USE_INTERVAL_SQL)))
        .values({column: func.now()})
    )
