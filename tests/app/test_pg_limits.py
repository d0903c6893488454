"""Values past PostgreSQL's limits, from Usenet or from a node: each is either refused with a 400
naming the field before anything is stored, or stored in full, never a 202 that does not end
stored; errors the database raises are told by what they are (a value past a limit comes again,
a lost connection passes); a post PostgreSQL refuses is left out of search alone; the lists and
maps a batch holds are bounded before they are decoded (docs/batch-format.md, "Bounds")."""

from __future__ import annotations

import gzip
import time
from contextlib import nullcontext
import tracemalloc

import msgpack
import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import errors as pg_errors
from sqlalchemy import exc as sa_exc
from sqlalchemy import text

from app.db import TransientDatabaseError, is_transient, session_scope
from app.services.ingest import lifecycle, posts, store
from app.services.ingest.checks import MAX_RULE_NAME, TEXT_LIMITS
from app.services.rules import add_rule
from edge.digest.batch import encode_batch
from edge.digest.rules import EXECUTABLE_RULE
from tests.app.factories import BIG, accept, lease_one_range
from tests.app.overview import make_batch
from tests.app.test_batch_bounds import (
    Ranges,
    accepted_and_stored,
    catalog_counts,
    changed,
    post,
    stored_here_or_by_a_worker,
)
from tests.fixtures.queries import query, scalar

# -- errors told by what they are ----------------------------------------------------------------


@pytest.mark.parametrize(
    "error, transient",
    [
        (pg_errors.ProgramLimitExceeded("string is too long for tsvector"), False),  # 54000
        (pg_errors.StringDataRightTruncation(), False),  # 22001
        (pg_errors.UniqueViolation(), False),  # 23505
        (pg_errors.CharacterNotInRepertoire(), False),  # 22021
        (pg_errors.DeadlockDetected(), True),
        (pg_errors.SerializationFailure(), True),
        (pg_errors.QueryCanceled(), True),  # a statement timeout
        (pg_errors.LockNotAvailable(), True),
        (pg_errors.AdminShutdown(), True),
        (pg_errors.CannotConnectNow(), True),
        (pg_errors.TooManyConnections(), True),
        (psycopg.OperationalError("server closed the connection unexpectedly"), True),  # no SQLSTATE
        (sa_exc.TimeoutError("QueuePool limit reached"), True),
        (ValueError("not the database's"), False),
    ],
)
def test_database_errors_are_told_transient_or_permanent(error, transient):
    assert is_transient(error) is transient
    # As SQLAlchemy wraps the driver's error (psycopg's ProgramLimitExceeded is an OperationalError).
    if isinstance(error, psycopg.Error):
        wrapped = (sa_exc.OperationalError if isinstance(error, psycopg.OperationalError) else sa_exc.DBAPIError)(
            "SELECT 1", {}, error
        )
        assert is_transient(wrapped) is transient
    with pytest.raises(TransientDatabaseError) if transient else nullcontext():
        TransientDatabaseError.raise_if(error)


def test_a_real_tsvector_overflow_is_permanent(engine):
    """What the join once retried for ever: PostgreSQL's own error for a name of too many words."""
    words = " ".join(f"w{i}x{i * 7919 % 100003}" for i in range(120_000))
    with pytest.raises(sa_exc.DBAPIError) as raised, engine.connect() as conn:
        conn.execute(text("SELECT to_tsvector('simple', :w)"), {"w": words})
    assert not is_transient(raised.value), raised.value


# -- a post PostgreSQL refuses is left out alone ------------------------------------------------


def test_a_post_past_a_limit_is_left_out_and_its_batch_neighbours_are_joined(clean_db):
    """A release whose name PostgreSQL cannot index (as one stored before the bounds were, or a
    bound missed): the join leaves its post out of search, joins the batch's other posts, and marks
    the batch joined with what it left out, instead of failing the whole batch for ever."""
    node, range_id = lease_one_range(BIG, BIG + 299)
    batch = make_batch(BIG, BIG + 299, chunk_size=100)
    batch_id = accept(node, range_id, batch)
    with session_scope() as session:
        assert store.store_batch(session, batch_id).stored
    keys = sorted(set(batch["releases"]["key"]))
    assert len(keys) >= 3
    words = " ".join(f"w{i}x{i * 7919 % 100003}" for i in range(120_000))  # past a tsvector's 1 MB
    with clean_db.begin() as conn:
        conn.execute(text("UPDATE releases SET name = :n WHERE key = :k"), {"n": words, "k": keys[1]})
    with session_scope() as session:
        assert posts.join_batch(session, batch_id) is not None
    state, error = query(clean_db, "SELECT state, error FROM seed_batches WHERE id = :b", b=batch_id)[0]
    assert state == "joined" and error.startswith("left out of search: post ") and "tsvector" in error, error
    in_search = {row[0] for row in query(clean_db, "SELECT key FROM posts")}
    assert keys[1] not in in_search and set(keys) - {keys[1]} <= in_search


