"""Posts: releases joined into the post they came from (post_key), found by their folded name;
companions (a lone .nfo, .sfv, .nzb posted beside a set)

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 22:00:00.000000+00:00
"""
from alembic import op


revision = '0011'
down_revision = '0010'
branch_labels = None
depends_on = None

# The release name without case, spaces or punctuation: "The.Walking.Dead" and "the walking dead"
# are one name. app.services.ingest.posts joins releases of one name posted close in time.
NAME_FOLD = "lower(regexp_replace(name, '[[:space:][:punct:]]+', '', 'g'))"

POSTS_VIEW = """
CREATE VIEW posts AS
SELECT group_id,
       coalesce(post_key, key) AS key,
       (array_agg(name ORDER BY files_seen DESC, key))[1] AS name,
       (array_agg(poster ORDER BY files_seen DESC, key))[1] AS poster,
       count(*) AS releases,
       least(sum(files_seen), 2147483647)::int AS files_seen,
       least(sum(parts_expected), 9223372036854775807)::bigint AS parts_expected,
       least(sum(parts_seen), 9223372036854775807)::bigint AS parts_seen,
       least(sum(bytes), 9223372036854775807)::bigint AS bytes,
       CASE WHEN sum(parts_expected) > 0
            THEN least(100.0, 100.0 * sum(parts_seen) / sum(parts_expected))::real ELSE 0 END AS completion,
       min(first_post) AS first_post,
       max(last_post) AS last_post
  FROM releases
 GROUP BY group_id, coalesce(post_key, key)
"""


# The indexes lead with the name and the post, not the group: the store's probes of a release by
# (group_id, key) must keep to the primary key, also in a group the planner has no statistics of.


def upgrade() -> None:
    op.execute("ALTER TABLE releases ADD COLUMN post_key bigint")
    op.execute("ALTER TABLE releases ADD COLUMN companion boolean NOT NULL DEFAULT false")
    op.execute(f"ALTER TABLE releases ADD COLUMN name_fold text GENERATED ALWAYS AS ({NAME_FOLD}) STORED")
    op.execute("CREATE INDEX ix_releases_name_fold ON releases (name_fold, group_id)")
    op.execute("CREATE INDEX ix_releases_post ON releases ((coalesce(post_key, key)), group_id)")
    op.execute(POSTS_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW posts")
    op.execute("DROP INDEX ix_releases_post")
    op.execute("DROP INDEX ix_releases_name_fold")
    op.execute("ALTER TABLE releases DROP COLUMN name_fold")
    op.execute("ALTER TABLE releases DROP COLUMN companion")
    op.execute("ALTER TABLE releases DROP COLUMN post_key")
