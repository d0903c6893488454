"""The NNTP client against the scripted server (GZIP, drops, silence, big numbers) and INN 2
(plain, TLS, STARTTLS, AUTHINFO, COMPRESS DEFLATE)."""

import socket
import ssl
import tracemalloc
from datetime import datetime, timedelta, timezone

import pytest

from edge.digest.nntp import (
    INFLATE_STEP,
    MAX_KEPT_LINE,
    MAX_LINE,
    MAX_OVER_BYTES_PER_ARTICLE,
    RECV_SIZE,
    NNTPClient,
    NNTPConnectionError,
    NNTPError,
    NNTPProtocolError,
    NNTPReplyError,
    NNTPTimeout,
    connect,
)
from edge.digest.overview import DEFAULT_LAYOUT, new_reject_counts, parse_block, parse_date
from simnews.generator import Config, generate, make_article
from simnews.hostile import HostileServer
from simnews.scripted import ScriptedServer
from tests.edge.helpers import block, overview_line

GROUP = "alt.binaries.big"
BASE = 6_000_000_000  # past 2**32, as "boneless" groups are
LINES = [overview_line(BASE + i, f'[1/1] - "file{i}.rar" yEnc (1/1)') for i in range(3000)]
LINES.insert(10, b".a line that starts with a dot")


def received(client: NNTPClient, first: int, last: int) -> bytes:
    return b"".join(client.over(first, last))


# -- the scripted server -------------------------------------------------------------------


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"deflate": True},
        {"gzip": "after"},
        {"gzip": "inside"},
        {"gzip": "after", "gzip_wrapper": "gzip"},
    ],
    ids=["plain", "deflate", "gzip-terminator-after", "gzip-terminator-inside", "gzip-wrapper"],
)
def test_overview_in_every_encoding(options):
    with ScriptedServer({GROUP: LINES}, **options) as server, connect(server.host, server.port, timeout=5) as client:
        assert client.compression == ("deflate" if "deflate" in options else "gzip" if "gzip" in options else None)
        info = client.group(GROUP)
        assert (info.count, info.first, info.last) == (len(LINES), BASE, BASE + 2999)
        assert received(client, BASE, BASE + 2999) == block(LINES)
        # The connection stays in step, so the next reply is read correctly.
        assert received(client, BASE + 5, BASE + 6) == block(LINES[5:7])
        assert client.article_date(BASE + 1) == parse_date(b"Sat, 01 Nov 2025 07:27:27 +0000")


@pytest.mark.parametrize(
    "options",
    [{}, {"deflate": True}, {"gzip": "after"}, {"gzip": "inside"}],
    ids=["plain", "deflate", "gzip-terminator-after", "gzip-terminator-inside"],
)
def test_over_long_lines_are_cut_and_rejected_and_the_rest_of_the_reply_is_read(options):
    """Anyone can post an article with a subject of megabytes: its line is cut to MAX_KEPT_LINE
    (and the digest rejects it by its reason), the lines around it come whole, in every encoding;
    six 880 KB subjects among 200 lines, and one of 2.2 MB, fail nothing."""
    lines = [overview_line(BASE + i, f'[1/1] - "file{i}.rar" yEnc (1/1)') for i in range(206)]
    hostile = {BASE + 3 + 30 * k: b"w%d " % k * 150_000 for k in range(6)}  # about 880 KB each
    hostile[BASE + 205] = b"." + b"x" * (2_200_000)  # starts with a dot: stuffed on the wire
    for number, subject in hostile.items():
        lines[number - BASE] = overview_line(number, subject)
    with ScriptedServer({GROUP: lines}, **options) as server, connect(server.host, server.port, timeout=5) as client:
        client.group(GROUP)
        got = received(client, BASE, BASE + 205)
        assert received(client, BASE, BASE + 2) == block(lines[:3])  # still in step
    kept = got.split(b"\r\n")
    assert kept.pop() == b"" and len(kept) == len(lines)
    for line, sent in zip(kept, lines):
        assert line == (sent[:MAX_KEPT_LINE] if len(sent) > MAX_KEPT_LINE else sent)
    rejects = new_reject_counts()
    columns = parse_block(got, DEFAULT_LAYOUT, rejects, BASE, BASE + 205)
    assert columns.numbers == [n for n in range(BASE, BASE + 206) if n not in hostile]
    assert rejects == {**new_reject_counts(), "subject_too_long": len(hostile)}


def test_gzip_is_asked_only_where_deflate_is_missing():
    with (
        ScriptedServer({GROUP: LINES}, deflate=True, gzip="after") as server,
        connect(server.host, server.port) as client,
    ):
        assert client.compression == "deflate"
        assert "XFEATURE COMPRESS GZIP" not in server.commands


def test_an_empty_range_yields_nothing():
    with ScriptedServer({GROUP: LINES}) as server, connect(server.host, server.port) as client:
        client.group(GROUP)
        assert received(client, 1, 100) == b""
        assert client.article_date(12) is None
        assert received(client, BASE, BASE) == block(LINES[:1])


