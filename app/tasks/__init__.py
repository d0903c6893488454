"""Thin Celery tasks with explicit names; the work is in app.services."""
