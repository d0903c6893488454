"""Fixtures shared by the data center's test modules."""

import pytest

from app.db import session_scope
from app.services import operators

from tests.app.test_batch_bounds import leased  # noqa: F401 (a range leased by a node, one batch of it stored)


@pytest.fixture
def operator_key(clean_db) -> str:
    """An operator key (a Prometheus scraper's): /metrics and the whole status over the API."""
    with session_scope() as s:
        return operators.create_key(s, "prometheus")[1]
