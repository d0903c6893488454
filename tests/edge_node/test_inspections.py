"""Inspections on the edge node: BODY in the NNTP client (against INN 2, which keeps bodies in its
CNFS buffer, and the scripted server for what INN never sends), the coordinator client's three
calls, the INSPECT settings, and the node end to end on the real API (gunicorn over HTTPS),
PostgreSQL, Celery and INN: an obfuscated post indexed by the node is inspected by it, renamed by
what its .nfo says, with the files its par2 lists; a missing article is counted and the inspection
still posted; an endless body is cut and counted; SIGTERM gives back what the node holds; a
server that fails gets its inspections given back; a node with INSPECT=0 leases none; a result
for an inspection another node holds now (409) is dropped."""

from __future__ import annotations

import itertools
import shutil
import signal
import socket
import threading
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select, text

from app.db import session_scope
from app.models import SeedRange
from app.services import leases
from edge.digest.nntp import NNTPClient, NNTPConnectionError, NNTPProtocolError, NNTPReplyTooLong, NNTPTimeout, connect
from edge.inspect import yenc
from edge.node.config import ConfigError, load_config
from edge.node.coordinator import (
    MAX_RESULTS_BODY,
    BadAnswer,
    Conflict,
    Coordinator,
    InspectionLease,
    Refused,
    parse_inspections,
)
from edge.node.inspector import Inspector
from simnews.generator import Article, make_article
from simnews.scripted import ScriptedServer, _dot_stuffed, _Session, overview_lines
from simnews.yencpost import article_body, make_release, post_files
from tests.app.factories import BIG, make_node
from tests.app.test_inspections import lines as app_lines
from tests.app.test_nzb_export import store_groups
from tests.edge_node.conftest import plan
from tests.fixtures.https_relay import HttpsRelay, Reply
from tests.fixtures.queries import assert_posts_summed, query, scalar
from tests.fixtures.waiting import wait_until

RELEASE = "Real.Movie.2019.1080p.BluRay.x264-GRP"
IMDB = 133093
NFO = (
    f"            Real Movie (2019)\r\n\r\n  Release....: {RELEASE}\r\n"
    f"  IMDb.......: https://www.imdb.com/title/tt0{IMDB}/\r\n  Size.......: 400 KB\r\n"
).encode()
POSTER = "poster <poster@example.net>"
_names = itertools.count(1)


# -- the posts -------------------------------------------------------------------------------


@dataclass
class Obfuscated:
    """A release posted as obfuscated posts are: every file named by one random hash (the par2
    set inside still lists the real names), with an .nfo naming the release and its IMDb id."""

    stem: str
    volumes: dict[str, int]  # the real names and sizes the par2 set lists
    articles: list[Article]  # one article per file (each file fits in one)

    def article(self, suffix: str) -> Article:
        """The article of the file named stem + suffix."""
        return next(a for a in self.articles if a.truth.filename == self.stem + suffix)


def obfuscated_release(directory: Path, group: str, seed: int = 5) -> Obfuscated:
    release = make_release(directory / "real", RELEASE, seed, size=400_000, volumes=2)
    stem = uuid.uuid4().hex
    posted = directory / "posted"
    posted.mkdir()
    paths = []
    for file in release.files:
        target = posted / (stem + file.name[len(RELEASE) :])
        shutil.copyfile(file.path, target)
        paths.append(target)
    nfo = posted / f"{stem}.nfo"
    nfo.write_bytes(NFO)
    articles = post_files([*paths, nfo], group, POSTER, namespace=uuid.uuid4().hex)
    assert len(articles) == len(paths) + 1, "each file in one article"
    return Obfuscated(stem, {v.name: v.size for v in release.volumes}, articles)


def stored_as_indexed(group: str, articles: list[Article]) -> None:
    """The articles' overview lines stored and joined as the edge and the data center do (the
    join queues the hashed post for inspection)."""
    plain = [Article(a.message_id, a.raw) for a in articles]  # overview_lines then goes by Newsgroups
    store_groups({group: list(overview_lines(plain, group, BIG))})
    # Its ranges done, as the node that read them would say: a node with --exit-when-idle would
    # wait for ranges another node holds.
    with session_scope() as s:
        for range_id in s.scalars(select(SeedRange.id).where(SeedRange.status == "leased")).all():
            leases.finish(s, None, range_id)


