"""Batches: a raw body is stored as it comes, without PostgreSQL's compression (STORAGE EXTERNAL)

A body is gzip already: PostgreSQL's own compression (pglz) of a 1.6 MB body gains nothing and
took most of its INSERT (about 25 of 35 ms, on the API's answer to the node); out of line
without compression, the row is stored, and read back by the store, as the bytes it holds.
Rows stored before keep their form; new ones are stored so.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-02 02:00:00.000000+00:00
"""

from alembic import op


revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute("ALTER TABLE seed_batches ALTER COLUMN body SET STORAGE EXTERNAL")


def downgrade() -> None:
    op.execute("ALTER TABLE seed_batches ALTER COLUMN body SET STORAGE EXTENDED")
