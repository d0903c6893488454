"""The Celery app, bound to the Flask app (Flask's patterns/celery), and the signals that make its
processes log as the rest of the data center does and keep beat's housekeeping out of Flower."""

from __future__ import annotations

import logging

from celery import Celery, Task
from celery.signals import beat_init, celeryd_init, setup_logging, worker_process_init
from flask import Flask

from app.collector import freeze_loaded
from app.config import get_settings
from app.logs import configure as configure_logging


def celery_init_app(app: Flask) -> Celery:
    class FlaskTask(Task):
        def __call__(self, *args, **kwargs):
            with app.app_context():
                return self.run(*args, **kwargs)

    celery: Celery = Celery(app.name, task_cls=FlaskTask)
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


@worker_process_init.connect
def _loaded_objects_frozen(**_):
    # What the pool process holds once it has started (the app, its modules, its pools) is out of
    # the collector's sight from then on: a full collection walks only what its tasks made since.
    freeze_loaded()


@setup_logging.connect
def _one_logging_configuration(**_):
    # A receiver here means Celery leaves logging alone: workers and beat log through
    # app/logs.py at LOG_LEVEL (a `--loglevel` given to celery is not used).
    configure_logging(get_settings())


@celeryd_init.connect
def _worker_logs_from_the_start(instance=None, **_):
    # Before setup_logging: the worker's first checks warn (running as root, say) through
    # Python's warnings, which are logged from here on. Its start banner is printed straight to
    # stdout, lines a JSON log pipeline cannot read: with LOG_FORMAT=json it is left out, as
    # `celery worker --quiet` does (the worker's log lines say it started and is ready).
    settings = get_settings()
    configure_logging(settings)
    if instance is not None and settings.log_format == "json":
        instance.quiet = True


@beat_init.connect
def _housekeeping_sends_no_events(sender=None, **_):
    # Beat sends only the housekeeping schedule (celeryconfig.beat_schedule), every minute or
    # so: its "task-sent" events would fill Flower's task list and bury the ingest tasks there.
    # The workers do not send events for these tasks either (send_events=False on each).
    if sender is not None:
        sender.app.conf.task_send_sent_event = False


def warm_broker_transport() -> None:
    """Import the broker's transport now (kombu resolves it when a connection is first made):
    called by the API's workers at start (ops/gunicorn.conf.py). It connects to nothing and never
    keeps a worker from starting: if the import fails, the first enqueue reports why."""
    from app.tasks.ingest import store_batch

    try:
        store_batch.app.connection_for_write().release()
    except Exception as exc:  # a bad broker URL, a transport that does not import
        logging.getLogger(__name__).warning("could not load the broker transport at start: %s", exc)
