"""The posts step named for what it does: a batch's end state 'gathered' becomes 'joined', and the
releases' gathered_at (when a release was last joined into its post) becomes joined_at. And the
indexes by which the status reads no more batches than it shows: the failed ones, and the latest
accepted (app.services.status).

Every batch ever joined is rewritten once (its state); docs/deploy.md's upgrade section says so.

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-05 17:20:00.000000+00:00
"""

from alembic import op

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def _rename_state(old: str, new: str) -> None:
    op.drop_constraint(op.f("ck_seed_batches_state"), "seed_batches", type_="check")
    op.execute(f"UPDATE seed_batches SET state = '{new}' WHERE state = '{old}'")
    op.create_check_constraint("state", "seed_batches", f"state IN ('accepted', 'stored', '{new}', 'failed')")


def upgrade() -> None:
    _rename_state("gathered", "joined")
    op.alter_column("releases", "gathered_at", new_column_name="joined_at")
    op.create_index("ix_seed_batches_failed", "seed_batches", ["id"], postgresql_where="state = 'failed'")
    op.create_index("ix_seed_batches_accepted_at", "seed_batches", ["accepted_at"])


def downgrade() -> None:
    op.drop_index("ix_seed_batches_accepted_at", table_name="seed_batches")
    op.drop_index("ix_seed_batches_failed", table_name="seed_batches")
    op.alter_column("releases", "joined_at", new_column_name="gathered_at")
    _rename_state("joined", "gathered")
