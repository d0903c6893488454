"""What ties an obfuscated post's files to the par2 set that lists them: the MD5 of each file's
first 16 KiB with its size, as a par2 set lists them (listed) and as nodes read them from the
files' first articles; and the releases joined into the post of their par2 set that way (the
join keeps them there, whatever later batches bring)

Revision ID: 0021
Revises: 0020
Create Date: 2026-12-05 02:20:00.000000+00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0021"
down_revision = "0020"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "post_file_hashes",
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("hash16k", sa.LargeBinary(), nullable=False),
        sa.Column("size", sa.BigInteger(), nullable=False),
        sa.Column("listed", sa.Boolean(), nullable=False),
        sa.Column("post_key", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "hash16k", "size", "listed", "post_key", name="pk_post_file_hashes"),
    )
    op.create_table(
        "inspection_joins",
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("release_key", sa.BigInteger(), nullable=False),
        sa.Column("anchor", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "release_key", name="pk_inspection_joins"),
    )
    op.create_index("ix_inspection_joins_anchor", "inspection_joins", ["group_id", "anchor"])


def downgrade() -> None:
    op.drop_table("inspection_joins")
    op.drop_table("post_file_hashes")
