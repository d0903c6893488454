"""Per-key daily limits: requests and NZB downloads a key may make per UTC day, and the use of
each key on each day they are checked against

newznab clients (Sonarr, Prowlarr, NZBHydra2) expect an indexer to limit a key's API requests
and NZB downloads per day, to say so in error 500 and 501, and to say when the limit frees.
api_keys gets the two limits, NULL for unlimited (every existing key stays unlimited); a CHECK
keeps them within 1 to 10^9, so that a day's first request always fits. api_key_days counts a
key's requests and downloads per UTC day, with the day's first of each (newznab's
apioldesttime, graboldesttime); the request's check and count are one upsert on its row. The
totals in api_keys (api_hits, grabs, last_used_at) keep their meaning.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-05 00:30:00.000000+00:00
"""

from alembic import op
import sqlalchemy as sa


revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("api_keys", sa.Column("requests_per_day", sa.Integer(), nullable=True))
    op.add_column("api_keys", sa.Column("grabs_per_day", sa.Integer(), nullable=True))
    op.create_check_constraint(
        op.f("ck_api_keys_requests_per_day"), "api_keys", "requests_per_day BETWEEN 1 AND 1000000000"
    )
    op.create_check_constraint(op.f("ck_api_keys_grabs_per_day"), "api_keys", "grabs_per_day BETWEEN 1 AND 1000000000")
    op.create_table(
        "api_key_days",
        sa.Column("key_id", sa.Integer(), nullable=False),
        sa.Column("day", sa.Date(), nullable=False),
        sa.Column("requests", sa.BigInteger(), nullable=False),
        sa.Column("grabs", sa.BigInteger(), nullable=False),
        sa.Column("first_request", sa.DateTime(timezone=True), nullable=False),
        sa.Column("first_grab", sa.DateTime(timezone=True), nullable=True),
        sa.ForeignKeyConstraint(
            ["key_id"], ["api_keys.id"], name=op.f("fk_api_key_days_key_id_api_keys"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("key_id", "day", name=op.f("pk_api_key_days")),
    )


def downgrade() -> None:
    op.drop_table("api_key_days")
    op.drop_constraint(op.f("ck_api_keys_grabs_per_day"), "api_keys", type_="check")
    op.drop_constraint(op.f("ck_api_keys_requests_per_day"), "api_keys", type_="check")
    op.drop_column("api_keys", "grabs_per_day")
    op.drop_column("api_keys", "requests_per_day")
