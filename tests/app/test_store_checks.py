"""What the store checks itself: the API checked the body whole before accepting it, the store
checks it again less the fragments' values, which its COPY refuses as it packs them. A poison
batch still fails with a clear error and stores nothing; any other body (JSON, not a map) is
decoded and checked whole."""

from __future__ import annotations

import pytest

from app.db import array_literal, session_scope
from app.services.ingest import checks, posts, store
from app.services.ingest.catalog import _in_key_order
from app.services.ingest.checks import MalformedBatch
from app.services.ingest.decode import StoredBatch
from edge.digest.batch import TABLES, BatchFormatError, decode_batch, encode_batch
from tests.app.factories import BIG, accept, lease_one_range
from tests.app.overview import make_batch
from tests.fixtures.queries import scalar


@pytest.mark.parametrize(
    "spoil, message",
    [
        (lambda b: b["fragments"]["message_id"].__setitem__(7, 5), "fragments"),
        (lambda b: b["fragments"]["message_id"].__setitem__(7, "<a\x00b@x>"), "NUL"),
        (lambda b: b["fragments"]["message_id"].__setitem__(7, b"<\xff@x>"), "utf-8"),  # sent as a string
        (lambda b: b["fragments"]["part"].__setitem__(7, 2**31), "past 32 bits"),
        (lambda b: b["fragments"]["bytes"].__setitem__(7, "9"), "fragments.bytes"),
        (lambda b: b["fragments"]["article"].__setitem__(7, None), "fragments.article"),
        (
            lambda b: b["fragments"]["article"].__setitem__(8, b["fragments"]["article"][7]),
            "fragments.article holds an article twice",
        ),
        # out of order, each once: stored (the good batch below); twice, out of order: refused
        (
            lambda b: b["fragments"]["article"].__setitem__(2, b["fragments"]["article"][9]),
            "fragments.article holds an article twice",
        ),
        (lambda b: b["fragments"]["file"].__setitem__(7, 2**63), "outside 64 bits"),
        (lambda b: b["fragments"]["file"].pop(), "one length"),
        (lambda b: b["fragments"].__setitem__("extra", [1] * len(b["fragments"]["file"])), "fragments"),
        (lambda b: b["fragments"].pop("bytes"), "fragments"),
        (lambda b: b["files"]["subject"].__setitem__(0, 3), "files.subject"),
        (lambda b: b["files"]["subject"].__setitem__(0, None), "files.subject"),
        (lambda b: b["files"]["name"].__setitem__(0, 5), "files.name"),
        (
            lambda b: b["releases"]["poster"].__setitem__(0, "a\x00b"),
            "releases.poster must hold UTF-8 strings without NUL",
        ),
        (lambda b: b["files"]["index"].__setitem__(0, 2**40), "past 32 bits"),
        (lambda b: b["release_chunks"]["fragments"].__setitem__(0, -(2**31) - 1), "past 32 bits"),
        (lambda b: b["releases"]["key"].__setitem__(0, "k"), "releases.key"),
        (lambda b: b["chunks"].__setitem__(0, [1, 2, 3, 4]), "chunks must cover"),
        (lambda b: b["files"]["key"].__setitem__(1, b["files"]["key"][0]), "files.key holds a value twice"),
        (lambda b: b["releases"]["key"].__setitem__(1, b["releases"]["key"][0]), "releases.key holds a value twice"),
        (lambda b: b["rules"].__setitem__("", [2**31, 0, 0, 0]), "rule counts"),
        (lambda b: b["files"]["release"].__setitem__(0, 2**62 + 5), "a file's release is not among"),
        (lambda b: b["release_chunks"]["release"].__setitem__(0, 2**62 + 5), "one row for each"),
        # Counts that are not the batch's, or past their bounds (docs/batch-format.md, "Bounds").
        (lambda b: b["rules"].update(a=[1, 1, 2**63 - 1, 0], b=[1, 1, 2**63 - 1, 0]), "rules' fragments must add up"),
        (lambda b: b["release_chunks"]["bytes"].__setitem__(0, 2**63 - 1000), "each release chunk must hold"),
        (lambda b: b["chunks"][0].__setitem__(2, -5), "a chunk's lines"),
        (lambda b: b["chunks"][0].__setitem__(3, b["chunks"][0][2] + 1), "a chunk's lines"),
        (lambda b: b["stats"].__setitem__("lines", 1990), "stats must count"),
        (lambda b: b["missing"].extend([[BIG + 5, BIG + 6], [BIG + 6, BIG + 7]]), "in order and disjoint"),
        (lambda b: b["missing"].extend([[BIG + 5, BIG + 5]] * 1001), "missing holds more items than first..last"),
        (lambda b: b["files"]["parts"].__setitem__(0, -1), "files.parts"),
    ],
)
def test_a_poison_batch_fails_clearly_and_stores_nothing(clean_db, store_parts, spoil, message):
    node, range_id = lease_one_range(BIG, BIG + 1999)
    batch = make_batch(BIG, BIG + 999)
    spoil(batch)
    batch_id = accept(node, range_id, batch)  # as if the API had let it in
    # As the ingest task stores it: the error leaves the session, which rolls back.
    with pytest.raises((MalformedBatch, BatchFormatError), match=message):
        with session_scope() as s:
            store.store_batch(s, batch_id)
    for table in ("fragments", "stored_fragments", "files", "releases", "release_chunks", "rule_counts"):
        assert scalar(clean_db, f"SELECT count(*) FROM {table}") == 0
    assert scalar(clean_db, f"SELECT state FROM seed_batches WHERE id = {batch_id}") == "accepted"
    # The worker goes on with the next batch.
    good = make_batch(BIG + 1000, BIG + 1999)
    with session_scope() as s:
        assert store.store_batch(s, accept(node, range_id, good)).stored
    assert scalar(clean_db, "SELECT count(*) FROM fragments") == len(good["fragments"]["article"])


