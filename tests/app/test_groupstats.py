"""The planner's statistics kept up with a group that fills (app.services.ingest.groupstats), on
the real database: a group added beside one the statistics know is estimated at a row or so, the
join's namesakes then compare every release of the group with every name of the batch; once the
join has had the table analyzed, they probe by name."""

from __future__ import annotations

import contextlib
from typing import Any

import pytest
from sqlalchemy import event, text
from sqlalchemy.orm import Session

from app.db import array_literal, get_engine, session_scope
from app.services.groups import add_groups
from app.services import inspections
from app.services.ingest import groupstats, posts

KNOWN, NEW = 20_000, 3_000


@pytest.fixture
def fresh(monkeypatch, clean_db):
    """What this process knows of groups forgotten (group ids start again in each test), and no
    autovacuum on releases meanwhile: its ANALYZE, landing part way, would do the join's work."""
    monkeypatch.setattr(groupstats, "_settled", set())
    monkeypatch.setattr(groupstats, "_analyzed_at", {})
    with clean_db.begin() as connection:
        connection.execute(text("ALTER TABLE releases SET (autovacuum_enabled = off)"))
    yield
    with clean_db.begin() as connection:
        connection.execute(text("ALTER TABLE releases RESET (autovacuum_enabled)"))


def add_releases(session: Session, group_id: int, count: int, first_key: int) -> None:
    """count releases of the group, each of a name of its own (a hash of its own)."""
    session.execute(
        text(
            "INSERT INTO releases (group_id, key, name, poster, file_count, files_seen, name_hash)"
            " SELECT :g, :k + i, 'Some.Name.' || i, 'p@example.net', 1, 1, :k + i"
            " FROM generate_series(1, :n) AS i"
        ),
        {"g": group_id, "k": first_key, "n": count},
    )


def a_known_group_and_a_new_one(engine) -> tuple[int, int]:
    """A group of KNOWN releases the statistics know, and a new one of NEW releases they never saw."""
    with session_scope() as session:
        known, new = (g.id for g in add_groups(session, ["alt.binaries.known", "alt.binaries.new"]))
        add_releases(session, known, KNOWN, 2**40)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("ANALYZE releases"))
    with session_scope() as session:
        add_releases(session, new, NEW, 2**41)
    return known, new


def namesakes_compared(session: Session, group_id: int) -> int:
    """How many rows the join's namesakes (posts.NAMESAKES) compared and threw away for a batch of
    the group's first 2,000 releases (EXPLAIN ANALYZE's rows removed by join filters)."""
    keys = session.execute(
        text("SELECT key FROM releases WHERE group_id = :g ORDER BY key LIMIT 2000"), {"g": group_id}
    ).scalars()
    plan = session.execute(
        text("EXPLAIN (ANALYZE, FORMAT JSON) " + posts.NAMESAKES.text),
        {"g": group_id, "keys": array_literal(list(keys))},
    ).scalar_one()
    return _removed(plan[0]["Plan"])


def _removed(node: dict[str, Any]) -> int:
    return int(node.get("Rows Removed by Join Filter", 0)) + sum(_removed(child) for child in node.get("Plans", []))


def test_a_new_group_is_analyzed_and_its_namesakes_are_probed(clean_db, fresh):
    _, new = a_known_group_and_a_new_one(clean_db)
    with session_scope() as session:
        assert groupstats.estimate(session, "releases", new) < NEW / groupstats.RATIO
        # What the join suffered: each of the group's releases against each name of the batch.
        assert namesakes_compared(session, new) > 1_000_000
    with session_scope() as session:
        assert groupstats.keep_up(session, new) == ["releases"]
    with session_scope() as session:
        assert groupstats.estimate(session, "releases", new) >= NEW / groupstats.RATIO
        assert namesakes_compared(session, new) < 2_000
        # Its estimate is near what it has now: not analyzed again (the others hold nothing of it).
        assert groupstats.keep_up(session, new) == []


def test_a_group_the_statistics_know_is_left_as_it_is(clean_db, fresh):
    known, _ = a_known_group_and_a_new_one(clean_db)
    with session_scope() as session:
        assert groupstats.keep_up(session, known) == []


def test_a_group_is_analyzed_again_only_once_it_has_doubled(clean_db, fresh, monkeypatch):
    _, new = a_known_group_and_a_new_one(clean_db)
    # A sample that never sees the group (as ANALYZE's of a huge table may not): the estimate
    # stays as it was, and the group is analyzed again only when it has twice the rows.
    monkeypatch.setattr(groupstats, "_analyze", lambda session, table: True)
    with session_scope() as session:
        assert groupstats.keep_up(session, new) == ["releases"]
        assert groupstats.keep_up(session, new) == []
        add_releases(session, new, NEW, 2**42)
        assert groupstats.keep_up(session, new) == ["releases"]


def test_a_table_estimated_safe_is_asked_no_more(clean_db, fresh, monkeypatch):
    _, new = a_known_group_and_a_new_one(clean_db)
    monkeypatch.setattr(groupstats, "SAFE_ROWS", 0)
    with session_scope() as session:
        assert groupstats.keep_up(session, new) == []
    assert {(new, table) for table in groupstats.GROUP_TABLES} <= groupstats._settled
    monkeypatch.setattr(groupstats, "SAFE_ROWS", 1_000)
    with session_scope() as session:
        assert groupstats.keep_up(session, new) == []  # not asked: it stays as it was
        assert groupstats.estimate(session, "releases", new) < NEW / groupstats.RATIO


