"""Node bearer tokens: random, shown once, stored as SHA-256, compared in constant time."""
from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_PREFIX = "seed_"


def new_token() -> str:
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def token_matches(token: str, stored_hash: bytes) -> bool:
    return hmac.compare_digest(hash_token(token), stored_hash)
