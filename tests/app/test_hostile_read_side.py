"""The catalog's read side with what Usenet itself carries (issue 32): post names in any script,
with control characters and bidi overrides, downloaded through the web page and newznab's t=get
(the Content-Disposition header), and printed by `flask seed releases search|show`; the web
page's logout (a POST with the CSRF token); and the newznab API's own answers to requests Flask
refuses before its view (404, 405, 414 under /api). Posts are made by the real digest and store
(tests/app/test_search.py's helpers)."""

from __future__ import annotations

import http.client
import json
import ssl
import urllib.parse
import xml.etree.ElementTree as ET
from urllib.parse import urlsplit

import pytest
from werkzeug.exceptions import RequestURITooLarge

from app.db import session_scope
from app.services import apikeys, operators
from app.services.attachments import nzb_disposition
from app.services.search import search_posts
from tests.app.factories import BIG
from tests.app.test_search import Made, made_lines, store_group
from tests.app.test_web import csrf_of, log_in, page

GROUP = "alt.binaries.test.hostile"
CYRILLIC = "Фильм.2024.1080p.WEB-DL"
JAPANESE = "日本語テスト.Release"
LATIN1 = "Café.Crème.Brûlée.2024"
# An ANSI escape that clears the screen, a bell, and a right-to-left override that shows
# "Invoice.exe.pdf"-like spoofs; DEL and a C1 control (CSI) too.
HOSTILE = "Evil\x1b[2J\x07.Show\u202egnp.exe\x7f\x9b31m.2024"
HOSTILE_POSTER = "Mallory \x1b]0;owned\x07 <m\u2066@example.net>"
NAMES = [CYRILLIC, JAPANESE, LATIN1, HOSTILE]
# What must never reach a terminal or a header.
UNSHOWN = {chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))} | set(
    "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
)


@pytest.fixture
def hostile(client):
    """The posts stored the normal way, each found by its name: (client, API key, {name: post})."""
    made = [
        Made(name, HOSTILE_POSTER if name == HOSTILE else "Poster <p@example.net>", 1 + i, files=2, parts=2)
        for i, name in enumerate(NAMES)
    ]
    store_group(GROUP, made_lines(BIG, made), BIG)
    with session_scope() as s:
        posts = {p.name: p for p in search_posts(s, None, group=GROUP, limit=100).items}
        _, key = apikeys.create_key(s, "reader")
    assert set(posts) == set(NAMES), sorted(posts)
    return client, key, posts


def safe_header_name(header: str) -> str:
    """The file name a client reads from the header (filename*), the header checked: ASCII, no
    control or bidi character, one quoted ASCII fallback."""
    assert header.isascii() and not any(c in UNSHOWN for c in header), header
    assert header.startswith('attachment; filename="') and header.count('"') == 2
    fallback = header.split('"')[1]
    assert fallback.endswith(".nzb") and fallback != ".nzb" and not fallback.startswith(".")
    # The real name, as a client reads filename* (RFC 5987): UTF-8, percent-encoded.
    encoded = header.split("filename*=UTF-8''", 1)[1]
    assert ";" not in encoded and " " not in encoded
    real = urllib.parse.unquote(encoded, encoding="utf-8", errors="strict")
    assert real.endswith(".nzb") and "/" not in real and not any(c in UNSHOWN for c in real)
    return real


# -- item 4: the NZB's file name ---------------------------------------------------------------


def test_an_nzb_of_any_name_downloads_with_an_ascii_header_and_the_real_name(hostile):
    client, key, posts = hostile
    for name, post in posts.items():
        web = client.get(f"/nzb/{post.key}", query_string={"apikey": key, "group_id": post.group_id})
        assert web.status_code == 200 and web.mimetype == "application/x-nzb", (name, web.data[:300])
        header = web.headers["Content-Disposition"]
        real = safe_header_name(header)
        assert real == (f"{name}.nzb" if name != HOSTILE else "Evil_[2J_.Show_gnp.exe__31m.2024.nzb"), real
        # The newznab API's t=get names the file alike: one helper for both.
        newznab = client.get("/api", query_string={"t": "get", "id": post.key, "apikey": key})
        assert newznab.status_code == 200 and newznab.headers["Content-Disposition"] == header
    latin1 = posts[LATIN1]
    assert client.get(f"/nzb/{latin1.key}", query_string={"apikey": key}).headers["Content-Disposition"] == (
        'attachment; filename="Caf_.Cr_me.Br_l_e.2024.nzb"; '
        "filename*=UTF-8''Caf%C3%A9.Cr%C3%A8me.Br%C3%BBl%C3%A9e.2024.nzb"
    )
    cyrillic = client.get(f"/nzb/{posts[CYRILLIC].key}", query_string={"apikey": key}).headers["Content-Disposition"]
    assert "filename*=UTF-8''" + urllib.parse.quote(CYRILLIC + ".nzb", safe="") in cyrillic


