"""The newznab API at /api (app.api.newznab) on the real database, read the way clients read it:
RSS by feedparser (and ElementTree for the newznab attributes), NZBs by the `nzb` package. The
catalog holds the five real posts of tests/data/nzb/, stored the normal way."""

from __future__ import annotations

import json
from email.utils import parsedate_to_datetime
import xml.etree.ElementTree as ET
from pathlib import Path

import feedparser
import pytest
from nzb import Nzb
from sqlalchemy import text

from app.db import session_scope
from app.services import apikeys
from tests.app.test_nzb_export import posted_real_posts

NZB_DIR = Path(__file__).resolve().parents[1] / "data" / "nzb"
NEWZNAB = "{http://www.newznab.com/DTD/2010/feeds/attributes/}"
WALKING_DEAD = "The.Walking.Dead.S03E06.INTERNAL.720p.HDTV.x264-EVOLVE"


@pytest.fixture
def catalog(client, clean_db):
    """The real posts in the catalog, and an API key: (client, key)."""
    posted_real_posts(sorted(NZB_DIR.glob("*.nzb")))
    with session_scope() as s:
        _, key = apikeys.create_key(s, "sonarr")
    return client, key


def get(client, **params):
    response = client.get("/api", query_string=params)
    assert response.status_code == 200, response.data[:300]
    return response


def error_code(response) -> int:
    root = ET.fromstring(response.data)
    assert root.tag == "error", response.data[:300]
    return int(root.get("code"))


def attributes(item: ET.Element) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for attr in item.iter(f"{NEWZNAB}attr"):
        found.setdefault(attr.get("name"), []).append(attr.get("value"))
    return found


def test_caps_needs_no_key_and_lists_the_categories(client, clean_db):
    root = ET.fromstring(get(client, t="caps").data)
    assert root.tag == "caps" and root.find("searching/search").get("available") == "yes"
    ids = {int(c.get("id")) for c in root.iter("category")} | {int(c.get("id")) for c in root.iter("subcat")}
    assert {1000, 2000, 3000, 4000, 5000, 6000, 7000, 7020, 8000, 8010} <= ids
    assert int(root.find("limits").get("max")) >= int(root.find("limits").get("default"))
    assert json.loads(get(client, t="caps", o="json").data)["caps"]["limits"]["@attributes"]["max"] == "100"


def test_search_finds_a_post_by_its_words_as_clients_read_it(catalog):
    client, key = catalog
    response = get(client, t="search", q="walking dead s03e06", apikey=key)
    feed = feedparser.parse(response.data)
    assert not feed.bozo, feed.bozo_exception
    # The post was crossposted to two groups: it is listed in each (one key, one NZB).
    assert [e.title for e in feed.entries] == [WALKING_DEAD] * 2
    assert len({e.id for e in feed.entries}) == 1
    entry = feed.entries[0]
    (enclosure,) = entry.enclosures
    assert enclosure.type == "application/x-nzb" and "t=get" in enclosure.href
    root = ET.fromstring(response.data)
    assert root.find(f"channel/{NEWZNAB}response").attrib == {"offset": "0", "total": "2"}
    items = root.findall("channel/item")
    groups = {attributes(item)["group"][0]: attributes(item) for item in items}
    assert set(groups) == {"alt.binaries.multimedia", "alt.binaries.teevee"}
    teevee = groups["alt.binaries.teevee"]
    # The category is the post's own (a 720p HDTV episode: TV > HD), in whichever group it is;
    # each category once.
    assert teevee["category"] == ["5000", "5040"]
    assert groups["alt.binaries.multimedia"]["category"] == ["5000", "5040"]
    assert int(teevee["size"][0]) > 0
    assert teevee["files"] == ["48"] and teevee["grabs"] == ["0"] and teevee["completion"] == ["100"]
    assert teevee["poster"] == ["teevee@4u.tv (teevee)"]
    # The same search as newznab JSON.
    document = json.loads(get(client, t="search", q="walking dead s03e06", apikey=key, o="json").data)
    items = document["rss"]["channel"]["item"]
    assert [i["title"] for i in items] == [WALKING_DEAD] * 2
    assert items[0]["enclosure"]["@attributes"]["type"] == "application/x-nzb"


def test_get_gives_the_nzb_and_counts_the_grab(catalog):
    client, key = catalog
    root = ET.fromstring(get(client, t="search", q="economist", apikey=key).data)
    # The rars' post (the .nfo was posted to another group: a post of its own there).
    item = max(root.findall("channel/item"), key=lambda i: int(attributes(i)["files"][0]))
    post_id = item.find("guid").text.rsplit("id=", 1)[1]
    response = get(client, t="get", id=post_id, apikey=key)
    assert response.mimetype == "application/x-nzb"
    assert 'filename="The_Economist_USA_-_April_19_2025.nzb"' in response.headers["Content-Disposition"]
    document = Nzb.from_str(response.data.decode())
    assert len(document.files) == 36 and all(f.segments for f in document.files)
    again = ET.fromstring(get(client, t="details", id=post_id, apikey=key).data)
    assert attributes(again.find("channel/item"))["grabs"] == ["1"]
    with session_scope() as s:
        (row,) = [k for k in apikeys.list_keys(s) if k.name == "sonarr"]
        assert (row.grabs, row.api_hits) == (1, 3)


