"""Bad requests at the node API's door, on the real database and through the real gunicorn: each
gets the JSON error format with the right status, never a 5xx or an HTML page, and changes
nothing: not the accepted batches, the ranges' resume points, nor the catalog."""

from __future__ import annotations

import http.client
import io
import json
import socket
import ssl
from urllib.parse import urlsplit

import pytest
from sqlalchemy import text

from app.db import session_scope
from tests.app.factories import BIG, accept, make_group, make_node, make_plan
from tests.app.overview import encoded, make_batch

API = "/api/v1/seed"
CATALOG = ("files", "fragments", "releases", "release_chunks")


@pytest.fixture
def door(clean_db):
    """Two nodes, one group, a plan of two ranges past 2^32, the first leased by node a."""
    from app.services import leases

    with session_scope() as s:
        group = make_group(s)
        node_a, token_a = make_node(s, "edge-a")
        _, token_b = make_node(s, "edge-b")
        ranges = make_plan(s, group, [(BIG + 1000, BIG + 1999), (BIG, BIG + 999)])
        ids = [r.id for r in ranges]
        assert leases.lease(s, node_a, max_leases=1).range_id == ids[0]
    return {
        "a": {"Authorization": f"Bearer {token_a}"},
        "b": {"Authorization": f"Bearer {token_b}"},
        "node_a": node_a,
        "ranges": ids,
    }


def snapshot(engine) -> tuple:
    """What a refused request must leave alone: the accepted batches, the ranges (their resume
    points, status and holders) and the catalog's counts."""
    with engine.connect() as conn:
        return (
            tuple(
                conn.execute(
                    text("SELECT id, range_id, node_id, batch_from, batch_to FROM seed_batches ORDER BY id")
                ).all()
            ),
            tuple(
                conn.execute(text("SELECT id, next_id, status, node_id, batches FROM seed_ranges ORDER BY id")).all()
            ),
            tuple(conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one() for table in CATALOG),
        )


def assert_error(response, status: int, code: str) -> dict:
    assert response.status_code == status, (response.status_code, response.data[:500])
    assert response.mimetype == "application/json", response.data[:500]
    data = response.get_json()
    assert data["error"] == code and isinstance(data["message"], str) and data["message"], data
    return data


def post_batch(client, auth, range_id, batch, fmt="msgpack"):
    body, headers = encoded(batch, fmt=fmt)
    return client.post(f"{API}/ranges/{range_id}/batches", data=body, headers={**auth, **headers})


# Replaying a batch: only the node that sent it, or the range's holder, hears about it.


def test_another_nodes_replay_of_an_accepted_batch_is_refused_and_changes_nothing(client, door, clean_db):
    first, second = door["ranges"]
    batch = make_batch(BIG + 1000, BIG + 1499)
    accept(door["node_a"], first, batch)
    client.post(f"{API}/lease", headers=door["b"])  # b holds the second range, not the first
    before = snapshot(clean_db)
    for fmt in ("msgpack", "json"):
        assert_error(post_batch(client, door["b"], first, batch, fmt=fmt), 409, "not_your_lease")
    # The same batch said to be of another group: refused as such, even to the node that sent it.
    other_group = make_batch(BIG + 1000, BIG + 1499, group="alt.binaries.other")
    assert_error(post_batch(client, door["b"], first, other_group), 409, "not_your_lease")
    assert_error(post_batch(client, door["a"], first, other_group), 422, "outside_range")
    assert snapshot(clean_db) == before


def test_a_node_replaying_its_own_batch_gets_200_even_after_giving_the_range_back(client, door, clean_db):
    first, _ = door["ranges"]
    batch = make_batch(BIG + 1000, BIG + 1499)
    batch_id = accept(door["node_a"], first, batch)
    own = post_batch(client, door["a"], first, batch)
    assert own.status_code == 200, own.get_json()
    assert own.get_json() == {"status": "already_accepted", "batch_id": batch_id, "next_id": BIG + 1500}
    assert client.post(f"{API}/ranges/{first}/release", headers=door["a"]).status_code == 200
    before = snapshot(clean_db)
    again = post_batch(client, door["a"], first, batch, fmt="json")
    assert again.status_code == 200
    assert again.get_json() == {"status": "already_accepted", "batch_id": batch_id, "next_id": BIG + 1500}
    # The next holder of the range hears of it too: the batch is the range's resume point.
    assert client.post(f"{API}/lease", headers=door["b"]).get_json()["range"]["id"] == first
    held = post_batch(client, door["b"], first, batch)
    assert held.status_code == 200 and held.get_json()["batch_id"] == batch_id
    batches, ranges, catalog = snapshot(clean_db)
    assert (batches, catalog) == (before[0], before[2])
    assert [r.next_id for r in ranges] == [r.next_id for r in before[1]]


