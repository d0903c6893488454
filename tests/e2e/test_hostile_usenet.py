"""Whatever Usenet carries cannot stop the indexer: articles posted to INN 2 among honest posts,
with subjects, posters and message-ids at and past every limit (up to what INN accepts), every C0
control, U+FFFE and U+FFFF, lone surrogates and invalid UTF-8 in bytes, right-to-left overrides,
floods of distinct words and markup, read by two edge nodes over ranges that cut the posts, then
through the API and the workers into PostgreSQL.

Every honest post is one searchable post, exact against what was posted; every hostile article
INN took is either stored or counted as rejected (the edge's reasons: docs/batch-format.md); no
range fails, no batch is left retrying or failed."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest

from app.services.groups import get_group
from app.services.planner import plan_group
from app.services.search import search_posts
from edge.digest.nntp import connect
from edge.digest.overview import MAX_MESSAGE_ID_BYTES, MAX_TEXT_BYTES
from simnews.generator import Config, generate
from simnews.inject import inject
from simnews.nzbpost import load_nzb, mixed_with, post_articles
from simnews.proxy import ProviderProxy
from tests.e2e.realposts import NAMES, NZB_DIR, QUOTED
from tests.e2e.test_real_posts import check_posts

pytestmark = pytest.mark.services

GROUP = "alt.binaries.hostile"
HONEST_NZBS = ("dlnzb_ngpost_economist.nzb", "nzbmatrix_teevee_underbelly_s05e04.nzb", "sabnzbd_unicode_rar.nzb")
OTHER_TRAFFIC = 1_000
POSTER = b"Hostile Poster <hostile@example.net>"


@dataclass
class RawArticle:
    """An article as simnews.inject sends it: its message-id and its bytes."""

    message_id: str
    raw: bytes
    lost: bool = False


def article(index: int, subject: bytes, poster: bytes = POSTER, message_id: bytes | None = None) -> RawArticle:
    message_id = message_id or b"<hostile.%d@example.net>" % index
    headers = [
        b"Path: hostile!not-for-mail",
        b"From: " + poster,
        b"Newsgroups: " + GROUP.encode(),
        b"Subject: " + subject,
        b"Message-ID: " + message_id,
        b"Date: Sat, 01 Nov 2025 07:27:27 +0000",
    ]
    return RawArticle(message_id.decode("ascii"), b"\r\n".join(headers) + b"\r\n\r\nhostile body\r\n")


def words(count: int, seed: int) -> bytes:
    """Distinct words (what a tsvector keeps one by one)."""
    return b" ".join(b"w%dx%d" % (i, (i * 7919 + seed) % 1_000_003) for i in range(count))


def fitting(length: int, fill: bytes) -> bytes:
    return (fill * (length // len(fill) + 1))[:length]


def hostile_articles() -> list[tuple[RawArticle, str | None]]:
    """(article, the reason the edge rejects it, or None when it is to be stored)."""
    counter = itertools.count(1)
    made: list[tuple[RawArticle, str | None]] = []

    def add(subject: bytes, rejected: str | None = None, **kwargs) -> None:
        made.append((article(next(counter), subject, **kwargs), rejected))

    yenc = b' - "hostile.rar" yEnc (1/1)'
    # Past every length: a subject of 750 KB of distinct words (once: a join failing for ever on
    # "string is too long for tsvector"), six of 880 KB (once: an OVER reply past its bound, the
    # range failing on every lease), one of 1.1 MB (once: past the client's longest line).
    add(words(100_000, 1)[:750_000], "subject_too_long")
    for k in range(6):
        add(fitting(880_000, b"w%d " % k), "subject_too_long")
    add(fitting(1_100_000, b"x"), "subject_too_long")
    # At and one past the subject's and poster's limits, and a message-id at its limit.
    add(fitting(MAX_TEXT_BYTES - len(yenc), b"Limit.") + yenc)
    add(fitting(MAX_TEXT_BYTES + 1 - len(yenc), b"Limit.") + yenc, "subject_too_long")
    add(words(400, 2)[:MAX_TEXT_BYTES])  # a flood of distinct words that fits
    add(b"poster at the limit" + yenc, poster=fitting(MAX_TEXT_BYTES - 20, b"p") + b" <p@example.net>")
    add(b"poster past the limit" + yenc, "poster_too_long", poster=fitting(MAX_TEXT_BYTES, b"p") + b" <p@x.net>")
    local = MAX_MESSAGE_ID_BYTES - len(b"<@example.net>")
    add(b"a message-id at its limit" + yenc, message_id=b"<" + fitting(local, b"m") + b"@example.net>")
    add(
        b"a message-id past its limit" + yenc,
        "message_id_too_long",
        message_id=b"<" + fitting(local + 1, b"n") + b"@example.net>",
    )
    # What the text can hold: every C0 control (INN keeps what it keeps; the rest is stored),
    # U+FFFE, U+FFFF, a lone surrogate and invalid UTF-8 as bytes, right-to-left overrides, markup.
    for code in [*range(1, 9), 11, 12, *range(14, 32), 127]:
        add(b'control %02x "c%02x.rar" yEnc (1/1) ' % (code, code) + bytes([code]) + b" end")
    add("nonchars \ufffe\uffff".encode() + yenc)
    add(b"lone surrogate \xed\xa0\x80 and \xed\xbf\xbf" + yenc)
    add(b"invalid utf-8 \xff\xfe\xc3\x28 \x80" + yenc)
    add(
        "right-to-left \u202eexe.gnp\u202c and \u2066isolate\u2069".encode() + b' - "rtl\xe2\x80\xaeexe.rar" yEnc (1/1)'
    )
    add(b'<script>alert(1)</script> & <b>markup</b> &#34;x&#34; - "markup.rar" yEnc (1/1)')
    add(b"Subject: a header inside the subject" + yenc, poster=b"\x01\x1f\x7f <ctl@example.net>")
    return made


def post_hostile_usenet(inn) -> tuple[dict[str, dict], dict[str, str | None]]:
    """The honest posts and other traffic posted with the hostile articles among them, each hostile
    article on its own so that what INN took is known: (the honest posts' truth by NZB, each
    hostile message-id INN took -> the reason it is rejected, or None)."""
    inn.add_group(GROUP)
    honest: list = []
    truth: dict[str, dict] = {}
    for name in HONEST_NZBS:
        posted = post_articles(load_nzb(NZB_DIR / name), GROUP, namespace="hostile")
        truth[name] = {a.message_id: (QUOTED.search(a.truth.file_subject)[1], a.truth.segment) for a in posted}
        honest = mixed_with(honest, posted, seed=len(honest))
    other = [
        a
        for a in generate(OTHER_TRAFFIC, Config(seed=32, groups=(GROUP,), namespace="hostile", kind="general"))
        if not a.lost
    ]
    honest = mixed_with(honest, other, seed=32)
    hostile = hostile_articles()
    taken: dict[str, str | None] = {}
    step = len(honest) // (len(hostile) + 1)
    for index, (raw, reason) in enumerate(hostile):
        assert inn.post(honest[index * step : (index + 1) * step]) == step
        if inject(inn.host, inn.feed_port, [raw], conns=1).accepted:
            taken[raw.message_id] = reason
    rest = honest[len(hostile) * step :]
    assert inn.post(rest) == len(rest)
    return truth, taken


def test_whatever_usenet_carries_every_honest_post_is_whole_and_searchable(dc, news):
    truth, taken = post_hostile_usenet(news.inn)
    # INN takes every case but a message-id past 250 bytes (RFC 5536's limit, which INN holds too:
    # the edge's bound is there for servers that do not, tests/edge/test_overview.py).
    refused = [(a.message_id, reason) for a, reason in hostile_articles() if a.message_id not in taken]
    assert [reason for _, reason in refused] == ["message_id_too_long"], refused
    must = [m for m, reason in taken.items() if reason is not None]
    dc.add_groups(GROUP)
    with ProviderProxy(news.inn.host, news.inn.reader_port) as proxy:
        # The whole group, whatever its dates (the NZBs' posts are years old).
        with connect("127.0.0.1", proxy.port, compress=False) as client, dc.session() as session:
            assert plan_group(session, client, get_group(session, GROUP), days=100 * 365, range_size=1_500).plan_id
        low = dc.value("SELECT min(first_id) FROM seed_ranges")
        assert low == 1, low
        tokens = {name: dc.create_node(name) for name in ("edge-a", "edge-b")}
        nodes = [dc.edge(name, dc.node_env(token, proxy.port), "--exit-when-idle") for name, token in tokens.items()]
        for node in nodes:
            assert node.wait(180) == 0, node.log()
    dc.wait_finished(timeout=120)

    # No range failed, no batch is left retrying, failed or with an error.
    assert dc.value("SELECT count(*) FROM seed_ranges WHERE status <> 'done' OR failures > 0") == 0, dc.rows(
        "SELECT id, status, failures, last_failure FROM seed_ranges WHERE status <> 'done' OR failures > 0"
    )
    assert (
        dc.rows(
            "SELECT id, state, attempts, error FROM seed_batches WHERE state <> 'joined' OR attempts > 0"
            " OR error IS NOT NULL"
        )
        == []
    )
    assert not any(node.named("failed") for node in nodes)

    # Every honest post whole, exact and found by its name.
    check_posts(dc, truth, GROUP, NAMES)
    with dc.session() as session:
        for nzb in HONEST_NZBS:
            found = search_posts(session, NAMES[nzb], group=GROUP, timeout_ms=None)
            assert NAMES[nzb] in [post.name for post in found.items], (nzb, found)

    # Every hostile article INN took: stored, or counted as rejected by the edge.
    stored = {
        row[0]
        for row in dc.rows("SELECT message_id FROM fragments_with_ids WHERE message_id = ANY(:ids)", ids=list(taken))
    }
    assert stored == {m for m, reason in taken.items() if reason is None}
    assert dc.value("SELECT sum(rejected) FROM seed_ranges") == len(must)
    # What was stored is kept as it came (its text UTF-8, or Latin-1 read as UTF-8), never cut.
    names = dc.rows(
        "SELECT DISTINCT f.subject FROM files f JOIN fragments_with_ids m ON m.group_id = f.group_id"
        " AND m.file_key = f.key WHERE m.message_id = ANY(:ids)",
        ids=sorted(stored),
    )
    assert any("\u202e" in row[0] for row in names) and any("alert(1)" in row[0] for row in names), names
    assert max(len(row[0].encode()) for row in names) <= 2 * MAX_TEXT_BYTES
