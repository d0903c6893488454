"""Operator keys revoked as API keys are: the row kept (its name, its times) with revoked_at set,
where revoking deleted it (app.services.credentials).

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-05 17:15:00.000000+00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("operator_keys", sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    # A revoked key has no place without the column: it goes, as revoking did before.
    op.execute("DELETE FROM operator_keys WHERE revoked_at IS NOT NULL")
    op.drop_column("operator_keys", "revoked_at")