def test_a_failed_join_counts_attempts_then_fails_and_a_retry_joins_it_again(clean_db):
    node, range_id = lease_one_range(BIG, BIG + 99)
    batch_id = accept(node, range_id, make_batch(BIG, BIG + 99))
    with session_scope() as session:
        assert store.store_batch(session, batch_id).stored
    for attempt in (1, 2):
        with session_scope() as session:
            state = lifecycle.record_join_error(session, batch_id, "DataError: bad", max_attempts=3)
        assert state == "stored"
        assert scalar(clean_db, "SELECT attempts FROM seed_batches WHERE id = :b", b=batch_id) == attempt
    with session_scope() as session:
        assert lifecycle.record_join_error(session, batch_id, "DataError: bad", max_attempts=3) == "failed"
    # The operator's retry: the catalog holds the batch already, so it goes back to be joined,
    # never to be stored again (its releases' sums would count it twice).
    with session_scope() as session:
        assert lifecycle.retry_failed(session) == [batch_id]
    assert query(clean_db, "SELECT state, attempts FROM seed_batches WHERE id = :b", b=batch_id) == [("stored", 0)]
    fragments = scalar(clean_db, "SELECT count(*) FROM fragments")
    with session_scope() as session:
        assert not store.store_batch(session, batch_id).stored
    with session_scope() as session:
        posts.join_batch(session, batch_id)
    assert scalar(clean_db, "SELECT state FROM seed_batches WHERE id = :b", b=batch_id) == "joined"
    assert scalar(clean_db, "SELECT count(*) FROM fragments") == fragments


# -- text at and past every limit: 400, or stored in full --------------------------------------

CHARACTERS = ["a", "é", "日", "🎬"]  # 1, 2, 3 and 4 bytes of UTF-8


