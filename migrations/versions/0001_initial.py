"""Initial schema: groups, nodes, plans and ranges, batches, the catalog (partitioned per group), the spool.

Revision ID: 0001
Revises:
Create Date: 2026-11-30 08:16:06.041632+00:00
"""

from alembic import op
import sqlalchemy as sa


revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "files",
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.BigInteger(), nullable=False),
        sa.Column("release_key", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("poster", sa.Text(), nullable=False),
        sa.Column("posted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("file_index", sa.Integer(), nullable=True),
        sa.Column("file_count", sa.Integer(), nullable=True),
        sa.Column("parts", sa.Integer(), nullable=True),
        sa.PrimaryKeyConstraint("group_id", "key", name=op.f("pk_files")),
        postgresql_partition_by="LIST (group_id)",
    )
    op.create_table(
        "fragments",
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("article", sa.BigInteger(), nullable=False),
        sa.Column("file_key", sa.BigInteger(), nullable=False),
        sa.Column("part", sa.Integer(), nullable=False),
        sa.Column("bytes", sa.Integer(), nullable=False),
        sa.Column("message_id", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("group_id", "article", name=op.f("pk_fragments")),
        postgresql_partition_by="LIST (group_id)",
    )
    op.create_table(
        "groups",
        sa.Column("id", sa.Integer(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("active", sa.Boolean(), server_default="true", nullable=False),
        sa.Column("low_mark", sa.BigInteger(), nullable=True),
        sa.Column("high_mark", sa.BigInteger(), nullable=True),
        sa.Column("marks_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("live_first", sa.BigInteger(), nullable=True),
        sa.Column("backfill_id", sa.BigInteger(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_groups")),
        sa.UniqueConstraint("name", name=op.f("uq_groups_name")),
    )
    op.create_table(
        "release_chunks",
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("release_key", sa.BigInteger(), nullable=False),
        sa.Column("batch_from", sa.BigInteger(), nullable=False),
        sa.Column("range_id", sa.BigInteger(), nullable=False),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("fragments", sa.Integer(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.Column("first_post", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_post", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("group_id", "release_key", "batch_from", name=op.f("pk_release_chunks")),
        postgresql_partition_by="LIST (group_id)",
    )
    op.create_table(
        "releases",
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("key", sa.BigInteger(), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("poster", sa.Text(), nullable=False),
        sa.Column("file_count", sa.Integer(), nullable=True),
        sa.Column("files_seen", sa.Integer(), server_default="0", nullable=False),
        sa.Column("parts_expected", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("parts_seen", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("bytes", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("completion", sa.REAL(), server_default="0", nullable=False),
        sa.Column("first_post", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_post", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("gathered_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("group_id", "key", name=op.f("pk_releases")),
    )
    op.create_table(
        "rule_counts",
        sa.Column("range_id", sa.BigInteger(), nullable=False),
        sa.Column("batch_from", sa.BigInteger(), nullable=False),
        sa.Column("rule", sa.Text(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("releases", sa.Integer(), nullable=False),
        sa.Column("files", sa.Integer(), nullable=False),
        sa.Column("fragments", sa.BigInteger(), nullable=False),
        sa.Column("bytes", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("range_id", "batch_from", "rule", name=op.f("pk_rule_counts")),
    )
    op.create_index(op.f("ix_rule_counts_group_id"), "rule_counts", ["group_id"], unique=False)
    op.create_table(
        "seed_nodes",
        sa.Column("id", sa.Integer(), sa.Identity(always=False), nullable=False),
        sa.Column("name", sa.Text(), nullable=False),
        sa.Column("token_hash", sa.LargeBinary(), nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default="true", nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("token_rotated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_seed_nodes")),
        sa.UniqueConstraint("name", name=op.f("uq_seed_nodes_name")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_seed_nodes_token_hash")),
    )
    op.create_table(
        "seed_plans",
        sa.Column("id", sa.Integer(), sa.Identity(always=False), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("first_id", sa.BigInteger(), nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        sa.Column("days", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.CheckConstraint("first_id <= last_id", name=op.f("ck_seed_plans_span")),
        sa.ForeignKeyConstraint(
            ["group_id"], ["groups.id"], name=op.f("fk_seed_plans_group_id_groups"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_seed_plans")),
    )
    op.create_index(op.f("ix_seed_plans_group_id"), "seed_plans", ["group_id"], unique=False)
    op.create_table(
        "seed_ranges",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("plan_id", sa.Integer(), nullable=False),
        sa.Column("group_id", sa.Integer(), nullable=False),
        sa.Column("first_id", sa.BigInteger(), nullable=False),
        sa.Column("last_id", sa.BigInteger(), nullable=False),
        sa.Column("next_id", sa.BigInteger(), nullable=False),
        sa.Column("status", sa.Text(), server_default="planned", nullable=False),
        sa.Column("spooled", sa.Boolean(), server_default="false", nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=True),
        sa.Column("leased_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("touched_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("done_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("batches", sa.Integer(), server_default="0", nullable=False),
        sa.Column("articles", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("missing", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("rejected", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("files", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("releases", sa.BigInteger(), server_default="0", nullable=False),
        sa.Column("dropped", sa.BigInteger(), server_default="0", nullable=False),
        sa.CheckConstraint("(status = 'leased') = (node_id IS NOT NULL)", name=op.f("ck_seed_ranges_lease_holder")),
        sa.CheckConstraint("status IN ('planned', 'leased', 'done')", name=op.f("ck_seed_ranges_status")),
        sa.CheckConstraint("first_id <= last_id", name=op.f("ck_seed_ranges_span")),
        sa.CheckConstraint("next_id >= first_id AND next_id <= last_id + 1", name=op.f("ck_seed_ranges_next_in_span")),
        sa.ForeignKeyConstraint(
            ["group_id"], ["groups.id"], name=op.f("fk_seed_ranges_group_id_groups"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["node_id"], ["seed_nodes.id"], name=op.f("fk_seed_ranges_node_id_seed_nodes"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["plan_id"], ["seed_plans.id"], name=op.f("fk_seed_ranges_plan_id_seed_plans"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_seed_ranges")),
        sa.UniqueConstraint("group_id", "first_id", name=op.f("uq_seed_ranges_group_id")),
    )
    op.create_index("ix_seed_ranges_lease_order", "seed_ranges", ["status", "plan_id", "id"], unique=False)
    op.create_index("ix_seed_ranges_node_id", "seed_ranges", ["node_id"], unique=False)
    op.create_table(
        "seed_batches",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("range_id", sa.BigInteger(), nullable=False),
        sa.Column("node_id", sa.Integer(), nullable=True),
        sa.Column("batch_from", sa.BigInteger(), nullable=False),
        sa.Column("batch_to", sa.BigInteger(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=True),
        sa.Column("content_type", sa.Text(), nullable=False),
        sa.Column("content_encoding", sa.Text(), server_default="", nullable=False),
        sa.Column("body_bytes", sa.Integer(), nullable=False),
        sa.Column("state", sa.Text(), server_default="accepted", nullable=False),
        sa.Column("attempts", sa.Integer(), server_default="0", nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("accepted_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.Column("stored_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("state IN ('accepted', 'stored', 'failed')", name=op.f("ck_seed_batches_state")),
        sa.CheckConstraint("batch_from <= batch_to", name=op.f("ck_seed_batches_span")),
        sa.ForeignKeyConstraint(
            ["node_id"], ["seed_nodes.id"], name=op.f("fk_seed_batches_node_id_seed_nodes"), ondelete="SET NULL"
        ),
        sa.ForeignKeyConstraint(
            ["range_id"], ["seed_ranges.id"], name=op.f("fk_seed_batches_range_id_seed_ranges"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_seed_batches")),
        sa.UniqueConstraint("range_id", "batch_from", name=op.f("uq_seed_batches_range_id")),
    )
    op.create_index(
        "ix_seed_batches_pending",
        "seed_batches",
        ["accepted_at"],
        unique=False,
        postgresql_where=sa.text("state = 'accepted'"),
    )
    op.create_table(
        "spool_chunks",
        sa.Column("range_id", sa.BigInteger(), nullable=False),
        sa.Column("chunk_from", sa.BigInteger(), nullable=False),
        sa.Column("chunk_to", sa.BigInteger(), nullable=False),
        sa.Column("lines", sa.Integer(), nullable=False),
        sa.Column("body", sa.LargeBinary(), nullable=False),
        sa.Column("fetched_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False),
        sa.ForeignKeyConstraint(
            ["range_id"], ["seed_ranges.id"], name=op.f("fk_spool_chunks_range_id_seed_ranges"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("range_id", "chunk_from", name=op.f("pk_spool_chunks")),
    )


def downgrade() -> None:
    op.drop_table("spool_chunks")
    op.drop_index("ix_seed_batches_pending", table_name="seed_batches", postgresql_where=sa.text("state = 'accepted'"))
    op.drop_table("seed_batches")
    op.drop_index("ix_seed_ranges_node_id", table_name="seed_ranges")
    op.drop_index("ix_seed_ranges_lease_order", table_name="seed_ranges")
    op.drop_table("seed_ranges")
    op.drop_index(op.f("ix_seed_plans_group_id"), table_name="seed_plans")
    op.drop_table("seed_plans")
    op.drop_table("seed_nodes")
    op.drop_index(op.f("ix_rule_counts_group_id"), table_name="rule_counts")
    op.drop_table("rule_counts")
    op.drop_table("releases")
    op.drop_table("release_chunks")
    op.drop_table("groups")
    op.drop_table("fragments")
    op.drop_table("files")
