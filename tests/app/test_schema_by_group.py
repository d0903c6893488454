"""The catalog's shape for distributing it by group (docs/scaling.md): every unique key (primary
keys included) and every foreign key of a catalog table carries group_id, so that each group's
rows can live on one node (Citus' rule for distributed tables). The coordination tables (groups,
plans, ranges, batches, nodes, keys, rules) stay on the coordinator and are not checked; the two
catalog tables that do not follow the rule yet are named with what they would need."""

from __future__ import annotations

from tests.fixtures.queries import query

# Tables of the catalog: rows of one group each, read and written by group.
CATALOG = {
    "files",
    "fragment_packs",
    "release_chunks",
    "releases",
    "posts",
    "release_posts",
    "post_file_hashes",
    "post_grabs",
    "post_words",
    "inspection_joins",
    "post_inspections",
    "rule_counts",
}
# Not yet: their keys lack group_id (docs/scaling.md says what each would need).
NOT_YET = {
    "post_inspections": "named by its own id in the node API (pk_post_inspections): distributed, it would be "
    "named by (group_id, id), or kept on the coordinator as the work queue it is",
    "rule_counts": "keyed by its batch (range_id, batch_from, rule): group_id first would make it distributable",
}


def test_every_key_of_the_catalog_carries_its_group(clean_db):
    rows = query(
        clean_db,
        """
        SELECT t.relname AS table, c.conname AS name, c.contype AS kind,
               array(SELECT a.attname FROM unnest(c.conkey) k
                       JOIN pg_attribute a ON a.attrelid = c.conrelid AND a.attnum = k) AS columns,
               coalesce(r.relname, '') AS referenced
          FROM pg_constraint c
          JOIN pg_class t ON t.oid = c.conrelid
          LEFT JOIN pg_class r ON r.oid = c.confrelid
         WHERE c.contype IN ('p', 'u', 'f') AND t.relnamespace = current_schema()::regnamespace
           AND NOT t.relispartition""",
    )
    tables = {row.table for row in rows} | {
        name
        for (name,) in query(
            clean_db,
            "SELECT relname FROM pg_class WHERE relkind IN ('r', 'p') AND NOT relispartition"
            " AND relnamespace = current_schema()::regnamespace",
        )
    }
    assert tables >= CATALOG, CATALOG - tables
    keyed = {(row.table, row.name): list(row.columns) for row in rows if row.table in CATALOG}
    wanting = {table for (table, _), columns in keyed.items() if "group_id" not in columns}
    assert wanting == set(NOT_YET), {k: v for k, v in keyed.items() if k[0] in wanting ^ set(NOT_YET)}
    # A catalog table's foreign keys point at coordination tables only (reference tables in
    # Citus), never from one group's rows to another table's rows by a key without the group.
    catalog_links = [
        (row.table, row.referenced)
        for row in rows
        if row.kind == "f" and row.table in CATALOG and row.referenced in CATALOG
    ]
    assert catalog_links == []
