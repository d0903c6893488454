"""Migrations build the schema the models describe; partitions are made on demand."""

import pytest
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect, text
from sqlalchemy.exc import IntegrityError

from app.config import Settings, override_settings
from app.db import ensure_group_partitions, reset_engine
from tests.fixtures.postgres import REPO


def alembic_config() -> Config:
    cfg = Config(str(REPO / "alembic.ini"))
    cfg.attributes["configure_logging"] = False
    return cfg


def test_upgrade_on_empty_database_then_check_agrees_with_models(postgres, settings):
    url = postgres.create_database("seed_migration_check")
    override_settings(Settings(database_url=url))
    try:
        command.upgrade(alembic_config(), "head")
        engine = create_engine(url)
        with engine.begin() as conn:
            # With a group's partitions present, check must still see no difference.
            ensure_group_partitions(conn, 7)
        command.check(alembic_config())  # raises if models and migrations disagree
        tables = set(inspect(engine).get_table_names())
        assert {
            "groups",
            "seed_nodes",
            "seed_plans",
            "seed_ranges",
            "seed_batches",
            "files",
            "fragment_packs",
            "releases",
            "release_chunks",
            "rule_counts",
            "spool_chunks",
        } <= tables
        with engine.connect() as conn:
            kinds = dict(
                conn.execute(
                    text(
                        "SELECT relname, relkind FROM pg_class"
                        " WHERE relname IN ('files', 'fragment_packs', 'fragments', 'release_chunks')"
                    )
                ).all()
            )
        # 0030: the fragments in packs, and a view of them a row an article.
        assert kinds == {"files": "p", "fragment_packs": "p", "fragments": "v", "release_chunks": "p"}
        with engine.connect() as conn:  # 0009: a raw body stored as it comes (gzip: no pglz)
            assert (
                conn.execute(
                    text(
                        "SELECT attstorage FROM pg_attribute WHERE attrelid = 'seed_batches'::regclass"
                        " AND attname = 'body'"
                    )
                ).scalar_one()
                == "e"
            )
        # 0029: the posts vacuumed past a few thousand dead versions, their indexes with them.
        posts_options = text("SELECT reloptions FROM pg_class WHERE relname = 'posts'")
        with engine.connect() as conn:
            assert set(conn.execute(posts_options).scalar_one()) == {
                "fillfactor=80",
                "autovacuum_vacuum_scale_factor=0",
                "autovacuum_vacuum_threshold=2000",
                "vacuum_index_cleanup=on",
            }
        command.downgrade(alembic_config(), "0028")
        with engine.connect() as conn:
            assert conn.execute(posts_options).scalar_one() == ["fillfactor=80"]
            assert conn.execute(text("SELECT relkind FROM pg_class WHERE relname = 'fragments'")).scalar_one() == "p"
        command.downgrade(alembic_config(), "base")
        assert "files" not in set(inspect(engine).get_table_names())
        engine.dispose()
    finally:
        override_settings(settings)
        reset_engine()


def test_article_numbers_are_bigint_everywhere(engine):
    with engine.connect() as conn:
        rows = conn.execute(
            text(
                "SELECT table_name, column_name, data_type FROM information_schema.columns"
                " WHERE table_schema = current_schema() AND (column_name IN"
                " ('first_id', 'last_id', 'next_id', 'batch_from', 'batch_to', 'article', 'chunk_from',"
                "  'chunk_to', 'low_mark', 'high_mark', 'live_first', 'backfill_id'))"
            )
        ).all()
    assert len(rows) >= 14
    assert {r.data_type for r in rows} == {"bigint"}, rows


def test_partitions_are_idempotent_and_hold_numbers_past_2_32(db_session):
    assert ensure_group_partitions(db_session, 4242) is True
    assert ensure_group_partitions(db_session, 4242) is False
    big = 2**32 + 17
    db_session.execute(
        text(
            "INSERT INTO fragment_packs (group_id, file_keys, articles, parts, bytes, host_ids, message_locals)"
            " VALUES (4242, '{-9223372036854775808}', ARRAY[CAST(:a AS bigint)], '{1}', '{700000}', '{1}', '{<x}')"
        ),
        {"a": big},
    )
    stored = db_session.execute(text("SELECT article FROM fragments WHERE group_id = 4242")).scalar_one()
    assert stored == big


