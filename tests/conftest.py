"""Test harness: real PostgreSQL, Redis, Celery workers and INN 2, started once per session.

Each service lives in its own plugin module under tests/fixtures/; a service starts only when
a test asks for it.
"""
pytest_plugins = [
    "tests.fixtures.postgres",
    "tests.fixtures.redis",
    "tests.fixtures.app",
    "tests.fixtures.api_server",
    "tests.fixtures.inn",
]