def kept_body(article: Article) -> bytes:
    """The body INN keeps of an article simnews.inject sent: inject ends the article's raw text
    (CRLF-terminated lines) with CRLF . CRLF, so one empty line more."""
    return article_body(article) + b"\r\n"


def node_token(name: str | None = None) -> str:
    with session_scope() as s:
        _, token = make_node(s, name or f"inspector-{next(_names)}")
    return token


def inspection_rows(engine) -> list:
    return query(
        engine,
        "SELECT i.id, i.state, i.node_id, i.inner_name, i.files, i.imdb, i.password,"
        " i.articles_read, i.articles_missing, i.bytes_read, p.name AS post_name"
        " FROM post_inspections i JOIN posts p ON p.group_id = i.group_id AND p.key = i.post_key"
        " ORDER BY i.id",
    )


def node_env(api, token: str, host: str, port: int, **extra: str) -> dict[str, str]:
    return {
        "COORDINATOR_URL": api.url,
        "NODE_TOKEN": token,
        "COORDINATOR_CAFILE": api.cafile,
        "NNTP_HOST": host,
        "NNTP_PORT": str(port),
        "NNTP_SSL": "0",
        "POLL_INTERVAL": "1",
        "DIGEST_PROCESSES": "0",
        **extra,
    }


# -- a scripted server that answers BODY -----------------------------------------------------


class BodyServer(ScriptedServer):
    """The scripted server (simnews.scripted) answering BODY <message-id> from `bodies`: the body
    (dot-stuffed on the wire), or what to do instead: "endless" (data that never ends), "stall"
    (222, then nothing), "drop" (the connection closed unanswered), "gated" (the body once `gate`
    is set), "gzip" (a 222 that says COMPRESS=GZIP), "423", "500" (BODY unknown); an id it lacks gets 430.
    `trickle`: bodies are sent a few bytes at a time."""

    def __init__(self, bodies: dict[str, bytes | str], *, trickle: int = 0, **options):
        super().__init__({}, **options)
        self.bodies = dict(bodies)
        self.trickle = trickle
        self.gate = threading.Event()
        self.asked: list[str] = []  # the message-ids of the BODY commands received

    def _answer(self, session: _Session, state: dict, command: str) -> bool:
        words = command.split()
        if not words or words[0].upper() != "BODY":
            return super()._answer(session, state, command)
        message_id = words[1] if len(words) == 2 else ""
        self.asked.append(message_id)
        answer = self.bodies.get(message_id, "430")
        if answer == "430":
            session.reply("430 no such article")
        elif answer == "423":
            session.reply("423 no article with that number")
        elif answer == "500":
            session.reply("500 what?")
        elif answer == "drop":
            session.sock.shutdown(socket.SHUT_RDWR)
            return False
        elif answer == "gzip":
            session.reply(f"222 0 {message_id} body follows [COMPRESS=GZIP]")
            session.send(b"x\x9c")
        elif answer in ("stall", "endless"):
            session.reply(f"222 0 {message_id} body follows")
            while answer == "endless" and not self._stopping.is_set():
                session.send(b"=ybegin line=128 size=9 name=x\r\n" * 2000)
            self._stopping.wait()
            return False
        else:
            if answer == "gated":
                self.gate.wait(60)
                answer = self.bodies[message_id + "#body"]
            assert isinstance(answer, bytes)
            data = f"222 0 {message_id} body follows\r\n".encode() + _dot_stuffed(answer.split(b"\r\n")[:-1]) + b".\r\n"
            step = self.trickle or len(data)
            for start in range(0, len(data), step):
                session.send(data[start : start + step])
        return True


def client_of(server: ScriptedServer, timeout: float = 5.0) -> NNTPClient:
    return connect(server.host, server.port, compress=False, timeout=timeout)


# -- BODY: the NNTP client -------------------------------------------------------------------


