"""Fragments stored in packs: a row for up to PACK_ARTICLES articles of a batch, each column an array.

A row an article cost 72 bytes of heap and about 9 of index an article, and its COPY with its
index by file was about 40% of PostgreSQL's time for each batch (docs/benchmarks.md). A pack holds
its articles' columns as arrays, compressed by lz4, and a GIN index of its files' keys finds the
packs of a file. The view `fragments` unpacks them, in the columns the table had, for reads that
are not by file (counts, the tests' ground truth); `fragments_with_ids` is that view with each
message-id whole again. Existing fragments are packed by article number, PACK_ARTICLES at most a
pack, partition by partition.

Revision ID: 0030
Revises: 0029
Create Date: 2026-12-07 02:00:00.000000+00:00
"""

from alembic import op
from sqlalchemy import text

revision = "0030"
down_revision = "0029"
branch_labels = None
depends_on = None

PACK_ARTICLES = 100
# The packs' array columns, each compressed by lz4 (faster than PostgreSQL's default, pglz).
PACK_COLUMNS = [
    ("file_keys", "bigint[]"),
    ("articles", "bigint[]"),
    ("parts", "integer[]"),
    ("bytes", "integer[]"),
    ("host_ids", "integer[]"),
    ("message_locals", "text[]"),
]
# Each pack column's name, and that of the fragments' column it holds.
UNPACKED = [
    ("file_keys", "file_key"),
    ("articles", "article"),
    ("parts", "part"),
    ("bytes", "bytes"),
    ("host_ids", "host_id"),
    ("message_locals", "message_local"),
]
FRAGMENTS_VIEW = (
    "CREATE VIEW fragments AS SELECT p.group_id, u.article, u.file_key, u.part, u.bytes, u.host_id,"
    " u.message_local FROM fragment_packs p CROSS JOIN LATERAL"
    " unnest(p.file_keys, p.articles, p.parts, p.bytes, p.host_ids, p.message_locals)"
    " AS u(file_key, article, part, bytes, host_id, message_local)"
)
WITH_IDS_VIEW = (
    "CREATE VIEW fragments_with_ids AS SELECT f.group_id, f.article, f.file_key, f.part, f.bytes,"
    " f.message_local || h.host AS message_id FROM fragments f JOIN message_hosts h ON h.id = f.host_id"
)
FRAGMENTS_0029 = (
    "CREATE TABLE fragments (article bigint NOT NULL, file_key bigint NOT NULL, group_id integer NOT NULL,"
    " part integer NOT NULL, bytes integer NOT NULL, host_id integer NOT NULL, message_local text NOT NULL)"
    " PARTITION BY LIST (group_id)"
)


def _groups(table: str) -> list[int]:
    """The groups of the table's partitions (named table_g<group>)."""
    rows = op.get_bind().execute(
        text(
            "SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid"
            " WHERE i.inhparent = CAST(:table AS regclass) ORDER BY c.relname"
        ),
        {"table": table},
    )
    return sorted(int(name.rpartition("_g")[2]) for (name,) in rows)


def _partition(table: str, group_id: int) -> None:
    op.execute(
        f'CREATE TABLE "{table}_g{group_id}" PARTITION OF {table} (group_id DEFAULT {group_id})'
        f" FOR VALUES IN ({group_id})"
    )


def upgrade() -> None:
    columns = ", ".join(f"{name} {kind} COMPRESSION lz4 NOT NULL" for name, kind in PACK_COLUMNS)
    op.execute(f"CREATE TABLE fragment_packs (group_id integer NOT NULL, {columns}) PARTITION BY LIST (group_id)")
    op.execute("CREATE INDEX ix_fragment_packs_files ON fragment_packs USING gin (file_keys)")
    aggregates = ", ".join(f"array_agg({column} ORDER BY article)" for _, column in UNPACKED)
    names = ", ".join(name for name, _ in UNPACKED)
    for group_id in _groups("fragments"):
        _partition("fragment_packs", group_id)
        op.execute(
            f'INSERT INTO "fragment_packs_g{group_id}" ({names}) SELECT {aggregates}'
            f' FROM "fragments_g{group_id}" GROUP BY article / {PACK_ARTICLES}'
        )
    op.execute("DROP VIEW fragments_with_ids")
    op.execute("DROP TABLE fragments")
    op.execute(FRAGMENTS_VIEW)
    op.execute(WITH_IDS_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW fragments_with_ids")
    op.execute("ALTER VIEW fragments RENAME TO fragments_unpacked")
    op.execute(FRAGMENTS_0029)
    columns = "article, file_key, part, bytes, host_id, message_local"
    for group_id in _groups("fragment_packs"):
        _partition("fragments", group_id)
        op.execute(
            f'INSERT INTO "fragments_g{group_id}" ({columns}) SELECT {columns} FROM fragments_unpacked'
            f" WHERE group_id = {group_id} ORDER BY article"
        )
    op.execute("CREATE INDEX ix_fragments_file ON fragments (file_key)")
    op.execute("DROP VIEW fragments_unpacked")
    op.execute("DROP TABLE fragment_packs")
    op.execute(WITH_IDS_VIEW)
