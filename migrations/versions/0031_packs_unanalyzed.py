"""The fragment packs' arrays left out of ANALYZE (statistics target 0).

ANALYZE of a packs partition decompressed every sampled pack and counted each element of its six
arrays: on bench/catalog.py's catalog, a partition of 21,108 packs took 3.0 - 3.6 s, and
autovacuum's analyze of the e-book group's partition in a bench/e2e.py run of 2,000,000 articles
1.38 s of PostgreSQL's CPU (0.7 µs an article); 52 ms with the arrays left out (docs/benchmarks.md).
No statement is planned by their values: a file's packs are found by the GIN index of file_keys,
with the same plan on containment's default selectivity. The target is set on the partitioned
table, which gives it to the partitions there are; app.db.ensure_group_partitions gives it to each
partition made later. Statistics gathered before stay as they are (only a superuser may remove
them); no plan changes by them.

Revision ID: 0031
Revises: 0030
Create Date: 2026-12-07 23:00:00.000000+00:00
"""

from alembic import op

revision = "0031"
down_revision = "0030"
branch_labels = None
depends_on = None

PACK_COLUMNS = ("file_keys", "articles", "parts", "bytes", "host_ids", "message_locals")


def _targets(target: int) -> None:
    op.execute(
        "ALTER TABLE fragment_packs " + ", ".join(f"ALTER COLUMN {c} SET STATISTICS {target}" for c in PACK_COLUMNS)
    )


def upgrade() -> None:
    _targets(0)


def downgrade() -> None:
    _targets(-1)
