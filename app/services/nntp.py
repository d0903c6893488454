"""The data center's own NNTP connection (planning, spooling, `flask seed range`)."""

from __future__ import annotations

from app.config import Settings, get_settings
from edge.digest.nntp import NNTPClient


def connect_from_settings(settings: Settings | None = None) -> NNTPClient:
    """A ready connection to the Usenet server of the settings (the process's by default)."""
    return (settings or get_settings()).nntp.connect()