def test_0006_carries_the_catalog_over_and_back(postgres, settings):
    """0006 rebuilds fragments and files with a new column order: every row survives upgrade and
    downgrade, partitions default group_id to their group, the fragments' key is packed."""
    url = postgres.create_database("seed_migration_0006")
    override_settings(Settings(database_url=url))
    engine = create_engine(url)
    frag = "SELECT group_id, article, file_key, part, bytes, message_id FROM fragments ORDER BY group_id, article"
    file = (
        "SELECT f.group_id, f.key, f.release_key, f.name, f.subject, coalesce(f.poster, r.poster), f.posted_at,"
        " f.file_index, f.file_count, f.parts FROM files f"
        " LEFT JOIN releases r ON r.group_id = f.group_id AND r.key = f.release_key ORDER BY 1, 2"
    )
    chunk = "SELECT group_id, release_key, batch_from, files FROM release_chunks ORDER BY 1, 2, 3"
    try:
        command.upgrade(alembic_config(), "0005")
        with engine.begin() as conn:
            for group_id in (3, 11):
                for table in ("files", "fragments", "release_chunks"):
                    conn.execute(
                        text(f'CREATE TABLE "{table}_g{group_id}" PARTITION OF "{table}" FOR VALUES IN ({group_id})')
                    )
                conn.execute(
                    text(
                        "INSERT INTO fragments (group_id, article, file_key, part, bytes, message_id)"
                        " SELECT :g, 2^32::bigint + n, -n, n % 7 + 1, 700000 + n, '<m' || n || '@x>'"
                        " FROM generate_series(1, 500) n"
                    ),
                    {"g": group_id},
                )
                conn.execute(
                    text(
                        "INSERT INTO files (group_id, key, release_key, name, subject, poster, posted_at, file_index,"
                        " file_count, parts) SELECT :g, n * 1000003, -n % 5, 'f' || n, 's' || n,"
                        " CASE WHEN n % 10 = 0 THEN 'other' ELSE 'p' || (n % 5) END,"
                        " CASE WHEN n % 3 = 0 THEN NULL ELSE to_timestamp(1761982047 + n) END,"
                        " CASE WHEN n % 2 = 0 THEN NULL ELSE n END, 9, n FROM generate_series(1, 50) n"
                    ),
                    {"g": group_id},
                )
                conn.execute(
                    text(
                        "INSERT INTO releases (group_id, key, name, poster) SELECT :g, -n, 'r', 'p' || n"
                        " FROM generate_series(0, 4) n"
                    ),
                    {"g": group_id},
                )
                conn.execute(
                    text(
                        "INSERT INTO release_chunks (group_id, release_key, batch_from, range_id, files, fragments, bytes)"
                        " VALUES (:g, 5, 2^32::bigint, 1, 2, 3, 4), (:g, -2, 2^32::bigint, 1, 9, 8, 7)"
                    ),
                    {"g": group_id},
                )
            # A batch stored but not gathered by the store before 0006: gathered by the upgrade.
            conn.execute(text("INSERT INTO groups (id, name) VALUES (11, 'alt.binaries.test')"))
            conn.execute(text("INSERT INTO seed_plans (id, group_id, first_id, last_id) VALUES (1, 11, 1, 10)"))
            conn.execute(
                text(
                    "INSERT INTO seed_ranges (id, plan_id, group_id, first_id, last_id, next_id)"
                    " VALUES (1, 1, 11, 1, 10, 11)"
                )
            )
            conn.execute(
                text(
                    "INSERT INTO seed_batches (range_id, batch_from, batch_to, content_type, body_bytes,"
                    " state, release_keys) VALUES (1, 1, 10, 'application/msgpack', 1, 'stored', '{-2}')"
                )
            )
        with engine.connect() as conn:
            before = [conn.execute(text(q)).all() for q in (frag, file, chunk)]
        command.upgrade(alembic_config(), "0006")
        with engine.connect() as conn:
            assert [conn.execute(text(q)).all() for q in (frag, file, chunk)] == before
            columns = conn.execute(
                text(
                    "SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute"
                    " WHERE attrelid = 'fragments_g11'::regclass AND attnum > 0 AND NOT attisdropped"
                )
            ).scalar_one()
            assert columns == "article,file_key,group_id,part,bytes,message_id"
            options = conn.execute(
                text("SELECT reloptions FROM pg_class WHERE relname = 'fragments_g11_pkey'")
            ).scalar_one()
            assert options == ["fillfactor=100"]
            assert conn.execute(text("SELECT state, release_keys FROM seed_batches")).one() == ("gathered", None)
            gathered = conn.execute(
                text(
                    "SELECT group_id, files_seen, parts_expected, parts_seen, bytes FROM releases WHERE key = -2"
                    " ORDER BY 1"
                )
            ).all()
            assert gathered == [(3, 0, 0, 0, 0), (11, 10, 245, 8, 7)]  # its files: n = 2, 7, ..., 47 parts
            # Posters are stored once, with the release, unless a file's differs.
            assert conn.execute(text("SELECT count(*) FROM files WHERE poster IS NOT NULL")).scalar_one() == 10
        with engine.begin() as conn:  # rows COPYed without group_id land with their partition's
            for table, columns, values in (
                ("fragments_g11", "article, file_key, part, bytes, message_id", "1, 2, 3, 4, '<x@y>'"),
                ("files_g11", "key, release_key, name, subject", "1, 2, 'n', 's'"),
                (
                    "release_chunks_g11",
                    "release_key, batch_from, range_id, files, fragments, bytes",
                    "1, 2, 3, 4, 5, 6",
                ),
            ):
                conn.execute(text(f"INSERT INTO {table} ({columns}) VALUES ({values})"))
                assert conn.execute(text(f"SELECT DISTINCT group_id FROM {table}")).scalars().all() == [11]
            conn.execute(text("DELETE FROM fragments WHERE article = 1"))
            conn.execute(text("DELETE FROM files WHERE key = 1"))
            conn.execute(text("DELETE FROM release_chunks WHERE release_key = 1"))
        command.downgrade(alembic_config(), "0005")
        with engine.connect() as conn:
            assert [conn.execute(text(q)).all() for q in (frag, file, chunk)] == before
            columns = conn.execute(
                text(
                    "SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute"
                    " WHERE attrelid = 'fragments_g3'::regclass AND attnum > 0 AND NOT attisdropped"
                )
            ).scalar_one()
            assert columns == "group_id,article,file_key,part,bytes,message_id"
            assert (
                conn.execute(
                    text(
                        "SELECT count(*) FROM pg_attrdef d JOIN pg_class c ON c.oid = d.adrelid"
                        " WHERE c.relname ~ '_g(3|11)$'"
                    )
                ).scalar_one()
                == 0
            )
        command.downgrade(alembic_config(), "base")
    finally:
        engine.dispose()
        override_settings(settings)
        reset_engine()