@pytest.mark.services
def test_body_reads_what_inn_keeps_dot_stuffing_undone(inn, fresh_group, tmp_path):
    dotted = b"first\r\n.\r\n..\r\n.dot line\r\n\r\nlast\r\n"
    text = make_article([fresh_group], "dots", f"<{uuid.uuid4().hex}@dots.invalid>", body=dotted)
    posted = obfuscated_release(tmp_path, fresh_group)
    assert inn.post([text, *posted.articles]) == 1 + len(posted.articles)
    with connect(inn.host, inn.reader_port, compress=False) as client:
        assert client.body(text.message_id, 4096) == kept_body(text)
        for article in posted.articles:
            body = client.body(article.message_id, 2 * 1024 * 1024)
            assert body == kept_body(article)
            decoded = yenc.decode(body)
            assert decoded.crc_ok and decoded.name == article.truth.filename
        # An article INN lacks: None, and the connection goes on.
        assert client.body(f"<{uuid.uuid4().hex}@nowhere.invalid>", 4096) is None
        # A message-id that is not <...> of printable ASCII is never sent: the connection goes on.
        for bad in (
            "no-brackets@x",
            "<a b@x>",
            "<a@x>\r\nQUIT",
            "<a@x>\nGROUP x",
            "<>",
            "<a<b@x>",
            "<é@x>",
            "<" + "a" * 300 + "@x>",
        ):
            with pytest.raises(ValueError):
                client.body(bad, 4096)
        assert client.body(text.message_id, 4096) == kept_body(text)
        # A body past the bytes allowed is cut: the connection is dropped (the rest is unread).
        volume = posted.article(".part01.rar")
        with pytest.raises(NNTPReplyTooLong, match="past the 10000 bytes"):
            client.body(volume.message_id, 10_000)
        with pytest.raises(NNTPConnectionError, match="closed"):
            client.body(text.message_id, 4096)


def test_body_is_bounded_whatever_the_server_sends():
    plain = b"line one\r\n.starts with a dot\r\n..\r\n" + b"x" * 5000 + b"\r\n"
    with BodyServer(
        {
            "<endless@x>": "endless",
            "<stall@x>": "stall",
            "<gz@x>": "gzip",
            "<old@x>": "423",
            "<plain@x>": plain,
            "<empty@x>": b"",
        },
        trickle=7,
    ) as server:
        client = client_of(server, timeout=0.5)
        # Sent 7 bytes at a time: the terminator and the stuffed dots are found across the cuts.
        assert client.body("<plain@x>", 6000) == plain
        assert client.body("<empty@x>", 10) == b""
        assert client.body("<old@x>", 10) is None and client.body("<none@x>", 10) is None
        with pytest.raises(NNTPReplyTooLong):
            client.body("<endless@x>", 100_000)
        client = client_of(server, timeout=0.5)
        with pytest.raises(NNTPProtocolError, match="compressed"):
            client.body("<gz@x>", 100)
        client = client_of(server, timeout=0.5)
        with pytest.raises(NNTPTimeout):
            client.body("<stall@x>", 100)
        # The body allowed exactly, then one byte less.
        client = client_of(server)
        assert client.body("<plain@x>", len(plain) + plain.count(b"\r\n.")) == plain
        with pytest.raises(NNTPReplyTooLong):
            client.body("<plain@x>", len(plain) + plain.count(b"\r\n.") - 1)


# -- the coordinator client and the settings -------------------------------------------------

ANSWER = {
    "inspections": [
        {
            "id": 12,
            "group": "alt.binaries.misc",
            "post_key": -4411,
            "name": "8f3a",
            "files": [{"name": "8f3a.par2", "message_id": "<p@h>", "bytes": 10428}],
        }
    ],
    "lease_timeout": 900,
    "max_bytes": 2097152,
}


def test_an_inspection_lease_answer_is_checked():
    (lease,) = parse_inspections(ANSWER)
    assert (lease.id, lease.post_key, lease.max_bytes, lease.files[0].message_id) == (12, -4411, 2097152, "<p@h>")
    # A coordinator cannot make the node read more than 16 MiB of one post.
    assert parse_inspections({**ANSWER, "max_bytes": 2**40})[0].max_bytes == 16 * 1024 * 1024
    entry = ANSWER["inspections"][0]
    for bad in (
        [],
        {"inspections": "all"},
        {**ANSWER, "max_bytes": 0},
        {**ANSWER, "lease_timeout": "soon"},
        {"inspections": [{**entry, "id": "12"}]},
        {"inspections": [{**entry, "id": True}]},
        {"inspections": [{**entry, "files": None}]},
        {"inspections": [{**entry, "files": ["x"]}]},
        {"inspections": [{**entry, "files": [{"name": "a", "message_id": 5}]}]},
        {"inspections": [{**entry, "files": [{"name": "a", "message_id": "<a@b>", "bytes": -1}]}]},
        {"inspections": [{k: v for k, v in entry.items() if k != "group"}]},
        {"inspections": [entry] * 101},
    ):
        with pytest.raises(BadAnswer):
            parse_inspections(bad)


