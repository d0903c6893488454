"""Catalog: fragments and files without alignment padding, fragments' key packed, group_id defaulted

Partitions default group_id to their group (rows are COPYed without it).

Fragments and files are rebuilt with their 8-byte columns first (fragments: article, file_key,
group_id, part, bytes, message_id: 4 bytes less padding in each row; files: about 7); a file's
poster is NULL when it is its release's (stored once, with the release: about 34 bytes less for
each file); files lose ix_files_release (the store keeps releases' aggregates up to date
itself: only release repair reads files by release, and it scans the partition); the fragments'
primary key gets fillfactor 100 (fragments go in in article order, a range at a time: the
rightmost and "localized ascending" page splits then leave full pages). Existing rows are carried
over partition by partition (batches stored but not gathered are gathered first); downgrade
rebuilds the 0005 layout the same way.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30 11:45:00.000000+00:00
"""

from alembic import op
import sqlalchemy as sa


revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None

# (column, type) in table order, per layout.
FRAGMENTS_0005 = [
    ("group_id", "integer"),
    ("article", "bigint"),
    ("file_key", "bigint"),
    ("part", "integer"),
    ("bytes", "integer"),
    ("message_id", "text"),
]
FRAGMENTS_0006 = [
    ("article", "bigint"),
    ("file_key", "bigint"),
    ("group_id", "integer"),
    ("part", "integer"),
    ("bytes", "integer"),
    ("message_id", "text"),
]
FILES_0005 = [
    ("group_id", "integer"),
    ("key", "bigint"),
    ("release_key", "bigint"),
    ("name", "text"),
    ("subject", "text"),
    ("poster", "text"),
    ("posted_at", "timestamptz NULL"),
    ("file_index", "integer NULL"),
    ("file_count", "integer NULL"),
    ("parts", "integer NULL"),
]
FILES_0006 = [
    ("key", "bigint"),
    ("release_key", "bigint"),
    ("posted_at", "timestamptz NULL"),
    ("group_id", "integer"),
    ("file_index", "integer NULL"),
    ("file_count", "integer NULL"),
    ("parts", "integer NULL"),
    ("name", "text"),
    ("subject", "text"),
    ("poster", "text NULL"),
]
# files.poster from 0006 on: NULL when it is its release's poster (stored once, with the release).
POSTER_ONCE = {"poster": "CASE WHEN o.poster = r.poster THEN NULL ELSE o.poster END"}
POSTER_BACK = {"poster": "coalesce(o.poster, r.poster, '')"}
WITH_RELEASE = " LEFT JOIN releases r ON r.group_id = o.group_id AND r.key = o.release_key"


def _partitions(conn, table: str) -> list[tuple[str, int]]:
    """(partition name, group id) of a partitioned table."""
    rows = conn.execute(
        sa.text(
            "SELECT c.relname, pg_get_expr(c.relpartbound, c.oid) FROM pg_inherits i"
            " JOIN pg_class c ON c.oid = i.inhrelid WHERE i.inhparent = to_regclass(:t) ORDER BY 1"
        ),
        {"t": table},
    ).all()
    found = []
    for name, bound in rows:
        # FOR VALUES IN (7)
        found.append((name, int(bound.split("(", 1)[1].rstrip(")").strip())))
    return found


def _rebuild(
    table: str,
    columns: list,
    primary_key: str,
    key_options: str,
    indexes: list[tuple[str, str]],
    order_by: str,
    defaults: bool,
    values: dict[str, str] | None = None,
    join: str = "",
) -> None:
    """Recreate a partitioned table with `columns` in this order, carrying every partition's rows."""
    conn = op.get_bind()
    old = f"{table}_old"
    partitions = _partitions(conn, table)
    op.execute(f'ALTER TABLE "{table}" RENAME TO "{old}"')
    op.execute(f'ALTER TABLE "{old}" RENAME CONSTRAINT "pk_{table}" TO "pk_{old}"')
    for index, _ in indexes:
        op.execute(f'ALTER INDEX IF EXISTS "{index}" RENAME TO "{index}_old"')
    for name, _ in partitions:
        op.execute(f'ALTER TABLE "{name}" RENAME TO "{name}_old"')
        for index in (
            conn.execute(
                sa.text("SELECT indexrelid::regclass::text FROM pg_index WHERE indrelid = to_regclass(:t)"),
                {"t": f'"{name}_old"'},
            )
            .scalars()
            .all()
        ):
            op.execute(f'ALTER INDEX {index} RENAME TO "{index.strip(chr(34))}_old"')
    definition = ", ".join(f"{c} {t}" if t.endswith("NULL") else f"{c} {t} NOT NULL" for c, t in columns)
    op.execute(
        f'CREATE TABLE "{table}" ({definition}, CONSTRAINT "pk_{table}" PRIMARY KEY ({primary_key})'
        f"{key_options}) PARTITION BY LIST (group_id)"
    )
    for index, index_columns in indexes:
        if index_columns:  # None: the index goes
            op.execute(f'CREATE INDEX "{index}" ON "{table}" ({index_columns})')
    names = ", ".join(c for c, _ in columns)
    selected = ", ".join((values or {}).get(c, f"o.{c}") for c, _ in columns)
    for name, group_id in partitions:
        default = f" (group_id DEFAULT {group_id})" if defaults else ""
        op.execute(f'CREATE TABLE "{name}" PARTITION OF "{table}"{default} FOR VALUES IN ({group_id})')
        op.execute(f'INSERT INTO "{name}" ({names}) SELECT {selected} FROM "{name}_old" o{join} ORDER BY o.{order_by}')
    op.execute(f'DROP TABLE "{old}" CASCADE')