def test_0007_stores_each_message_id_host_once_and_carries_the_fragments_over_and_back(postgres, settings):
    """0007 cuts every fragment's message-id before its last '@': the local part stays in the row,
    the host goes to message_hosts once; fragments_with_ids gives the message-ids back, and
    downgrade puts them back whole. Every row survives both ways, ids of any shape included."""
    url = postgres.create_database("seed_migration_0007")
    override_settings(Settings(database_url=url))
    engine = create_engine(url)
    rows = "SELECT group_id, article, file_key, part, bytes, message_id FROM {} ORDER BY group_id, article"
    odd = ["<a@b@two.example>", "<no-at-sign>", "<@>", "<é ü@hôte.example>", "<x@>", "@lead>"]
    try:
        command.upgrade(alembic_config(), "0006")
        with engine.begin() as conn:
            for group_id in (3, 11):
                conn.execute(
                    text(f'CREATE TABLE "fragments_g{group_id}" PARTITION OF fragments FOR VALUES IN ({group_id}) ')
                )
                conn.execute(
                    text(
                        "INSERT INTO fragments (group_id, article, file_key, part, bytes, message_id)"
                        " SELECT :g, 2^32::bigint + n, -n, n % 7 + 1, 700000 + n,"
                        " '<part' || n || 'of9.' || n * 7 || '@host' || (n % 3) || '.example>'"
                        " FROM generate_series(1, 300) n"
                    ),
                    {"g": group_id},
                )
                for n, message_id in enumerate(odd):
                    conn.execute(
                        text(
                            "INSERT INTO fragments (group_id, article, file_key, part, bytes, message_id)"
                            " VALUES (:g, :a, 1, 1, 1, :m)"
                        ),
                        {"g": group_id, "a": 2**40 + n, "m": message_id},
                    )
        with engine.connect() as conn:
            before = conn.execute(text(rows.format("fragments"))).all()
        command.upgrade(alembic_config(), "0007")
        with engine.connect() as conn:
            assert conn.execute(text(rows.format("fragments_with_ids"))).all() == before
            hosts = set(conn.execute(text("SELECT host FROM message_hosts")).scalars())
            assert hosts == {
                "@host0.example>",
                "@host1.example>",
                "@host2.example>",
                "@two.example>",
                "",
                "@>",
                "@hôte.example>",
                "@lead>",
            }
            assert conn.execute(
                text("SELECT message_local FROM fragments WHERE article = :a"), {"a": 2**40}
            ).scalars().all() == ["<a@b", "<a@b"]
            columns = conn.execute(
                text(
                    "SELECT string_agg(attname, ',' ORDER BY attnum) FROM pg_attribute"
                    " WHERE attrelid = 'fragments_g11'::regclass AND attnum > 0 AND NOT attisdropped"
                )
            ).scalar_one()
            assert columns == "article,file_key,group_id,part,bytes,host_id,message_local"
            assert conn.execute(
                text("SELECT reloptions FROM pg_class WHERE relname = 'fragments_g11_pkey'")
            ).scalar_one() == ["fillfactor=100"]
        with engine.begin() as conn:  # rows COPYed without group_id land with their partition's
            conn.execute(
                text(
                    "INSERT INTO fragments_g11 (article, file_key, part, bytes, host_id, message_local)"
                    " VALUES (1, 2, 3, 4, 1, '<x')"
                )
            )
            assert conn.execute(text("SELECT group_id FROM fragments WHERE article = 1")).scalar_one() == 11
            conn.execute(text("DELETE FROM fragments WHERE article = 1"))
        command.downgrade(alembic_config(), "0006")
        with engine.connect() as conn:
            assert conn.execute(text(rows.format("fragments"))).all() == before
            assert "message_hosts" not in set(inspect(engine).get_table_names())
        command.downgrade(alembic_config(), "base")
    finally:
        engine.dispose()
        override_settings(settings)
        reset_engine()


