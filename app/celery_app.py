"""The Celery app, bound to the Flask app (Flask's patterns/celery)."""
from __future__ import annotations

import logging

from celery import Celery, Task
from celery.signals import worker_process_init
from flask import Flask


def celery_init_app(app: Flask) -> Celery:
    class FlaskTask(Task):
        def __call__(self, *args, **kwargs):
            with app.app_context():
                return self.run(*args, **kwargs)

    celery = Celery(app.name, task_cls=FlaskTask)
    celery.config_from_object("celeryconfig")
    celery.set_default()
    app.extensions["celery"] = celery
    return celery


@worker_process_init.connect
def _fresh_engine_after_fork(**_):
    # A forked pool process must not share the parent's pooled database connections, so it opens
    # its own as it starts, before its first task. A store uses three: one for its session, one
    # for the fragments' COPY and one for the partitions' check.
    from app.db import reset_engine, warm_pool

    reset_engine()
    warm_pool(3)


def warm_broker_transport() -> None:
    """Import the broker's transport now (kombu resolves it when a connection is first made):
    called by the API's workers at start (ops/gunicorn.conf.py). It connects to nothing and never
    keeps a worker from starting: if the import fails, the first enqueue reports why."""
    from app.tasks.ingest import store_batch

    try:
        store_batch.app.connection_for_write().release()
    except Exception as exc:  # a bad broker URL, a transport that does not import
        logging.getLogger(__name__).warning("could not load the broker transport at start: %s", exc)
