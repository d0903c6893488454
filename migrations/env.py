"""Alembic environment: the app's settings, its metadata, and timeouts so a migration never
queues behind long transactions forever (warehouse does the same)."""

from logging.config import fileConfig

from alembic import context
from sqlalchemy import text

import app.models  # noqa: F401  (registers every table on Base.metadata)
from app.config import get_settings
from app.db import Base, is_partition_name, make_engine

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logging", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def include_name(name, type_, parent_names):
    # A group's partitions are made at run time, not by migrations.
    return not (type_ == "table" and name is not None and is_partition_name(name))


def run_migrations_offline() -> None:
    context.configure(
        url=get_settings().database_url,
        target_metadata=target_metadata,
        literal_binds=True,
        include_name=include_name,
    )
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    settings = get_settings()
    engine = config.attributes.get("engine") or make_engine(settings)
    with engine.connect() as connection:
        connection.execute(text("SET lock_timeout = '4s'"))
        connection.execute(text("SET statement_timeout = '5min'"))
        if settings.db_search_path:
            schema = settings.db_search_path.split(",")[0]
            connection.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{schema}"'))
        connection.commit()
        context.configure(
            connection=connection,
            target_metadata=target_metadata,
            include_name=include_name,
            compare_type=True,
        )
        with context.begin_transaction():
            context.run_migrations()


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