# Range ids past 64 bits name no range.

RANGE_CALLS = [
    ("get", "/ranges/{id}/chunks"),
    ("post", "/ranges/{id}/batches"),
    ("post", "/ranges/{id}/heartbeat"),
    ("post", "/ranges/{id}/done"),
    ("post", "/ranges/{id}/release"),
]


@pytest.mark.parametrize("range_id", [2**63, 2**64 + 5, 10**40])
@pytest.mark.parametrize("method, path", RANGE_CALLS)
def test_a_range_id_past_64_bits_is_an_unknown_range(client, door, clean_db, method, path, range_id):
    before = snapshot(clean_db)
    url = API + path.format(id=range_id)
    assert_error(getattr(client, method)(url), 401, "unauthorized")  # the token first, as everywhere
    body, headers = encoded(make_batch(BIG + 1000, BIG + 1099))
    answer = getattr(client, method)(url, data=body, headers={**door["a"], **headers})
    data = assert_error(answer, 404, "unknown_range")
    assert str(range_id) in data["message"]
    assert snapshot(clean_db) == before


def test_the_largest_range_id_is_looked_up(client, door):
    assert_error(client.post(f"{API}/ranges/{2**63 - 1}/heartbeat", headers=door["a"]), 404, "unknown_range")


# Lease and release bodies.


@pytest.mark.parametrize("path", ["/lease", "/ranges/{id}/release"])
@pytest.mark.parametrize(
    "body",
    [
        b"[" * 50_000 + b"]" * 50_000,
        b'{"skip": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
        b'{"failure": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001,
    ],
)
def test_a_body_nested_50000_deep_is_malformed(client, door, clean_db, path, body):
    before = snapshot(clean_db)
    answer = client.post(
        API + path.format(id=door["ranges"][0]), data=body, headers={**door["a"], "Content-Type": "application/json"}
    )
    assert_error(answer, 400, "malformed_request")
    assert snapshot(clean_db) == before


def test_a_chunked_lease_body_over_the_limit_is_refused(client, door, clean_db):
    from app.api.seed import MAX_CONTROL_BODY

    before = snapshot(clean_db)
    body = b'{"skip": [' + b" " * MAX_CONTROL_BODY + b"]}"
    answer = client.post(
        f"{API}/lease",
        input_stream=io.BytesIO(body),
        headers={**door["a"], "Content-Type": "application/json", "Transfer-Encoding": "chunked"},
        environ_overrides={"wsgi.input_terminated": True},
    )
    assert_error(answer, 400, "malformed_request")
    assert snapshot(clean_db) == before


# The batch's version is the integer 1, nothing equal to it.


@pytest.mark.parametrize("fmt", ["msgpack", "json"])
@pytest.mark.parametrize("version", [True, 1.0, "1", None, 2, 0])
def test_a_batch_version_other_than_the_integer_1_is_refused(client, door, clean_db, fmt, version):
    batch = make_batch(BIG + 1000, BIG + 1499)
    batch["version"] = version
    before = snapshot(clean_db)
    data = assert_error(post_batch(client, door["a"], door["ranges"][0], batch, fmt=fmt), 400, "malformed_batch")
    assert "version" in data["message"]
    assert snapshot(clean_db) == before


def test_a_batch_without_a_version_is_refused(client, door, clean_db):
    batch = make_batch(BIG + 1000, BIG + 1499)
    del batch["version"]
    before = snapshot(clean_db)
    assert_error(post_batch(client, door["a"], door["ranges"][0], batch), 400, "malformed_batch")
    assert snapshot(clean_db) == before