def test_through_gunicorn_every_name_downloads(hostile, api_server):
    """The 500 of a name outside Latin-1 showed only through a real server, which writes headers
    as Latin-1 (Flask's test client does not)."""
    _, key, posts = hostile
    url = urlsplit(api_server.url)
    context = ssl.create_default_context(cafile=api_server.cafile)
    for name, post in posts.items():
        for path in (f"/nzb/{post.key}?apikey={key}", f"/api?t=get&id={post.key}&apikey={key}"):
            conn = http.client.HTTPSConnection(url.hostname, url.port, context=context, timeout=60)
            try:
                conn.request("GET", path)
                response = conn.getresponse()
                body = response.read()
                assert response.status == 200, (name, path, body[:300])
                # http.client reads header bytes as Latin-1: ASCII here is ASCII on the wire.
                header = response.getheader("Content-Disposition")
                assert header.isascii() and body.startswith(b"<?xml"), (name, header)
            finally:
                conn.close()


@pytest.mark.parametrize(
    "name",
    [
        CYRILLIC,
        JAPANESE,
        LATIN1,
        HOSTILE,
        "",
        "...",
        "///",
        "a/b\\c",
        "\ud800lone",
        "nul\x00here",
        "x" * 5000,
        'a"b\r\nSet-Cookie: x=1',
        "\u202e",
        ".hidden",
        "tab\there",
        "\u2028line",
    ],
)
def test_the_disposition_is_safe_whatever_the_name(name):
    header = nzb_disposition(name, -42)
    real = safe_header_name(header)
    assert len(header) < 2500 and len(real) <= 204 and not real.startswith(".")
    if not name.strip("./\\\u202e"):
        assert 'filename="-42.nzb"' in header


# -- item 8: the catalog's commands --------------------------------------------------------------


def test_cli_output_shows_control_and_bidi_characters_escaped(hostile, flask_app):
    runner = flask_app.test_cli_runner()
    result = runner.invoke(args=["seed", "releases", "search", "evil"])
    assert result.exit_code == 0, result.output
    assert not any(c in UNSHOWN for c in result.output.replace("\n", "")), ascii(result.output)
    assert "Evil\\x1b[2J\\x07.Show\\u202egnp.exe\\x7f\\x9b31m.2024" in result.output
    result = runner.invoke(args=["seed", "releases", "search", "фильм"])
    assert result.exit_code == 0 and CYRILLIC in result.output  # other scripts are shown as they are

    key = str(hostile[2][HOSTILE].key)
    shown = runner.invoke(args=["seed", "releases", "show", key, "--group", GROUP])
    assert shown.exit_code == 0, shown.output
    assert not any(c in UNSHOWN for c in shown.output.replace("\n", "")), ascii(shown.output)
    assert "name      Evil\\x1b[2J\\x07.Show\\u202egnp.exe\\x7f\\x9b31m.2024" in shown.output
    assert "poster    Mallory \\x1b]0;owned\\x07 <m\\u2066@example.net>" in shown.output
    files = shown.output.split("\nfiles:\n", 1)[1]
    assert "\\u202e" in files and "\\x1b" in files
    # --json gives the text whole (JSON escapes it).
    as_json = runner.invoke(args=["seed", "releases", "show", key, "--group", GROUP, "--json"])
    assert as_json.exit_code == 0 and "\x1b" not in as_json.output
    details = json.loads(as_json.output)
    assert details["post"]["name"] == HOSTILE and details["post"]["poster"] == HOSTILE_POSTER


# -- item 9a: logging out --------------------------------------------------------------------------