def test_inspect_is_on_with_a_usenet_server_and_can_be_turned_off():
    required = {"COORDINATOR_URL": "https://seed.example.net:8443", "NODE_TOKEN": "seed_abc"}
    assert not load_config(env=required).inspecting  # no server to read articles from
    served = {**required, "NNTP_HOST": "news.provider.net"}
    assert load_config(env=served).inspecting and load_config(env=served).inspect_batch == 10
    assert not load_config(env={**served, "INSPECT": "0"}).inspecting
    assert load_config({"inspect_batch": "40"}, env=served).inspect_batch == 40
    with pytest.raises(ConfigError, match="INSPECT=1 needs"):
        load_config(env={**required, "INSPECT": "1"})
    for value in ("0", "101", "ten"):
        with pytest.raises(ConfigError, match="INSPECT_BATCH"):
            load_config(env={**served, "INSPECT_BATCH": value})


@pytest.mark.services
def test_the_three_calls_on_the_real_api(edge_api, clean_db, tmp_path):
    coordinator = Coordinator(edge_api.url, node_token(), cafile=edge_api.cafile)
    assert coordinator.lease_inspections(5) == []  # 204: nothing queued
    posted = obfuscated_release(tmp_path, "alt.binaries.misc")
    stored_as_indexed("alt.binaries.misc", posted.articles)
    (lease,) = coordinator.lease_inspections(5)
    assert isinstance(lease, InspectionLease) and lease.name == posted.stem and lease.max_bytes == 2 * 1024 * 1024
    assert {f.name for f in lease.files} == {posted.stem + s for s in (".nfo", ".par2", ".part01.rar")}
    assert {f.message_id for f in lease.files} <= {a.message_id for a in posted.articles}
    other = Coordinator(edge_api.url, node_token(), cafile=edge_api.cafile)
    with pytest.raises(Conflict):
        other.post_inspection(lease.id, {"password": 0})
    assert coordinator.release_inspection(lease.id, deadline=5) == "queued"
    (again,) = other.lease_inspections(1)
    assert other.post_inspection(again.id, {"password": 0}) == "stored"
    assert other.post_inspection(again.id, {"password": 0}) == "already_stored"
    assert other.release_inspection(again.id, deadline=5) == "done"
    with pytest.raises(Refused) as refused:
        other.release_inspection(2**40, deadline=5)
    assert refused.value.status == 404


class RecordingRelay(HttpsRelay):
    """The API behind a relay that keeps each call's path and body size; `older` answers 404 to
    POST /inspections/results, as a coordinator older than that call does."""

    def __init__(self, api, older: bool = False):
        super().__init__(api.url, api.cafile)
        self.older = older
        self.calls: list[tuple[str, int]] = []

    def before_forwarding(self, path: str) -> Reply | None:
        if self.older and path.endswith("/inspections/results"):
            with self.lock:
                self.calls.append((path.removeprefix("/api/v1/seed"), 0))
            return Reply(
                404, b'{"error": "not_found", "message": "The requested URL was not found"}', "application/json"
            )
        return None

    def after_forwarding(self, path: str, headers: dict[str, str], body: bytes, status: int) -> None:
        with self.lock:
            self.calls.append((path.removeprefix("/api/v1/seed"), len(body)))


def hashed_posts_queued(count: int) -> None:
    """`count` hashed posts of headers only, stored and queued for inspection."""
    hashes = [uuid.uuid4().hex for _ in range(count)]
    store_groups(
        {
            "alt.binaries.misc": [
                line
                for n, h in enumerate(hashes)
                for line in app_lines(
                    h, [f"{h}.par2", f"{h}.part01.rar", f"{h}.nfo"], [b"a <a@x.example>"], first=3 * n
                )
            ]
        }
    )


