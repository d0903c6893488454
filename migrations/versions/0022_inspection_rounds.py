"""A post is inspected once it has stopped changing, and again when it has grown since: the
post's files when its inspection was leased (files_seen), when the join last changed it while
queued (changed_at: the lease waits INSPECT_SETTLE seconds after it), and how many times it was
queued (rounds, at most app.services.inspections.MAX_ROUNDS).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-05 08:00:00.000000+00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("post_inspections", sa.Column("files_seen", sa.Integer(), nullable=True))
    op.add_column(
        "post_inspections",
        sa.Column("changed_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
    )
    op.add_column("post_inspections", sa.Column("rounds", sa.SmallInteger(), server_default="1", nullable=False))


def downgrade() -> None:
    op.drop_column("post_inspections", "rounds")
    op.drop_column("post_inspections", "changed_at")
    op.drop_column("post_inspections", "files_seen")