def test_memory_stays_bounded_whatever_the_range():
    many = [overview_line(BASE + i, b'"x" yEnc (1/1)' + b"s" * 200) for i in range(60_000)]  # ~18 MB
    with ScriptedServer({GROUP: many}, gzip="after") as server, connect(server.host, server.port) as client:
        client.group(GROUP)
        tracemalloc.start()
        largest = total = 0
        for piece in client.over(BASE, BASE + 60_000):
            largest, total = max(largest, len(piece)), total + len(piece)
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
        assert total == len(block(many))
        assert largest <= RECV_SIZE + INFLATE_STEP
        assert peak < 8 * INFLATE_STEP


def test_error_replies_raise_with_their_code_and_leave_the_connection_usable():
    with ScriptedServer({GROUP: LINES}) as server, connect(server.host, server.port) as client:
        with pytest.raises(NNTPReplyError) as error:
            client.group("alt.binaries.nothing")
        assert error.value.code == 411
        assert client.group(GROUP).count == len(LINES)


def test_authinfo():
    users = {"reader": "secret"}
    with ScriptedServer({GROUP: LINES}, users=users) as server:
        with connect(server.host, server.port) as client, pytest.raises(NNTPReplyError) as error:
            client.group(GROUP)
        assert error.value.code == 480
        with pytest.raises(NNTPReplyError) as error:
            connect(server.host, server.port, user="reader", password="wrong")
        assert error.value.code == 481 and "wrong" not in str(error.value)
        with connect(server.host, server.port, user="reader", password="secret") as client:
            assert client.group(GROUP).count == len(LINES)


def test_a_connection_dropped_mid_response_raises():
    with ScriptedServer({GROUP: LINES}, drop_after_lines=1000) as server, connect(server.host, server.port) as client:
        client.group(GROUP)
        with pytest.raises(NNTPConnectionError, match="closed"):
            received(client, BASE, BASE + 2999)
        with pytest.raises(NNTPConnectionError):
            client.group(GROUP)


def test_a_connection_dropped_mid_compressed_response_raises():
    with ScriptedServer({GROUP: LINES}, deflate=True, drop_after_lines=1000) as server:
        with connect(server.host, server.port) as client:
            client.group(GROUP)
            with pytest.raises(NNTPConnectionError):
                received(client, BASE, BASE + 2999)


def test_a_silent_server_times_out():
    with (
        ScriptedServer({GROUP: LINES}, stall_over=True) as server,
        connect(server.host, server.port, timeout=0.5) as client,
    ):
        client.group(GROUP)
        with pytest.raises(NNTPTimeout):
            received(client, BASE, BASE + 10)
    with ScriptedServer(silent=True) as server, pytest.raises(NNTPTimeout):
        NNTPClient(server.host, server.port, timeout=0.5)


@pytest.mark.parametrize(
    "behaviour, match",
    [
        ("endless", "lines or"),
        ("long_line", "goes on past"),
        ("out_of_range", "outside the range"),
    ],
)
def test_a_hostile_reply_is_a_protocol_error_in_bounded_memory(behaviour, match):
    """A reply that never ends, has a line over the limit or lines numbered past the range asked
    for is cut off as soon as it shows, with the connection closed; the memory used meanwhile is
    bounded by the range asked for (1000 articles), not by what the server sends."""
    with (
        HostileServer(behaviour, {GROUP: (BASE, BASE + 9999)}) as server,
        connect(server.host, server.port, timeout=5) as client,
    ):
        client.group(GROUP)
        tracemalloc.start()
        try:
            with pytest.raises(NNTPProtocolError, match=match):
                for _ in client.over(BASE, BASE + 999):
                    pass
            peak = tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()
        print(f"{behaviour}: peak {peak / 2**20:.1f} MiB")
        assert peak < 2 * MAX_LINE + 1000 * MAX_OVER_BYTES_PER_ARTICLE
        with pytest.raises(NNTPConnectionError):
            client.group(GROUP)


def test_a_reply_stalled_mid_line_times_out():
    with (
        HostileServer("stall", {GROUP: (BASE, BASE + 9999)}) as server,
        connect(server.host, server.port, timeout=0.5) as client,
    ):
        client.group(GROUP)
        with pytest.raises(NNTPTimeout):
            received(client, BASE, BASE + 999)


def test_a_refused_starttls_is_a_reply_error_naming_it():
    with HostileServer("no_starttls", {GROUP: (BASE, BASE + 9)}) as server, pytest.raises(NNTPReplyError) as error:
        connect(server.host, server.port, starttls=True, timeout=5)
    assert (error.value.code, error.value.command) == (580, "STARTTLS")


def test_nothing_listening_is_a_connection_error():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    with pytest.raises(NNTPConnectionError):
        NNTPClient("127.0.0.1", port, timeout=2)