def one_planned_range(conn, first: int, last: int) -> None:
    """Group 5 (alt.binaries.test) with its partitions (of the tables before 0030), and plan 1 of
    one range, 1: first..last."""
    conn.execute(text("INSERT INTO groups (id, name) VALUES (5, 'alt.binaries.test')"))
    for table in ("files", "fragments", "release_chunks"):
        conn.execute(text(f"CREATE TABLE {table}_g5 PARTITION OF {table} (group_id DEFAULT 5) FOR VALUES IN (5)"))
    conn.execute(
        text("INSERT INTO seed_plans (id, group_id, first_id, last_id) VALUES (1, 5, :a, :b)"), {"a": first, "b": last}
    )
    conn.execute(
        text(
            "INSERT INTO seed_ranges (id, plan_id, group_id, first_id, last_id, next_id) VALUES (1, 1, 5, :a, :b, :a)"
        ),
        {"a": first, "b": last},
    )


def test_0008_drops_the_fragments_key_and_records_the_batches_whose_fragments_are_in(postgres, settings):
    """0008 drops the fragments' key. A batch that may still be stored (accepted, or failed and
    retried later) whose fragments are in (its store failed after their commit) is recorded in
    stored_fragments, so its retry leaves them as they are; the others are not. Downgrade puts the
    key back."""
    url = postgres.create_database("seed_migration_0008")
    override_settings(Settings(database_url=url))
    engine = create_engine(url)
    big = 2**32
    try:
        command.upgrade(alembic_config(), "0007")
        with engine.begin() as conn:
            one_planned_range(conn, big, big + 9999)
            # (id, from, to, state, fragments in)
            batches = [
                (1, 0, 999, "gathered", True),
                (2, 1000, 1999, "accepted", True),
                (3, 2000, 2999, "accepted", False),
                (4, 3000, 3999, "failed", True),
                (5, 4000, 4999, "failed", False),
            ]
            host = conn.execute(text("INSERT INTO message_hosts (host) VALUES ('@x>') RETURNING id")).scalar_one()
            for batch_id, first, last, state, fragments in batches:
                conn.execute(
                    text(
                        "INSERT INTO seed_batches (id, range_id, batch_from, batch_to, content_type, body_bytes, state)"
                        " VALUES (:id, 1, :a, :b, 'application/msgpack', 0, :s)"
                    ),
                    {"id": batch_id, "a": big + first, "b": big + last, "s": state},
                )
                if fragments:
                    conn.execute(
                        text(
                            "INSERT INTO fragments (group_id, article, file_key, part, bytes, host_id, message_local)"
                            " SELECT 5, :a + n, 7, 1, 100, :h, '<p' || n FROM generate_series(0, 9) n"
                        ),
                        {"a": big + first, "h": host},
                    )
        command.upgrade(alembic_config(), "0008")
        with engine.connect() as conn:
            assert set(conn.execute(text("SELECT batch_id FROM stored_fragments")).scalars()) == {2, 4}
            assert (
                conn.execute(
                    text(
                        "SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid"
                        " WHERE c.relname IN ('fragments', 'fragments_g5')"
                    )
                ).scalar_one()
                == 0
            )
        with engine.begin() as conn:  # without the key, rows of an article already there go in
            conn.execute(
                text(
                    "INSERT INTO fragments (group_id, article, file_key, part, bytes, host_id,"
                    " message_local) VALUES (5, :a, 1, 1, 1, 1, '<x')"
                ),
                {"a": big},
            )
            conn.execute(text("DELETE FROM fragments WHERE message_local = '<x'"))
            conn.execute(text("DELETE FROM seed_batches WHERE id = 4"))  # its record goes with it
            assert set(conn.execute(text("SELECT batch_id FROM stored_fragments")).scalars()) == {2}
        command.downgrade(alembic_config(), "0007")
        with engine.connect() as conn:
            assert "stored_fragments" not in set(inspect(engine).get_table_names())
            assert conn.execute(
                text("SELECT reloptions FROM pg_class WHERE relname = 'fragments_g5_pkey'")
            ).scalar_one() == ["fillfactor=100"]
            assert conn.execute(text("SELECT count(*) FROM fragments")).scalar_one() == 30
        command.downgrade(alembic_config(), "base")
    finally:
        engine.dispose()
        override_settings(settings)
        reset_engine()


