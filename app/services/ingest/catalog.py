"""A batch's keyed rows (files, release chunks, releases) into the catalog, less the files and
releases there already (they span batches, ranges and nodes), and the known releases' aggregates
brought up to date by what the batch adds to them.

Rows go in by COPY straight into the group's partitions; should another worker store one of them
meanwhile, that table falls back to staging and INSERT ... ON CONFLICT DO NOTHING (PendingCopy),
and only the rows that went in are added to the releases' aggregates. Nothing is stored or
counted twice either way.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from hashlib import blake2b
from itertools import compress, islice, repeat
from operator import itemgetter, lt
from typing import TYPE_CHECKING

from app.db import array_literal, partition_name
from app.services.ingest.checks import Column, Table
from app.services.ingest.pgcopy import CopyColumn, PendingCopy, binary_slices
from edge.digest.rules import METADATA, file_kind

if TYPE_CHECKING:
    from app.services.ingest.pgcopy import PgCursor

FILE_COLUMNS = "key, release_key, posted_at, file_index, file_count, parts, name, subject, poster"
RELEASE_CHUNK_COLUMNS = "release_key, batch_from, range_id, bytes, first_post, last_post, files, fragments"
RELEASE_COLUMNS = (
    "key, name, poster, file_count, group_id, files_seen, parts_expected, parts_seen, bytes,"
    " completion, first_post, last_post, joined_at, name_hash"
)


# Each key is looked up by an index probe of its own (a LATERAL ... LIMIT 1). With a few thousand
# keys in one `= ANY`, the planner may prefer to scan a whole partition, which grows with the
# catalog; the probes make the look-up's cost grow with the batch instead
# (`bench/store.py --catalog 1000000`, docs/benchmarks.md).
PROBE_KEYS = (
    "SELECT k.key FROM unnest(%s::bigint[]) AS k(key) CROSS JOIN LATERAL"
    ' (SELECT FROM "{table}" t WHERE t.group_id = %s AND t.key = k.key LIMIT 1) AS hit'
)


def known_keys(
    cur: PgCursor, group_id: int, file_keys: Sequence[int], file_releases: Sequence[int], release_keys: Sequence[int]
) -> tuple[set[int], set[int]]:
    """Which of these files and releases the catalog has for the group already (those spanning
    batches, ranges and nodes are stored by the first batch that saw them).

    Releases first: a file is stored with its release (the same transaction), so only the files
    of known releases are looked up, a tenth of a batch's or so. Should a file be there without
    its release all the same, its COPY meets it and goes through ON CONFLICT (PendingCopy):
    slower, never stored twice."""
    known: tuple[set[int], set[int]] = (set(), set())
    if not release_keys:
        return known
    # The keys as array literals: parsed by the server in C, where a list of ints would be adapted
    # value by value here.
    cur.execute(PROBE_KEYS.format(table="releases"), (array_literal(release_keys), group_id), binary=True)
    known[1].update(key for (key,) in cur.fetchall())
    candidates = [key for key, release in zip(file_keys, file_releases) if release in known[1]] if known[1] else []
    if candidates:
        cur.execute(
            PROBE_KEYS.format(table=partition_name("files", group_id)),
            (array_literal(candidates), group_id),
            binary=True,
        )
        known[0].update(key for (key,) in cur.fetchall())
    return known


def _without(known: set[int], keys: Sequence[int], columns: list[CopyColumn]) -> list[CopyColumn]:
    if not known:
        return columns
    keep = [key not in known for key in keys]
    return [(kind, list(compress(values, keep))) for kind, values in columns]


def _completion(parts_seen: int, parts_expected: int) -> float:
    return min(100.0, 100.0 * parts_seen / parts_expected) if parts_expected > 0 else 0.0


# What a batch adds to a release of its release chunk: fragments, bytes, first and last dates.
ChunkAddition = tuple[int, int, int | None, int | None]
NO_CHUNK: ChunkAddition = (0, 0, None, None)
# What a batch adds to releases, a sequence each: files, parts, fragments, bytes, first dates, last dates.
ReleaseAdditions = tuple[
    Sequence[int], Sequence[int], Sequence[int], Sequence[int], Sequence[int | None], Sequence[int | None]
]


class _Additions:
    """What one batch adds to each of its releases: the files and the release chunk it stored."""

    def __init__(
        self,
        tables: dict[str, Table],
        inserted_file_keys: set[int] | None,
        new_files: tuple[Column, Column],
        inserted_chunks: set[int] | None,
    ):
        """new_files: the release and parts of each file the batch means to store; inserted_*:
        None when every row went in, else the keys of those that did (through ON CONFLICT)."""
        files, chunks = tables["files"], tables["release_chunks"]
        releases, parts = new_files
        if inserted_file_keys is not None:  # count those that went in (once)
            went_in = {
                k: (r, p) for k, r, p in zip(files["key"], files["release"], files["parts"]) if k in inserted_file_keys
            }
            releases, parts = map(list, zip(*went_in.values())) if went_in else ([], [])
        self.files: Counter[int] = Counter(releases)
        self.parts = dict.fromkeys(self.files, 0)
        for release, count in zip(releases, parts):
            self.parts[release] += count
        rows = zip(
            chunks["release"], zip(chunks["fragments"], chunks["bytes"], chunks["first_date"], chunks["last_date"])
        )
        self.chunk: dict[int, ChunkAddition] = (
            dict(rows)
            if inserted_chunks is None
            else {release: row for release, row in rows if release in inserted_chunks}
        )

    def columns(self, keys: list[int]) -> ReleaseAdditions:
        """(files, parts, fragments, bytes, first dates, last dates), a sequence each, for the keys."""
        if not keys:
            return (), (), (), (), (), ()
        fragments, size, first, last = zip(*map(self.chunk.get, keys, repeat(NO_CHUNK)))
        return (
            list(map(self.files.get, keys, repeat(0))),
            list(map(self.parts.get, keys, repeat(0))),
            fragments,
            size,
            first,
            last,
        )


def _in_key_order(columns: list[CopyColumn]) -> list[CopyColumn]:
    """The rows sorted by their first column (the key). Workers storing batches that share new
    files or releases then insert them in one order, so they wait on each other, never deadlock.
    The edge sends them in that order: then they are only checked (docs/batch-format.md)."""
    keys = columns[0][1]
    if len(keys) < 2 or all(map(lt, keys, islice(keys, 1, None))):
        return columns
    order = sorted(range(len(keys)), key=keys.__getitem__)
    pick = itemgetter(*order)
    return [(kind, list(pick(values))) for kind, values in columns]


def _release_pieces(releases: Table, new: list[bool], group_id: int, additions: _Additions, text: str) -> list[bytes]:
    keys = list(compress(releases["key"], new))
    files, parts, fragments, size, first, last = additions.columns(keys)
    n = len(keys)
    return list(
        binary_slices(
            _in_key_order(
                [
                    ("int8", keys),
                    (text, list(compress(releases["name"], new))),
                    (text, list(compress(releases["poster"], new))),
                    ("int4", list(compress(releases["file_count"], new))),
                    ("int4", [group_id] * n),
                    ("int4", files),
                    ("int8", parts),
                    ("int8", fragments),
                    ("int8", size),
                    ("float4", list(map(_completion, fragments, parts))),
                    ("timestamp", first),
                    ("timestamp", last),
                    ("timestamp", [int(time.time())] * n),
                    ("int8", list(map(name_hash, compress(releases["name"], new)))),
                ]
            )
        )
    )


_NOT_ALNUM = re.compile(r"[\W_]+")
# The ASCII bytes that are not letters or digits: what _NOT_ALNUM removes from an ASCII name, in
# one bytes.translate rather than a regex (a third of the time: the store hashes every new release).
_ASCII_NOT_ALNUM = bytes(b for b in range(128) if not chr(b).isalnum())


def name_hash(name: str | bytes) -> int | None:
    """What posts are joined by (app.services.ingest.posts): a signed 64-bit BLAKE2b of the name
    without case, spaces or punctuation ("The.Walking.Dead" and "the walking dead" are one name),
    the same on every server whatever its locale; None for a name under 8 bytes so folded, which
    would join releases that only share a word."""
    if isinstance(name, bytes):
        name = name.decode("utf-8", "replace")
    if name.isascii():
        folded = name.encode().translate(None, _ASCII_NOT_ALNUM).lower()
    else:
        folded = _NOT_ALNUM.sub("", name).casefold().encode()
    if len(folded) < 8:
        return None
    return int.from_bytes(blake2b(folded, digest_size=8).digest(), "big", signed=True)


class KeyedRows:
    """A batch's files, release chunks and releases as binary COPY payloads, less the files and
    releases the catalog has already, and what the batch adds to each release's aggregates.
    store() sends each table as soon as its rows are built, so the server stores one while the
    next is built here; the known releases are updated last."""

    additions: _Additions  # what the batch adds to its releases (store())

    def __init__(
        self,
        files: Table,
        releases: Table,
        chunks: Table,
        known_files: set[int],
        known_releases: set[int],
        group_id: int,
        range_id: int,
        batch_from: int,
        raw_text: bool,
    ):
        self.tables = {"files": files, "release_chunks": chunks}
        self.releases, self.group_id = releases, group_id
        self.range_id, self.batch_from = range_id, batch_from
        # Text as the batch holds it: UTF-8 bytes (StoredBatch.raw_text), else str.
        self.text, no_name = ("utf8", b"") if raw_text else ("text", "")
        file_keys = files["key"]
        # A file's poster is its release's (stored there): NULL unless it differs.
        release_poster = dict(zip(releases["key"], releases["poster"]))
        file_columns = _in_key_order(
            _without(
                known_files,
                file_keys,
                [
                    ("int8", file_keys),
                    ("int8", files["release"]),
                    ("timestamp", files["date"]),
                    ("int4", files["index"]),
                    ("int4", files["count"]),
                    ("int4", files["parts"]),
                    (self.text, [name or no_name for name in files["name"]]),
                    (self.text, files["subject"]),
                    (
                        self.text,
                        [
                            None if poster == release_poster.get(release) else poster
                            for release, poster in zip(files["release"], files["poster"])
                        ],
                    ),
                ],
            )
        )
        self.file_pieces = list(binary_slices(file_columns))
        self.new_files = (file_columns[1][1], file_columns[5][1])  # release, parts
        self.new = [key not in known_releases for key in releases["key"]]
        self.to_update: list[int] = []
        self.metadata_only = _metadata_only(files, releases, self.new)

    def _chunk_pieces(self) -> list[bytes]:
        chunks = self.tables["release_chunks"]
        count = len(chunks["release"])
        return list(
            binary_slices(
                [
                    ("int8", chunks["release"]),
                    ("int8", [self.batch_from] * count),
                    ("int8", [self.range_id] * count),
                    ("int8", chunks["bytes"]),
                    ("timestamp", chunks["first_date"]),
                    ("timestamp", chunks["last_date"]),
                    ("int4", chunks["files"]),
                    ("int4", chunks["fragments"]),
                ]
            )
        )

    def store(self, cur: PgCursor, meanwhile: Callable[[], object] | None = None) -> None:
        """The files, the release chunks, then the new releases (their aggregates counting only
        the rows that really went in). The other tables are built, and meanwhile() runs, while
        the server stores the files."""
        group_id = self.group_id
        files = PendingCopy(
            cur, "files", partition_name("files", group_id), FILE_COLUMNS, self.file_pieces, "key", binary=True
        )
        try:
            chunk_pieces = self._chunk_pieces()
            # The additions as if every row goes in, which is nearly always so; they are counted
            # again below when some rows did not go in.
            self.additions = _Additions(self.tables, None, self.new_files, None)
            release_pieces = _release_pieces(self.releases, self.new, group_id, self.additions, self.text)
            if meanwhile is not None:
                meanwhile()
        except BaseException as exc:
            files.abort(exc)
            raise
        inserted_files = files.finish()
        inserted_chunks = PendingCopy(
            cur,
            "release_chunks",
            partition_name("release_chunks", group_id),
            RELEASE_CHUNK_COLUMNS,
            chunk_pieces,
            "release_key",
            binary=True,
        ).finish()
        if inserted_files is not None or inserted_chunks is not None:
            self.additions = _Additions(self.tables, inserted_files, self.new_files, inserted_chunks)
            release_pieces = _release_pieces(self.releases, self.new, group_id, self.additions, self.text)
        inserted_releases = PendingCopy(
            cur, "releases", "releases", RELEASE_COLUMNS, release_pieces, "key", binary=True
        ).finish()
        # Marked on the rows this batch inserted only: no other transaction sees them yet, so
        # this waits on no one's lock.
        marked = (
            self.metadata_only
            if inserted_releases is None
            else [key for key in self.metadata_only if key in inserted_releases]
        )
        if marked:
            cur.execute(MARK_METADATA_ONLY, (array_literal(marked), group_id))
        # Releases stored before (or by a concurrent batch meanwhile) get this batch's part added.
        self.to_update = sorted(
            key
            for key, is_new in zip(self.releases["key"], self.new)
            if not is_new or (inserted_releases is not None and key not in inserted_releases)
        )

    def update_known_releases(self, cur: PgCursor) -> None:
        """Last, so that the locks on releases shared with other batches are held briefly."""
        if not self.to_update:
            return
        add = self.additions.columns(self.to_update)
        keys = array_literal(self.to_update)
        cur.execute(LOCK_RELEASES, (keys, self.group_id))
        cur.execute(PROBES_ONLY)
        cur.execute(UPDATE_RELEASES, (keys, *map(array_literal, add), self.group_id))
        updated = cur.rowcount
        cur.execute(PROBES_DONE)
        if updated != len(self.to_update):  # each was locked, so each is there: never silently fewer
            raise RuntimeError(f"updated {updated} of the batch's {len(self.to_update)} known releases")


MARK_METADATA_ONLY = "UPDATE releases SET metadata_only = true WHERE key = ANY(%s::bigint[]) AND group_id = %s"


def _metadata_only(files: Table, releases: Table, new: list[bool]) -> list[int]:
    """The new releases counting one file or none whose files in this batch are all metadata
    (.nfo, .sfv, .nzb...): a companion of a post when it holds one file (app.services.ingest.posts
    reads files_seen too, so where batches cut it does not matter)."""
    single = {
        key
        for key, count, is_new in zip(releases["key"], releases["file_count"], new)
        if is_new and (count is None or count <= 1)
    }
    if not single:
        return []
    kinds: dict[int, bool] = {}
    for release, name in zip(files["release"], files["name"]):
        if release in single:
            kinds[release] = kinds.get(release, True) and file_kind(_text(name)) == METADATA
    return sorted(key for key, metadata in kinds.items() if metadata)


def _text(name: str | bytes | None) -> str | None:
    return name.decode("utf-8", "replace") if isinstance(name, bytes) else name


# A batch's part added to the releases stored before it. Each release is locked by an index probe,
# in key order first: two batches of one release stored at once then wait on each other in one
# order, never deadlock. Then updated by a statement of its own, whose snapshot sees what a batch
# that held the lock before wrote, where a probe of that snapshot finds it (its ctid). Probes (with
# LIMIT 1: a subquery the planner cannot fold into a join), with hash and merge joins off for the
# UPDATE: the planner would rather scan the releases table, every group's, from a few thousand
# releases on, or, for a group it has no statistics of yet (a new one), walk the group's releases
# once for every release of the batch (tests/app/test_store.py shows the plans).
# The sums are made in numeric (bigint for the files) and held at their column's maximum: the
# bounds checked at the door (checks.py) keep a release's sums far below it (a release would need
# 2^32 articles of 2 GiB), so the cap is never reached by what the catalog holds, and an addition
# can never fail the batch that shares the release.
PROBES_ONLY = "SELECT set_config('enable_hashjoin', 'off', true), set_config('enable_mergejoin', 'off', true)"
PROBES_DONE = "RESET enable_hashjoin; RESET enable_mergejoin"
LOCK_RELEASES = (
    "SELECT FROM unnest(%s::bigint[]) AS k(key) CROSS JOIN LATERAL"
    " (SELECT FROM releases r WHERE r.group_id = %s AND r.key = k.key FOR UPDATE) AS hit"
)
UPDATE_RELEASES = """
    WITH target AS MATERIALIZED (
        SELECT hit.tid, d.*
          FROM unnest(%s::bigint[], %s::int[], %s::bigint[], %s::bigint[], %s::bigint[], %s::bigint[],
                      %s::bigint[]) AS d(key, files, parts, fragments, bytes, first_post, last_post)
         CROSS JOIN LATERAL (SELECT r.ctid AS tid FROM releases r
                              WHERE r.group_id = %s AND r.key = d.key LIMIT 1) AS hit)
    UPDATE releases r
       SET files_seen = least(r.files_seen::bigint + d.files, 2147483647),
           parts_expected = least(r.parts_expected::numeric + d.parts, 9223372036854775807),
           parts_seen = least(r.parts_seen::numeric + d.fragments, 9223372036854775807),
           bytes = least(r.bytes::numeric + d.bytes, 9223372036854775807),
           first_post = least(r.first_post, to_timestamp(d.first_post)),
           last_post = greatest(r.last_post, to_timestamp(d.last_post)),
           completion = CASE WHEN r.parts_expected::numeric + d.parts > 0
                             THEN least(100.0, 100.0 * (r.parts_seen::numeric + d.fragments)
                                               / (r.parts_expected::numeric + d.parts)) ELSE 0 END,
           joined_at = now()
      FROM target d
     WHERE r.ctid = d.tid
"""
