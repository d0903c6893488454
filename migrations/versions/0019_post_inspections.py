"""Inspections: the posts an edge node reads a few small files of (.par2 index, .nfo, the first
archive volume), queued newest first, leased like ranges, and what each inspection found; posts
keep its password and ids for search

Revision ID: 0019
Revises: 0018
Create Date: 2026-12-05 02:00:00.000000+00:00
"""

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision = "0019"
down_revision = "0018"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "post_inspections",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("post_key", sa.BigInteger(), nullable=False),
        sa.Column("state", sa.Text(), server_default="queued", nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("priority", sa.DateTime(timezone=True), nullable=True),
        sa.Column("node_id", sa.Integer(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("attempts", sa.SmallInteger(), server_default="0", nullable=False),
        sa.Column("queued_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("articles_read", sa.Integer(), nullable=True),
        sa.Column("articles_missing", sa.Integer(), nullable=True),
        sa.Column("bytes_read", sa.BigInteger(), nullable=True),
        sa.Column("password", sa.SmallInteger(), nullable=True),
        sa.Column("flags", sa.Text(), nullable=True),
        sa.Column("inner_name", sa.Text(), nullable=True),
        sa.Column("files", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("nfo", sa.LargeBinary(), nullable=True),
        sa.Column("imdb", sa.Integer(), nullable=True),
        sa.Column("tvdb", sa.Integer(), nullable=True),
        sa.Column("tvmaze", sa.Integer(), nullable=True),
        sa.Column("tmdb", sa.Integer(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.ForeignKeyConstraint(
            ["node_id"], ["seed_nodes.id"], name="fk_post_inspections_node_id_seed_nodes", ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name="pk_post_inspections"),
        sa.UniqueConstraint("group_id", "post_key", name="uq_post_inspections_post"),
    )
    op.execute(
        "CREATE INDEX ix_post_inspections_queue ON post_inspections (priority DESC NULLS LAST, id)"
        " WHERE state = 'queued'"
    )
    op.execute("CREATE INDEX ix_post_inspections_leased ON post_inspections (expires_at) WHERE state = 'leased'")
    # What a post's inspection found, kept on its row for search (the join writes it).
    op.execute(
        "ALTER TABLE posts ADD COLUMN password smallint, ADD COLUMN imdb integer, ADD COLUMN tvdb integer,"
        " ADD COLUMN tvmaze integer, ADD COLUMN tmdb integer"
    )
    for column in ("imdb", "tvdb", "tvmaze", "tmdb"):
        op.execute(f"CREATE INDEX ix_posts_{column} ON posts ({column}) WHERE {column} IS NOT NULL")


def downgrade() -> None:
    op.execute(
        "ALTER TABLE posts DROP COLUMN password, DROP COLUMN imdb, DROP COLUMN tvdb, DROP COLUMN tvmaze,"
        " DROP COLUMN tmdb"
    )
    op.drop_table("post_inspections")
