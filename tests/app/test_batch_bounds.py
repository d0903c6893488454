"""Any batch the API accepts is stored, and stored exactly: its counts are those of its chunks and
tables, each within its bound (app/services/ingest/checks.py, docs/batch-format.md "Bounds"), so
no sum the catalog keeps of it can overflow, and it leaves the other batches' results as they
were. A property test over real digests' batches with values set at and past every bound, and a
test of each way a node could once get a batch accepted and then lost, or poison others."""

from __future__ import annotations

import copy
import gzip
from types import SimpleNamespace

import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from app.db import session_scope
from app.services.ingest import accept as acceptance
from app.services.ingest import posts, store
from app.services.ingest.checks import MAX_ARTICLE_BYTES, MAX_CHUNK_LINES, MAX_PARTS, MAX_RULES, MalformedBatch
from app.services.ingest.decode import check_body
from edge.digest.batch import encode_batch
from tests.app.factories import BIG, RANGES_OFF_THEIR_ROWS, RELEASES_OFF_THEIR_ROWS, make_group, make_node, make_plan
from tests.app.overview import encoded, make_batch
from tests.fixtures.queries import query, scalar

API = "/api/v1/seed"
INT64_MAX = 2**63 - 1
# Values at and past the bounds, and the extremes of the format's 64 bits (and one past them).
EDGES = [
    -(2**63),
    -(2**31) - 1,
    -5,
    -1,
    0,
    1,
    2,
    MAX_PARTS,
    MAX_PARTS + 1,
    MAX_ARTICLE_BYTES - 1,
    MAX_ARTICLE_BYTES,
    MAX_ARTICLE_BYTES + 1,
    2**32,
    2**62,
    INT64_MAX - 1000,
    INT64_MAX,
    2**63,
]


# -- changes to a batch: each (batch, value, row) -> the batch changed; row picks a row or a chunk --


def _release_of_fragment(batch: dict, i: int) -> int:
    """The index of the release chunk of the fragment's file's release."""
    release = dict(zip(batch["files"]["key"], batch["files"]["release"]))[batch["fragments"]["file"][i]]
    return batch["release_chunks"]["release"].index(release)


def fragment_bytes_kept_in_step(batch: dict, value: int, row: int) -> None:
    """An article's size, with its release chunk's and rules['']'s bytes in step: accepted exactly
    when the size is within 0..MAX_ARTICLE_BYTES."""
    fragments = batch["fragments"]
    i = row % len(fragments["bytes"])
    delta = value - fragments["bytes"][i]
    fragments["bytes"][i] = value
    batch["release_chunks"]["bytes"][_release_of_fragment(batch, i)] += delta
    batch["rules"][""][3] += delta


def lines_kept_in_step(batch: dict, value: int, row: int) -> None:
    """A chunk's lines set, the lines past its kept ones counted as rejected (bad numbers), its
    stats in step: accepted exactly when the lines are within the kept ones..MAX_CHUNK_LINES."""
    chunk = batch["chunks"][row % len(batch["chunks"])]
    kept = chunk[2] - chunk[3]
    extra = value - chunk[2]
    chunk[2], chunk[3] = value, value - kept
    batch["stats"]["lines"] += extra
    batch["stats"]["rejected"]["bad_number"] += extra


def fragment_part(batch: dict, value: int, row: int) -> None:
    batch["fragments"]["part"][row % len(batch["fragments"]["part"])] = value


def file_parts(batch: dict, value: int, row: int) -> None:
    batch["files"]["parts"][row % len(batch["files"]["parts"])] = value


def fragment_bytes(batch: dict, value: int, row: int) -> None:
    batch["fragments"]["bytes"][row % len(batch["fragments"]["bytes"])] = value


def rule_count(batch: dict, value: int, row: int) -> None:
    counts = list(batch["rules"].values())[row % len(batch["rules"])]
    counts[row % 4] = value


def new_rules(batch: dict, value: int, row: int) -> None:
    """Two rules dropping as much: their sum passes 2^63 - 1 when the value passes 2^62."""
    batch["rules"]["spam"] = batch["rules"]["porn"] = [row % 2, row % 3, value, value % 2**31]


def chunk_count(batch: dict, value: int, row: int) -> None:
    batch["chunks"][row % len(batch["chunks"])][2 + row % 2] = value


