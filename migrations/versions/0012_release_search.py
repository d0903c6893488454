"""Release search: a full-text index over the words of each release's name

A release's name is read as words: everything that is not a letter or a digit is a space
('The.Walking.Dead.S03E06.INTERNAL.720p.HDTV.x264-EVOLVE' is the words the, walking, dead,
s03e06, internal, 720p, hdtv, x264, evolve), with the 'simple' text search configuration (words
lower-cased, no stemming, no stop words). The GIN index over that expression is what
app.services.search finds releases by; its queries repeat the expression exactly, or the planner
would not use the index.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-04 10:00:00.000000+00:00
"""

from alembic import op


revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

# The colons are escaped for SQLAlchemy's text(), which would read ':alnum' as a parameter.
NAME_WORDS = r"to_tsvector('simple'::regconfig, regexp_replace(name, '[^[\:alnum\:]]+', ' ', 'g'))"


def upgrade() -> None:
    op.execute(f"CREATE INDEX ix_releases_name_words ON releases USING gin ({NAME_WORDS})")


def downgrade() -> None:
    op.execute("DROP INDEX ix_releases_name_words")
