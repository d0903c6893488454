"""Celery configuration: Redis broker, three queues, late acks, explicit task names, beat.

Long ingest work runs on its own queue so short control work (lease expiry, requeue) never
waits behind it; release repair (`releases.*`) has its own queue, named repair, so it can be
scaled apart from ingest.
"""

from celery.schedules import crontab
from kombu import Queue

from app.config import get_settings

_settings = get_settings()

broker_url = _settings.redis_url
result_backend = _settings.redis_url
broker_connection_retry_on_startup = True
# Ack after the task ran: a worker that dies mid-task leaves the message to be redelivered.
# Every task is idempotent, so a redelivery stores nothing twice.
task_acks_late = True
task_reject_on_worker_lost = True
worker_prefetch_multiplier = 1
# Redis redelivers an unacked message after this; it must exceed the longest task
# (an ingest of the largest batch takes well under a minute; replanning a few minutes).
broker_transport_options = {"visibility_timeout": 3600}
result_backend_transport_options = {"visibility_timeout": 3600}
result_expires = 3600
task_ignore_result = True
task_serializer = "json"
result_serializer = "json"
accept_content = ["json"]
timezone = "UTC"
enable_utc = True

# Flower sees task events: the ingest tasks' as they are sent (by the API and the requeue sweep),
# received, started and done. Beat's housekeeping every minute (leases.expire, batches.requeue,
# control.queue_depth, plan.live) sends none: those tasks say send_events=False and beat sends no
# "task-sent" (app/celery_app.py), so that Flower's task list shows the ingest work instead of
# pages of them. They log as every task does, and their failures show in the workers' logs.
worker_send_task_events = True
task_send_sent_event = True

# Task modules: each registers its tasks under explicit, stable names.
imports = (
    "app.tasks.batches",
    "app.tasks.control",
    "app.tasks.ingest",
    "app.tasks.leases",
    "app.tasks.plan",
    "app.tasks.releases",
)

task_default_queue = "control"
task_queues = (Queue("ingest"), Queue("repair"), Queue("control"))
task_routes = {
    "ingest.*": {"queue": "ingest"},
    "releases.*": {"queue": "repair"},
    "leases.*": {"queue": "control"},
    "plan.*": {"queue": "control"},
    "batches.*": {"queue": "control"},
    "control.*": {"queue": "control"},
}

beat_schedule = {
    "leases.expire": {"task": "leases.expire", "schedule": 60.0},
    "batches.requeue": {"task": "batches.requeue", "schedule": 60.0},
    "control.queue_depth": {"task": "control.queue_depth", "schedule": 60.0},
    # Live planning: new articles planned every LIVE_PLAN_INTERVAL seconds. A run not started
    # within its period is dropped (the next one plans the same articles), so a stopped worker
    # does not come back to a pile of them.
    "plan.live": {
        "task": "plan.live",
        "schedule": float(_settings.live_plan_interval),
        "options": {"expires": float(_settings.live_plan_interval)},
    },
    "plan.replan": {
        "task": "plan.replan",
        "schedule": crontab(minute=_settings.replan_minute, hour=_settings.replan_hour),
    },
}