def release_chunk(batch: dict, value: int, row: int) -> None:
    chunks = batch["release_chunks"]
    chunks[("files", "fragments", "bytes")[row % 3]][row % len(chunks["files"])] = value


def release_chunk_bytes_with_rules(batch: dict, value: int, row: int) -> None:
    """A release chunk's bytes and rules['']'s in step, the fragments' left as they are."""
    chunks = batch["release_chunks"]
    i = row % len(chunks["bytes"])
    batch["rules"][""][3] += value - chunks["bytes"][i]
    chunks["bytes"][i] = value


def stats_count(batch: dict, value: int, row: int) -> None:
    if row % 3 == 0:
        batch["stats"]["lines"] = value
    elif row % 3 == 1:
        batch["stats"]["bad_dates"] = value
    else:
        batch["stats"]["rejected"]["nul_byte"] = value


def missing_span(batch: dict, value: int, row: int) -> None:
    """A missing span added (its articles then counted twice) or one moved."""
    spans = batch["missing"]
    if spans and row % 2:
        spans[row % len(spans)][row % 2] = value
    else:
        spans.append([value, value])


CHANGES = [
    fragment_bytes_kept_in_step,
    lines_kept_in_step,
    fragment_part,
    file_parts,
    fragment_bytes,
    rule_count,
    new_rules,
    chunk_count,
    release_chunk,
    release_chunk_bytes_with_rules,
    stats_count,
    missing_span,
]


def changed(batch: dict, change, value: int, row: int) -> dict:
    batch = copy.deepcopy(batch)
    change(batch, value, row)
    return batch


# -- storing as the API and the ingest task do --------------------------------------------------


def results_of_range(engine, range_id: int) -> tuple:
    """What a stored batch leaves of itself: its range's counts, its release chunks and rule
    counts, and its fragments."""
    return (
        tuple(
            query(
                engine,
                "SELECT next_id, articles, missing, rejected, files, releases, dropped FROM seed_ranges WHERE id = :r",
                r=range_id,
            )
        ),
        tuple(
            query(
                engine,
                "SELECT release_key, files, fragments, bytes FROM release_chunks WHERE range_id = :r"
                " ORDER BY release_key",
                r=range_id,
            )
        ),
        tuple(
            query(
                engine,
                "SELECT rule, releases, files, fragments, bytes FROM rule_counts WHERE range_id = :r ORDER BY rule",
                r=range_id,
            )
        ),
        scalar(
            engine,
            "SELECT count(*) FROM fragments f JOIN seed_ranges s ON s.group_id = f.group_id"
            " AND f.article BETWEEN s.first_id AND s.last_id WHERE s.id = :r",
            r=range_id,
        ),
    )


def accepted_and_stored(engine, range_id: int, body: bytes, content_type: str, encoding: str | None) -> bool:
    """The body checked as the API checks it; if it passes, accepted and stored as the ingest task
    stores it (which must then succeed). Whether it was accepted."""
    try:
        header = check_body(body, content_type, encoding or "", 256 * 1024 * 1024)
    except MalformedBatch:
        return False
    with session_scope() as session:
        batch_id = acceptance.accept_batch(
            session,
            None,
            range_id,
            batch_from=header.batch_from,
            batch_to=header.batch_to,
            body=body,
            content_type=content_type,
            content_encoding=encoding or "",
            group=header.group,
        ).batch_id
    with session_scope() as session:
        assert store.store_batch(session, batch_id).stored
    with session_scope() as session:
        posts.join_batch(session, batch_id)
    assert scalar(engine, "SELECT state FROM seed_batches WHERE id = :b", b=batch_id) == "joined"
    return True


class Ranges:
    """Consecutive ranges of one group: each example's batch has a range of its own, following the
    last, so its releases straddle the previous batch's."""

    def __init__(self, start: int):
        self.next = start
        with session_scope() as session:
            self.group_id = make_group(session).id

    def take(self, size: int) -> int:
        first, self.next = self.next, self.next + size
        with session_scope() as session:
            (seed_range,) = make_plan(session, SimpleNamespace(id=self.group_id), [(first, first + size - 1)])
            return seed_range.id


