"""Operator keys: the credential that sees the whole seed (nodes see only their own part)

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-03 19:30:00.000000+00:00
"""

from alembic import op
import sqlalchemy as sa


revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "operator_keys",
        sa.Column("id", sa.Integer(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("key_hash", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("last_used_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_operator_keys")),
        sa.UniqueConstraint("name", name=op.f("uq_operator_keys_name")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_operator_keys_key_hash")),
    )


def downgrade() -> None:
    op.drop_table("operator_keys")
