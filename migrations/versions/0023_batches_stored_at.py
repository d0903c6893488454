"""The batches by when they were stored: the status page's chart of articles stored a minute reads
the last hours of them without going through every batch ever stored.

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-05 08:30:00.000000+00:00
"""

from alembic import op

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index(
        "ix_seed_batches_stored_at", "seed_batches", ["stored_at"], postgresql_where="stored_at IS NOT NULL"
    )


def downgrade() -> None:
    op.drop_index("ix_seed_batches_stored_at", table_name="seed_batches")
