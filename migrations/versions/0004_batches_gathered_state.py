"""Batches: a gathered state and the release keys awaiting gathering (replaces the releases sweep index)

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30 09:02:05.074469+00:00
"""

from alembic import op
import sqlalchemy as sa


revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.drop_index(op.f("ix_releases_ungathered"), table_name="releases", postgresql_where="(gathered_at IS NULL)")
    op.add_column("seed_batches", sa.Column("release_keys", sa.ARRAY(sa.BigInteger()), nullable=True))
    op.drop_constraint(op.f("ck_seed_batches_state"), "seed_batches", type_="check")
    op.create_check_constraint("state", "seed_batches", "state IN ('accepted', 'stored', 'gathered', 'failed')")
    op.drop_index("ix_seed_batches_pending", table_name="seed_batches")
    op.create_index(
        "ix_seed_batches_pending",
        "seed_batches",
        ["accepted_at"],
        postgresql_where=sa.text("state IN ('accepted', 'stored')"),
    )


def downgrade() -> None:
    op.drop_index("ix_seed_batches_pending", table_name="seed_batches")
    op.create_index(
        "ix_seed_batches_pending", "seed_batches", ["accepted_at"], postgresql_where=sa.text("state = 'accepted'")
    )
    op.execute("UPDATE seed_batches SET state = 'stored' WHERE state = 'gathered'")
    op.drop_constraint(op.f("ck_seed_batches_state"), "seed_batches", type_="check")
    op.create_check_constraint("state", "seed_batches", "state IN ('accepted', 'stored', 'failed')")
    op.drop_column("seed_batches", "release_keys")
    op.create_index(
        op.f("ix_releases_ungathered"),
        "releases",
        ["created_at"],
        unique=False,
        postgresql_where="(gathered_at IS NULL)",
    )