def test_a_partition_made_without_its_group_default_gets_it(db_session):
    """A partition without a group_id default (as migrations before 0006 made them) is given one,
    so rows COPYed without group_id land in it."""
    db_session.execute(text("CREATE TABLE fragment_packs_g4343 PARTITION OF fragment_packs FOR VALUES IN (4343)"))
    assert ensure_group_partitions(db_session, 4343) is True
    assert ensure_group_partitions(db_session, 4343) is False
    db_session.execute(
        text(
            "INSERT INTO fragment_packs_g4343 (file_keys, articles, parts, bytes, host_ids, message_locals)"
            " VALUES ('{2}', '{1}', '{3}', '{4}', '{1}', '{<x}')"
        )
    )
    assert db_session.execute(text("SELECT group_id FROM fragment_packs_g4343")).scalar_one() == 4343


def test_0018_fills_every_existing_post_from_its_name(postgres, settings):
    """Posts made before 0018 get their category and parsed fields at the upgrade (the very
    reading the join gives new ones), and lose them again on the way down."""
    url = postgres.create_database("seed_migration_0018")
    override_settings(Settings(database_url=url))
    engine = create_engine(url)
    try:
        command.upgrade(alembic_config(), "0017")
        with engine.begin() as conn:
            conn.execute(
                text("INSERT INTO groups (id, name) VALUES (4, 'alt.binaries.teevee'), (9, 'alt.binaries.e-book')")
            )
            conn.execute(
                text(
                    "INSERT INTO posts (group_id, key, name, poster, names, posters, releases, files_seen,"
                    " parts_expected, parts_seen, bytes, completion, first_post, last_post)"
                    " SELECT g, k, n, 'p', n, 'p', 1, 1, 1, 1, 1, 100, now(), now() FROM (VALUES"
                    " (4, 2^40::bigint, 'Show.Name.S01E02.720p.HDTV.x264-GRP'),"
                    " (4, -5, 'Film.Title.2019.1080p.BluRay.x264-GRP'),"
                    " (9, 7, 'a1b2c3d4e5f6a7b8c9d0e1f2a3b4c5d6')) AS t(g, k, n)"
                )
            )
        command.upgrade(alembic_config(), "0018")
        with engine.connect() as conn:
            rows = conn.execute(text("SELECT key, category, season, episode, year FROM posts ORDER BY key")).all()
        assert rows == [(-5, 2040, None, None, 2019), (7, 7020, None, None, None), (2**40, 5040, 1, 2, None)]
        command.downgrade(alembic_config(), "0017")
        with engine.connect() as conn:
            assert "category" not in {c["name"] for c in inspect(conn).get_columns("posts")}
    finally:
        engine.dispose()
        override_settings(settings)
        reset_engine()


