"""Migrations build the schema the models describe; partitions are made on demand."""
from alembic import command
from alembic.config import Config
from sqlalchemy import create_engine, inspect, text

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
        assert {"groups", "seed_nodes", "seed_plans", "seed_ranges", "seed_batches", "files",
                "fragments", "releases", "release_chunks", "rule_counts", "spool_chunks"} <= tables
        with engine.connect() as conn:
            kinds = dict(conn.execute(text(
                "SELECT relname, relkind FROM pg_class WHERE relname IN ('files', 'fragments', 'release_chunks')"
            )).all())
        assert kinds == {"files": "p", "fragments": "p", "release_chunks": "p"}
        command.downgrade(alembic_config(), "base")
        assert "files" not in set(inspect(engine).get_table_names())
        engine.dispose()
    finally:
        override_settings(settings)
        reset_engine()


def test_article_numbers_are_bigint_everywhere(engine):
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT table_name, column_name, data_type FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND (column_name IN"
            " ('first_id', 'last_id', 'next_id', 'batch_from', 'batch_to', 'article', 'chunk_from',"
            "  'chunk_to', 'low_mark', 'high_mark', 'live_first', 'backfill_id'))"
        )).all()
    assert len(rows) >= 14
    assert {r.data_type for r in rows} == {"bigint"}, rows


def test_partitions_are_idempotent_and_hold_numbers_past_2_32(db_session):
    assert ensure_group_partitions(db_session, 4242) is True
    assert ensure_group_partitions(db_session, 4242) is False
    big = 2**32 + 17
    db_session.execute(text(
        "INSERT INTO fragments (group_id, article, file_key, part, bytes, message_id)"
        " VALUES (4242, :a, -9223372036854775808, 1, 700000, '<x@y>')"
    ), {"a": big})
    stored = db_session.execute(text("SELECT article FROM fragments_g4242")).scalar_one()
    assert stored == big
