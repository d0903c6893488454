"""Who is looking at the web page: a login kept in a signed session cookie, or an API key given
with the request (``?apikey=``), and the cookie's signing key.

A login stores in the session what logged in (``operator`` or ``apikey``), the key's row id and
the first bytes of the key's stored hash, never the key: each request loads the row again, so a
revoked key (its ``revoked_at`` set: app.services.credentials) ends its sessions
at once, and a row id given anew after the tables were emptied does not match an old cookie. A
login lasts LOGIN_SECONDS.

The cookie is signed with ``app.secret_key`` when the app has one. Otherwise with a secret the
web processes share through Redis (SharedSecret): the first process that needs one stores 32
random bytes under SECRET_KEY_NAME with SET NX, and every process (each gunicorn worker is one)
reads that value, so a login made through one worker holds in the others and across restarts.
Each process looks again every SECRET_REFRESH_SECONDS, and at once (at most every
SECRET_RECHECK_SECONDS) when a cookie does not verify, and puts its value back if Redis lost it
(a Redis restarted empty), so the workers agree again; logins signed with a value given up are
asked again. While Redis cannot be reached, a process signs with a random secret of its own:
sessions then hold only within that process (another worker, or a restart, asks for a new
login) until Redis answers again.
"""

from __future__ import annotations

import hmac
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass

import redis
from flask import Flask, has_request_context, request, session
from flask.sessions import SecureCookieSessionInterface
from itsdangerous import BadSignature, URLSafeTimedSerializer
from sqlalchemy.orm import Session

from app.models import ApiKey, OperatorKey
from app.services import apikeys, operators
from app.services.credentials import API_KEY_PREFIX, MAX_CREDENTIAL_LENGTH, OPERATOR_KEY_PREFIX

log = logging.getLogger(__name__)

OPERATOR = "operator"
API_KEY = "apikey"
LOGIN_SECONDS = 12 * 3600
# Bytes of the key's stored SHA-256 kept in the session: enough that another key with the same
# row id (tables emptied and filled again) never passes for the one that logged in.
CHECK_BYTES = 8
SECRET_KEY_NAME = "usenet-seed:web:session-secret"
SECRET_BYTES = 32
SECRET_REFRESH_SECONDS = 60.0
SECRET_RECHECK_SECONDS = 1.0
REDIS_TIMEOUT_SECONDS = 2.0


@dataclass(frozen=True)
class Visitor:
    """Who makes the request. api_key is the row to count the request on (API-key visitors);
    from_url tells that the key came with the request (``?apikey=``), so that the page's links
    carry it on."""

    kind: str
    id: int
    name: str
    api_key: ApiKey | None = None
    from_url: bool = False

    @property
    def operator(self) -> bool:
        return self.kind == OPERATOR


class SharedSecret:
    """The session cookies' signing key, shared by the web processes through Redis (see the
    module's doc)."""

    def __init__(self, redis_url: str, refresh_seconds: float = SECRET_REFRESH_SECONDS):
        self.redis_url = redis_url
        self.refresh_seconds = refresh_seconds
        self._value: bytes | None = None
        self._looked = self._next_look = 0.0
        self._lock = threading.Lock()

    def current(self) -> bytes:
        with self._lock:
            if self._value is None or time.monotonic() >= self._next_look:
                return self._look()
            return self._value

    def look_again(self) -> bool:
        """Reads Redis again now (unless it was read within SECRET_RECHECK_SECONDS): whether the
        value changed, another process having stored another one."""
        with self._lock:
            if self._value is not None and time.monotonic() - self._looked < SECRET_RECHECK_SECONDS:
                return False
            before = self._value
            self._look()
            return self._value != before

    def _look(self) -> bytes:
        proposal = self._value or os.urandom(SECRET_BYTES)
        value = self._value = self._shared(proposal) or proposal
        self._looked = time.monotonic()
        self._next_look = self._looked + self.refresh_seconds
        return value

    def _shared(self, proposal: bytes) -> bytes | None:
        """The value in Redis, the proposal stored first when there is none; None when Redis
        cannot be asked."""
        try:
            client = redis.Redis.from_url(
                self.redis_url, socket_timeout=REDIS_TIMEOUT_SECONDS, socket_connect_timeout=REDIS_TIMEOUT_SECONDS
            )
            try:
                client.set(SECRET_KEY_NAME, proposal, nx=True)
                value = client.get(SECRET_KEY_NAME)
            finally:
                client.close()
        except (redis.RedisError, OSError) as exc:
            log.warning(
                "the web sessions' secret is not shared (Redis: %s): logins hold in this process only",
                exc.__class__.__name__,
            )
            return None
        # None when unset, else bytes (the client does not decode responses)
        if not isinstance(value, bytes) or len(value) < SECRET_BYTES:  # nobody of ours wrote it: not a secret to use
            log.warning(
                "the web sessions' secret in Redis (%s) is unusable: logins hold in this process only", SECRET_KEY_NAME
            )
            return None
        return value


