"""Catalog: the fragments keep no key; a batch's fragments are recorded as stored (stored_fragments)

The fragments' primary key (group_id, article) was there to refuse an article stored twice, and
keeping it up to date cost about half of PostgreSQL's work for each batch (bench/e2e.py, docs/benchmarks.md). An
article is stored once without it: it belongs to one batch only (a range's batches follow each
other from its next_id, ranges do not overlap), the API refuses a batch that lists it twice, and
a batch's fragments go in whole, in one transaction that also adds the batch to
stored_fragments, which a retry of the batch reads to know they are in (docs/store.md).

Batches that may still be stored (accepted, or failed and retried by an operator) whose
fragments are in already (a store that failed after the fragments' commit) are recorded first,
while the key still finds them. Downgrade puts the key back.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-02 01:30:00.000000+00:00
"""

from alembic import op


revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.execute(
        "CREATE TABLE stored_fragments (batch_id bigint NOT NULL CONSTRAINT pk_stored_fragments PRIMARY KEY"
        " CONSTRAINT fk_stored_fragments_batch_id_seed_batches REFERENCES seed_batches (id) ON DELETE CASCADE)"
    )
    op.execute(
        "INSERT INTO stored_fragments (batch_id)"
        " SELECT b.id FROM seed_batches b JOIN seed_ranges r ON r.id = b.range_id"
        " WHERE b.state IN ('accepted', 'failed') AND EXISTS (SELECT FROM fragments f"
        "  WHERE f.group_id = r.group_id AND f.article BETWEEN b.batch_from AND b.batch_to)"
    )
    op.execute("ALTER TABLE fragments DROP CONSTRAINT pk_fragments")


def downgrade() -> None:
    op.execute(
        "ALTER TABLE fragments ADD CONSTRAINT pk_fragments PRIMARY KEY (group_id, article) WITH (fillfactor = 100)"
    )
    op.execute("DROP TABLE stored_fragments")