@st.composite
def examples(draw):
    size = draw(st.integers(1, 90))
    chunk = draw(st.integers(1, 40))
    skip = draw(st.sets(st.integers(0, size - 1), max_size=size // 3))
    files, parts = draw(st.integers(1, 4)), draw(st.integers(1, 6))
    change = draw(st.sampled_from(CHANGES))
    value = draw(st.one_of(st.sampled_from(EDGES), st.integers(-(2**63), INT64_MAX)))
    return (
        size,
        chunk,
        skip,
        files,
        parts,
        change,
        value,
        draw(st.integers(0, 1000)),
        draw(st.sampled_from(["msgpack", "json"])),
    )


def test_any_batch_the_api_accepts_stores_and_leaves_the_others_as_they_were(clean_db, store_parts):
    ranges = Ranges(BIG + 7)  # not a release's first article: releases straddle the batches
    reference = ranges.take(100)
    assert accepted_and_stored(clean_db, reference, *encode_batch(make_batch(BIG + 7, BIG + 106, chunk_size=30)))
    stored = [reference]
    counted = {"accepted": 0, "refused": 0}

    @settings(
        max_examples=100,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(examples())
    def a_batch(example):
        size, chunk, skip, files, parts, change, value, row, fmt = example
        first = ranges.next
        range_id = ranges.take(size)
        batch = make_batch(
            first, first + size - 1, chunk_size=chunk, files=files, parts=parts, skip={first + s for s in skip}
        )
        if not batch["fragments"]["article"] and change not in (
            lines_kept_in_step,
            chunk_count,
            stats_count,
            missing_span,
            new_rules,
            rule_count,
        ):
            change = missing_span  # no row to change
        try:
            spoiled = changed(batch, change, value, row)
            body, content_type, encoding = encode_batch(spoiled, fmt=fmt)
        except OverflowError:  # msgpack holds no integer past 64 bits: sent as JSON
            body, content_type, encoding = encode_batch(spoiled, fmt="json")
        others = list(stored)
        before = [results_of_range(clean_db, r) for r in others]
        fragments_before = scalar(clean_db, "SELECT count(*) FROM fragments")
        if accepted_and_stored(clean_db, range_id, body, content_type, encoding):
            counted["accepted"] += 1
            # Stored exactly: its fragments, its counts; the aggregates equal a recomputation.
            assert scalar(clean_db, "SELECT count(*) FROM fragments") == fragments_before + len(
                spoiled["fragments"]["article"]
            )
            (counts,), *_ = results_of_range(clean_db, range_id)
            chunks = spoiled["chunks"]
            assert tuple(counts)[1:4] == (
                sum(c[2] - c[3] for c in chunks),
                sum(b - a + 1 for a, b in spoiled["missing"]),
                sum(c[3] for c in chunks),
            )
            stored.append(range_id)
        else:
            counted["refused"] += 1
            assert scalar(clean_db, "SELECT count(*) FROM fragments") == fragments_before
        assert [results_of_range(clean_db, r) for r in others] == before
        assert scalar(clean_db, RELEASES_OFF_THEIR_ROWS) == 0
        assert scalar(clean_db, RANGES_OFF_THEIR_ROWS) == 0

    a_batch()
    # Both sides of the bounds were met.
    assert counted["accepted"] and counted["refused"], counted


@pytest.mark.parametrize(
    "change, value",
    [
        (fragment_bytes_kept_in_step, MAX_ARTICLE_BYTES),
        (fragment_bytes_kept_in_step, 0),
        (fragment_part, MAX_PARTS),
        (file_parts, MAX_PARTS),
        (file_parts, 0),
        (lines_kept_in_step, MAX_CHUNK_LINES),
    ],
)
def test_a_batch_at_its_bounds_is_accepted_and_stored(clean_db, change, value):
    ranges = Ranges(BIG)
    range_id = ranges.take(300)
    batch = changed(make_batch(BIG, BIG + 299, chunk_size=100), change, value, 4)
    assert accepted_and_stored(clean_db, range_id, *encode_batch(batch))
    assert scalar(clean_db, RELEASES_OFF_THEIR_ROWS) == 0


@pytest.mark.parametrize(
    "change, value",
    [
        (fragment_bytes_kept_in_step, MAX_ARTICLE_BYTES + 1),
        (fragment_bytes_kept_in_step, -1),
        (fragment_part, MAX_PARTS + 1),
        (fragment_part, -1),
        (file_parts, MAX_PARTS + 1),
        (file_parts, -1),
        (lines_kept_in_step, MAX_CHUNK_LINES + 1),
    ],
)
def test_a_batch_past_its_bounds_is_refused(change, value):
    batch = changed(make_batch(BIG, BIG + 299, chunk_size=100), change, value, 4)
    with pytest.raises(MalformedBatch):
        check_body(*encode_batch(batch), 256 * 1024 * 1024)


# -- each case, through the API on the real database ---------------------------------------------


@pytest.fixture
def leased(client):
    """A group planned as one range, leased by a node and one batch of it stored (its
    releases straddle the next batch's): (headers, range id)."""
    with session_scope() as session:
        group = make_group(session)
        _, token = make_node(session, "edge-a")
        (seed_range,) = make_plan(session, group, [(BIG, BIG + 1999)])
        range_id = seed_range.id
    auth = {"Authorization": f"Bearer {token}"}
    assert client.post(f"{API}/lease", headers=auth).get_json()["range"]["id"] == range_id
    response = post(client, auth, range_id, make_batch(BIG, BIG + 999))
    assert response.status_code == 202, response.get_json()
    stored_here_or_by_a_worker(response.get_json()["batch_id"])
    return auth, range_id


def stored_here_or_by_a_worker(batch_id: int) -> None:
    """The API enqueued the batch's store: a Celery worker that another test module left running
    may take it first. Storing is idempotent under the batch's row lock, so the batch is stored
    once, whoever does it."""
    with session_scope() as session:
        store.store_batch(session, batch_id)
    with session_scope() as session:
        posts.join_batch(session, batch_id)
    with session_scope() as session:
        assert session.scalar(text("SELECT state FROM seed_batches WHERE id = :b"), {"b": batch_id}) == "joined"


def post(client, auth, range_id: int, batch: dict | None = None, body: bytes | None = None, headers=None):
    if batch is not None:
        body, headers = encoded(batch)
    return client.post(f"{API}/ranges/{range_id}/batches", data=body, headers={**auth, **headers})


def catalog_counts(engine, range_id: int) -> tuple:
    return (
        scalar(engine, "SELECT count(*) FROM files"),
        scalar(engine, "SELECT count(*) FROM fragments"),
        scalar(engine, "SELECT count(*) FROM releases"),
        scalar(engine, "SELECT count(*) FROM release_chunks"),
        scalar(engine, "SELECT next_id FROM seed_ranges WHERE id = :r", r=range_id),
        tuple(query(engine, "SELECT key, files_seen, parts_expected, parts_seen, bytes FROM releases ORDER BY key")),
        tuple(
            query(engine, "SELECT articles, missing, rejected, files, releases, dropped FROM seed_ranges ORDER BY id")
        ),
    )


def _rules_past_int64(b):
    """Rule counts whose fragments add up past 2^63 - 1 (each within 64 bits)."""
    b["rules"]["spam"] = [1, 1, INT64_MAX, 0]
    b["rules"]["porn"] = [1, 1, INT64_MAX, 0]


def _release_bytes_near_int64(b):
    b["release_chunks"]["bytes"][0] = INT64_MAX - 1000
    b["rules"][""][3] = INT64_MAX - 1000


CASES = [
    # 1. rule counts past 2^63 - 1 (once a 202, then a store failing "bigint out of range")
    (_rules_past_int64, "rules' fragments must add up"),
    (lambda b: b["rules"][""].__setitem__(2, INT64_MAX), "rules"),
    # 2. a release chunk's bytes near 2^63 (once stored, poisoning the releases it shares)
    (_release_bytes_near_int64, "release"),
    (lambda b: b["release_chunks"]["bytes"].__setitem__(0, INT64_MAX - 1000), "release"),
    (lambda b: fragment_bytes_kept_in_step(b, 2**40, 3), "fragments.bytes"),
    # 3. negative or impossible counts
    (lambda b: b["chunks"][0].__setitem__(2, -5), "chunk's lines"),
    (lambda b: b["chunks"][0].__setitem__(3, b["chunks"][0][2] + 1), "chunk's lines"),
    (lambda b: b["rules"][""].__setitem__(2, b["rules"][""][2] - 10), "rules"),
    (lambda b: b["rules"].__setitem__("executable", [0, 0, 1010, 0]), "rules' fragments must add up"),
    (lambda b: b["stats"].__setitem__("lines", 1990), "stats"),
    (lambda b: b["release_chunks"]["fragments"].__setitem__(0, 0), "release chunk"),
    (lambda b: b["missing"].append([BIG + 1000, BIG + 1000]), "missing"),
    (lambda b: fragment_part(b, -1, 3), "fragments.part"),
]


@pytest.mark.parametrize("spoil, message", CASES)
def test_impossible_counts_get_400_and_change_nothing(client, clean_db, leased, spoil, message):
    auth, range_id = leased
    batch = make_batch(BIG + 1000, BIG + 1999)
    spoil(batch)
    before = catalog_counts(clean_db, range_id)
    response = post(client, auth, range_id, batch)
    answer = response.get_json()
    assert (response.status_code, answer["error"]) == (400, "malformed_batch") and message in answer["message"], answer
    assert catalog_counts(clean_db, range_id) == before
    # The honest batch still goes in, and is stored exactly.
    good = make_batch(BIG + 1000, BIG + 1999)
    response = post(client, auth, range_id, good)
    assert response.status_code == 202, response.get_json()
    stored_here_or_by_a_worker(response.get_json()["batch_id"])
    assert scalar(clean_db, "SELECT count(*) FROM fragments") == before[1] + len(good["fragments"]["article"])
    assert scalar(clean_db, RELEASES_OFF_THEIR_ROWS) == 0


def test_a_list_longer_than_the_batch_is_refused_from_its_header(client, clean_db, leased):
    """Five million missing spans in a 15 MiB body (some 30 KB gzip) for 1,000 articles: refused
    before one span is decoded, at the cost of reading a few bytes, not seconds and gigabytes."""
    auth, range_id = leased
    batch = make_batch(BIG + 1000, BIG + 1999)
    raw = msgpack.packb({**batch, "missing": []}, use_bin_type=False)
    spans = 5_000_000
    assert raw.count(b"\xa7missing\x90") == 1
    body = raw.replace(b"\xa7missing\x90", b"\xa7missing\xdd" + spans.to_bytes(4, "big") + b"\x92\x01\x01" * spans)
    body = gzip.compress(body, compresslevel=9)
    assert len(body) < 100_000
    before = catalog_counts(clean_db, range_id)
    response = post(
        client, auth, range_id, body=body, headers={"Content-Type": "application/msgpack", "Content-Encoding": "gzip"}
    )
    answer = response.get_json()
    assert (response.status_code, answer["error"]) == (400, "malformed_batch"), answer
    # The header check's refusal: the spans were never decoded (the full check would name a span).
    assert "missing holds more items than first..last has articles" in answer["message"], answer
    assert catalog_counts(clean_db, range_id) == before
    # A table's column too, and the rules.
    for name, packed in (("article", msgpack.packb(list(range(1001)))),):
        columns = {**batch["fragments"]}
        raw = msgpack.packb({**batch, "fragments": {**columns, name: [7]}}, use_bin_type=False)
        body = raw.replace(b"\xa7article\x91\x07", b"\xa7article" + packed)
        response = post(client, auth, range_id, body=body, headers={"Content-Type": "application/msgpack"})
        assert "fragments.article holds more items" in response.get_json()["message"]
    # What the node read of the names: no column longer than the batch has releases is decoded.
    padded = {**batch, "release_names": {**batch["release_names"], "year": [None] * 5_000_000}}
    body = gzip.compress(msgpack.packb(padded, use_bin_type=False), compresslevel=9)
    assert len(body) < 100_000
    response = post(
        client, auth, range_id, body=body, headers={"Content-Type": "application/msgpack", "Content-Encoding": "gzip"}
    )
    assert response.status_code == 400
    assert "release_names holds more than a batch can" in response.get_json()["message"], response.get_json()
    many_rules = {**batch, "rules": {**batch["rules"], **{f"r{i}": [0, 0, 0, 0] for i in range(MAX_RULES + 1)}}}
    response = post(client, auth, range_id, many_rules)
    assert (response.status_code, f"at most {MAX_RULES} rules" in response.get_json()["message"]) == (400, True)
    assert catalog_counts(clean_db, range_id) == before