def test_results_posted_together_as_few_calls_as_the_body_limit_allows(edge_api, clean_db):
    hashed_posts_queued(3)
    with RecordingRelay(edge_api) as relay:
        coordinator = Coordinator(relay.url, node_token(), cafile=relay.cafile)
        first, second, third = (lease.id for lease in coordinator.lease_inspections(3))

        def listing(width: int) -> dict:  # 10,000 files: 2.3 MB of JSON at width 200, 4.8 MB at 450
            return {"files": [{"name": f"{n:05d}" + "x" * width, "size": n} for n in range(10_000)]}

        answers = coordinator.post_inspections(
            [(first, listing(200)), (second, listing(200)), (third, listing(450)), (first, listing(200))]
        )
    assert [(a.id, a.status, a.taken) for a in answers] == [
        (first, "stored", True),
        (second, "stored", True),
        (third, "too_large", False),
        (first, "already_stored", True),
    ]
    posted = [size for path, size in relay.calls if path == "/inspections/results"]
    assert len(posted) == 3 and all(size <= MAX_RESULTS_BODY for size in posted), relay.calls
    states = dict(query(clean_db, "SELECT id, state FROM post_inspections"))
    assert [states[i] for i in (first, second, third)] == ["done", "done", "leased"]


def test_an_older_coordinator_is_sent_results_one_by_one(edge_api, clean_db, tmp_path):
    group = "alt.binaries.misc"
    posted = obfuscated_release(tmp_path, group)
    stored_as_indexed(group, posted.articles)
    events: list[tuple[str, dict]] = []
    stop = threading.Event()
    with (
        BodyServer({a.message_id: article_body(a) for a in posted.articles}) as server,
        RecordingRelay(edge_api, older=True) as relay,
    ):
        coordinator = Coordinator(relay.url, node_token(), cafile=relay.cafile, stop=stop)
        inspector = Inspector(
            coordinator,
            lambda: client_of(server),
            stop=stop,
            poll_interval=0.2,
            on_event=lambda name, **fields: events.append((name, fields)),
        )
        inspector.start()
        try:
            assert wait_until(lambda: inspector.counts.inspected == 1, timeout=30, what=lambda: str(events))
        finally:
            stop.set()
            inspector.close()
            inspector.join(10)
    (row,) = inspection_rows(clean_db)
    assert (row.state, row.inner_name, row.imdb) == ("done", RELEASE, IMDB)
    paths = [path for path, _ in relay.calls if path.startswith("/inspections/") and path != "/inspections/lease"]
    assert paths == ["/inspections/results", f"/inspections/{row.id}/result"]
    (said,) = [fields for name, fields in events if name == "error"]
    assert said["call"] == "inspection_results" and "one by one" in said["message"]
    assert inspector.counts.dropped == 0 and inspector.held == []


# -- the node end to end ---------------------------------------------------------------------


@pytest.mark.services
def test_a_node_inspects_the_obfuscated_post_it_indexed(
    edge_api, celery_worker, inn, fresh_group, clean_db, run_edge, tmp_path
):
    posted = obfuscated_release(tmp_path, fresh_group)
    assert inn.post(posted.articles) == len(posted.articles)
    with connect(inn.host, inn.reader_port, compress=False) as client:
        info = client.group(fresh_group)
    token, _ = plan(fresh_group, [(info.first, info.last)])

    edge = run_edge(node_env(edge_api, token, inn.host, inn.reader_port))
    assert edge.wait_for(lambda e: e["event"] == "start")["inspect"] is True
    # The node digests the range, the workers store and join it (the hashed post is queued), and
    # the node's inspector leases it, reads its articles from INN and posts what they tell.
    assert wait_until(
        lambda: scalar(clean_db, "SELECT count(*) FROM post_inspections WHERE state = 'done'") == 1,
        timeout=120,
        what=lambda: f"the post inspected; node log:\n{edge.log()}",
    )
    (row,) = inspection_rows(clean_db)
    assert (row.inner_name, row.imdb, row.password) == (RELEASE, IMDB, 0)
    assert {(f["name"], f["size"], f["source"]) for f in row.files} == {
        (name, size, "par2") for name, size in posted.volumes.items()
    }
    read = [posted.article(s) for s in (".nfo", ".par2", ".part01.rar")]
    assert (row.articles_read, row.articles_missing) == (3, 0)
    assert row.bytes_read == sum(len(kept_body(a)) for a in read)
    # The post is renamed by what its .nfo says; its posted name still finds it.
    (post,) = query(clean_db, "SELECT name, names FROM posts")
    assert post.name == RELEASE and posted.stem in post.names
    assert_posts_summed(clean_db)

    (inspected,) = edge.named("inspected")
    assert (inspected["told_name"], inspected["files"], inspected["articles_read"], inspected["status"]) == (
        RELEASE,
        2,
        3,
        "stored",
    )
    edge.signal(signal.SIGTERM)
    assert edge.wait(30) == 143, edge.log()
    counts = edge.named("stop")[0]["inspections"]
    assert {k: counts[k] for k in ("leased", "inspected", "articles_read", "articles_missing", "dropped")} == {
        "leased": 1,
        "inspected": 1,
        "articles_read": 3,
        "articles_missing": 0,
        "dropped": 0,
    }
    assert counts["bytes_read"] == row.bytes_read


