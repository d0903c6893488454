"""Ranges: failures reported by nodes, and failed ranges leased after the others

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30 11:40:00.000000+00:00
"""

from alembic import op
import sqlalchemy as sa


revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("seed_ranges", sa.Column("failures", sa.Integer(), server_default="0", nullable=False))
    op.add_column("seed_ranges", sa.Column("last_failure", sa.Text(), nullable=True))
    op.drop_index("ix_seed_ranges_lease_order", table_name="seed_ranges")
    op.create_index("ix_seed_ranges_lease_order", "seed_ranges", ["status", "failures", "plan_id", "id"])


def downgrade() -> None:
    op.drop_index("ix_seed_ranges_lease_order", table_name="seed_ranges")
    op.create_index("ix_seed_ranges_lease_order", "seed_ranges", ["status", "plan_id", "id"])
    op.drop_column("seed_ranges", "last_failure")
    op.drop_column("seed_ranges", "failures")