def test_corrupt_compressed_data_is_a_protocol_error():
    class Corrupt(ScriptedServer):
        def _over(self, session, state, args):
            session.reply("224 overview follows [COMPRESS=GZIP]")
            session.send(b"\x78\x9c\xde\xad\xbe\xef" * 10)
            return True

    with Corrupt({GROUP: LINES}, gzip="after") as server, connect(server.host, server.port, timeout=2) as client:
        client.group(GROUP)
        with pytest.raises(NNTPProtocolError):
            received(client, BASE, BASE + 10)


def test_abandoning_a_response_closes_the_connection():
    with ScriptedServer({GROUP: LINES}) as server, connect(server.host, server.port) as client:
        client.group(GROUP)
        replies = client.over(BASE, BASE + 2999)
        next(replies)
        with pytest.raises(NNTPError, match="still being read"):
            client.group(GROUP)
        replies.close()
        with pytest.raises(NNTPConnectionError):
            client.group(GROUP)


def test_server_date_and_garbage_lines():
    garbage = [b"garbage without tabs", b"x\ty\tz", overview_line(BASE + 5000, message_id=b"")]
    with ScriptedServer({GROUP: LINES + garbage}) as server, connect(server.host, server.port) as client:
        assert abs(client.date() - datetime.now(timezone.utc)) < timedelta(minutes=1)
        client.group(GROUP)
        assert received(client, BASE + 2999, BASE + 6000) == block([LINES[-1], *garbage])


# -- INN 2 ---------------------------------------------------------------------------------


def _post(inn, group: str, count: int = 30) -> list:
    articles = [
        make_article(
            [group], f'[{i}/{count}] - "inn.test.part{i:02d}.rar" yEnc (1/1)', f"<inn{i}.{group}@test.invalid>"
        )
        for i in range(1, count + 1)
    ]
    assert inn.post(articles) == count
    return articles


def test_inn_plain(inn, fresh_group):
    _post(inn, fresh_group)
    with connect(inn.host, inn.reader_port, compress=False) as client:
        assert "OVER" in client.capabilities()
        assert client.overview_format()[:4] == ["Subject:", "From:", "Date:", "Message-ID:"]
        info = client.group(fresh_group)
        assert info.count == 30
        lines = received(client, info.first, info.last).split(b"\r\n")[:-1]
        assert [line.split(b"\t")[1] for line in lines][:2] == [
            b'[1/30] - "inn.test.part01.rar" yEnc (1/1)',
            b'[2/30] - "inn.test.part02.rar" yEnc (1/1)',
        ]
        assert client.article_date(info.first) == int(datetime(2025, 6, 1, tzinfo=timezone.utc).timestamp())


def test_inn_compress_deflate(inn, fresh_group):
    _post(inn, fresh_group)
    with connect(inn.host, inn.reader_port) as client:
        assert client.compression == "deflate"
        info = client.group(fresh_group)
        assert len(received(client, info.first, info.last).split(b"\r\n")[:-1]) == 30
        assert received(client, info.last + 1, info.last + 100) == b""


def test_inn_tls(inn, fresh_group):
    _post(inn, fresh_group)
    with connect(inn.host, inn.tls_port, tls=True, cafile=str(inn.cafile)) as client:
        info = client.group(fresh_group)
        assert len(received(client, info.first, info.last).split(b"\r\n")[:-1]) == 30
    with pytest.raises(NNTPConnectionError, match="not trusted"):
        NNTPClient(inn.host, inn.tls_port, tls=True)  # the system CAs do not know the test CA


def test_inn_starttls(inn, fresh_group):
    _post(inn, fresh_group)
    with connect(inn.host, inn.reader_port, starttls=True, cafile=str(inn.cafile)) as client:
        assert isinstance(client._wire.sock, ssl.SSLSocket)
        assert client.group(fresh_group).count == 30


def test_inn_authinfo(inn_auth):
    _post(inn_auth, "alt.binaries.test", 5)
    user, password = next(iter(inn_auth.users.items()))
    with connect(inn_auth.host, inn_auth.reader_port) as client, pytest.raises(NNTPReplyError) as error:
        client.group("alt.binaries.test")
    assert error.value.code == 480
    with pytest.raises(NNTPReplyError) as error:
        connect(inn_auth.host, inn_auth.reader_port, user=user, password=password + "x")
    assert error.value.code == 481
    with connect(inn_auth.host, inn_auth.reader_port, user=user, password=password) as client:
        assert client.compression == "deflate"  # after AUTHINFO, as RFC 8054 wants
        info = client.group("alt.binaries.test")
        assert len(received(client, info.first, info.last).split(b"\r\n")[:-1]) >= 5


def test_inn_generated_overview_round_trip(inn, fresh_group):
    articles = list(generate(400, Config(seed=3, groups=(fresh_group,))))
    posted = [article for article in articles if not article.lost]
    assert inn.post(posted) == len(posted)
    with connect(inn.host, inn.reader_port) as client:
        info = client.group(fresh_group)
        lines = received(client, info.first, info.last).split(b"\r\n")[:-1]
    assert sorted(line.split(b"\t")[4].decode() for line in lines) == sorted(a.message_id for a in posted)