@pytest.mark.services
def test_a_missing_article_is_counted_and_the_inspection_still_posted(
    edge_api, inn, fresh_group, clean_db, run_edge, tmp_path
):
    posted = obfuscated_release(tmp_path, fresh_group)
    volume = posted.article(".part01.rar")
    # INN gets all but the first volume: its BODY is answered 430.
    assert inn.post([a for a in posted.articles if a is not volume]) == len(posted.articles) - 1
    stored_as_indexed(fresh_group, posted.articles)

    # --exit-when-idle waits for the inspections under way, then exits.
    edge = run_edge(node_env(edge_api, node_token(), inn.host, inn.reader_port), "--exit-when-idle")
    assert edge.wait(60) == 0, edge.log()
    (row,) = inspection_rows(clean_db)
    assert (row.state, row.articles_read, row.articles_missing, row.imdb, row.inner_name) == (
        "done",
        2,
        1,
        IMDB,
        RELEASE,
    )
    assert {f["name"] for f in row.files} == set(posted.volumes)
    assert edge.named("inspected")[0]["articles_missing"] == 1
    assert edge.named("stop")[0]["inspections"]["articles_missing"] == 1


@pytest.mark.services
def test_an_endless_body_is_cut_and_counted_and_the_node_goes_on(edge_api, clean_db, run_edge, tmp_path):
    group = "alt.binaries.misc"
    posted = obfuscated_release(tmp_path, group)
    index = posted.article(".par2")
    bodies: dict[str, bytes | str] = {a.message_id: article_body(a) for a in posted.articles}
    bodies[index.message_id] = "endless"
    stored_as_indexed(group, posted.articles)
    with BodyServer(bodies) as server:
        edge = run_edge(node_env(edge_api, node_token(), server.host, server.port), "--exit-when-idle")
        assert edge.wait(60) == 0, edge.log()
    # The par2 index is cut at the lease's 2 MiB; the .nfo and the volume are read all the same
    # (the volume on a new connection), and the post is renamed by the .nfo.
    assert set(server.asked) == {posted.article(s).message_id for s in (".nfo", ".par2", ".part01.rar")}
    (row,) = inspection_rows(clean_db)
    assert (row.state, row.articles_read, row.articles_missing, row.imdb, row.post_name) == (
        "done",
        2,
        0,
        IMDB,
        RELEASE,
    )
    assert row.files is None  # the par2 index never came whole
    (inspected,) = edge.named("inspected")
    assert inspected["malformed"] >= 1
    assert edge.named("stop")[0]["inspections"]["malformed"] >= 1


@pytest.mark.services
def test_sigterm_gives_back_every_inspection_held(edge_api, clean_db, run_edge, tmp_path):
    group = "alt.binaries.misc"
    first = obfuscated_release(tmp_path / "a", group, seed=1)
    second = obfuscated_release(tmp_path / "b", group, seed=2)
    stored_as_indexed(group, first.articles + second.articles)
    # Every BODY stalls: the node holds both inspections while it waits for the first article.
    with BodyServer({a.message_id: "stall" for a in first.articles + second.articles}) as server:
        edge = run_edge(node_env(edge_api, node_token(), server.host, server.port, NNTP_TIMEOUT="60"))
        lease = edge.wait_for(lambda e: e["event"] == "inspection_lease")
        assert lease["count"] == 2
        assert wait_until(lambda: server.asked, timeout=30)
        assert [r.state for r in inspection_rows(clean_db)] == ["leased", "leased"]
        edge.signal(signal.SIGTERM)
        assert edge.wait(15) == 143, edge.log()
    assert [(r.state, r.node_id) for r in inspection_rows(clean_db)] == [("queued", None), ("queued", None)]
    assert sorted(e["inspection"] for e in edge.named("inspection_release")) == sorted(lease["ids"])
    assert edge.named("stop")[0]["inspections"]["given_back"] == 2