def test_0024_names_the_end_state_joined_and_back(postgres, settings):
    """The batches that ended 'gathered' end 'joined' (the others keep their state) and a release's
    gathered_at is its joined_at, each value kept; the way down gives back both names."""
    url = postgres.create_database("seed_migration_0024")
    override_settings(Settings(database_url=url))
    engine = create_engine(url)
    big = 2**32
    states = ["gathered", "accepted", "stored", "failed"]
    try:
        command.upgrade(alembic_config(), "0023")
        with engine.begin() as conn:
            one_planned_range(conn, big, big + 3999)
            for n, state in enumerate(states):
                conn.execute(
                    text(
                        "INSERT INTO seed_batches (id, range_id, batch_from, batch_to, content_type, body_bytes, state)"
                        " VALUES (:id, 1, :a, :b, 'application/msgpack', 0, :s)"
                    ),
                    {"id": n + 1, "a": big + 1000 * n, "b": big + 1000 * n + 999, "s": state},
                )
            conn.execute(
                text(
                    "INSERT INTO releases (group_id, key, name, poster, gathered_at)"
                    " VALUES (5, 2^40::bigint, 'n', 'p', '2026-12-01 10:00+00')"
                )
            )
        batch_states = "SELECT state FROM seed_batches ORDER BY id"
        command.upgrade(alembic_config(), "0024")
        with engine.connect() as conn:
            assert conn.execute(text(batch_states)).scalars().all() == ["joined", "accepted", "stored", "failed"]
            stamp = conn.execute(text("SELECT joined_at FROM releases")).scalar_one()
            with pytest.raises(IntegrityError):
                conn.execute(text("UPDATE seed_batches SET state = 'gathered' WHERE id = 1"))
        command.downgrade(alembic_config(), "0023")
        with engine.connect() as conn:
            assert conn.execute(text(batch_states)).scalars().all() == states
            assert conn.execute(text("SELECT gathered_at FROM releases")).scalar_one() == stamp
    finally:
        engine.dispose()
        override_settings(settings)
        reset_engine()


