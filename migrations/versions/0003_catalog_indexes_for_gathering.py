"""catalog indexes for gathering

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30 08:29:27.009399+00:00
"""

from alembic import op
import sqlalchemy as sa


revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_files_release", "files", ["group_id", "release_key"], unique=False)
    op.create_index(
        "ix_releases_ungathered",
        "releases",
        ["created_at"],
        unique=False,
        postgresql_where=sa.text("gathered_at IS NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_releases_ungathered", table_name="releases", postgresql_where=sa.text("gathered_at IS NULL"))
    op.drop_index("ix_files_release", table_name="files")