# A chunked batch body past MAX_CONTENT_LENGTH.


def chunked_post(client, url, headers, body):
    """A body sent chunked, as gunicorn hands it on: no Content-Length, the stream terminated."""
    return client.post(
        url,
        input_stream=io.BytesIO(body),
        environ_overrides={"wsgi.input_terminated": True},
        headers={**headers, "Transfer-Encoding": "chunked"},
    )


def test_a_chunked_batch_body_past_the_limit_gets_413(client, flask_app, door, clean_db):
    url = f"{API}/ranges/{door['ranges'][0]}/batches"
    body, headers = encoded(make_batch(BIG + 1000, BIG + 1499), fmt="msgpack")
    headers = {**door["a"], **headers}
    limit = flask_app.config["MAX_CONTENT_LENGTH"]
    flask_app.config["MAX_CONTENT_LENGTH"] = len(body)
    try:
        before = snapshot(clean_db)
        assert_error(chunked_post(client, url, headers, body + b"\x00"), 413, "request_entity_too_large")
        assert_error(chunked_post(client, url, headers, body * 3), 413, "request_entity_too_large")
        assert snapshot(clean_db) == before
        # A body of the limit exactly is read whole.
        at_limit = chunked_post(client, url, headers, body)
        assert at_limit.status_code == 202, at_limit.get_json()
        assert at_limit.get_json()["next_id"] == BIG + 1500
    finally:
        flask_app.config["MAX_CONTENT_LENGTH"] = limit


# Unknown paths and methods.


def test_unknown_paths_and_methods_get_json_errors(client, door):
    assert_error(client.get(f"{API}/nothing-here", headers=door["a"]), 404, "not_found")
    assert_error(client.get(f"{API}/ranges/-1/heartbeat", headers=door["a"]), 404, "not_found")
    not_allowed = client.get(f"{API}/lease", headers=door["a"])
    assert_error(not_allowed, 405, "method_not_allowed")
    assert "POST" in not_allowed.headers["Allow"]
    assert_error(
        client.delete(f"{API}/ranges/{door['ranges'][0]}/batches", headers=door["a"]), 405, "method_not_allowed"
    )


# The database down: 503 with Retry-After, then service again.


def test_the_database_down_gets_503_with_retry_after(client, door, postgres, clean_db, api_server):
    from app.db import reset_engine

    context = ssl.create_default_context(cafile=api_server.cafile)
    postgres.run("stop")
    try:
        for method, path in [
            ("post", "/lease"),
            ("post", f"/ranges/{door['ranges'][0]}/heartbeat"),
            ("get", "/status"),
        ]:
            answer = getattr(client, method)(API + path, headers=door["a"])
            assert_error(answer, 503, "unavailable")
            assert int(answer.headers["Retry-After"]) > 0
        status, headers, data = https_request(api_server, context, "POST", f"{API}/lease", headers=door["a"])
        assert (status, data["error"]) == (503, "unavailable") and int(headers["Retry-After"]) > 0
    finally:
        postgres.run("start")
        reset_engine()
        clean_db.dispose()
    assert client.post(f"{API}/ranges/{door['ranges'][0]}/heartbeat", headers=door["a"]).status_code == 200


# Through gunicorn: what it refuses itself is JSON too.


def https_request(api_server, context, method, path, headers=None, body=None, encode_chunked=False):
    """(status, headers, the JSON body) of one request to the real gunicorn."""
    url = urlsplit(api_server.url)
    conn = http.client.HTTPSConnection(url.hostname, url.port, context=context, timeout=120)
    try:
        try:
            conn.request(method, path, body=body, headers=headers or {}, encode_chunked=encode_chunked)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the server answered before reading the whole body: its answer is still there
        response = conn.getresponse()
        raw = response.read()
        assert response.getheader("Content-Type", "").startswith("application/json"), raw[:500]
        return response.status, response.headers, json.loads(raw)
    finally:
        conn.close()


