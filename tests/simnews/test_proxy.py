"""The provider-emulating proxy in front of the real INN: shifted numbers, throughput cap, limits, drops."""

from __future__ import annotations

import threading
import time

import pytest

from simnews.generator import Config, generate
from simnews.proxy import ProviderProxy
from tests.simnews.rawnntp import RawNNTP

GROUP = "alt.binaries.test.proxied"
ARTICLES = 20_000
SHIFT = 2**32 + 12345


@pytest.fixture(scope="module")
def proxied_group(inn) -> str:
    inn.add_group(GROUP)
    assert inn.post(generate(ARTICLES, Config(seed=77, groups=(GROUP,), namespace=GROUP))) == ARTICLES
    return GROUP


@pytest.fixture
def proxy_factory(inn):
    proxies = []

    def make(**options) -> ProviderProxy:
        proxy = ProviderProxy(inn.host, inn.reader_port, **options)
        proxy.start()
        proxies.append(proxy)
        return proxy

    yield make
    for proxy in proxies:
        proxy.stop()


def test_article_numbers_are_shifted_past_2_32_both_ways(inn, proxied_group, proxy_factory):
    proxy = proxy_factory(shift=SHIFT)
    with RawNNTP(inn.host, inn.reader_port) as direct:
        direct.command(f"GROUP {proxied_group}")
        inn_rows = direct.over("1-10")
    with RawNNTP(inn.host, proxy.port) as nntp:
        count, low, high = nntp.command(f"GROUP {proxied_group}").split()[1:4]
        assert (int(count), int(low), int(high)) == (ARTICLES, SHIFT + 1, SHIFT + ARTICLES)

        rows = nntp.over(f"{SHIFT + 1}-{SHIFT + 10}")
        assert [int(row[0]) for row in rows] == list(range(SHIFT + 1, SHIFT + 11))
        assert [row[1:8] for row in rows] == [row[1:8] for row in inn_rows]
        assert [row[8] for row in rows] == [
            b"Xref: testnews.localdomain %s:%d" % (proxied_group.encode(), SHIFT + i) for i in range(1, 11)
        ]

        assert [int(row[0]) for row in nntp.over(f"{SHIFT + ARTICLES - 2}-")] == [
            SHIFT + ARTICLES - 2,
            SHIFT + ARTICLES - 1,
            SHIFT + ARTICLES,
        ]
        assert nntp.over("1-5000") == []  # below the shift: nothing, and no error
        assert nntp.over(f"{SHIFT}") == []
        assert nntp.over(f"{SHIFT + 10**12}-") == []  # far above anything INN holds

        status = nntp.command(f"XHDR Xref {SHIFT + 2}")
        assert status.startswith(b"221")
        assert nntp.data() == [b"%d testnews.localdomain %s:%d" % (SHIFT + 2, proxied_group.encode(), SHIFT + 2)]

        assert nntp.command(f"LISTGROUP {proxied_group} {SHIFT + 4}-{SHIFT + 6}").startswith(b"211")
        assert nntp.data() == [b"%d" % (SHIFT + n) for n in (4, 5, 6)]

        status = nntp.command(f"HEAD {SHIFT + 3}")
        assert status.split()[:3] == [b"221", b"%d" % (SHIFT + 3), inn_rows[2][4]]
        assert b"Xref: testnews.localdomain %s:%d" % (proxied_group.encode(), SHIFT + 3) in nntp.data()
        assert nntp.command("NEXT").split()[:2] == [b"223", b"%d" % (SHIFT + 4)]
        assert nntp.command("STAT 5").startswith(b"423")
        assert nntp.command(f"STAT {inn_rows[0][4].decode()}").split()[:2] == [b"223", b"0"]
        assert nntp.command(f"HDR Subject {inn_rows[0][4].decode()}").startswith(b"225")
        assert nntp.data() == [b"0 " + inn_rows[0][1]]  # 0 is "asked by message-id", never shifted

        assert nntp.command(f"LIST ACTIVE {proxied_group}").startswith(b"215")
        assert nntp.data() == [b"%s %d %d y" % (proxied_group.encode(), SHIFT + ARTICLES, SHIFT + 1)]


