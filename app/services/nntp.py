"""The data center's own NNTP connection (planning, spooling, `flask seed range`)."""
from __future__ import annotations

from app.config import Settings, get_settings
from edge.digest.nntp import NNTPClient, connect


def connect_from_settings(settings: Settings | None = None) -> NNTPClient:
    s = settings or get_settings()
    return connect(
        s.nntp_host, s.nntp_port, tls=s.nntp_ssl, cafile=s.nntp_cafile,
        user=s.nntp_user, password=s.nntp_password,
    )