def _group_defaults(table: str, on: bool) -> None:
    for name, group_id in _partitions(op.get_bind(), table):
        if on:
            op.execute(f'ALTER TABLE "{name}" ALTER COLUMN group_id SET DEFAULT {group_id}')
        else:
            op.execute(f'ALTER TABLE "{name}" ALTER COLUMN group_id DROP DEFAULT')


GATHER = """
    WITH chunk AS (
        SELECT release_key, sum(fragments) AS fragments, sum(bytes) AS bytes,
               min(first_post) AS first_post, max(last_post) AS last_post
          FROM release_chunks WHERE group_id = :g AND release_key = ANY(:keys)
         GROUP BY release_key),
    file AS (
        SELECT release_key, count(*) AS files, coalesce(sum(parts), 0) AS parts
          FROM files WHERE group_id = :g AND release_key = ANY(:keys)
         GROUP BY release_key)
    UPDATE releases r
       SET files_seen = file.files, parts_expected = file.parts, parts_seen = chunk.fragments,
           bytes = chunk.bytes, first_post = chunk.first_post, last_post = chunk.last_post,
           completion = CASE WHEN file.parts > 0
                             THEN least(100.0, 100.0 * chunk.fragments / file.parts) ELSE 0 END,
           gathered_at = now()
      FROM chunk JOIN file USING (release_key)
     WHERE r.group_id = :g AND r.key = chunk.release_key
"""


def _gather_stored_batches() -> None:
    """Batches stored but not gathered yet (by the store before 0006) are gathered here, while
    ix_files_release still exists: from 0006 on the store keeps releases up to date itself."""
    conn = op.get_bind()
    groups = conn.execute(
        sa.text(
            "SELECT r.group_id, array_agg(DISTINCT k) FROM seed_batches b JOIN seed_ranges r ON r.id = b.range_id"
            " CROSS JOIN LATERAL unnest(b.release_keys) k WHERE b.state = 'stored' GROUP BY r.group_id"
        )
    ).all()
    for group_id, keys in groups:
        conn.execute(sa.text(GATHER), {"g": group_id, "keys": list(keys)})
    conn.execute(sa.text("UPDATE seed_batches SET state = 'gathered', release_keys = NULL WHERE state = 'stored'"))


def upgrade() -> None:
    _gather_stored_batches()
    _rebuild("fragments", FRAGMENTS_0006, "group_id, article", " WITH (fillfactor = 100)", [], "article", defaults=True)
    # ix_files_release goes: only gathering from scratch read it, and from this migration on the
    # store keeps the releases' aggregates up to date as it adds rows (release repair scans the
    # partition).
    _rebuild(
        "files",
        FILES_0006,
        "group_id, key",
        "",
        [("ix_files_release", None)],
        "key",
        defaults=True,
        values=POSTER_ONCE,
        join=WITH_RELEASE,
    )
    _group_defaults("release_chunks", on=True)


def downgrade() -> None:
    _group_defaults("release_chunks", on=False)
    _rebuild(
        "files",
        FILES_0005,
        "group_id, key",
        "",
        [("ix_files_release", "group_id, release_key")],
        "key",
        defaults=False,
        values=POSTER_BACK,
        join=WITH_RELEASE,
    )
    _rebuild("fragments", FRAGMENTS_0005, "group_id, article", "", [], "article", defaults=False)
