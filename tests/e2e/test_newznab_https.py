"""The newznab API through gunicorn over HTTPS, as a client reaches it: caps, search, details and
get on the real posts indexed end to end (INN 2 -> two edge nodes -> API -> workers ->
PostgreSQL), and each newznab error code; the RSS read by feedparser, the NZB by the `nzb`
package."""

from __future__ import annotations

import json
import ssl
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET

import feedparser
import pytest
from nzb import Nzb

from simnews.proxy import ProviderProxy
from tests.e2e.realposts import GROUP, NAMES

pytestmark = pytest.mark.services

NEWZNAB = "{http://www.newznab.com/DTD/2010/feeds/attributes/}"


def fetch(dc, **params) -> tuple[int, str, bytes]:
    context = ssl.create_default_context(cafile=dc.api.cafile)
    url = f"{dc.api.url}/api?{urllib.parse.urlencode(params)}"
    with urllib.request.urlopen(url, context=context, timeout=30) as response:
        return response.status, response.headers.get_content_type(), response.read()


def test_newznab_over_https_on_the_indexed_real_posts(dc, news, real_posts):
    dc.add_groups(GROUP)
    with ProviderProxy(news.inn.host, news.inn.reader_port) as proxy:
        dc.plan(proxy, GROUP, range_size=2_000)
        token = dc.create_node("edge-a")
        node = dc.edge("edge-a", dc.node_env(token, proxy.port), "--exit-when-idle")
        assert node.wait(120) == 0, node.log()
    dc.wait_finished()
    key = json.loads(dc.flask("apikeys", "create", "prowlarr", "--json"))["key"]

    status, kind, body = fetch(dc, t="caps")
    assert (status, ET.fromstring(body).tag) == (200, "caps")

    status, kind, body = fetch(dc, t="search", q="underbelly badness", apikey=key)
    feed = feedparser.parse(body)
    assert status == 200 and not feed.bozo
    assert [e.title for e in feed.entries] == [NAMES["nzbmatrix_teevee_underbelly_s05e04.nzb"]]
    (enclosure,) = feed.entries[0].enclosures
    assert enclosure.href.startswith(dc.api.url + "/api?t=get&id=")

    post_id = urllib.parse.parse_qs(urllib.parse.urlparse(enclosure.href).query)["id"][0]
    status, kind, body = fetch(dc, t="get", id=post_id, apikey=key)
    assert (status, kind) == (200, "application/x-nzb")
    document = Nzb.from_str(body.decode())
    expected = {name for name, _ in real_posts["nzbmatrix_teevee_underbelly_s05e04.nzb"].values()}
    assert {f.name for f in document.files} == expected
    assert sum(len(f.segments) for f in document.files) == len(real_posts["nzbmatrix_teevee_underbelly_s05e04.nzb"])

    status, kind, body = fetch(dc, t="details", id=post_id, apikey=key)
    item = ET.fromstring(body).find("channel/item")
    grabs = [a.get("value") for a in item.iter(f"{NEWZNAB}attr") if a.get("name") == "grabs"]
    assert grabs == ["1"]

    for params, code in [
        ({"t": "search"}, "100"),
        ({"t": "search", "apikey": "seedapi_x"}, "100"),
        ({}, "200"),
        ({"t": "search", "apikey": key, "limit": "x"}, "201"),
        ({"t": "nope", "apikey": key}, "202"),
        ({"t": "get", "apikey": key, "id": "42"}, "300"),
    ]:
        status, kind, body = fetch(dc, **params)
        root = ET.fromstring(body)
        assert (status, root.tag, root.get("code")) == (200, "error", code), (params, body[:200])
