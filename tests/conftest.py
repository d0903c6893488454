"""Test harness: real PostgreSQL, Redis, Celery workers and INN 2, started once per session.

Each service lives in its own plugin module under tests/fixtures/; a service starts only when
a test asks for it, and every test that asks is marked `services` (tests/fixtures/services.py),
so that `pytest -m "not services"` runs the rest without any.
"""

pytest_plugins = [
    "tests.fixtures.services",
    "tests.fixtures.postgres",
    "tests.fixtures.redis",
    "tests.fixtures.app",
    "tests.fixtures.api_server",
    "tests.fixtures.inn",
]