def raw_request(api_server, request: bytes) -> tuple[int, dict]:
    """The status and JSON body gunicorn answers to bytes sent as they are."""
    url = urlsplit(api_server.url)
    context = ssl.create_default_context(cafile=api_server.cafile)
    with socket.create_connection((url.hostname, url.port), timeout=30) as plain:
        with context.wrap_socket(plain, server_hostname=url.hostname) as sock:
            sock.sendall(request)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
    head, _, body = answer.partition(b"\r\n\r\n")
    assert b"application/json" in head.lower(), answer[:500]
    return int(head.split(b" ", 2)[1]), json.loads(body)


@pytest.fixture
def gunicorn_door(api_server, door, clean_redis):
    return ssl.create_default_context(cafile=api_server.cafile), door


def test_gunicorn_answers_an_oversized_header_with_json_431(api_server, gunicorn_door, clean_db):
    context, door = gunicorn_door
    before = snapshot(clean_db)
    status, _, data = https_request(
        api_server, context, "POST", f"{API}/lease", headers={**door["a"], "X-Padding": "x" * 10_000}
    )
    assert (status, data["error"]) == (431, "request_header_fields_too_large") and data["message"]
    assert snapshot(clean_db) == before


def test_gunicorn_answers_other_refusals_with_json(api_server, gunicorn_door, clean_db):
    context, door = gunicorn_door
    before = snapshot(clean_db)
    status, _, data = https_request(
        api_server, context, "POST", f"{API}/ranges/{'9' * 5000}/heartbeat", headers=door["a"]
    )
    assert (status, data["error"]) == (414, "uri_too_long")
    status, data = raw_request(api_server, b"NOT A REQUEST\r\n\r\n")
    assert status == 400 and data["error"] == "bad_request" and data["message"]
    host = urlsplit(api_server.url).netloc.encode()
    token = door["a"]["Authorization"].encode()
    status, data = raw_request(
        api_server,
        b"POST "
        + API.encode()
        + b"/lease HTTP/1.1\r\nHost: "
        + host
        + b"\r\nAuthorization: "
        + token
        + b"\r\nContent-Type: application/json"
        + b"\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n\r\n",
    )
    assert status == 400 and data["error"] in ("bad_request", "malformed_request"), data
    for method, path, code in [
        ("GET", f"{API}/nothing-here", 404),
        ("GET", f"{API}/lease", 405),
        ("POST", f"{API}/ranges/{2**63}/heartbeat", 404),
    ]:
        status, _, data = https_request(api_server, context, method, path, headers=door["a"])
        assert status == code and data["error"] in ("not_found", "method_not_allowed", "unknown_range")
    assert snapshot(clean_db) == before


def test_gunicorn_refuses_a_chunked_batch_past_64_mib_with_413(api_server, gunicorn_door, clean_db):
    context, door = gunicorn_door
    before = snapshot(clean_db)
    piece = b"\x00" * (1024 * 1024)

    def body():
        for _ in range(65):
            yield piece

    status, _, data = https_request(
        api_server,
        context,
        "POST",
        f"{API}/ranges/{door['ranges'][0]}/batches",
        body=body(),
        headers={**door["a"], "Content-Type": "application/msgpack"},
        encode_chunked=True,
    )
    assert (status, data["error"]) == (413, "request_entity_too_large"), data
    assert snapshot(clean_db) == before
    # The worker still serves: an honest batch after it is accepted.
    batch_body, headers = encoded(make_batch(BIG + 1000, BIG + 1099))
    status, _, data = https_request(
        api_server,
        context,
        "POST",
        f"{API}/ranges/{door['ranges'][0]}/batches",
        body=batch_body,
        headers={**door["a"], **headers},
    )
    assert (status, data["next_id"]) == (202, BIG + 1100)


def test_a_msgpack_batch_nested_deep_is_malformed(client, door, clean_db):
    body = b"\x91" * 100_000 + b"\x90"  # an array in an array, 100,000 deep
    before = snapshot(clean_db)
    answer = client.post(
        f"{API}/ranges/{door['ranges'][0]}/batches",
        data=body,
        headers={**door["a"], "Content-Type": "application/msgpack"},
    )
    assert_error(answer, 400, "malformed_batch")
    assert snapshot(clean_db) == before