@pytest.mark.services
def test_a_server_that_fails_gets_the_inspections_given_back(edge_api, clean_db, run_edge, tmp_path):
    group = "alt.binaries.misc"
    posted = obfuscated_release(tmp_path, group)
    stored_as_indexed(group, posted.articles)
    with BodyServer({a.message_id: "drop" for a in posted.articles}) as server:
        edge = run_edge(node_env(edge_api, node_token(), server.host, server.port), "--exit-when-idle")
        assert edge.wait(60) == 0, edge.log()
    # Tried three times on new connections, then given back (another node's server may have it).
    assert len(server.asked) >= 3 and len(edge.named("nntp_retry")) >= 2
    assert [(r.state, r.node_id) for r in inspection_rows(clean_db)] == [("queued", None)]
    assert edge.named("inspection_release")[0]["status"] == "queued"


@pytest.mark.services
def test_a_server_without_body_turns_inspections_off_and_gives_them_back(edge_api, clean_db, run_edge, tmp_path):
    group = "alt.binaries.misc"
    posted = obfuscated_release(tmp_path, group)
    stored_as_indexed(group, posted.articles)
    with BodyServer({a.message_id: "500" for a in posted.articles}) as server:
        edge = run_edge(node_env(edge_api, node_token(), server.host, server.port), "--exit-when-idle")
        assert edge.wait(60) == 0, edge.log()
    # Asked once (no retry: it will never know BODY), said once, given back; no error.
    assert len(server.asked) == 1 and not edge.named("nntp_retry") and not edge.named("error")
    (off,) = edge.named("inspect_off")
    assert "does not serve BODY" in off["reason"] and "500" in off["reason"]
    assert [(r.state, r.node_id) for r in inspection_rows(clean_db)] == [("queued", None)]


@pytest.mark.services
def test_a_node_with_inspect_0_leases_none(edge_api, clean_db, run_edge, tmp_path):
    group = "alt.binaries.misc"
    posted = obfuscated_release(tmp_path, group)
    stored_as_indexed(group, posted.articles)
    with BodyServer({}) as server:
        edge = run_edge(node_env(edge_api, node_token(), server.host, server.port, INSPECT="0"), "--exit-when-idle")
        assert edge.wait(60) == 0, edge.log()
    assert edge.named("start")[0]["inspect"] is False
    assert not edge.named("inspection_lease") and server.asked == []
    assert [(r.state, r.node_id) for r in inspection_rows(clean_db)] == [("queued", None)]
    assert "inspections" not in edge.named("stop")[0]


@pytest.mark.services
def test_a_result_for_an_inspection_another_node_holds_now_is_dropped(edge_api, clean_db, tmp_path):
    group = "alt.binaries.misc"
    posted = obfuscated_release(tmp_path, group)
    stored_as_indexed(group, posted.articles)
    nfo = posted.article(".nfo")
    bodies: dict[str, bytes | str] = {a.message_id: article_body(a) for a in posted.articles}
    bodies[nfo.message_id], bodies[nfo.message_id + "#body"] = "gated", article_body(nfo)
    events: list[tuple[str, dict]] = []
    stop = threading.Event()
    with BodyServer(bodies) as server:
        mine = Coordinator(edge_api.url, node_token(), cafile=edge_api.cafile, stop=stop)
        inspector = Inspector(
            mine,
            lambda: client_of(server),
            stop=stop,
            poll_interval=0.2,
            on_event=lambda name, **fields: events.append((name, fields)),
        )
        inspector.start()
        try:
            # The inspector waits for the .nfo's body; meanwhile its lease lapses and another
            # node takes the inspection.
            assert wait_until(lambda: nfo.message_id in server.asked, timeout=30)
            with session_scope() as s:
                s.execute(text("UPDATE post_inspections SET expires_at = now() - interval '1 second'"))
            other = Coordinator(edge_api.url, node_token(), cafile=edge_api.cafile)
            (taken,) = other.lease_inspections(1)
            server.gate.set()
            assert wait_until(lambda: inspector.counts.dropped == 1, timeout=30, what=lambda: str(events))
            assert inspector.held == [] and inspector.counts.inspected == 0
            (row,) = inspection_rows(clean_db)
            assert row.state == "leased" and row.node_id is not None
            assert other.post_inspection(taken.id, {"password": 0}) == "stored"
        finally:
            stop.set()
            inspector.close()
            inspector.join(10)
    assert [name for name, _ in events if name == "inspection_dropped"] == ["inspection_dropped"]
