"""The web page (app.web) through Flask's test client on the real database: logins with an
operator key and an API key (the form's CSRF token, wrong and revoked keys, what the session
cookie holds), the status page's figures for a group planned, leased, done and failed, the
release search and its NZB links (the real posts of tests/data/nzb/, stored the normal way, the
NZB read by the `nzb` package), escaping of hostile input, and bad parameters (a 4xx page, never
a 500)."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
from nzb import Nzb
from sqlalchemy import select, text

from app.db import session_scope
from app.models import ApiKey, SeedRange
from app.services import apikeys, leases, operators
from app.services import status as status_service
from app.services.ingest import store
from app.web.auth import SECRET_KEY_NAME
from tests.app.factories import BIG, accept, make_group, make_node, make_plan
from tests.app.overview import make_batch
from tests.app.test_nzb_export import posted_real_posts
from tests.fixtures.queries import query
from tests.fixtures.waiting import wait_until

NZB_DIR = Path(__file__).resolve().parents[1] / "data" / "nzb"
WALKING_DEAD_NZB = NZB_DIR / "avsnatch_teevee_walking_dead_s03e06.nzb"
WALKING_DEAD = "The.Walking.Dead.S03E06.INTERNAL.720p.HDTV.x264-EVOLVE"
HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'


class Page(HTMLParser):
    """A page read as a browser's DOM would give it: each table's rows (cells' text), the
    links, the forms' fields, and elements' text by id."""

    def __init__(self, html: str):
        super().__init__(convert_charrefs=True)
        self.tables: dict[str, list[list[str]]] = {}
        self.row_keys: dict[str, list[dict[str, str]]] = {}
        self.links: list[dict[str, str]] = []
        self.inputs: list[dict[str, str]] = []
        self.by_id: dict[str, str] = {}
        self._table: str | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._ids: list[tuple[str, str, list[str]]] = []
        self._in_body = False
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = {k: v or "" for k, v in attrs}
        if tag == "table":
            self._table = attrs.get("id", f"table{len(self.tables)}")
            self.tables[self._table], self.row_keys[self._table] = [], []
        elif tag == "tr" and self._table is not None:
            self._row = []
            self.row_keys[self._table].append(attrs)
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []
        elif self._cell is not None:  # an element inside a cell starts a word of its own
            self._cell.append(" ")
        if tag == "a":
            self.links.append(attrs)
        elif tag in ("input", "select"):
            self.inputs.append(attrs)
        if "id" in attrs:
            self._ids.append((tag, attrs["id"], []))

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None and self._table is not None:
            self.tables[self._table].append(self._row)
            self._row = None
        elif tag == "table":
            self._table = None
        if self._ids and self._ids[-1][0] == tag:
            _, name, text_parts = self._ids.pop()
            self.by_id[name] = " ".join("".join(text_parts).split())

    def handle_data(self, data):
        if self._cell is not None:
            self._cell.append(data)
        for _, _, text_parts in self._ids:
            text_parts.append(data)

    def field(self, name: str) -> str:
        """The value of the page's fields of this name (one value: the login form and the Log out
        button both carry the session's CSRF token)."""
        (value,) = {i.get("value", "") for i in self.inputs if i.get("name") == name}
        return value

    def rows(self, table: str) -> list[list[str]]:
        """The table's rows, its header's first, each as its cells' text."""
        return self.tables[table]


def page(response) -> Page:
    assert response.mimetype == "text/html", response.data[:300]
    return Page(response.get_data(as_text=True))


def new_operator_key(name: str = "alice") -> str:
    with session_scope() as s:
        return operators.create_key(s, name)[1]


def new_api_key(name: str = "reader") -> str:
    with session_scope() as s:
        return apikeys.create_key(s, name)[1]


def csrf_of(client) -> str:
    return page(client.get("/login")).field("csrf")


def log_in(client, key: str, **extra):
    return client.post("/login", data={"key": key, "csrf": csrf_of(client), **extra})


def log_out(client):
    """The page's Log out button: a POST with the session's CSRF token."""
    return client.post("/logout", data={"csrf": csrf_of(client)})


def session_cookie(client, flask_app) -> dict:
    cookie = client.get_cookie("session")
    assert cookie is not None
    return flask_app.session_interface.get_signing_serializer(flask_app).loads(cookie.value)


def segment_ids(nzb: Nzb) -> set[str]:
    return {segment.message_id for file in nzb.files for segment in file.segments}


# -- logins ------------------------------------------------------------------------------------


def test_an_operator_logs_in_with_the_form_and_sees_the_status(client, flask_app):
    key = new_operator_key()
    assert client.get("/").status_code == 303  # to the login form first
    response = log_in(client, key)
    assert response.status_code == 303 and response.headers["Location"] == "/"
    shown = page(client.get("/"))
    assert shown.by_id["groups"]  # the status page's tables
    assert "alice (operator)" in client.get("/").get_data(as_text=True)
    # The session holds who logged in and as what, never the key.
    stored = session_cookie(client, flask_app)
    assert stored["who"]["kind"] == "operator" and isinstance(stored["who"]["id"], int)
    assert key not in repr(stored) and key[len("seedop_") :] not in client.get_cookie("session").value
    # Operators search too.
    assert client.get("/search").status_code == 200
    # Log out: the status asks for a login again.
    assert log_out(client).status_code == 303
    assert client.get("/").status_code == 303


def test_an_api_key_user_searches_but_does_not_see_the_status(client):
    key = new_api_key()
    response = log_in(client, key)
    assert response.status_code == 303 and response.headers["Location"] == "/search"
    assert client.get("/search").status_code == 200
    refused = client.get("/")
    assert refused.status_code == 403 and "Operators only" in refused.get_data(as_text=True)
    assert "Status" not in [link.get("href") for link in page(client.get("/search")).links]


def test_the_login_goes_back_to_the_page_asked_for_and_only_to_this_server(client):
    key = new_api_key()
    first = client.get("/search?q=walking")
    assert first.status_code == 303
    assert first.headers["Location"] == "/login?next=/search?q%3Dwalking"
    assert log_in(client, key, next="/search?q=walking").headers["Location"] == "/search?q=walking"
    log_out(client)
    for elsewhere in ("//evil.example/", "https://evil.example/", "/\\evil.example", "javascript:alert(1)"):
        assert log_in(client, key, next=elsewhere).headers["Location"] == "/search", elsewhere


def test_a_wrong_or_revoked_key_is_refused(client):
    api_key = new_api_key()
    for wrong in ("seedop_" + "x" * 43, "seedapi_" + "y" * 43, "nothing", "", "k" * 10_000):
        response = log_in(client, wrong)
        assert response.status_code == 401, wrong[:20]
        assert "not an operator key or an active API key" in page(response).by_id["login-error"]
        assert client.get("/search").status_code == 303  # still no login
    # Logged in, then revoked: the next request has no login any more.
    assert log_in(client, api_key).status_code == 303
    assert client.get("/search").status_code == 200
    with session_scope() as s:
        apikeys.revoke_key(s, "reader")
    assert client.get("/search").status_code == 303
    assert log_in(client, api_key).status_code == 401


def test_an_operator_key_revoked_ends_its_session(client):
    key = new_operator_key()
    assert log_in(client, key).status_code == 303 and client.get("/").status_code == 200
    with session_scope() as s:
        operators.revoke_key(s, "alice")
    assert client.get("/").status_code == 303


def test_the_login_form_needs_its_csrf_token(client):
    key = new_operator_key()
    for data in ({"key": key}, {"key": key, "csrf": ""}, {"key": key, "csrf": "forged"}):
        csrf_of(client)  # the session has a token; the post does not carry it
        response = client.post("/login", data=data)
        assert response.status_code == 400
        assert "expired or did not come from this page" in response.get_data(as_text=True)
        assert client.get("/").status_code == 303
    # Another browser's token is not this session's.
    other = client.application.test_client()
    token = csrf_of(other)
    csrf_of(client)
    assert client.post("/login", data={"key": key, "csrf": token}).status_code == 400
    assert log_in(client, key).status_code == 303


def test_logins_hold_across_processes_through_the_shared_secret(clean_db, clean_redis, flask_app, redis_server):
    """The cookie is signed with the secret in Redis: another process (a gunicorn worker, made
    here as a second app) reads the same login. When Redis lost it and a process stored
    another, the others take that one at the first cookie that does not verify."""
    import redis

    from app import create_app

    def process():
        return create_app(flask_app.config["SETTINGS"]).test_client()

    key = new_operator_key()
    first, second = process(), process()
    log_in(first, key)
    shared = redis.Redis.from_url(redis_server.url)
    secret = shared.get(SECRET_KEY_NAME)
    assert secret is not None and len(secret) == 32
    second.set_cookie("session", first.get_cookie("session").value)
    assert second.get("/").status_code == 200
    # Redis emptied; a third process stores a new secret; the first takes it on a cookie that
    # does not verify (Redis read again at most every SECRET_RECHECK_SECONDS).
    shared.flushdb()
    third = process()
    log_in(third, key)
    assert shared.get(SECRET_KEY_NAME) not in (None, secret)
    first.set_cookie("session", third.get_cookie("session").value)
    wait_until(lambda: first.get("/").status_code == 200, timeout=10, what="the first process to take the new secret")
    assert second.get("/").status_code == 200 and third.get("/").status_code == 200


# -- the status page ---------------------------------------------------------------------------


def test_the_status_shows_each_groups_progress_nodes_and_failures(client):
    with session_scope() as s:
        group = make_group(s)
        make_plan(s, group, [(BIG, BIG + 999), (BIG + 1000, BIG + 1999), (BIG + 2000, BIG + 2999)])
        node, _ = make_node(s)
        for _ in range(3):
            leases.lease(s, node, max_leases=3)
        ids = s.scalars(select(SeedRange.id).order_by(SeedRange.first_id)).all()
    failed, half, whole = ids
    accept(node, whole, make_batch(BIG + 2000, BIG + 2999))
    accept(node, half, make_batch(BIG + 1000, BIG + 1499))
    with session_scope() as s:
        leases.finish(s, node, whole)
        leases.release(s, node, failed, failure="server said 411 <b>no such group</b>")
        s.execute(text("UPDATE seed_nodes SET last_seen_at = '2025-11-01 07:27:27+00'"))
        # Both batches came two hours ago (in one minute).
        s.execute(text("UPDATE seed_batches SET accepted_at = now() - interval '2 hours'"))
    log_in(client, new_operator_key())
    response = client.get("/")
    assert response.status_code == 200
    shown = page(response)
    (row,) = [r for r in shown.rows("groups") if r and r[0] == "alt.binaries.test"]
    planned, leased, done = row[1:3], row[3:5], row[5:7]
    assert planned == ["1", "1,000"] and leased == ["1", "1,000"] and done == ["1", "1,000"]
    covered, progress, rate, eta, last_batch, articles, missing, dropped, files, releases, posts = row[7:18]
    assert covered == "1,500 / 3,000" and progress == "50.0 %"
    # 1,500 article numbers in the last minute that saw batches (two hours ago: the pause since
    # does not make it 0): 25 a second, so the 1,500 left take a minute at that pace.
    assert rate == "25.0" and eta == "1 min" and last_batch.startswith("2 h ") and last_batch.endswith(" ago")
    # Articles and the catalog's counts grow as batches are stored: these were accepted only.
    assert (articles, missing, dropped, files, releases, posts) == ("0", "0", "0", "0", "0", "0")
    assert "2 waiting" in shown.by_id["summary"]
    assert shown.by_id["oldest-unstored"].startswith("Oldest batch not stored: batch ")
    assert shown.by_id["oldest-unstored"].endswith("waiting 2 h 00 min after 0 attempts.")
    (node_row,) = [r for r in shown.rows("nodes") if r and r[0] == "edge-1"]
    assert node_row[1:4] == ["yes", "1", "2025-11-01 07:27:27 UTC"] and node_row[4].endswith(" ago")
    # Its rate over its last minute that saw its batches, and the failure it gave a range back with.
    assert node_row[5:7] == ["25.0", "server said 411 <b>no such group</b>"]
    (leased_row,) = [r for r in shown.rows("leased") if r and r[0] == str(half)]
    assert leased_row[1:6] == ["alt.binaries.test", f"{BIG + 1000:,}", f"{BIG + 1500:,}", f"{BIG + 1999:,}", "edge-1"]
    (failed_row,) = [r for r in shown.rows("failed") if r and r[0] == str(failed)]
    assert failed_row[5:] == ["planned", "1", "edge-1: server said 411 <b>no such group</b>"]
    assert "<b>no such group</b>" not in response.get_data(as_text=True)  # shown as text, escaped


def test_the_status_charts_the_articles_stored_a_minute_by_group(client):
    """A line a group over the last hours, by minute, from the batches stored (server-drawn SVG)."""
    with session_scope() as s:
        groups = [make_group(s, name) for name in ("alt.binaries.test", "alt.binaries.other")]
        for group in groups:
            make_plan(s, group, [(BIG, BIG + 1999)])
        node, _ = make_node(s)
        for _ in groups:
            leases.lease(s, node, max_leases=2)
        ranges = dict(s.execute(select(SeedRange.group_id, SeedRange.id)).all())
    ids = [
        accept(node, ranges[groups[0].id], make_batch(BIG, BIG + 999, skip={BIG + 1})),
        accept(node, ranges[groups[0].id], make_batch(BIG + 1000, BIG + 1999)),
        accept(node, ranges[groups[1].id], make_batch(BIG, BIG + 999, group="alt.binaries.other")),
    ]
    for batch_id in ids:
        with session_scope() as s:
            assert store.store_batch(s, batch_id).stored
    with session_scope() as s:  # the first batch stored half an hour ago, one a day ago (off the chart)
        s.execute(
            text("UPDATE seed_batches SET stored_at = now() - interval '30 minutes' WHERE id = :id"), {"id": ids[0]}
        )
        s.execute(text("UPDATE seed_batches SET stored_at = now() - interval '1 day' WHERE id = :id"), {"id": ids[2]})
    log_in(client, new_operator_key())
    html = client.get("/").get_data(as_text=True)
    chart = re.search(r'<figure id="stored-chart">(.*?)</figure>', html, re.S).group(1)
    lines = dict(re.findall(r'<polyline data-group="([^"]+)".*?points="([^"]+)"', chart, re.S))
    assert list(lines) == ["alt.binaries.test"]  # the other group stored nothing in the chart's hours
    points = [tuple(map(float, p.split(","))) for p in lines["alt.binaries.test"].split()]
    assert len(points) == status_service.CHART_HOURS * 60 and points == sorted(points)  # a point a minute
    baseline = max(y for _, y in points)
    # Two minutes above the axis: half an hour ago (999 articles) and now (1,000: the top).
    assert sorted(y for _, y in points if y < baseline) == [0.0, 0.2]
    legend = " ".join(re.sub(r"<[^>]+>", " ", chart).split())
    assert "alt.binaries.test: 1,999 articles, at most 1,000 a minute" in legend


def test_the_status_of_an_empty_seed(client):
    log_in(client, new_operator_key())
    shown = page(client.get("/"))
    assert "No group yet" in shown.rows("groups")[-1][0]
    assert "No node yet" in shown.rows("nodes")[-1][0]


# -- search and NZB ----------------------------------------------------------------------------


@pytest.fixture
def catalog(client, clean_db):
    """The Walking Dead post (crossposted to two groups) stored the normal way, and an API key."""
    posted_real_posts([WALKING_DEAD_NZB])
    return client, new_api_key()


def test_the_category_filter_keeps_to_a_category(catalog, clean_db):
    client, key = catalog
    log_in(client, key)
    for cat, total in (
        ("5040", "2 posts found"),
        ("5000", "2 posts found"),
        ("5030", "0 posts found"),
        ("7020", "0 posts found"),
    ):
        shown = page(client.get("/search", query_string={"q": "walking dead", "cat": cat}))
        assert shown.by_id["total"] == total, cat
    # The choice is kept on the form, and on the links to other pages.
    shown = page(client.get("/search", query_string={"cat": "5040"}))
    assert shown.by_id["total"] == "2 posts found"
    for bad in ("5041", "x", "²", "9" * 40):
        response = client.get("/search", query_string={"cat": bad})
        assert response.status_code == 400, bad


def test_a_search_finds_the_post_and_its_nzb_link_downloads_it(catalog, clean_db):
    client, key = catalog
    log_in(client, key)
    response = client.get("/search", query_string={"q": "walking dead s03e06"})
    assert response.status_code == 200
    shown = page(response)
    assert shown.by_id["total"] == "2 posts found"
    rows = shown.rows("results")[1:]
    assert {(r[0].split()[0], r[1], r[2]) for r in rows} == {
        (WALKING_DEAD, "TV > HD", "alt.binaries.multimedia"),
        (WALKING_DEAD, "TV > HD", "alt.binaries.teevee"),
    }
    # What the name says, under it: the show, the episode, the resolution.
    assert all("The Walking Dead · S03E06 · 720p · hdtv" in r[0] for r in rows), rows
    for row in rows:
        files, size, completion, posted, link = row[3:]
        assert int(files) > 0 and size.endswith("MiB") and completion.endswith(" %") and posted.endswith(" UTC")
        assert link == "NZB"
    nzb_links = [a["href"] for a in shown.links if a.get("class") == "nzb"]
    assert len(nzb_links) == 2 and all(link.startswith("/nzb/") for link in nzb_links)
    download = client.get(nzb_links[0])
    assert download.status_code == 200 and download.mimetype == "application/x-nzb"
    assert download.headers["Content-Disposition"] == (
        f"attachment; filename=\"{WALKING_DEAD}.nzb\"; filename*=UTF-8''{WALKING_DEAD}.nzb"
    )
    # The NZB read as a downloader reads it: the original post's articles, every one.
    parsed = Nzb.from_str(download.get_data(as_text=True))
    original = Nzb.from_file(WALKING_DEAD_NZB)
    assert segment_ids(parsed) == segment_ids(original) and len(parsed.files) == len(original.files)
    # The grab is counted for the post and the key (the search as a hit, the NZB as a grab).
    assert query(clean_db, "SELECT sum(grabs) FROM post_grabs") == [(1,)]
    with session_scope() as s:
        row = s.scalar(select(ApiKey).where(ApiKey.name == "reader"))
        assert (row.grabs, row.api_hits) == (1, 2) and row.last_used_at is not None


def test_an_api_key_in_the_url_works_without_a_login_and_is_carried_on(catalog):
    client, key = catalog
    response = client.get("/search", query_string={"q": "walking dead", "apikey": key})
    assert response.status_code == 200 and client.get_cookie("session") is None
    shown = page(response)
    assert shown.field("apikey") == key  # the form searches again with it
    nzb_links = [a["href"] for a in shown.links if a.get("class") == "nzb"]
    assert nzb_links and all(parse_qs(urlsplit(link).query)["apikey"] == [key] for link in nzb_links)
    assert client.get(nzb_links[0]).status_code == 200
    assert "Log out" not in response.get_data(as_text=True)
    assert f"/search?apikey={key}" in [a.get("href") for a in shown.links]  # the menu's link too
    # A wrong key in the URL is refused, not taken as no key; the status never takes one.
    assert client.get("/search", query_string={"q": "walking", "apikey": "seedapi_wrong"}).status_code == 401
    assert client.get(nzb_links[0].replace(key, "seedapi_wrong")).status_code == 401
    assert client.get("/", query_string={"apikey": key}).status_code == 303


def test_the_nzb_needs_a_key_and_a_post(catalog):
    client, key = catalog
    assert client.get("/nzb/1").status_code == 303
    log_in(client, key)
    missing = client.get("/nzb/12345")
    assert missing.status_code == 404 and "No such post" in missing.get_data(as_text=True)
    for bad in ("/nzb/99999999999999999999999", "/nzb/-99999999999999999999999", "/nzb/" + "9" * 5000):
        assert client.get(bad).status_code == 404, bad[:30]
    assert client.get("/nzb/1?group_id=abc").status_code == 400
    assert client.get("/nzb/1?group_id=99999999999").status_code == 400


def test_paging(catalog):
    client, key = catalog
    log_in(client, key)
    shown = page(client.get("/search", query_string={"q": "", "page": 1}))
    assert shown.by_id["total"].endswith("found")
    beyond = client.get("/search", query_string={"q": "walking", "page": 3})
    assert beyond.status_code == 200 and "results" not in page(beyond).tables


# -- hostile and bad input ---------------------------------------------------------------------


def test_hostile_words_are_shown_as_text(client):
    log_in(client, new_api_key())
    response = client.get("/search", query_string={"q": HOSTILE})
    assert response.status_code == 200
    body = response.get_data(as_text=True)
    assert "<script>" not in body and "<img" not in body and "onerror=alert(2)>" not in body
    assert page(response).field("q") == HOSTILE  # the box shows the words as typed
    # A group of markup is refused with its name escaped.
    refused = client.get("/search", query_string={"q": "x", "group": HOSTILE})
    assert refused.status_code == 400 and "<script>" not in refused.get_data(as_text=True)
    assert response.headers["Content-Security-Policy"].startswith("default-src 'none'")
    assert response.headers["Referrer-Policy"] == "no-referrer"


@pytest.mark.parametrize(
    "params, status",
    [
        ({"page": "-1"}, 400),
        ({"page": "0"}, 400),
        ({"page": "abc"}, 400),
        ({"page": "1e3"}, 400),
        ({"page": "9" * 40}, 400),
        ({"page": "202"}, 400),
        ({"q": "a" * 600}, 400),
        ({"q": " ".join(f"w{i}" for i in range(40))}, 400),
        ({"q": "x", "group": "alt.binaries.nothing.here"}, 404),
        ({"q": "nul\0byte"}, 200),
        ("q=%ff%fe%00", 200),
        ("page=%ff", 400),
        ("group=%ff&q=", 400),
        ("q=" + "%25" * 501, 400),
    ],
)
def test_bad_parameters_give_a_page_not_a_500(client, params, status):
    log_in(client, new_api_key())
    response = client.get("/search", query_string=params)
    assert response.status_code == status, response.data[:400]
    assert response.mimetype == "text/html"
    if status != 200:
        assert re.search(r'class="error"', response.get_data(as_text=True))


def test_the_last_page_is_served(client):
    log_in(client, new_api_key())
    assert client.get("/search", query_string={"q": "x", "page": "201"}).status_code == 200
