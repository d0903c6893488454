"""Posts vacuumed once a few thousand of their row versions are dead, their indexes with them.

A post's row is written again when a later batch adds to it or an inspection tells of it, so the
dead versions of rows are among the newest posts, where every search looks first; each keeps its
entries in the words' GIN index and the b-trees until a vacuum removes them, and a search fetches
and drops every one of them its index scans find. On bench/catalog.py's 1,000,000 posts, 10,000
dead versions among the newest 5,000 posts cost PostgreSQL 4.17 - 5.72 ms of CPU a search against
3.10 - 3.25 (400 searches in process, /tmp/ps/prof.py, a one-off; docs/benchmarks.md). PostgreSQL's
defaults wait for a fifth of the table (200,000 dead versions at 1,000,000 posts), and a vacuum of
dead versions on fewer than 2% of a table's pages leaves its indexes as they are
(`vacuum_index_cleanup` auto: 5,000 dead versions on 10,000,010 posts, "index scan bypassed"),
which keeps the searches as slow (4.20 - 4.38 ms with the indexes left on 1,000,000). So the posts
are vacuumed past AUTOVACUUM_DEAD dead versions whatever the table's size, with their indexes: a
vacuum of 5,000 dead versions took 0.74 - 0.88 s of CPU on 10,000,010 posts, 0.2 - 0.3 s on
1,000,000, and autovacuum runs at most once a minute (its naptime).

Revision ID: 0029
Revises: 0028
Create Date: 2026-12-06 23:50:00.000000+00:00
"""

from alembic import op

revision = "0029"
down_revision = "0028"
branch_labels = None
depends_on = None

AUTOVACUUM_DEAD = 2000


def upgrade() -> None:
    op.execute(
        "ALTER TABLE posts SET (autovacuum_vacuum_scale_factor = 0,"
        f" autovacuum_vacuum_threshold = {AUTOVACUUM_DEAD}, vacuum_index_cleanup = on)"
    )


def downgrade() -> None:
    op.execute(
        "ALTER TABLE posts RESET (autovacuum_vacuum_scale_factor, autovacuum_vacuum_threshold, vacuum_index_cleanup)"
    )