def timed_over(port: int, host: str, group: str, article_range: str) -> tuple[int, float]:
    with RawNNTP(host, port) as nntp:
        nntp.command(f"GROUP {group}")
        started = time.perf_counter()
        rows = nntp.over(article_range)
        return len(rows), time.perf_counter() - started


def test_throughput_cap_per_connection(inn, proxied_group, proxy_factory):
    cap = 40_000
    proxy = proxy_factory(lines_per_sec=cap)
    # Only the upper bound is checked: a busy machine may slow the proxy below the cap, but it
    # must never let a connection go faster (the edge benchmark's speedups rest on that).
    lines, seconds = timed_over(proxy.port, inn.host, proxied_group, "1-")
    assert lines == ARTICLES
    assert lines / seconds <= cap * 1.05

    # the cap is per connection: two connections side by side each get it
    results = []
    threads = [
        threading.Thread(target=lambda r=r: results.append(timed_over(proxy.port, inn.host, proxied_group, r)))
        for r in ("1-10000", "10001-20000")
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert [lines for lines, _ in results] == [10_000, 10_000]
    for lines, seconds in results:
        assert lines / seconds <= cap * 1.05


def test_connection_limit(inn, proxy_factory):
    proxy = proxy_factory(max_conns=2)
    first, second = RawNNTP(inn.host, proxy.port), RawNNTP(inn.host, proxy.port)
    assert first.greeting.startswith(b"200") and second.greeting.startswith(b"200")
    extra = RawNNTP(inn.host, proxy.port)
    assert extra.greeting.startswith(b"502")
    assert extra.file.readline() == b""  # and closed
    extra.close()
    assert proxy.refused == 1

    first.close()
    deadline = time.monotonic() + 5
    while True:  # the freed slot is taken back once the proxy saw the QUIT
        again = RawNNTP(inn.host, proxy.port)
        if again.greeting.startswith(b"200") or time.monotonic() > deadline:
            break
        again.close()
        time.sleep(0.05)
    assert again.greeting.startswith(b"200")
    again.close()
    second.close()


def test_drop_mid_response_after_n_lines_then_serve_normally(inn, proxied_group, proxy_factory):
    proxy = proxy_factory(drop_after_lines=100, drops=1)
    with RawNNTP(inn.host, proxy.port) as nntp:
        nntp.command(f"GROUP {proxied_group}")
        assert nntp.command("XOVER 1-1000").startswith(b"224")
        with pytest.raises(EOFError, match="after 100 lines"):
            nntp.data()
    assert proxy.dropped == 1
    with RawNNTP(inn.host, proxy.port) as nntp:
        nntp.command(f"GROUP {proxied_group}")
        assert len(nntp.over("1-1000")) == 1000


def test_latency_before_each_command(inn, proxy_factory):
    proxy = proxy_factory(latency=0.2)
    with RawNNTP(inn.host, proxy.port) as nntp:
        started = time.perf_counter()
        assert nntp.command("DATE").startswith(b"111")
        assert nntp.command("DATE").startswith(b"111")
        assert time.perf_counter() - started >= 0.4


def test_other_commands_pass_through_but_compress_is_not_offered(inn_auth):
    proxy = ProviderProxy(inn_auth.host, inn_auth.reader_port, shift=SHIFT)
    proxy.start()
    try:
        user, password = next(iter(inn_auth.users.items()))
        with RawNNTP(inn_auth.host, proxy.port) as nntp:
            assert nntp.command("CAPABILITIES").startswith(b"101")
            capabilities = nntp.data()
            assert b"OVER" in capabilities and b"READER" in capabilities
            assert not [c for c in capabilities if c.startswith((b"COMPRESS", b"STARTTLS"))]
            assert nntp.command("COMPRESS DEFLATE").startswith(b"502")
            assert nntp.command("GROUP alt.binaries.test").startswith(b"480")
            assert nntp.command(f"AUTHINFO USER {user}").startswith(b"381")
            assert nntp.command(f"AUTHINFO PASS {password}").startswith(b"281")
            # Other tests may have posted to this instance: check the shift, not the counts.
            code, _count, low, high = nntp.command("GROUP alt.binaries.test").split()[:4]
            assert code == b"211" and int(low) > SHIFT and int(high) >= SHIFT
    finally:
        proxy.stop()
