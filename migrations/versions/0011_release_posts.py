"""Posts: releases joined into the post they came from (release_posts), found by the hash of
their folded name (releases.name_hash); releases whose files are metadata only marked

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-03 22:00:00.000000+00:00
"""

import re
from hashlib import blake2b

from alembic import op
import sqlalchemy as sa


revision = "0011"
down_revision = "0010"
branch_labels = None
depends_on = None

POSTS_VIEW = """
CREATE VIEW posts AS
SELECT r.group_id,
       coalesce(p.post_key, r.key) AS key,
       (array_agg(r.name ORDER BY r.files_seen DESC, r.key))[1] AS name,
       (array_agg(r.poster ORDER BY r.files_seen DESC, r.key))[1] AS poster,
       count(*) AS releases,
       least(sum(r.files_seen), 2147483647)::int AS files_seen,
       least(sum(r.parts_expected), 9223372036854775807)::bigint AS parts_expected,
       least(sum(r.parts_seen), 9223372036854775807)::bigint AS parts_seen,
       least(sum(r.bytes), 9223372036854775807)::bigint AS bytes,
       CASE WHEN sum(r.parts_expected) > 0
            THEN least(100.0, 100.0 * sum(r.parts_seen) / sum(r.parts_expected))::real ELSE 0 END AS completion,
       min(r.first_post) AS first_post,
       max(r.last_post) AS last_post
  FROM releases r
  LEFT JOIN release_posts p ON p.group_id = r.group_id AND p.key = r.key
 GROUP BY r.group_id, coalesce(p.post_key, r.key)
"""


def _name_hash(name: str) -> int | None:
    """app.services.ingest.catalog.name_hash as this revision has it."""
    folded = re.sub(r"[\W_]+", "", name).casefold().encode()
    if len(folded) < 8:
        return None
    return int.from_bytes(blake2b(folded, digest_size=8).digest(), "big", signed=True)


def upgrade() -> None:
    op.add_column("releases", sa.Column("name_hash", sa.BigInteger(), nullable=True))
    op.add_column("releases", sa.Column("metadata_only", sa.Boolean(), server_default=sa.text("false"), nullable=False))
    # The releases there already get their name's hash; they join posts when a release of their
    # name next comes.
    conn = op.get_bind()
    rows = conn.execute(sa.text("SELECT group_id, key, name FROM releases")).all()
    hashes = [{"g": g, "k": k, "h": _name_hash(name)} for g, k, name in rows]
    hashes = [row for row in hashes if row["h"] is not None]
    if hashes:
        conn.execute(sa.text("UPDATE releases SET name_hash = :h WHERE group_id = :g AND key = :k"), hashes)
    op.create_index(
        "ix_releases_name_hash",
        "releases",
        ["name_hash", "group_id"],
        postgresql_where=sa.text("name_hash IS NOT NULL"),
    )
    op.create_table(
        "release_posts",
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.BigInteger(), nullable=False),
        sa.Column("post_key", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "key", name=op.f("pk_release_posts")),
    )
    op.create_index("ix_release_posts_post", "release_posts", ["group_id", "post_key"])
    op.execute(POSTS_VIEW)


def downgrade() -> None:
    op.execute("DROP VIEW posts")
    op.drop_index("ix_release_posts_post", table_name="release_posts")
    op.drop_table("release_posts")
    op.drop_index("ix_releases_name_hash", table_name="releases")
    op.drop_column("releases", "metadata_only")
    op.drop_column("releases", "name_hash")
