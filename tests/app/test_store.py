"""The store itself (what ingest.store_batch runs), on the real database: rows already there
(another worker raced it, or an overlapping plan) fall back to ON CONFLICT, never twice."""
from __future__ import annotations

from sqlalchemy import text

from app.db import session_scope
from app.services import batches, orchestrator
from edge.batch import encode_batch
from tests.app.factories import BIG, make_group, make_node, make_plan
from tests.app.overview import make_batch


def accept(node, range_id, batch):
    body, content_type, content_encoding = encode_batch(batch)
    with session_scope() as s:
        return orchestrator.accept_batch(
            s, node, range_id, batch_from=batch["first"], batch_to=batch["last"], body=body,
            content_type=content_type, content_encoding=content_encoding or "").batch_id


def count(engine, sql):
    with engine.connect() as conn:
        return conn.execute(text(sql)).scalar_one()


def test_rows_already_there_are_kept_once(clean_db):
    with session_scope() as s:
        group = make_group(s)
        node, _ = make_node(s)
        (seed_range,) = make_plan(s, group, [(BIG, BIG + 1999)])
        orchestrator.lease(s, node, max_leases=1)
        range_id, group_id = seed_range.id, group.id
    first = make_batch(BIG, BIG + 999)
    with session_scope() as s:
        batches.store_batch(s, accept(node, range_id, first))
    second = make_batch(BIG + 1000, BIG + 1999)
    # Another writer got there first with one fragment, one file and one release of this batch.
    with session_scope() as s:
        s.execute(text(
            "INSERT INTO fragments (group_id, article, file_key, part, bytes, message_id)"
            " VALUES (:g, :a, :f, 1, 1, '<raced@x>')"),
            {"g": group_id, "a": second["fragments"]["article"][5], "f": second["fragments"]["file"][5]})
        s.execute(text(
            "INSERT INTO files (group_id, key, release_key, name, subject, poster)"
            " VALUES (:g, :k, :r, 'raced', 'raced', 'raced')"),
            {"g": group_id, "k": second["files"]["key"][-1], "r": second["files"]["release"][-1]})
    batch_id = accept(node, range_id, second)
    with session_scope() as s:
        assert batches.store_batch(s, batch_id).stored
    with session_scope() as s:
        assert not batches.store_batch(s, batch_id).stored  # a redelivery does nothing
        assert batches.gather_batch(s, batch_id) > 0
    assert count(clean_db, "SELECT count(*) FROM fragments") == 2000
    assert count(clean_db, "SELECT count(DISTINCT article) FROM fragments") == 2000
    assert count(clean_db, "SELECT count(*) FROM fragments WHERE message_id = '<raced@x>'") == 1
    assert count(clean_db, "SELECT count(*) FROM files") == count(clean_db, "SELECT count(DISTINCT key) FROM files")
    assert count(clean_db, "SELECT count(*) FROM release_chunks") == len(first["release_chunks"]["release"]) + len(
        second["release_chunks"]["release"])