def test_search_without_words_pages_through_the_newest_posts(catalog):
    client, key = catalog
    everything = ET.fromstring(get(client, t="search", apikey=key).data)
    total = int(everything.find(f"channel/{NEWZNAB}response").get("total"))
    items = everything.findall("channel/item")
    assert total == len(items) >= 5
    dates = [parsedate_to_datetime(i.find("pubDate").text) for i in items]
    assert dates == sorted(dates, reverse=True)
    second = ET.fromstring(get(client, t="search", apikey=key, limit=2, offset=2).data)
    assert [i.find("title").text for i in second.findall("channel/item")] == [i.find("title").text for i in items[2:4]]
    # Books only: the categories come from what each post is (none of these is a book).
    books = ET.fromstring(get(client, t="search", apikey=key, cat="7000").data)
    assert books.find(f"channel/{NEWZNAB}response").get("total") == "0"
    for cat in ("5000", "5040", "2000,5040"):
        tv = ET.fromstring(get(client, t="search", apikey=key, cat=cat).data)
        assert {i.find("title").text for i in tv.findall("channel/item")} >= {WALKING_DEAD}
    sd = ET.fromstring(get(client, t="search", apikey=key, cat="5030").data)
    assert WALKING_DEAD not in {i.find("title").text for i in sd.findall("channel/item")}


@pytest.mark.parametrize(
    "params, code",
    [
        ({"t": "search"}, 100),
        ({"t": "search", "apikey": "seedapi_nope"}, 100),
        ({"t": "get", "id": "1"}, 100),
        ({"t": "bogus", "apikey": "KEY"}, 202),
        ({}, 200),
        ({"t": "search", "apikey": "KEY", "limit": "many"}, 201),
        ({"t": "search", "apikey": "KEY", "limit": str(10**12)}, 201),
        ({"t": "search", "apikey": "KEY", "offset": "-1"}, 201),
        ({"t": "search", "apikey": "KEY", "offset": str(10**9)}, 201),
        ({"t": "search", "apikey": "KEY", "maxage": "x"}, 201),
        ({"t": "search", "apikey": "KEY", "cat": "books"}, 201),
        ({"t": "search", "apikey": "KEY", "o": "yaml"}, 201),
        ({"t": "get", "apikey": "KEY"}, 200),
        ({"t": "get", "apikey": "KEY", "id": "not-a-post"}, 300),
        ({"t": "get", "apikey": "KEY", "id": str(2**70)}, 300),
        ({"t": "details", "apikey": "KEY", "id": "12345"}, 300),
        ({"t": "search", "apikey": "KEY", "cat": "99999"}, 201),
        ({"t": "search", "apikey": "KEY", "cat": "-5000"}, 201),
        ({"t": "search", "apikey": "KEY", "minsize": "-1"}, 201),
        ({"t": "search", "apikey": "KEY", "maxsize": str(2**64)}, 201),
        ({"t": "tvsearch", "apikey": "KEY", "season": "one"}, 201),
        ({"t": "tvsearch", "apikey": "KEY", "season": "1", "ep": "x"}, 201),
        ({"t": "tvsearch", "apikey": "KEY", "season": "99999999"}, 201),
        ({"t": "tvsearch", "apikey": "KEY", "season": "2014", "ep": "13/45"}, 201),
        ({"t": "tvsearch", "apikey": "KEY", "season": "", "ep": "07/22"}, 201),
        ({"t": "tvsearch", "apikey": "KEY", "season": "²", "ep": "1"}, 201),
        ({"t": "movie", "apikey": "KEY", "year": "soon"}, 201),
        ({"t": "tvsearch", "apikey": "KEY", "rid": "121361", "season": "1", "ep": "2"}, 203),
        ({"t": "tvsearch", "apikey": "KEY", "rid": "1", "traktid": "2"}, 203),
        ({"t": "tvsearch", "apikey": "KEY", "tvdbid": "x"}, 201),
        ({"t": "movie", "apikey": "KEY", "imdbid": "tt"}, 201),
        ({"t": "movie", "apikey": "KEY", "tmdbid": str(2**31)}, 201),
        ({"t": "getnfo", "apikey": "KEY", "id": "1"}, 300),
        ({"t": "register", "apikey": "KEY"}, 202),
    ],
)
def test_bad_requests_get_newznab_errors(catalog, params, code):
    client, key = catalog
    params = {k: (key if v == "KEY" else v) for k, v in params.items()}
    assert error_code(get(client, **params)) == code