def test_0030_packs_the_fragments_and_gives_them_back(postgres, settings):
    """0030 packs each group's fragments, PACK_ARTICLES articles at most a pack, each column an
    array compressed by lz4: the view `fragments` gives back every row (numbers past 2^32, an
    empty local part), fragments_with_ids every message-id, and the packs' index finds a file's
    articles; the way down gives back the table a row an article, with its index by file."""
    from app.models.catalog import PACK_ARTICLES
    from app.services.fragments import file_articles

    url = postgres.create_database("seed_migration_0030")
    override_settings(Settings(database_url=url))
    engine = create_engine(url)
    big = 2**32 + 704  # a multiple of 100: 2,500 articles make 25 packs
    rows = "SELECT group_id, article, file_key, part, bytes, host_id, message_local FROM fragments ORDER BY 1, 2"
    ids = "SELECT group_id, article, message_id FROM fragments_with_ids ORDER BY 1, 2"
    try:
        command.upgrade(alembic_config(), "0029")
        with engine.begin() as conn:
            host = conn.execute(text("INSERT INTO message_hosts (host) VALUES ('@x>') RETURNING id")).scalar_one()
            for group_id, count in ((3, 2500), (11, 5)):
                conn.execute(
                    text(
                        f"CREATE TABLE fragments_g{group_id} PARTITION OF fragments (group_id DEFAULT {group_id})"
                        f" FOR VALUES IN ({group_id})"
                    )
                )
                conn.execute(
                    text(
                        "INSERT INTO fragments (group_id, article, file_key, part, bytes, host_id, message_local)"
                        " SELECT :g, :a + n, n / 7 - 4611686018427387904, n % 7 + 1, n * 10, :h,"
                        " CASE WHEN n = 3 THEN '' ELSE '<p' || n END FROM generate_series(0, :c - 1) n"
                    ),
                    {"g": group_id, "a": big, "h": host, "c": count},
                )
            before = conn.execute(text(rows)).all(), conn.execute(text(ids)).all()
        command.upgrade(alembic_config(), "0030")
        with engine.connect() as conn:
            assert (conn.execute(text(rows)).all(), conn.execute(text(ids)).all()) == before
            packs = conn.execute(
                text(
                    "SELECT group_id, count(*), sum(cardinality(articles)), max(cardinality(articles))"
                    " FROM fragment_packs GROUP BY 1 ORDER BY 1"
                )
            ).all()
            assert [(g, n, articles) for g, n, articles, _ in packs] == [(3, 25, 2500), (11, 1, 5)]
            assert max(most for *_, most in packs) <= PACK_ARTICLES
            compressions = conn.execute(
                text(
                    "SELECT attname, attcompression FROM pg_attribute WHERE attrelid = 'fragment_packs_g3'::regclass"
                    " AND attnum > 0 AND NOT attisdropped AND attname <> 'group_id'"
                )
            ).all()
            assert len(compressions) == 6 and {c for _, c in compressions} == {"l"}
            file_key = -(2**62) + 200  # articles 1400 - 1406 of group 3
            found = conn.execute(
                text(f"SELECT article - :a, part FROM ({file_articles(':g', 'CAST(:key AS bigint)')}) f ORDER BY 1"),
                {"g": 3, "key": file_key, "a": big},
            ).all()
            assert found == [(1400 + n, n + 1) for n in range(7)]
        command.downgrade(alembic_config(), "0029")
        with engine.connect() as conn:
            assert (conn.execute(text(rows)).all(), conn.execute(text(ids)).all()) == before
            assert conn.execute(text("SELECT relkind FROM pg_class WHERE relname = 'fragments'")).scalar_one() == "p"
            assert conn.execute(text("SELECT to_regclass('ix_fragments_file') IS NOT NULL")).scalar_one()
            assert conn.execute(text("SELECT to_regclass('fragment_packs')")).scalar_one() is None
    finally:
        engine.dispose()
        override_settings(settings)
        reset_engine()


