"""Bearer credentials (node tokens, operator keys): random, shown once, stored as SHA-256,
compared in constant time."""
from __future__ import annotations

import hashlib
import hmac
import secrets

TOKEN_PREFIX = "seed_"
# A key says what it is, so that one pasted in the wrong place is recognised at a glance.
OPERATOR_KEY_PREFIX = "seedop_"
# Longer than any credential made here: a longer one is refused before it is hashed.
MAX_CREDENTIAL_LENGTH = 256


def new_token(prefix: str = TOKEN_PREFIX) -> str:
    return prefix + secrets.token_urlsafe(32)


def new_operator_key() -> str:
    return new_token(OPERATOR_KEY_PREFIX)


def hash_token(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8")).digest()


def token_matches(token: str, stored_hash: bytes) -> bool:
    return hmac.compare_digest(hash_token(token), stored_hash)
