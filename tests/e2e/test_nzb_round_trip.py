"""Real posts round-trip to the same NZB: two of the real posts of tests/data/nzb/ posted to INN 2
at their real sizes (each article, as the server stores it, exactly its segment's bytes), indexed end to end (INN 2 -> an
edge node -> API -> workers -> PostgreSQL), found through the newznab API over HTTPS and exported
through t=get: the exported NZB lists exactly the original's files, and per file its segments'
numbers, bytes and message-ids (as posted: the sabnzbd post's ids are made up, its NZB's are file
references no server takes). The `nzb` package reads both."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from nzb import Nzb

from edge.digest.nntp import connect
from simnews.generator import make_article
from simnews.inject import inject
from simnews.nzbpost import load_nzb, post_articles
from simnews.proxy import ProviderProxy

pytestmark = pytest.mark.services

NZB_DIR = Path(__file__).resolve().parents[1] / "data" / "nzb"
GROUP = "alt.binaries.fullsize"
POSTS = {"dlnzb_ngpost_economist.nzb": "The_Economist_USA_-_April_19_2025", "sabnzbd_unicode_rar.nzb": "你好世界"}
NEWZNAB = "{http://www.newznab.com/DTD/2010/feeds/attributes/}"


def fetch(dc, **params) -> bytes:
    context = ssl.create_default_context(cafile=dc.api.cafile)
    try:
        with urllib.request.urlopen(
            f"{dc.api.url}/api?{urllib.parse.urlencode(params)}", context=context, timeout=30
        ) as response:
            assert response.status == 200
            return response.read()
    except urllib.error.HTTPError as exc:
        raise AssertionError(
            f"{params.get('t')}: HTTP {exc.code}; the API's log ends:\n{dc.api.output()[-3000:]}"
        ) from exc


def server_additions(news) -> int:
    """What INN adds to an article it stores (its Path entry, an Xref header), measured on a probe
    posted as the group's article 1: its size on the server less its size as posted."""
    probe = make_article([GROUP], '"probe.txt" yEnc (1/1)', "<probe.fullsize@simnews.invalid>")
    assert inject(news.inn.host, news.inn.feed_port, [probe], conns=1).accepted == 1
    with connect(news.inn.host, news.inn.reader_port, compress=False) as client:
        info = client.group(GROUP)
        (line,) = b"".join(client.over(info.first, info.last)).split(b"\r\n")[:-1]
    assert int(line.split(b"\t")[0]) == 1
    return int(line.split(b"\t")[6]) - len(probe.raw)


def test_real_posts_at_their_real_sizes_come_back_as_the_same_nzb(dc, news):
    news.inn.add_group(GROUP)
    added = server_additions(news)
    expected = {}
    articles = []
    for name in POSTS:
        # Posted in order on one connection, the i-th article is the group's number i + 2, whose
        # Xref is as long as article 1's plus its extra digits.
        start = len(articles)
        posted = post_articles(
            load_nzb(NZB_DIR / name),
            GROUP,
            namespace="fullsize",
            full_size=True,
            server_adds=lambda i, start=start: added + len(str(start + i + 2)) - 1,
        )
        articles += posted
        # The original, file by file: its name, and per segment (number, bytes, message-id as posted).
        expected[name] = {}
        for article in posted:
            truth = article.truth
            file_name = truth.file_subject.split('"')[1]
            expected[name].setdefault(file_name, set()).add(
                (truth.segment, truth.nzb_bytes, truth.message_id.strip("<>"))
            )
    assert inject(news.inn.host, news.inn.feed_port, articles, conns=1).accepted == len(articles)

    dc.add_groups(GROUP)
    with ProviderProxy(news.inn.host, news.inn.reader_port) as proxy:
        dc.plan(proxy, GROUP)
        token = dc.create_node("edge-a")
        node = dc.edge("edge-a", dc.node_env(token, proxy.port), "--exit-when-idle")
        assert node.wait(120) == 0, node.log()
    dc.wait_finished()
    key = json.loads(dc.flask("apikeys", "create", "sabnzbd", "--json"))["key"]

    for name, title in POSTS.items():
        feed = ET.fromstring(fetch(dc, t="search", q=title, group=GROUP, apikey=key))
        items = [i for i in feed.iter("item") if i.find("title").text == title]
        # The economist's .nfo came weeks later from another poster: one post with its rars.
        (item,) = items
        post_id = urllib.parse.parse_qs(urllib.parse.urlparse(item.find("link").text).query)["id"][0]
        document = Nzb.from_str(fetch(dc, t="get", id=post_id, apikey=key).decode())
        got = {f.name: {(s.number, s.size, s.message_id) for s in f.segments} for f in document.files}
        assert got == expected[name], name
        assert all(f.groups == (GROUP,) for f in document.files)