def test_0031_leaves_the_packs_arrays_out_of_analyze_on_every_partition(postgres, settings):
    """0031 sets the statistics target of the packs' six arrays to 0 on the partitions there are,
    ensure_group_partitions on each one made later, so that ANALYZE gathers group_id's alone; a
    file's articles are still found by the packs' index; the way down gives the default back."""
    from app.db import UNANALYZED_COLUMNS
    from app.models.catalog import FragmentPack
    from app.services.fragments import file_articles

    url = postgres.create_database("seed_migration_0031")
    override_settings(Settings(database_url=url))
    engine = create_engine(url)
    arrays = sorted(UNANALYZED_COLUMNS["fragment_packs"])
    # The list app.db keeps is every array of the model: a column added to the packs is named there.
    assert arrays == sorted(c.name for c in FragmentPack.__table__.columns if c.name != "group_id")
    targets = (
        "SELECT attname, attstattarget FROM pg_attribute WHERE attrelid = CAST(:t AS regclass)"
        " AND attnum > 0 AND NOT attisdropped AND attname <> 'group_id' ORDER BY 1"
    )
    analyzed = "SELECT attname FROM pg_stats WHERE tablename = :t ORDER BY 1"
    big = 2**32 + 9
    packs = (
        "INSERT INTO fragment_packs (group_id, file_keys, articles, parts, bytes, host_ids, message_locals)"
        " SELECT :g, ARRAY[n / 3, n / 3 + 1], ARRAY[CAST(:a AS bigint) + 2 * n, CAST(:a AS bigint) + 2 * n + 1],"
        " '{1,2}', '{700000,700000}', '{1,1}', ARRAY['<a' || n, '<b' || n] FROM generate_series(0, 299) n"
    )
    try:
        command.upgrade(alembic_config(), "0030")
        with engine.begin() as conn:
            conn.execute(
                text(
                    "CREATE TABLE fragment_packs_g3 PARTITION OF fragment_packs (group_id DEFAULT 3) FOR VALUES IN (3)"
                )
            )
            assert [t for _, t in conn.execute(text(targets), {"t": "fragment_packs_g3"})] == [-1] * 6
        command.upgrade(alembic_config(), "0031")
        with engine.begin() as conn:
            assert ensure_group_partitions(conn, 12) is True
        with engine.begin() as conn:
            for group_id in (3, 12):
                table = f"fragment_packs_g{group_id}"
                assert conn.execute(text(targets), {"t": table}).all() == [(name, 0) for name in arrays]
                conn.execute(text(packs), {"g": group_id, "a": big})
                conn.execute(text(f"ANALYZE {table}"))
                assert conn.execute(text(analyzed), {"t": table}).scalars().all() == ["group_id"]
                # File 40 is the first key of the packs n = 120 - 122 and the second of n = 117 - 119.
                found = conn.execute(
                    text(
                        f"SELECT article - :a, part FROM ({file_articles(':g', 'CAST(:key AS bigint)')}) f ORDER BY 1"
                    ),
                    {"g": group_id, "key": 40, "a": big},
                ).all()
                assert found == [(2 * n + 1, 2) for n in (117, 118, 119)] + [(2 * n, 1) for n in (120, 121, 122)]
        command.downgrade(alembic_config(), "0030")
        with engine.connect() as conn:
            for table in ("fragment_packs_g3", "fragment_packs_g12"):
                assert [t for _, t in conn.execute(text(targets), {"t": table})] == [-1] * 6
    finally:
        engine.dispose()
        override_settings(settings)
        reset_engine()
