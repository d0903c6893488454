"""Reading the articles of a file from their packs (app.models.catalog.FragmentPack).

A file's articles are in the packs of the batches that held them. The packs' GIN index of their
files' keys finds those packs in the group's partition, and only those are unpacked: the view
`fragments`, which unpacks every pack of the catalog, is for reads that are not by file.
"""

from __future__ import annotations


def file_articles(group: str, key: str) -> str:
    """A subquery of the articles of one file of a group, for a LATERAL join over the files:
    rows (article, part, bytes, host_id, message_local). `group` is an SQL expression of the
    group's id, `key` one of the file's key (a column of the outer query, or a parameter).

    One file at a time, by containment of its key alone: PostgreSQL then reads the packs by their
    index. Asked for several files at once (`&&`), or let to pull the subquery up into a join by
    file key (OFFSET 0 keeps it from doing so), it priced unpacking every pack of the group lower
    than the index, as its price leaves out decompressing the arrays: 945 ms against 12.6 for a
    post of 50 files and 10,000 articles, on bench/catalog.py's 2,110,726 articles. The arrays are
    unnested in the select list, in step (a ProjectSet: 7.0 - 9.6 ms for that post), rather than
    by unnest's form of several arrays in FROM, which writes every row of a pack into a
    tuplestore first (12.4 - 12.8 ms).
    """
    return f"""
        SELECT u.article, u.part, u.bytes, u.host_id, u.message_local
          FROM (SELECT unnest(p.file_keys) AS file_key, unnest(p.articles) AS article, unnest(p.parts) AS part,
                       unnest(p.bytes) AS bytes, unnest(p.host_ids) AS host_id,
                       unnest(p.message_locals) AS message_local
                  FROM fragment_packs p
                 WHERE p.group_id = {group} AND p.file_keys @> ARRAY[{key}]) u
         WHERE u.file_key = {key}
        OFFSET 0
    """
