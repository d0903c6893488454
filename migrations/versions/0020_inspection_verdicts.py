"""Inspections say which rule dropped the post they flagged (a flag rule, or the built-in
inspected-executable rule): the join then keeps the post out of posts (search), and the count of
posts each rule dropped is read from here. Rules may look at flags (field 'flag').

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-05 02:00:00.000000+00:00
"""

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("post_inspections", sa.Column("dropped_by", sa.Text(), nullable=True))
    op.execute(
        "ALTER TABLE seed_rules DROP CONSTRAINT ck_seed_rules_field, ADD CONSTRAINT ck_seed_rules_field"
        " CHECK (field IN ('subject', 'poster', 'message_id', 'flag'))"
    )


def downgrade() -> None:
    op.execute("DELETE FROM seed_rules WHERE field = 'flag'")
    op.execute(
        "ALTER TABLE seed_rules DROP CONSTRAINT ck_seed_rules_field, ADD CONSTRAINT ck_seed_rules_field"
        " CHECK (field IN ('subject', 'poster', 'message_id'))"
    )
    op.drop_column("post_inspections", "dropped_by")
