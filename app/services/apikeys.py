"""API keys: the credential of the catalog's users and their tools (search, NZB downloads)."""
from __future__ import annotations

from sqlalchemy import func, select, text, update
from sqlalchemy.orm import Session

from app.models import ApiKey
from app.services import tokens
from app.services.errors import Conflict, NotFound

# Told apart at a glance from node tokens (seed_) and operator keys (seedop_), so that a key
# pasted into the wrong tool is recognised.
API_KEY_PREFIX = "seedapi_"


def create_key(session: Session, name: str) -> tuple[ApiKey, str]:
    """A new key and its secret; the secret is returned once and only its hash is stored."""
    tokens.check_name(name, "an API key name", "bad_api_key_name")
    # A revoked key keeps its name: its counts stay readable under it, and a new key is not
    # mistaken for the old one in the list.
    if session.scalar(select(ApiKey.id).where(ApiKey.name == name)) is not None:
        raise Conflict(f"API key name already in use: {name}", code="api_key_exists")
    secret = tokens.new_token(API_KEY_PREFIX)
    key = ApiKey(name=name, key_hash=tokens.hash_token(secret))
    session.add(key)
    session.flush()
    return key, secret


def list_keys(session: Session) -> list[ApiKey]:
    return list(session.scalars(select(ApiKey).order_by(ApiKey.name)))


def revoke_key(session: Session, name: str) -> ApiKey:
    """The key stops working at once; its row stays with its counts. Revoking it again keeps the
    first revocation's time."""
    key = session.scalar(select(ApiKey).where(ApiKey.name == name).with_for_update())
    if key is None:
        raise NotFound(f"no such API key: {name}", code="unknown_api_key")
    if key.revoked_at is None:
        key.revoked_at = func.now()
        session.flush()
    return key


def holder(session: Session, presented_key: str) -> ApiKey | None:
    """The active API key with this secret, or None (tokens.holder: found by hash, compared in
    constant time)."""
    key = tokens.holder(session, ApiKey.key_hash, presented_key)
    if key is None or key.revoked_at is not None:
        return None
    return key


def record_use(session: Session, key_row: ApiKey, grab: bool) -> None:
    """Counts one request made with the key, and one NZB download when grab is true.

    The counts are added in the database, so concurrent requests with one key lose none. They are
    usage figures, not catalog data: the transaction's commit does not wait for the disk
    (synchronous_commit off), so a request does not wait a WAL flush for them, and a crash can lose
    the last fraction of a second of counts."""
    session.execute(text("SET LOCAL synchronous_commit = off"))
    session.execute(
        update(ApiKey)
        .where(ApiKey.id == key_row.id)
        .values(api_hits=ApiKey.api_hits + 1, grabs=ApiKey.grabs + (1 if grab else 0), last_used_at=func.now())
        .execution_options(synchronize_session="fetch")
    )
