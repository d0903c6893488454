"""Fixtures shared by the data center's test modules."""
from tests.app.test_batch_bounds import leased  # noqa: F401 (a range leased by a node, one batch of it stored)