def test_logging_out_takes_a_post_with_the_csrf_token(client):
    with session_scope() as s:
        key = operators.create_key(s, "alice")[1]
    assert log_in(client, key).status_code == 303
    status = page(client.get("/"))
    # The page's Log out is a form posting the session's token.
    token = status.field("csrf")
    assert token == csrf_of(client)
    # A GET (a link or an image on another site) does not log out: it shows the button.
    shown = client.get("/logout")
    assert shown.status_code == 200 and "Log out" in shown.get_data(as_text=True)
    assert client.get("/").status_code == 200
    # A POST without the token, or with another one, does not either.
    for data in ({}, {"csrf": ""}, {"csrf": "forged"}):
        refused = client.post("/logout", data=data)
        assert refused.status_code == 400 and refused.mimetype == "text/html", data
        assert client.get("/").status_code == 200
    done = client.post("/logout", data={"csrf": token})
    assert done.status_code == 303 and done.headers["Location"] == "/login"
    assert client.get("/").status_code == 303
    # Without a login, GET /logout goes to the login form.
    assert client.get("/logout").status_code == 303


# -- item 9b: refusals under /api are newznab errors -------------------------------------------


def newznab_error(response, status: int) -> int:
    assert response.status_code == status, response.data[:300]
    root = ET.fromstring(response.data)
    assert root.tag == "error" and root.get("description"), response.data[:300]
    return int(root.get("code"))


def test_refusals_under_api_are_newznab_errors_with_their_status(client, flask_app):
    assert newznab_error(client.get("/api/nothing"), 404) == 202
    assert newznab_error(client.get("/api/"), 404) == 202
    hostile = client.get("/api/<script>\x1b")
    assert newznab_error(hostile, 404) == 202 and b"<script>" not in hostile.data
    not_allowed = client.post("/api", data={"t": "caps"})
    assert newznab_error(not_allowed, 405) == 202 and "GET" in not_allowed.headers["Allow"]
    as_json = client.get("/api/nothing", query_string={"o": "json"})
    assert as_json.status_code == 404 and as_json.mimetype == "application/json"
    assert as_json.get_json()["error"]["@attributes"]["code"] == "202"
    # A URL too long for the server (gunicorn's limit, or a proxy's, raised as a 414).
    with flask_app.test_request_context("/api", query_string={"t": "search", "q": "x" * 9000}):
        too_long = flask_app.make_response(flask_app.handle_user_exception(RequestURITooLarge()))
    assert newznab_error(too_long, 414) == 201
    # The node API under /api/v1/ and the rest keep their JSON errors.
    node = client.get("/api/v1/seed/nothing-here")
    assert node.status_code == 404 and node.get_json()["error"] == "not_found"
    assert client.get("/api/v1").get_json()["error"] == "not_found"
    assert client.get("/apixyz").get_json()["error"] == "not_found"


def test_a_request_line_gunicorn_refuses_as_too_long_is_a_newznab_error_under_api(api_server):
    """gunicorn refuses a request line past its limit (8,190 bytes) before the app sees it: under
    /api it answers the newznab error its clients read (ops/gunicorn.conf.py), elsewhere the
    API's JSON."""
    url = urlsplit(api_server.url)
    context = ssl.create_default_context(cafile=api_server.cafile)

    def get(path: str) -> tuple[int, str, bytes]:
        conn = http.client.HTTPSConnection(url.hostname, url.port, context=context, timeout=60)
        try:
            conn.request("GET", path)
            response = conn.getresponse()
            return response.status, response.getheader("Content-Type"), response.read()
        finally:
            conn.close()

    status, media_type, body = get("/api?t=search&q=" + "x" * 9000)
    assert (status, media_type) == (414, "application/xml"), body[:300]
    root = ET.fromstring(body)
    assert root.tag == "error" and root.get("code") == "201", body
    status, media_type, body = get("/api?o=json&t=search&q=" + "x" * 9000)
    assert (status, media_type) == (414, "application/json")
    assert json.loads(body)["error"]["@attributes"]["code"] == "201"
    status, media_type, body = get("/api/v1/seed/status?" + "x" * 9000)
    assert (status, media_type) == (414, "application/json") and json.loads(body)["error"] == "uri_too_long", body
