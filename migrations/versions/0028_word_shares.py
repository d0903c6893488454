"""The words' shares a search sizes its window by, kept apart from what PostgreSQL plans with: the
statistics object `posts_word_shares` keeps the 10,000 commonest words of the posts' names
(statistics target 1000), and the column `words` goes back to PostgreSQL's default (1,000 words).

A search reads the shares every minute (app.services.search, COMMON_WORDS); PostgreSQL reads a
column's statistics every time it plans a statement that matches it. Planning `words @@ query`
copies and takes apart the column's whole list of common words: with 10,000 of them (0027) that
was 0.7 ms a match, against 0.16 ms with 1,000 (EXPLAIN's planning time on bench/catalog.py's
1,000,000 posts), and a search's statement plans one or two matches every time it runs. The
statistics of an expression (here `strip(words)`, the same words without their positions) are
read only for a clause on that expression, which no statement has, so the planner never loads
them. ANALYZE samples as many posts as before (the larger target sets the sample) and counts
the words twice.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06 20:40:00.000000+00:00
"""

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

# 0027's reason: on 10,000,010 posts the 1,000th word was in 0.043% of them, and `mabu`, in 0.126%,
# was left out, so that a search of it got no window (401 ms against 14.5 ms in one).
SHARES_STATISTICS = 1000


def upgrade() -> None:
    op.execute("CREATE STATISTICS posts_word_shares ON (strip(words)) FROM posts")
    op.execute(f"ALTER STATISTICS posts_word_shares SET STATISTICS {SHARES_STATISTICS}")
    op.execute("ALTER TABLE posts ALTER COLUMN words SET STATISTICS -1")


def downgrade() -> None:
    op.execute(f"ALTER TABLE posts ALTER COLUMN words SET STATISTICS {SHARES_STATISTICS}")
    op.execute("DROP STATISTICS posts_word_shares")