class WebSessionInterface(SecureCookieSessionInterface):
    """Flask's signed-cookie sessions, signed with the app's secret key when it has one and else
    with the shared secret; the cookie is SameSite=Lax unless configured otherwise, and Secure on
    HTTPS requests. A request without a session cookie (every node and newznab client) opens an
    empty session without asking for the secret."""

    def __init__(self, secret: SharedSecret):
        self.secret = secret

    def get_signing_serializer(self, app: Flask) -> URLSafeTimedSerializer:
        if app.secret_key:
            serializer = super().get_signing_serializer(app)
            assert serializer is not None  # Flask's is None only for an app without a secret key
            return serializer
        return URLSafeTimedSerializer(
            self.secret.current(),
            salt=self.salt,
            serializer=self.serializer,
            signer_kwargs={"key_derivation": self.key_derivation, "digest_method": self.digest_method},
        )

    def open_session(self, app: Flask, request):
        value = request.cookies.get(self.get_cookie_name(app))
        if not value:
            return self.session_class()
        max_age = int(app.permanent_session_lifetime.total_seconds())
        try:
            return self.session_class(self.get_signing_serializer(app).loads(value, max_age=max_age))
        except BadSignature:
            # Signed by another process with a value this one has not seen yet (Redis lost the
            # secret, and another worker stored a new one): once more with Redis's value.
            if app.secret_key or not self.secret.look_again():
                return self.session_class()
        try:
            return self.session_class(self.get_signing_serializer(app).loads(value, max_age=max_age))
        except BadSignature:
            return self.session_class()

    def get_cookie_samesite(self, app: Flask) -> str | None:
        return app.config["SESSION_COOKIE_SAMESITE"] or "Lax"

    def get_cookie_secure(self, app: Flask) -> bool:
        return bool(app.config["SESSION_COOKIE_SECURE"]) or (has_request_context() and request.is_secure)


def install_sessions(app: Flask) -> None:
    """Sessions for the web page: WebSessionInterface, unless the app was given another kind."""
    if type(app.session_interface) is SecureCookieSessionInterface:
        app.session_interface = WebSessionInterface(SharedSecret(app.config["SETTINGS"].redis_url))


def csrf_token() -> str:
    """The session's token for the login form and the Log out button (made on first use)."""
    token = session.get("csrf")
    if not isinstance(token, str) or not token:
        token = session["csrf"] = secrets.token_urlsafe(32)
    return token


def csrf_matches(presented: str | None) -> bool:
    expected = session.get("csrf")
    return (
        isinstance(expected, str)
        and bool(expected)
        and isinstance(presented, str)
        and hmac.compare_digest(expected.encode(), presented.encode())
    )


def log_in(db: Session, presented: str) -> Visitor | None:
    """The visitor a key makes (an operator key, else an API key), remembered in the session, or
    None when the key is neither. The session starts afresh (a new CSRF token)."""
    presented = presented.strip()
    if not presented or len(presented) > MAX_CREDENTIAL_LENGTH:
        return None
    visitor, key_hash = None, b""
    if not presented.startswith(API_KEY_PREFIX):
        operator = operators.authenticate(db, presented)
        if operator is not None:
            visitor, key_hash = Visitor(OPERATOR, operator.id, operator.name), operator.key_hash
    if visitor is None and not presented.startswith(OPERATOR_KEY_PREFIX):
        key = apikeys.holder(db, presented)
        if key is not None:
            visitor, key_hash = Visitor(API_KEY, key.id, key.name, api_key=key), key.key_hash
    if visitor is None:
        return None
    session.clear()
    session["who"] = {
        "kind": visitor.kind,
        "id": visitor.id,
        "check": key_hash[:CHECK_BYTES].hex(),
        "at": int(time.time()),
    }
    csrf_token()
    return visitor


def log_out() -> None:
    session.clear()


def url_key_visitor(db: Session, presented: str) -> Visitor | None:
    """The visitor of an API key given with the request, or None when it is not an active one."""
    key = apikeys.holder(db, presented.strip())
    return None if key is None else Visitor(API_KEY, key.id, key.name, api_key=key, from_url=True)


def session_visitor(db: Session) -> Visitor | None:
    """The visitor of the session's login, or None (no login, an expired one, a key revoked since)."""
    who = session.get("who")
    if not isinstance(who, dict):
        return None
    kind, row_id, check, at = who.get("kind"), who.get("id"), who.get("check"), who.get("at")
    if not (isinstance(row_id, int) and isinstance(check, str) and isinstance(at, int)):
        return None
    if not 0 <= time.time() - at <= LOGIN_SECONDS or not -(2**31) <= row_id < 2**31:
        return None
    if kind == OPERATOR:
        operator = db.get(OperatorKey, row_id)
        if operator is None or operator.revoked_at is not None:
            return None
        visitor, key_hash = Visitor(OPERATOR, operator.id, operator.name), operator.key_hash
    elif kind == API_KEY:
        key = db.get(ApiKey, row_id)
        if key is None or key.revoked_at is not None:
            return None
        visitor, key_hash = Visitor(API_KEY, key.id, key.name, api_key=key), key.key_hash
    else:
        return None
    if not hmac.compare_digest(key_hash[:CHECK_BYTES].hex(), check):
        return None
    return visitor
