"""app.services.ingest.accept on the real database: where its statements could go wrong that the
API's suites do not reach: a resume point past 2^31 - 1, and the same batch sent twice at once."""

from __future__ import annotations

import threading

import pytest
from edge.digest.batch import encode_batch
from sqlalchemy import text

from app.db import session_scope
from app.services.ingest import accept as acceptance
from tests.app.factories import accept, lease_one_range
from tests.app.overview import make_batch
from tests.fixtures.queries import scalar
from tests.fixtures.waiting import wait_until

INT4_MAX = 2**31 - 1


def test_a_batch_ending_at_the_largest_int4_moves_the_range_past_it(clean_db):
    """next_id = 2^31 (a bigint): the arithmetic is not left to the type the number is sent as."""
    node, range_id = lease_one_range(INT4_MAX - 999, INT4_MAX + 1000)
    accept(node, range_id, make_batch(INT4_MAX - 999, INT4_MAX))
    assert scalar(clean_db, "SELECT next_id FROM seed_ranges WHERE id = :r", r=range_id) == INT4_MAX + 1
    accept(node, range_id, make_batch(INT4_MAX + 1, INT4_MAX + 1000))
    assert scalar(clean_db, "SELECT count(*) FROM seed_batches") == 2


@pytest.mark.timeout(120)
def test_the_same_batch_sent_again_while_the_first_holds_the_range_is_recognised(clean_db):
    """A node's post timed out and it sent the batch again while the first request still held the
    range's lock: the second, once the first commits, answers already accepted (200), not out of
    order (a 409 would make the node drop the range), and nothing is stored twice."""
    first = 2**32 + 5_000
    node, range_id = lease_one_range(first, first + 1999)
    body, content_type, content_encoding = encode_batch(make_batch(first, first + 999))
    call = {
        "batch_from": first,
        "batch_to": first + 999,
        "body": body,
        "content_type": content_type,
        "content_encoding": content_encoding or "",
    }
    answers: list[object] = []
    with session_scope() as holding:
        made = acceptance.accept_batch(holding, node, range_id, **call)
        assert made.created

        def send_again() -> None:
            try:
                with session_scope() as session:
                    answers.append(acceptance.accept_batch(session, node, range_id, **call))
            except Exception as exc:  # noqa: BLE001 - told by the assert below
                answers.append(exc)

        again = threading.Thread(target=send_again)
        again.start()
        wait_until(
            lambda: (
                scalar(
                    clean_db,
                    "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FOR UPDATE OF r%'",
                )
                == 1
            ),
            30,
            "the second request waiting for the range's lock",
            interval=0.02,
        )
    again.join(30)
    assert not again.is_alive()
    (answer,) = answers
    assert isinstance(answer, acceptance.Acceptance), answer
    assert (answer.created, answer.batch_id, answer.next_id) == (False, made.batch_id, first + 1000)
    with session_scope() as s:
        assert s.execute(text("SELECT count(*) FROM seed_batches")).scalar_one() == 1