@pytest.mark.parametrize("fmt, gzip", [("json", True), ("json", False), ("msgpack", False), ("msgpack", True)])
def test_any_body_the_api_takes_is_stored_the_same(clean_db, store_parts, fmt, gzip):
    node, range_id = lease_one_range(BIG, BIG + 999)
    batch = make_batch(BIG, BIG + 999)
    batch_id = accept(node, range_id, batch, encode_batch(batch, fmt=fmt, gzip=gzip))
    with session_scope() as s:
        assert store.store_batch(s, batch_id).stored
    with session_scope() as s:
        posts.join_batch(s, batch_id)
    assert scalar(clean_db, "SELECT count(*) FROM fragments") == len(batch["fragments"]["article"])
    assert scalar(clean_db, "SELECT count(*) FROM files") == len(batch["files"]["key"])
    assert (
        scalar(
            clean_db, f"SELECT count(*) FROM seed_batches WHERE id = {batch_id} AND body IS NULL AND state = 'joined'"
        )
        == 1
    )


def test_stored_batch_decodes_table_by_table_what_decode_batch_decodes():
    batch = make_batch(BIG, BIG + 999)
    body = encode_batch(batch)
    whole = decode_batch(*body)
    stored = StoredBatch(*body)
    # Text stays the UTF-8 bytes the body holds: the COPY sends it as it is.
    as_bytes = {
        name: {
            column: [None if v is None else v.encode() for v in values] if kind.startswith("str") else values
            for column, values in whole[name].items()
            for kind in [TABLES[name][column]]
        }
        for name in TABLES
    }
    assert stored.raw_text
    # The fragments are read in C (app/services/_msgcolumns.c): integers as arrays, 32-bit where
    # the catalog's column is.
    fragments = stored.table("fragments")
    assert (
        fragments["article"].typecode,
        fragments["file"].typecode,
        fragments["part"].typecode,
        fragments["bytes"].typecode,
    ) == ("q", "q", "i", "i")
    assert {column: list(values) for column, values in fragments.items()} == as_bytes["fragments"]
    stored_whole = stored.decoded()
    assert {**stored_whole, "fragments": {column: list(values) for column, values in fragments.items()}} == {
        **whole,
        **as_bytes,
    }
    with pytest.raises(BatchFormatError):
        StoredBatch(b"\x93not a batch", "application/msgpack", "")
    with pytest.raises(BatchFormatError):
        StoredBatch(b"\x1f\x8bnot gzip", "application/msgpack", "gzip")


@pytest.mark.parametrize(
    "values, once",
    [
        ([], True),
        ([2**32 + 5], True),
        ([1, 2, 2**40], True),
        ([3, 1, 2], True),
        ([1, 2, 1], False),
        ([2**40, 2**40], False),
        ([5, 4, 3, 5], False),
    ],
)
def test_each_once_answers_for_arrays_in_any_order_and_lists(values, once):
    """The articles' check: ascending arrays at C speed, any other order by a set, lists too."""
    from array import array

    assert checks._each_once(array("q", values)) is once
    assert checks._each_once(list(values)) is once


def test_array_literal():
    assert array_literal([1, -(2**63), 2**63 - 1]) == "{1,-9223372036854775808,9223372036854775807}"
    assert array_literal([None, 2]) == "{NULL,2}"
    assert array_literal([]) == "{}"


def test_rows_go_in_in_key_order_whatever_order_the_batch_has():
    columns = [("int8", [30, -5, 2**62, 7]), ("text", ["c", "a", "d", "b"]), ("int4", [3, 1, None, 2])]
    assert _in_key_order(columns) == [
        ("int8", [-5, 7, 30, 2**62]),
        ("text", ["a", "b", "c", "d"]),
        ("int4", [1, 2, 3, None]),
    ]
    assert _in_key_order([("int8", [9]), ("text", ["x"])]) == [("int8", [9]), ("text", ["x"])]
    # In order already (as the edge sends them): kept as they are, not copied.
    ordered = [("int8", [-5, 7, 2**40]), ("text", ["a", "b", "c"])]
    assert _in_key_order(ordered) is ordered
    # A key twice is not "in order": sorted (check_batch refuses such a batch before).
    assert _in_key_order([("int8", [7, 7, 1]), ("text", ["a", "b", "c"])])[0][1] == [1, 7, 7]
