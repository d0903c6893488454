"""Post grabs: how often each post's NZB was downloaded through the newznab API

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-03 23:00:00.000000+00:00
"""

from alembic import op
import sqlalchemy as sa


revision = "0014"
down_revision = "0013"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "post_grabs",
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("post_key", sa.BigInteger(), nullable=False),
        sa.Column("grabs", sa.BigInteger(), server_default="0", nullable=False),
        sa.PrimaryKeyConstraint("group_id", "post_key", name=op.f("pk_post_grabs")),
    )


def downgrade() -> None:
    op.drop_table("post_grabs")
