"""A real `celery worker` process runs the tasks against the real Redis and PostgreSQL."""

import os

from sqlalchemy import text

from tests.fixtures.app import task_result


def test_a_task_runs_in_the_worker_process(celery_app, celery_worker):
    result = task_result(celery_app, "control.ping", worker=celery_worker)
    assert result["pid"] != os.getpid()
    assert result["db_time"]


def test_lease_expiry_task_returns_stale_leases_to_planned(celery_app, celery_worker, clean_db):
    with clean_db.begin() as conn:
        gid = conn.execute(text("INSERT INTO groups (name) VALUES ('alt.binaries.test') RETURNING id")).scalar_one()
        nid = conn.execute(
            text("INSERT INTO seed_nodes (name, token_hash) VALUES ('n', '\\x00') RETURNING id")
        ).scalar_one()
        pid = conn.execute(
            text(
                "INSERT INTO seed_plans (group_id, first_id, last_id) VALUES (:g, 4294967296, 4295967295) RETURNING id"
            ),
            {"g": gid},
        ).scalar_one()
        conn.execute(
            text(
                "INSERT INTO seed_ranges (plan_id, group_id, first_id, last_id, next_id, status, node_id, leased_at, touched_at)"
                " VALUES (:p, :g, 4294967296, 4295467295, 4294987296, 'leased', :n, now() - interval '2 hours', now() - interval '1 hour'),"
                "        (:p, :g, 4295467296, 4295967295, 4295467296, 'leased', :n, now(), now())"
            ),
            {"p": pid, "g": gid, "n": nid},
        )
    expired = task_result(celery_app, "leases.expire", worker=celery_worker)
    assert len(expired) == 1
    with clean_db.connect() as conn:
        rows = conn.execute(text("SELECT first_id, next_id, status, node_id FROM seed_ranges ORDER BY first_id")).all()
    assert rows[0] == (4294967296, 4294987296, "planned", None)
    assert rows[1].status == "leased"


def test_queue_depth_metric_counts_waiting_messages(celery_app, celery_worker):
    from app.tasks.control import queue_depths

    # No worker consumes this queue, so what is sent there waits.
    for _ in range(3):
        celery_app.send_task("control.ping", queue="depth-probe")
    try:
        assert queue_depths(("depth-probe",)) == {"depth-probe": 3}
    finally:
        with celery_app.connection_for_write() as conn:
            conn.default_channel.client.delete("depth-probe")
    depths = task_result(celery_app, "control.queue_depth", worker=celery_worker)
    assert set(depths) == {"ingest", "repair", "control"}