def test_tvsearch_finds_the_episode_with_its_extended_attributes(catalog):
    client, key = catalog
    for params in (
        {"q": "walking dead", "season": "3", "ep": "6"},
        {"title": "The Walking Dead", "season": "03"},
        {"q": "walking dead", "season": "S03", "ep": "E06"},
        {"q": "walking dead", "tvdbid": "153021"},
    ):
        root = ET.fromstring(get(client, t="tvsearch", apikey=key, cat="5030,5040", extended="1", **params).data)
        items = root.findall("channel/item")
        assert {i.find("title").text for i in items} == {WALKING_DEAD}, params
        found = attributes(items[0])
        assert (found["season"], found["episode"], found["tvtitle"], found["resolution"]) == (
            ["S03"],
            ["E06"],
            ["The Walking Dead"],
            ["1280x720"],
        )
        assert found["category"] == ["5000", "5040"] and int(found["size"][0]) > 0
    for params in (
        {"q": "walking dead", "season": "3", "ep": "7"},
        {"q": "walking dead", "season": "2"},
        {"q": "walking dead", "season": "2014", "ep": "07/22"},
    ):
        root = ET.fromstring(get(client, t="tvsearch", apikey=key, **params).data)
        assert root.find(f"channel/{NEWZNAB}response").get("total") == "0", params
    # Without extended=1, none of the name's attributes.
    plain = ET.fromstring(get(client, t="tvsearch", apikey=key, q="walking dead").data)
    assert "season" not in attributes(plain.find("channel/item"))


def test_every_answer_carries_the_keys_use(catalog):
    client, key = catalog
    get(client, t="search", apikey=key)
    root = ET.fromstring(get(client, t="tvsearch", apikey=key).data)
    limits = root.find(f"channel/{NEWZNAB}apilimits")
    assert limits.get("apicurrent") == "2" and limits.get("grabcurrent") == "0"
    assert limits.get("apimax") is None  # no limit set


def test_past_its_limits_a_key_gets_500_or_501_with_429_and_retry_after(catalog):
    client, _ = catalog
    with session_scope() as s:
        _, key = apikeys.create_key(s, "limited", requests_per_day=3, grabs_per_day=1)
    item = ET.fromstring(get(client, t="search", apikey=key, q="walking dead").data).find("channel/item")
    post_id = item.find("guid").text.rsplit("=", 1)[1]
    limits = ET.fromstring(get(client, t="details", apikey=key, id=post_id).data).find(f"channel/{NEWZNAB}apilimits")
    assert (limits.get("apicurrent"), limits.get("apimax"), limits.get("grabmax")) == ("2", "3", "1")
    assert get(client, t="get", apikey=key, id=post_id).mimetype == "application/x-nzb"
    for params, code in (({"t": "get", "id": post_id}, 500), ({"t": "search"}, 500)):
        response = client.get("/api", query_string={"apikey": key, **params})
        assert response.status_code == 429 and 0 < int(response.headers["Retry-After"]) <= 86400
        assert error_code(response) == code
    with session_scope() as s:
        apikeys.set_limits(s, "limited", requests_per_day=None)
    response = client.get("/api", query_string={"apikey": key, "t": "get", "id": post_id})
    assert response.status_code == 429 and error_code(response) == 501
    assert ET.fromstring(get(client, t="search", apikey=key).data).tag == "rss"


def test_hostile_words_are_text_and_come_back_escaped(catalog):
    client, key = catalog
    for words in ("<script>&amp;'\"", "walking & dead | !s03e06", "'; DROP TABLE releases; --", "\\", "*:(", "é€"):
        response = get(client, t="search", q=words, apikey=key)
        root = ET.fromstring(response.data)  # well formed whatever was asked
        assert root.tag == "rss"
        assert b"<script>" not in response.data


def test_a_revoked_key_stops_working_at_once(catalog):
    """Even in a process that has seen it work (apikeys.key_id knows it): every function refuses
    it, and nothing of the refused request is kept (an NZB's download is not counted)."""
    client, key = catalog
    root = ET.fromstring(get(client, t="search", q="economist", apikey=key).data)
    post_id = root.find("channel/item/guid").text.rsplit("id=", 1)[1]
    assert get(client, t="get", id=post_id, apikey=key).mimetype == "application/x-nzb"
    with session_scope() as s:
        apikeys.revoke_key(s, "sonarr")
        grabs = s.execute(text("SELECT sum(grabs) FROM post_grabs")).scalar_one()
    assert grabs == 1
    for params in ({"t": "search"}, {"t": "get", "id": post_id}, {"t": "details", "id": post_id}):
        assert error_code(get(client, apikey=key, **params)) == 100
    with session_scope() as s:
        assert s.execute(text("SELECT sum(grabs) FROM post_grabs")).scalar_one() == grabs
        (row,) = [k for k in apikeys.list_keys(s) if k.name == "sonarr"]
        assert (row.grabs, row.api_hits) == (1, 2)


def test_the_nzb_file_name_header_is_ascii_whatever_the_post_is_called():
    from app.services.attachments import nzb_disposition as attachment

    header = attachment("你好世界", 42)
    assert header.isascii() and 'filename="42.nzb"' in header and "filename*=UTF-8''%E4%BD%A0" in header
    hostile = attachment('a"b\r\nSet-Cookie: x=1', 7)
    assert hostile.isascii() and "\r" not in hostile and "\n" not in hostile and hostile.count('"') == 2
    assert attachment("The.Walking.Dead.S03E06", 1).startswith('attachment; filename="The.Walking.Dead.S03E06.nzb"')
