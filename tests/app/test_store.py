"""The store itself (what ingest.store_batch runs), on the real database: files and releases
already there (another worker raced it, or an overlapping plan) fall back to ON CONFLICT, never
twice; a batch's fragments go in once, recorded with their commit; the
releases' aggregates the store keeps up to date equal a recomputation from scratch."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace

import pytest
from sqlalchemy import text
from sqlalchemy.exc import OperationalError

from app.db import array_literal, session_scope
from app.services.ingest import catalog, pgcopy, posts, repair, store
from tests.app.factories import BIG, accept, group_of_range, lease_one_range
from tests.app.overview import make_batch
from tests.fixtures.queries import query, scalar


def test_rows_already_there_are_kept_once(clean_db):
    node, range_id = lease_one_range(BIG, BIG + 1999)
    group_id = group_of_range(range_id)
    first = make_batch(BIG, BIG + 999)
    with session_scope() as s:
        store.store_batch(s, accept(node, range_id, first))
    second = make_batch(BIG + 1000, BIG + 1999)
    # Another writer got there first with one file of this batch (a batch's fragments are its
    # own: only its store writes them, see test_a_failure_after_the_fragments_committed_...).
    with session_scope() as s:
        s.execute(
            text(
                "INSERT INTO files (group_id, key, release_key, name, subject, poster)"
                " VALUES (:g, :k, :r, 'raced', 'raced', 'raced')"
            ),
            {"g": group_id, "k": second["files"]["key"][-1], "r": second["files"]["release"][-1]},
        )
    batch_id = accept(node, range_id, second)
    with session_scope() as s:
        assert store.store_batch(s, batch_id).stored
    with session_scope() as s:
        assert not store.store_batch(s, batch_id).stored  # a redelivery does nothing
    with session_scope() as s:
        assert posts.join_batch(s, batch_id) == 0  # one post per release here
    with session_scope() as s:
        assert posts.join_batch(s, batch_id) is None  # a redelivery does nothing
        assert repair.repair_batch(s, batch_id) is None  # nothing to repair: joined
    assert scalar(clean_db, "SELECT count(*) FROM fragments") == 2000
    assert scalar(clean_db, "SELECT count(DISTINCT article) FROM fragments") == 2000
    assert scalar(clean_db, "SELECT array_agg(batch_id ORDER BY batch_id) FROM stored_fragments") == [
        scalar(clean_db, "SELECT min(id) FROM seed_batches"),
        batch_id,
    ]
    assert scalar(clean_db, "SELECT count(*) FROM files") == scalar(clean_db, "SELECT count(DISTINCT key) FROM files")
    # Posters are stored once, with the release (the raced row aside).
    assert scalar(clean_db, "SELECT count(*) FROM files WHERE poster IS NOT NULL") == 1
    assert (
        scalar(
            clean_db,
            "SELECT count(*) FROM files f JOIN releases r ON r.group_id = f.group_id"
            " AND r.key = f.release_key WHERE coalesce(f.poster, r.poster) <> r.poster",
        )
        == 1
    )
    assert scalar(clean_db, "SELECT count(*) FROM release_chunks") == len(first["release_chunks"]["release"]) + len(
        second["release_chunks"]["release"]
    )


def test_the_look_up_finds_what_the_catalog_has_by_probing_its_keys(clean_db):
    """Which of a batch's files and releases are known: exactly those the catalog has, found by
    an index probe for each key, also where the planner would scan the catalog for so many keys."""
    node, range_id = lease_one_range(BIG, BIG + 1999)
    group_id = group_of_range(range_id)
    with session_scope() as s:
        store.store_batch(s, accept(node, range_id, make_batch(BIG, BIG + 999)))
    second = make_batch(BIG + 1000, BIG + 1999)  # releases straddle the two batches
    files, releases = second["files"], second["releases"]
    with clean_db.connect() as conn:
        there = (
            {k for (k,) in conn.execute(text("SELECT key FROM files WHERE key = ANY(:k)"), {"k": files["key"]})},
            {k for (k,) in conn.execute(text("SELECT key FROM releases WHERE key = ANY(:k)"), {"k": releases["key"]})},
        )
        assert there[0] and there[1] and len(there[1]) < len(releases["key"])
        cur = conn.connection.driver_connection.cursor()
        assert catalog.known_keys(cur, group_id, files["key"], files["release"], releases["key"]) == there
        # A catalog some hundred thousand rows big, analyzed, and 5,000 keys: asked with = ANY, the
        # planner scans the whole table (PostgreSQL 15 does); the probes stay probes.
        for table, fill in (
            (f"files_g{group_id}", "(key, release_key, name, subject) SELECT -n, n, 'f', 's'"),
            ("releases", "(group_id, key, name, poster) SELECT :g, -n, 'r', 'p'"),
        ):
            conn.execute(text(f"INSERT INTO {table} {fill} FROM generate_series(1, 200000) AS n"), {"g": group_id})
            conn.execute(text(f"ANALYZE {table}"))
            keys = array_literal(list(range(-5000, 0)))
            cur.execute(
                f"EXPLAIN SELECT key FROM {table} WHERE group_id = %s AND key = ANY(%s::bigint[])", (group_id, keys)
            )
            assert "Seq Scan" in "\n".join(line for (line,) in cur.fetchall())  # what the probes avoid
            cur.execute("EXPLAIN " + catalog.PROBE_KEYS.format(table=table), (keys, group_id))
            plan = "\n".join(line for (line,) in cur.fetchall())
            assert "Seq Scan" not in plan and "Index Only Scan" in plan, plan
        conn.rollback()


def test_a_file_there_without_its_release_goes_in_once(clean_db, monkeypatch):
    """The look-up asks only for the files of known releases (a file is stored with its release).
    One there all the same (written by hand, say) is not looked up; the files' COPY meets it and
    falls back to ON CONFLICT: stored once, the rest of the batch in whole."""
    node, range_id = lease_one_range(BIG, BIG + 999)
    group_id = group_of_range(range_id)
    batch = make_batch(BIG, BIG + 999)
    files = batch["files"]
    with session_scope() as s:
        s.execute(
            text("INSERT INTO files (group_id, key, release_key, name, subject) VALUES (:g, :k, :r, 'x', 'x')"),
            {"g": group_id, "k": files["key"][7], "r": files["release"][7]},
        )
    looked_up, went_in = [], {}
    real_known_keys, real_finish = catalog.known_keys, pgcopy.PendingCopy.finish

    def known_keys(*args):
        looked_up.append(real_known_keys(*args))
        return looked_up[-1]

    def finish(self):
        went_in[self.table] = real_finish(self)
        return went_in[self.table]

    monkeypatch.setattr(catalog, "known_keys", known_keys)
    monkeypatch.setattr(pgcopy.PendingCopy, "finish", finish)
    batch_id = accept(node, range_id, batch)
    with session_scope() as s:
        assert store.store_batch(s, batch_id).stored
    assert looked_up == [(set(), set())]  # neither its release nor it asked for
    assert went_in["files"] == set(files["key"]) - {files["key"][7]}  # through ON CONFLICT
    assert went_in["releases"] is None  # straight in
    assert "fragments" not in went_in  # a plain COPY: no key, nothing to fall back on
    assert scalar(clean_db, "SELECT count(*) FROM files") == len(files["key"])
    assert scalar(clean_db, "SELECT count(DISTINCT key) FROM files") == len(files["key"])
    assert scalar(clean_db, "SELECT subject FROM files WHERE key = :k", k=files["key"][7]) == "x"
    assert scalar(clean_db, "SELECT count(*) FROM fragments") == len(batch["fragments"]["article"])
    assert scalar(clean_db, "SELECT count(*) FROM releases") == len(batch["releases"]["key"])
    # Its release counts the files this batch stored: not the one it found there.
    assert (
        scalar(clean_db, "SELECT files_seen FROM releases WHERE key = :k", k=files["release"][7])
        == sum(1 for r in files["release"] if r == files["release"][7]) - 1
    )


def test_a_release_another_batch_holds_gets_both_parts(clean_db):
    """A known release another transaction is updating (its lock held): this batch's update waits
    for it, then adds its part to what that one wrote, never to the version it started from."""
    node, range_id = lease_one_range(BIG, BIG + 1999)
    with session_scope() as s:
        store.store_batch(s, accept(node, range_id, make_batch(BIG, BIG + 999)))
    second = make_batch(BIG + 1000, BIG + 1999)
    with clean_db.connect() as conn:
        shared = conn.execute(
            text("SELECT key, parts_seen FROM releases WHERE key = ANY(:k) ORDER BY key LIMIT 1"),
            {"k": second["releases"]["key"]},
        ).one()
    batch_id = accept(node, range_id, second)
    holder = clean_db.connect()
    holder.execute(text("UPDATE releases SET parts_seen = parts_seen + 1000 WHERE key = :k"), {"k": shared.key})
    done = threading.Event()

    def store_it():
        with session_scope() as s:
            store.store_batch(s, batch_id)
        done.set()

    worker = threading.Thread(target=store_it)
    worker.start()
    try:
        deadline = time.monotonic() + 30
        while (
            scalar(
                clean_db,
                "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE%'",
            )
            == 0
        ):  # the store waits on the holder's lock
            assert time.monotonic() < deadline and not done.is_set()
            time.sleep(0.02)
    finally:
        holder.commit()
        holder.close()
    worker.join(30)
    assert done.is_set()
    i = second["release_chunks"]["release"].index(shared.key)
    assert scalar(clean_db, "SELECT parts_seen FROM releases WHERE key = :k", k=shared.key) == (
        shared.parts_seen + 1000 + second["release_chunks"]["fragments"][i]
    )


def test_known_releases_are_probed_even_in_a_group_the_planner_knows_nothing_of(clean_db):
    """The store locks and updates known releases by index probes: 3,000 of them in a new group
    (no statistics: the planner would walk the group's releases once for every release, or hash
    every group's), as in a big one. The plans of the statements update_known_releases runs, as it
    runs them, in its transaction."""
    node, range_id = lease_one_range(BIG, BIG + 999)
    group_id = group_of_range(range_id)
    with clean_db.connect() as conn:
        conn.execute(
            text(
                "INSERT INTO releases (group_id, key, name, poster) SELECT 999999, n, 'r', 'p'"
                " FROM generate_series(1, 200000) AS n"
            )
        )
        conn.execute(text("ANALYZE releases"))  # statistics of the other group's releases only
        conn.execute(
            text(
                "INSERT INTO releases (group_id, key, name, poster) SELECT :g, -n, 'r', 'p'"
                " FROM generate_series(1, 3000) AS n"
            ),
            {"g": group_id},
        )
        conn.commit()
    keys, plans, after = list(range(-3000, 0)), {}, []

    class Explaining:
        """The store's cursor, explaining the two statements first, in the store's transaction."""

        def __init__(self, cur):
            self.cur = cur

        def execute(self, sql, params=None, **kwargs):
            if sql in (catalog.LOCK_RELEASES, catalog.UPDATE_RELEASES):
                self.cur.execute("EXPLAIN " + sql, params)
                plans[sql] = "\n".join(line for (line,) in self.cur.fetchall())
            return self.cur.execute(sql, params, **kwargs)

        def __getattr__(self, name):
            return getattr(self.cur, name)

    ones = [1] * len(keys)
    known = SimpleNamespace(
        to_update=keys,
        group_id=group_id,
        additions=SimpleNamespace(
            columns=lambda wanted: (ones, ones, ones, ones, [None] * len(wanted), [None] * len(wanted))
        ),
    )
    with clean_db.connect() as conn:
        cur = conn.connection.driver_connection.cursor()
        catalog.KeyedRows.update_known_releases(known, Explaining(cur))
        cur.execute("SHOW enable_hashjoin")
        after.append(cur.fetchone()[0])
        conn.connection.driver_connection.commit()
    assert set(plans) == {catalog.LOCK_RELEASES, catalog.UPDATE_RELEASES}
    for plan in plans.values():
        assert "Seq Scan" not in plan and "Hash" not in plan and "Index Cond: ((group_id" in plan, plan
        # The batch's keys drive the probes: the outer side of the loop, never rescanned.
        assert plan.index("Function Scan") < plan.index("Index"), plan
    assert "Tid Scan" in plans[catalog.UPDATE_RELEASES]
    assert after == ["on"]  # the transaction goes on with the planner's settings as they were
    assert scalar(clean_db, "SELECT sum(files_seen) FROM releases WHERE group_id = :g", g=group_id) == 3000


def test_a_known_release_that_is_not_there_fails_the_store_loudly(clean_db):
    """Known releases are locked before they are updated, so each is there: one that is not (a
    bug, or the catalog changed by hand) fails the batch instead of losing its part silently."""
    node, range_id = lease_one_range(BIG, BIG + 999)
    group_id = group_of_range(range_id)
    with clean_db.connect() as conn:
        conn.execute(
            text("INSERT INTO releases (group_id, key, name, poster) VALUES (:g, 1, 'r', 'p')"), {"g": group_id}
        )
        conn.commit()
    known = SimpleNamespace(
        to_update=[1, 2],
        group_id=group_id,
        additions=SimpleNamespace(columns=lambda keys: ([1, 1], [1, 1], [1, 1], [1, 1], [None, None], [None, None])),
    )
    with clean_db.connect() as conn:
        with pytest.raises(RuntimeError, match="updated 1 of the batch's 2 known releases"):
            catalog.KeyedRows.update_known_releases(known, conn.connection.driver_connection.cursor())


AGGREGATES = (
    "SELECT key, files_seen, parts_expected, parts_seen, bytes, completion, first_post, last_post"
    " FROM releases ORDER BY key"
)


def rows(engine, sql):
    with engine.connect() as conn:
        return [tuple(r) for r in conn.execute(text(sql)).all()]


def store_range(spans, skip=frozenset()):
    """Store batches of one range (as ingest does) and return (group_id, batches)."""
    node, range_id = lease_one_range(spans[0][0], spans[-1][1])
    group_id = group_of_range(range_id)
    made = [make_batch(a, b, skip=skip) for a, b in spans]
    for batch in made:
        batch_id = accept(node, range_id, batch)
        with session_scope() as s:
            assert store.store_batch(s, batch_id).stored
        with session_scope() as s:
            assert count_state(s, batch_id) == "stored"
            posts.join_batch(s, batch_id)
        with session_scope() as s:
            assert count_state(s, batch_id) == "joined"
    return group_id, made


def count_state(session, batch_id):
    return session.execute(text("SELECT state FROM seed_batches WHERE id = :b"), {"b": batch_id}).scalar_one()


def test_aggregates_kept_by_the_store_equal_a_full_repair(clean_db):
    # 15 articles per release, batches of 1000 (and one of 7): releases straddle batches.
    spans = [(BIG, BIG + 999), (BIG + 1000, BIG + 1006), (BIG + 1007, BIG + 2999)]
    group_id, made = store_range(spans, skip={BIG + 3, BIG + 1003, BIG + 2500})
    kept = rows(clean_db, AGGREGATES)
    assert len(kept) == len({k for b in made for k in b["releases"]["key"]})
    with session_scope() as s:
        keys = [r[0] for r in kept]
        assert repair.repair_releases(s, group_id, keys) == len(keys)
    assert rows(clean_db, AGGREGATES) == kept
    # One release straddling the first two batches, whole, with its hole counted.
    with clean_db.connect() as conn:
        whole = conn.execute(
            text("SELECT files_seen, parts_expected, parts_seen FROM releases WHERE name = :n"),
            {"n": f"Some.Release.2025.{(BIG + 1003) // 15}"},
        ).one()
    assert tuple(whole) == (3, 15, 14)


def test_a_release_stored_meanwhile_by_another_batch_gets_this_batchs_part(clean_db):
    """Another worker stored a release of this batch between the look-up and the COPY (here: before,
    with its look-up defeated): the release goes through ON CONFLICT and gets this batch's part
    added, not lost."""
    node, range_id = lease_one_range(BIG, BIG + 999)
    group_id = group_of_range(range_id)
    batch = make_batch(BIG, BIG + 999)
    key, name = batch["releases"]["key"][3], batch["releases"]["name"][3]
    with session_scope() as s:
        s.execute(
            text(
                "INSERT INTO releases (group_id, key, name, poster, files_seen, parts_expected, parts_seen,"
                " bytes) VALUES (:g, :k, :n, 'p', 1, 5, 5, 10)"
            ),
            {"g": group_id, "k": key, "n": name},
        )
    real = catalog.known_keys
    catalog.known_keys = lambda cur, g, f, fr, r: (set(), set())
    try:
        batch_id = accept(node, range_id, batch)
        with session_scope() as s:
            assert store.store_batch(s, batch_id).stored
    finally:
        catalog.known_keys = real
    with clean_db.connect() as conn:
        row = conn.execute(
            text("SELECT files_seen, parts_expected, parts_seen, bytes FROM releases WHERE key = :k"), {"k": key}
        ).one()
    i = batch["release_chunks"]["release"].index(key)
    files = sum(1 for r in batch["files"]["release"] if r == key)
    assert tuple(row) == (
        1 + files,
        5 + 15,
        5 + batch["release_chunks"]["fragments"][i],
        10 + batch["release_chunks"]["bytes"][i],
    )
    assert scalar(clean_db, "SELECT count(*) FROM releases") == len(batch["releases"]["key"])


def test_a_failure_after_the_fragments_committed_is_retried_without_storing_twice(clean_db):
    """The fragments commit on their own connection just before the session does: should the
    session then fail (the worker dies, the server goes away), the batch is still 'accepted'
    and its retry finds its fragments there. Nothing is stored or counted twice."""
    spans = [(BIG, BIG + 999), (BIG + 1000, BIG + 1999)]
    node, range_id = lease_one_range(spans[0][0], spans[-1][1])
    made = [make_batch(a, b, skip={BIG + 17}) for a, b in spans]
    first = accept(node, range_id, made[0])
    with session_scope() as s:
        assert store.store_batch(s, first).stored
    second = accept(node, range_id, made[1])

    class SessionFailed(Exception):
        pass

    with pytest.raises(SessionFailed):
        with session_scope() as s:
            assert store.store_batch(s, second).stored
            raise SessionFailed  # after load_catalog: the session's commit never happens
    fragments = len(made[0]["fragments"]["article"]) + len(made[1]["fragments"]["article"])
    assert scalar(clean_db, "SELECT count(*) FROM fragments") == fragments  # the second's committed
    assert scalar(clean_db, "SELECT count(*) FROM files") == len(made[0]["files"]["key"])
    assert scalar(clean_db, f"SELECT state FROM seed_batches WHERE id = {second}") == "accepted"
    # committed with them: what tells the retry they are in (the fragments keep no key)
    assert scalar(clean_db, "SELECT array_agg(batch_id ORDER BY batch_id) FROM stored_fragments") == [first, second]
    half = rows(clean_db, AGGREGATES)

    with session_scope() as s:  # the retry
        assert store.store_batch(s, second).stored
    assert scalar(clean_db, "SELECT count(*) FROM fragments") == fragments
    assert scalar(clean_db, "SELECT count(DISTINCT article) FROM fragments") == fragments
    assert scalar(clean_db, "SELECT count(*) FROM files") == len({k for b in made for k in b["files"]["key"]})
    assert scalar(clean_db, "SELECT count(*) FROM release_chunks") == sum(
        len(b["release_chunks"]["release"]) for b in made
    )
    assert scalar(clean_db, "SELECT count(*) FROM rule_counts WHERE rule = ''") == 2
    assert scalar(clean_db, f"SELECT articles FROM seed_ranges WHERE id = {range_id}") == fragments
    kept = rows(clean_db, AGGREGATES)
    assert kept != half
    with session_scope() as s:  # the aggregates equal a recomputation from scratch
        keys = [r[0] for r in kept]
        assert repair.repair_releases(s, group_of_range(range_id), keys) == len(keys)
    assert rows(clean_db, AGGREGATES) == kept


def test_making_a_groups_partitions_gives_up_on_a_lock_it_cannot_get(clean_db, monkeypatch):
    """Making a partition locks its parent table whole. A worker whose fragments connection holds
    that parent while its session waits on the maker would wait with it forever (across two
    connections, no deadlock the server can see): the maker gives up after its lock timeout, the
    task is retried (OperationalError), and the batch goes in once the lock is free."""
    monkeypatch.setattr(store, "PARTITIONS_LOCK_TIMEOUT", "200ms")
    node, range_id = lease_one_range(BIG, BIG + 999)
    group_id = group_of_range(range_id)
    with session_scope() as s:  # as for a group whose partitions were never made
        for table in ("files", "fragment_packs", "release_chunks"):
            s.execute(text(f'DROP TABLE "{table}_g{group_id}"'))
    batch = make_batch(BIG, BIG + 999)
    batch_id = accept(node, range_id, batch)
    with clean_db.connect() as other:
        other.execute(text("LOCK TABLE fragment_packs IN ACCESS SHARE MODE"))  # held until the block ends
        with pytest.raises(OperationalError, match="lock timeout"):
            with session_scope() as s:
                store.store_batch(s, batch_id)
    assert scalar(clean_db, f"SELECT state FROM seed_batches WHERE id = {batch_id}") == "accepted"
    assert scalar(clean_db, f"SELECT to_regclass('files_g{group_id}') IS NULL")  # nothing half made
    with session_scope() as s:
        assert store.store_batch(s, batch_id).stored
    assert scalar(clean_db, "SELECT count(*) FROM fragments") == len(batch["fragments"]["article"])


def test_a_batchs_fragments_go_in_packs_and_each_file_reads_back_whole(clean_db):
    """A batch's fragments are stored PACK_ARTICLES a pack, in the batch's order (its articles
    ascending), each column an array of one length; every article once. Each file's articles read
    through app.services.fragments (the packs' index, a file at a time) are exactly the batch's,
    message-ids whole, numbers past 2^32, also for a file that spans packs."""
    from app.models.catalog import PACK_ARTICLES
    from app.services.fragments import file_articles

    node, range_id = lease_one_range(BIG, BIG + 1049)
    group_id = group_of_range(range_id)
    batch = make_batch(BIG, BIG + 1049, files=3, parts=7)
    with session_scope() as s:
        assert store.store_batch(s, accept(node, range_id, batch)).stored
    fragments = batch["fragments"]
    count = len(fragments["article"])
    assert count > 2 * PACK_ARTICLES
    packs = query(
        clean_db,
        "SELECT articles, cardinality(file_keys), cardinality(parts), cardinality(bytes), cardinality(host_ids),"
        " cardinality(message_locals) FROM fragment_packs ORDER BY articles[1]",
    )
    assert [len(p[0]) for p in packs] == [min(PACK_ARTICLES, count - n) for n in range(0, count, PACK_ARTICLES)]
    assert all(len(set(p[1:])) == 1 and p[1] == len(p[0]) for p in packs)
    assert [a for p in packs for a in p[0]] == fragments["article"]
    expected: dict[int, list[tuple[int, int, int, str]]] = {}
    for key, article, part, size, message_id in zip(
        fragments["file"], fragments["article"], fragments["part"], fragments["bytes"], fragments["message_id"]
    ):
        text_id = message_id.decode() if isinstance(message_id, bytes) else message_id
        expected.setdefault(key, []).append((article, part, size, text_id))
    pack_of = {article: n for n, pack in enumerate(packs) for article in pack[0]}
    spanning = 0
    with clean_db.connect() as conn:
        for key, articles in expected.items():
            found = conn.execute(
                text(
                    f"SELECT f.article, f.part, f.bytes, f.message_local || h.host"
                    f" FROM ({file_articles(':g', 'CAST(:key AS bigint)')}) f"
                    " JOIN message_hosts h ON h.id = f.host_id ORDER BY f.article"
                ),
                {"g": group_id, "key": key},
            ).all()
            assert [tuple(row) for row in found] == sorted(articles)
            spanning += len({pack_of[a] for a, *_ in articles}) > 1
    assert spanning  # some file's articles are in two packs


def test_pack_slices_cut_the_packs_into_slices_that_postgres_reads_back(engine, monkeypatch):
    """The packs' payload, however many packs a slice holds, is one COPY that gives back each
    pack's arrays: `articles` a pack, the last one shorter, numbers past 2^32 and 2^31."""
    from array import array

    fragments = {
        "file": [2**62 + n // 4 for n in range(11)],
        "article": [BIG + n for n in range(11)],
        "part": [n % 4 + 1 for n in range(11)],
        "bytes": [2**31 - 1 - n for n in range(11)],
    }
    locals_ = [f"<p{n}".encode() for n in range(11)]
    hosts = array("i", [n % 2 + 1 for n in range(11)])
    monkeypatch.setattr(store, "PACKS_PER_SLICE", 1000)
    whole = list(store.pack_slices(fragments, locals_, hosts, articles=3))
    monkeypatch.setattr(store, "PACKS_PER_SLICE", 2)
    sliced = list(store.pack_slices(fragments, locals_, hosts, articles=3))
    assert len(whole) == 3 and len(sliced) == 4  # header, 2 + 2 packs, trailer
    assert b"".join(sliced) == b"".join(whole)
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            cur.execute("CREATE TEMP TABLE packs (LIKE fragment_packs)")
            cur.execute("ALTER TABLE packs ALTER COLUMN group_id SET DEFAULT 7")
            with cur.copy(store.PACK_COPY.format(table="packs")) as copy:
                for piece in sliced:
                    copy.write(piece)
            cur.execute(f"SELECT {store.PACK_COLUMNS} FROM packs ORDER BY articles[1]")
            packs = cur.fetchall()
        conn.rollback()
    assert len(packs) == 4
    for n, pack in enumerate(packs):
        cut = slice(3 * n, 3 * n + 3)
        assert pack == (
            fragments["file"][cut],
            fragments["article"][cut],
            fragments["part"][cut],
            fragments["bytes"][cut],
            list(hosts[cut]),
            [local.decode() for local in locals_[cut]],
        )
