"""Live planning: plans and ranges of a kind (backfill or live), the groups' live pointer and
planning failures, expired ranges, and the lease order by kind

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-04 09:00:00.000000+00:00
"""

from alembic import op
import sqlalchemy as sa


revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("groups", sa.Column("live_next", sa.BigInteger(), nullable=True))
    op.add_column("groups", sa.Column("plan_failures", sa.Integer(), server_default="0", nullable=False))
    op.add_column("groups", sa.Column("plan_error", sa.Text(), nullable=True))
    op.add_column("groups", sa.Column("plan_error_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("seed_plans", sa.Column("kind", sa.Text(), server_default="backfill", nullable=False))
    op.create_check_constraint(op.f("ck_seed_plans_kind"), "seed_plans", "kind IN ('backfill', 'live')")
    op.add_column("seed_ranges", sa.Column("kind", sa.Text(), server_default="backfill", nullable=False))
    op.add_column("seed_ranges", sa.Column("expired", sa.BigInteger(), server_default="0", nullable=False))
    op.create_check_constraint(op.f("ck_seed_ranges_kind"), "seed_ranges", "kind IN ('backfill', 'live')")
    op.drop_constraint(op.f("ck_seed_ranges_status"), "seed_ranges", type_="check")
    op.create_check_constraint(
        op.f("ck_seed_ranges_status"), "seed_ranges", "status IN ('planned', 'leased', 'done', 'expired')"
    )
    op.drop_index("ix_seed_ranges_lease_order", table_name="seed_ranges")
    op.create_index("ix_seed_ranges_lease_order", "seed_ranges", ["status", "kind", "failures", "plan_id", "id"])
    # Whose turn a lease is (live first, or backfill first): app/services/leases.py.
    op.execute("CREATE SEQUENCE seed_lease_turns")


def downgrade() -> None:
    op.execute("DROP SEQUENCE seed_lease_turns")
    op.drop_index("ix_seed_ranges_lease_order", table_name="seed_ranges")
    op.create_index("ix_seed_ranges_lease_order", "seed_ranges", ["status", "failures", "plan_id", "id"])
    # Expired ranges have no status before this revision: they are as good as done (next_id is
    # past their end and nothing is left to fetch).
    op.execute("UPDATE seed_ranges SET status = 'done', done_at = coalesce(done_at, now()) WHERE status = 'expired'")
    op.drop_constraint(op.f("ck_seed_ranges_status"), "seed_ranges", type_="check")
    op.create_check_constraint(op.f("ck_seed_ranges_status"), "seed_ranges", "status IN ('planned', 'leased', 'done')")
    op.drop_constraint(op.f("ck_seed_ranges_kind"), "seed_ranges", type_="check")
    op.drop_column("seed_ranges", "expired")
    op.drop_column("seed_ranges", "kind")
    op.drop_constraint(op.f("ck_seed_plans_kind"), "seed_plans", type_="check")
    op.drop_column("seed_plans", "kind")
    op.drop_column("groups", "plan_error_at")
    op.drop_column("groups", "plan_error")
    op.drop_column("groups", "plan_failures")
    op.drop_column("groups", "live_next")