def text_of(size: int, character: str) -> str:
    """A text of exactly `size` bytes of UTF-8 (ASCII filling what the character leaves)."""
    width = len(character.encode())
    return character * (size // width) + "a" * (size % width)


def set_text(batch: dict, table: str, column: str, size: int, character: str, row: int) -> None:
    """The row's value made `size` bytes of UTF-8 long."""
    values = batch[table][column]
    # A message-id's host carries the length: what message_hosts indexes.
    value = "<m@" + text_of(max(0, size - 4), character) + ">" if column == "message_id" else text_of(size, character)
    values[row % len(values)] = value


@st.composite
def text_examples(draw):
    table, column = draw(st.sampled_from(sorted(TEXT_LIMITS)))
    limit = TEXT_LIMITS[(table, column)]
    size = draw(st.sampled_from([limit - 1, limit, limit + 1, limit + 3, 2 * limit, 9_000, 1]))
    return (
        table,
        column,
        size,
        draw(st.sampled_from(CHARACTERS)),
        draw(st.integers(0, 50)),
        draw(st.sampled_from(["msgpack", "json"])),
    )


def test_text_at_and_past_every_limit_is_refused_or_stored_in_full(clean_db):
    ranges = Ranges(BIG + 7)
    counted = {"stored": 0, "refused": 0}

    @settings(
        max_examples=60,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
    )
    @given(text_examples())
    def an_example(example):
        table, column, size, character, row, fmt = example
        first = ranges.next
        range_id = ranges.take(60)
        batch = changed(
            make_batch(first, first + 59, chunk_size=30),
            lambda b, v, r: set_text(b, table, column, v, character, r),
            size,
            row,
        )
        value = batch[table][column][row % len(batch[table][column])]
        fits = len(value.encode()) <= TEXT_LIMITS[(table, column)]
        fragments_before = scalar(clean_db, "SELECT count(*) FROM fragments")
        key = batch[table]["key"][row % len(batch[table]["key"])] if table != "fragments" else None
        # A file or release an earlier batch brought keeps its details (they are stored once).
        known = key is not None and scalar(clean_db, f"SELECT count(*) FROM {table} WHERE key = :k", k=key) > 0
        stored = accepted_and_stored(clean_db, range_id, *encode_batch(batch, fmt=fmt))
        assert stored is fits, (table, column, len(value.encode()))
        if stored:
            counted["stored"] += 1
            if table == "fragments":
                host = value[value.rindex("@") :]
                assert scalar(clean_db, "SELECT count(*) FROM message_hosts WHERE host = :h", h=host) == 1
            elif not known:
                assert scalar(clean_db, f"SELECT {column} FROM {table} WHERE key = :k", k=key) == value
        else:
            counted["refused"] += 1
            assert scalar(clean_db, "SELECT count(*) FROM fragments") == fragments_before

    an_example()
    assert counted["stored"] and counted["refused"], counted


@pytest.mark.parametrize("table, column", sorted(TEXT_LIMITS))
def test_a_value_one_byte_past_its_limit_gets_a_400_naming_it(client, clean_db, leased, table, column):
    auth, range_id = leased
    batch = make_batch(BIG + 1000, BIG + 1999)
    set_text(batch, table, column, TEXT_LIMITS[(table, column)] + 1, "é", 3)
    before = catalog_counts(clean_db, range_id)
    response = post(client, auth, range_id, batch)
    answer = response.get_json()
    assert (response.status_code, answer["error"]) == (400, "malformed_batch"), answer
    assert f"{table}.{column}" in answer["message"], answer
    assert catalog_counts(clean_db, range_id) == before


def test_a_message_id_host_of_9000_characters_gets_a_400(client, clean_db, leased):
    """Once answered 202, then never stored: "index row requires 9032 bytes" (uq_message_hosts_host)."""
    auth, range_id = leased
    batch = make_batch(BIG + 1000, BIG + 1999)
    batch["fragments"]["message_id"][0] = "<m@" + "h" * 9000 + ">"
    response = post(client, auth, range_id, batch)
    assert response.status_code == 400 and "fragments.message_id" in response.get_json()["message"]


# -- rule names: printable, bounded, handed out ----------------------------------------------


@pytest.mark.parametrize(
    "name, message",
    [
        ("r" * 9000, "rules"),  # once: pk_rule_counts' index row too large
        ("r" * (MAX_RULE_NAME + 1), "rule names must be printable"),
        ("bell\x07", "rule names must be printable"),
        ("evil\u202egnp.exe", "rule names must be printable"),
        ("made-up", "did not hand out"),
    ],
)
def test_a_rule_name_that_was_not_handed_out_gets_a_400(client, clean_db, leased, name, message):
    auth, range_id = leased
    batch = make_batch(BIG + 1000, BIG + 1999)
    batch["rules"][name] = [0, 0, 0, 0]
    before = catalog_counts(clean_db, range_id)
    response = post(client, auth, range_id, batch)
    answer = response.get_json()
    assert response.status_code == 400 and message in answer["message"], answer
    assert catalog_counts(clean_db, range_id) == before


def test_nine_thousand_rules_of_two_kilobytes_get_a_400_and_add_no_row(client, clean_db, leased):
    """Once: 10,001 rule_counts rows, a 20 MB status and every edge's status read failing."""
    auth, range_id = leased
    batch = make_batch(BIG + 1000, BIG + 1999)
    batch["rules"].update({f"{i:04d}" + "x" * 2000: [0, 0, 0, 0] for i in range(9_999)})
    rows = scalar(clean_db, "SELECT count(*) FROM rule_counts")
    response = post(client, auth, range_id, batch)
    assert response.status_code == 400, response.get_json()
    assert scalar(clean_db, "SELECT count(*) FROM rule_counts") == rows


def test_the_rules_the_data_center_hands_out_are_counted(client, clean_db, leased):
    """An operator's rule (disabled since, too) and the executable rule are taken."""
    auth, range_id = leased
    with session_scope() as session:
        add_rule(session, {"name": "no-spam", "field": "subject", "pattern": "spam", "action": "drop"})
    batch = make_batch(BIG + 1000, BIG + 1999)
    batch["rules"]["no-spam"] = [0, 0, 0, 0]
    assert EXECUTABLE_RULE in batch["rules"]
    response = post(client, auth, range_id, batch)
    assert response.status_code == 202, response.get_json()
    stored_here_or_by_a_worker(response.get_json()["batch_id"])
    assert (
        scalar(clean_db, "SELECT count(*) FROM rule_counts WHERE rule = 'no-spam' AND range_id = :r", r=range_id) == 1
    )


# -- lists and maps bounded before they are decoded --------------------------------------------


def _peak_while(call):
    tracemalloc.start()
    try:
        started = time.monotonic()
        result = call()
        return result, tracemalloc.get_traced_memory()[1], time.monotonic() - started
    finally:
        tracemalloc.stop()


def test_a_json_body_of_five_million_missing_spans_is_refused_in_bounded_memory(client, clean_db, leased):
    """Once 10 s and +630 MiB in one API worker for 0.13 MB of gzip."""
    auth, range_id = leased
    batch = make_batch(BIG + 1000, BIG + 1999)
    text_body = encode_batch({**batch, "missing": []}, fmt="json", gzip=False)[0]
    empty = b'"missing":[]' if b'"missing":[]' in text_body else b'"missing": []'
    assert text_body.count(empty) == 1
    body = gzip.compress(
        text_body.replace(empty, b'"missing":[' + b",".join([b"[1,1]"] * 5_000_000) + b"]"), compresslevel=9
    )
    assert len(body) < 200_000
    before = catalog_counts(clean_db, range_id)
    response, peak, seconds = _peak_while(
        lambda: post(
            client, auth, range_id, body=body, headers={"Content-Type": "application/json", "Content-Encoding": "gzip"}
        )
    )
    answer = response.get_json()
    assert (response.status_code, answer["error"]) == (400, "malformed_batch") and "arrays" in answer["message"], answer
    assert peak < 120 * 2**20, f"peak {peak / 2**20:.0f} MiB"  # the inflated text, not its lists
    assert catalog_counts(clean_db, range_id) == before
    print(f"refused in {seconds:.2f} s, peak {peak / 2**20:.0f} MiB")


def test_a_msgpack_map_of_three_million_reasons_is_refused_before_it_is_decoded(client, clean_db, leased):
    """Once 4.8 s and +535 MiB: stats.rejected decoded before its bound was checked."""
    auth, range_id = leased
    batch = make_batch(BIG + 1000, BIG + 1999)
    stats = batch.pop("stats")
    packer = msgpack.Packer(use_bin_type=False)
    reasons = b"".join(packer.pack(f"r{i}") + packer.pack(0) for i in range(3_000_000))
    rejected = b"\xdf" + (3_000_000).to_bytes(4, "big") + reasons
    stats_body = (
        packer.pack_map_header(3)
        + packer.pack("lines")
        + packer.pack(stats["lines"])
        + packer.pack("rejected")
        + rejected
        + packer.pack("bad_dates")
        + packer.pack(stats["bad_dates"])
    )
    body = packer.pack_map_header(len(batch) + 1) + b"".join(packer.pack(k) + packer.pack(v) for k, v in batch.items())
    body += packer.pack("stats") + stats_body
    body = gzip.compress(body, compresslevel=9)
    before = catalog_counts(clean_db, range_id)
    response, peak, _ = _peak_while(
        lambda: post(
            client,
            auth,
            range_id,
            body=body,
            headers={"Content-Type": "application/msgpack", "Content-Encoding": "gzip"},
        )
    )
    answer = response.get_json()
    assert (response.status_code, answer["error"]) == (400, "malformed_batch") and "stats" in answer["message"], answer
    assert peak < 200 * 2**20, f"peak {peak / 2**20:.0f} MiB"
    assert catalog_counts(clean_db, range_id) == before


def test_missing_spans_past_what_the_chunks_leave_room_for_get_a_400(client, clean_db, leased):
    auth, range_id = leased
    batch = make_batch(BIG + 1000, BIG + 1999)
    packer = msgpack.Packer(use_bin_type=False)
    raw = msgpack.packb({**batch, "missing": []}, use_bin_type=False)
    spans = 5_000_000
    body = raw.replace(
        b"\xa7missing\x90",
        b"\xa7missing\xdd" + spans.to_bytes(4, "big") + (packer.pack([BIG + 1000, BIG + 1000])) * spans,
    )
    body = gzip.compress(body, compresslevel=9)
    response, peak, _ = _peak_while(
        lambda: post(
            client,
            auth,
            range_id,
            body=body,
            headers={"Content-Type": "application/msgpack", "Content-Encoding": "gzip"},
        )
    )
    answer = response.get_json()
    assert response.status_code == 400 and "missing" in answer["message"], answer
    assert peak < 200 * 2**20, f"peak {peak / 2**20:.0f} MiB"
