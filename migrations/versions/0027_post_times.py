"""When a post's last article was posted, as words: `times`, the hour, the day and the 16 days
(counted from 1970-01-01 UTC) its last_post falls in, and the words' index made of both columns. A
search of words looking among the newest posts first (app.services.search, MATCHING_WINDOWED) asks
for the hours since its window's start as these words, and GIN intersects them with its words inside
the index: it fetches the posts in the window only. With last_post's own index, PostgreSQL fetched
every post having the words to keep those in the window (EXPLAIN ANALYZE of `bizesiki` on
bench/catalog.py's 1,000,000 posts: 4,180 pages read, 28.9 ms; 470 pages with the times,
docs/benchmarks.md).

post_times is immutable (a moment's hour in UTC does not depend on the session's time zone), as a
generated column needs, and made of immutable functions only, so that PostgreSQL inlines it: the
column's expression runs without a call to it. Called (its first form read the seconds since 1970,
a stable function), it cost 5.7 – 6.3 µs a post in a scan of bench/catalog.py's 1,000,001 posts,
against 1.3 – 2.1 inlined, the scan's 0.7 µs included.

Revision ID: 0027
Revises: 0026
Create Date: 2026-12-06 17:40:00.000000+00:00
"""

from alembic import op

revision = "0027"
down_revision = "0026"
branch_labels = None
depends_on = None

# The hours since 1970-01-01 of a post's last article in UTC, then its days and its 16 days
# (search.time_words computes the same). NULL for a post without dates.
POST_TIMES = """
    CREATE FUNCTION post_times(last_post timestamptz) RETURNS tsvector
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS $$
        SELECT CASE WHEN last_post IS NOT NULL THEN array_to_tsvector(ARRAY[
            '1h' || (((last_post AT TIME ZONE 'UTC')::date - DATE '1970-01-01')::bigint * 24
                     + extract(hour FROM last_post AT TIME ZONE 'UTC')::bigint)::text,
            '24h' || ((last_post AT TIME ZONE 'UTC')::date - DATE '1970-01-01')::text,
            '384h' || floor(((last_post AT TIME ZONE 'UTC')::date - DATE '1970-01-01') / 16.0)::bigint::text]) END
    $$
"""
WORDS_STATISTICS = 1000


def upgrade() -> None:
    op.execute(POST_TIMES)
    op.execute("ALTER TABLE posts ADD COLUMN times tsvector GENERATED ALWAYS AS (post_times(last_post)) STORED")
    op.execute("DROP INDEX ix_posts_words")
    op.execute("CREATE INDEX ix_posts_words ON posts USING gin (words, times) WITH (gin_pending_list_limit = 512)")
    # The statistics keep the 10,000 commonest words rather than 1,000: a search sizes its window
    # by them, and a word not among them gets none. On 10,000,010 posts the 1,000th was in 0.043%
    # of them, and `mabu`, in 0.126%, was left out: its 12,570 posts fetched whole, 401 ms, against
    # 14.5 ms in a window (EXPLAIN ANALYZE, docs/benchmarks.md). ANALYZE of those posts takes 12 s.
    op.execute(f"ALTER TABLE posts ALTER COLUMN words SET STATISTICS {WORDS_STATISTICS}")


def downgrade() -> None:
    op.execute("ALTER TABLE posts ALTER COLUMN words SET STATISTICS -1")
    op.execute("DROP INDEX ix_posts_words")
    op.execute("CREATE INDEX ix_posts_words ON posts USING gin (words) WITH (gin_pending_list_limit = 512)")
    op.execute("ALTER TABLE posts DROP COLUMN times")
    op.execute("DROP FUNCTION post_times(timestamptz)")
