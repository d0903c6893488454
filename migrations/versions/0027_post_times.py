"""When a post's last article was posted, as words: `times`, the day, the 16 days and the 256 days
(counted from 1970-01-01 UTC) its last_post falls in, and the words' index made of both columns. A
search of words looking among the newest posts first (app.services.search, MATCHING_WINDOWED) asks
for the days since its window's start as these words, and GIN intersects them with its words inside
the index: it fetches the posts in the window only. With last_post's own index, PostgreSQL fetched
every post having the words to keep those in the window (EXPLAIN ANALYZE of `bizesiki` on
bench/catalog.py's 1,000,000 posts: 4,180 pages read, 28.9 ms; 434 pages, 2.8 ms with the days,
docs/benchmarks.md).

post_times is immutable (the seconds since 1970 of a moment do not depend on the time zone), as a
generated column needs.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-06 17:40:00.000000+00:00
"""

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # A day is 86,400 seconds since 1970 (UTC, no leap seconds): the same number Python computes
    # (search.time_words). NULL for a post without dates.
    op.execute("""
        CREATE FUNCTION post_times(last_post timestamptz) RETURNS tsvector
        LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE AS $$
            SELECT array_to_tsvector(ARRAY[
                '1d' || floor(extract(epoch FROM last_post) / 86400)::bigint,
                '16d' || floor(extract(epoch FROM last_post) / (86400 * 16))::bigint,
                '256d' || floor(extract(epoch FROM last_post) / (86400 * 256))::bigint])
        $$
    """)
    op.execute("ALTER TABLE posts ADD COLUMN times tsvector GENERATED ALWAYS AS (post_times(last_post)) STORED")
    op.execute("DROP INDEX ix_posts_words")
    op.execute("CREATE INDEX ix_posts_words ON posts USING gin (words, times) WITH (gin_pending_list_limit = 512)")


def downgrade() -> None:
    op.execute("DROP INDEX ix_posts_words")
    op.execute("CREATE INDEX ix_posts_words ON posts USING gin (words) WITH (gin_pending_list_limit = 512)")
    op.execute("ALTER TABLE posts DROP COLUMN times")
    op.execute("DROP FUNCTION post_times(timestamptz)")
