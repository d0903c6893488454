"""operator rules

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30 08:24:50.790232+00:00
"""

from alembic import op
import sqlalchemy as sa


revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "seed_rules",
        sa.Column("id", sa.Integer(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("field", sa.Text(), nullable=False),
        sa.Column("pattern", sa.Text(), nullable=False),
        sa.Column("action", sa.Text(), server_default="drop", nullable=False),
        sa.Column("groups", sa.Text(), nullable=True),
        sa.Column("enabled", sa.Boolean(), server_default="true", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("action IN ('drop', 'keep')", name=op.f("ck_seed_rules_action")),
        sa.CheckConstraint("field IN ('subject', 'poster', 'message_id')", name=op.f("ck_seed_rules_field")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_seed_rules")),
        sa.UniqueConstraint("name", name=op.f("uq_seed_rules_name")),
    )


def downgrade() -> None:
    op.drop_table("seed_rules")
