"""Posts keep what their names say: the newznab category by what the post is, and the parsed
fields the newznab functions filter on and show (title, year, season, episodes, air date,
resolution, source, video codec, languages)

Every existing post is parsed here, a page at a time (app.services.postnames.refill, the very
code the join and `flask seed names refresh` run), so that a catalog upgraded in place answers
t=tvsearch and category filters at once. The new index serves searches without words in some
categories (Sonarr's and Radarr's RSS sync), newest first.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-05 01:30:00.000000+00:00
"""

from alembic import op
from sqlalchemy.orm import Session

from app.services import postnames

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

COLUMNS = (
    ("category", "smallint NOT NULL DEFAULT 8010"),
    ("year", "smallint"),
    ("season", "smallint"),
    ("episode", "smallint"),
    ("episode_last", "smallint"),
    ("resolution", "smallint"),
    ("air_date", "date"),
    ("title", "text"),
    ("source", "text"),
    ("video", "text"),
    ("languages", "text"),
)


def upgrade() -> None:
    op.execute("ALTER TABLE posts " + ", ".join(f"ADD COLUMN {name} {kind}" for name, kind in COLUMNS))
    postnames.refill(Session(bind=op.get_bind()))
    op.execute("CREATE INDEX ix_posts_category_newest ON posts (category, last_post DESC NULLS LAST, group_id, key)")


def downgrade() -> None:
    op.execute("DROP INDEX ix_posts_category_newest")
    op.execute("ALTER TABLE posts " + ", ".join(f"DROP COLUMN {name}" for name, _ in COLUMNS))