def test_the_join_has_its_group_analyzed_before_its_statements(clean_db, fresh):
    _, new = a_known_group_and_a_new_one(clean_db)
    sent: list[str] = []

    def seen(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        sent.append(" ".join(statement.split()))

    with session_scope() as session:
        keys = list(session.execute(text("SELECT key FROM releases WHERE group_id = :g"), {"g": new}).scalars())
        assert groupstats.estimate(session, "releases", new) < NEW / groupstats.RATIO
        event.listen(get_engine(), "before_cursor_execute", seen)
        try:
            posts.join_posts(session, new, keys)
        finally:
            event.remove(get_engine(), "before_cursor_execute", seen)
        assert groupstats.estimate(session, "releases", new) >= NEW / groupstats.RATIO
        assert session.execute(text("SELECT count(*) FROM posts WHERE group_id = :g"), {"g": new}).scalar() == NEW

    def first(start: str) -> int:
        return next(i for i, statement in enumerate(sent) if statement.startswith(start))

    analyzed = first("ANALYZE (SKIP_LOCKED) releases")
    assert analyzed < first("WITH batch AS MATERIALIZED")  # the namesakes, after it
    assert first("SELECT pg_advisory_xact_lock") < analyzed  # under the group's lock


def test_a_table_held_by_a_vacuum_is_left_to_the_next_join(clean_db, fresh):
    _, new = a_known_group_and_a_new_one(clean_db)
    with clean_db.connect() as holder:
        with holder.begin():  # what a VACUUM or another ANALYZE holds: the join does not wait on it
            holder.execute(text("LOCK TABLE releases IN SHARE UPDATE EXCLUSIVE MODE"))
            with session_scope() as session:
                assert groupstats.keep_up(session, new) == []
                assert groupstats.estimate(session, "releases", new) < NEW / groupstats.RATIO
    with session_scope() as session:
        assert groupstats.keep_up(session, new) == ["releases"]


def test_a_group_the_sample_never_shows_is_asked_about_no_more_past_counted_max(clean_db, fresh, monkeypatch):
    _, new = a_known_group_and_a_new_one(clean_db)
    monkeypatch.setattr(groupstats, "COUNTED_MAX", 1_000)
    monkeypatch.setattr(groupstats, "_analyze", lambda session, table: True)  # the estimate stays
    with session_scope() as session:
        assert groupstats.keep_up(session, new) == ["releases"]
        add_releases(session, new, 4 * NEW, 2**42)
        assert groupstats.keep_up(session, new) == []
    assert (new, "releases") in groupstats._settled


def test_the_analyze_leaves_its_pooled_connection_as_it_found_it(clean_db, fresh):
    _, new = a_known_group_and_a_new_one(clean_db)
    engine = get_engine()  # the sessions' own, whose pool the ANALYZE's connection goes back to
    with engine.connect() as connection:
        before = connection.execute(text("SHOW lock_timeout")).scalar_one()
    with session_scope() as session:
        assert groupstats.keep_up(session, new) == ["releases"]
    with contextlib.ExitStack() as stack:  # every connection the pool holds, at once
        connections = [stack.enter_context(engine.connect()) for _ in range(engine.pool.checkedin() + 1)]
        assert {c.execute(text("SHOW lock_timeout")).scalar_one() for c in connections} == {before}


def test_a_groups_first_queue_of_inspections_tests_its_posts_before_writing_them(clean_db, fresh, monkeypatch):
    """A group's first join writes its posts and queues them in one transaction no ANALYZE sees:
    the queue's check of the group's inspections is a scan of the group alone, and were its rows
    written as they are tested, each check would walk the rows written before it."""
    known, new = a_known_group_and_a_new_one(clean_db)
    with session_scope() as session:
        session.execute(
            text(
                "INSERT INTO post_inspections (group_id, post_key, reason)"
                " SELECT :g, key, 'misc' FROM releases WHERE group_id = :g"
            ),
            {"g": known},
        )
        session.execute(
            text(
                "INSERT INTO posts (group_id, key, name, poster, names, posters, releases, files_seen,"
                " parts_expected, parts_seen, bytes, completion)"
                " SELECT group_id, key, name, poster, name, poster, 1, 1, 0, 0, 0, 0 FROM releases WHERE group_id = :g"
            ),
            {"g": known},
        )
    with clean_db.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
        connection.execute(text("ANALYZE posts"))
        connection.execute(text("ANALYZE post_inspections"))
    plans: list[dict[str, Any]] = []

    def explained(session: Session, group_id: int, post_keys: list[int]) -> None:
        plans.append(
            session.execute(
                text("EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) " + inspections.queue_statement(group_id).text),
                {"g": group_id, "keys": array_literal(post_keys)},
            ).scalar_one()[0]["Plan"]
        )

    monkeypatch.setattr(inspections, "queue", explained)
    with session_scope() as session:
        keys = list(session.execute(text("SELECT key FROM releases WHERE group_id = :g"), {"g": new}).scalars())
        posts.join_posts(session, new, keys)
    (plan,) = plans
    assert plan["Actual Rows"] == 0 and _inserted(plan) == NEW  # every post queued (one file each)
    checks = _nodes(plan, "post_inspections")
    assert checks and all(node["Shared Hit Blocks"] < 4 * node["Actual Loops"] for node in checks), checks


def _inserted(plan: dict[str, Any]) -> int:
    return int(plan.get("Tuples Inserted", 0))


def _nodes(node: dict[str, Any], relation: str) -> list[dict[str, Any]]:
    """The plan's scans of the relation whose rows it tests (not the insert into it)."""
    found = [node] if node.get("Relation Name") == relation and "Scan" in node["Node Type"] else []
    return found + [n for child in node.get("Plans", []) for n in _nodes(child, relation)]
