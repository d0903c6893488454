"""The proof of inspections: what is inside a post, read by edge nodes, names, joins and flags it.

Real content is posted to INN 2 (which keeps the bodies) amid other traffic of its group:

1. an obfuscated post: every file under a random 32-character subject by a random poster from a
   random mail domain, its par2 set made by Debian's `par2` over the real names;
2. archives as posting tools make them: 7z made by Debian's `7z` (p7zip-full) plain, with
   encrypted data, with encrypted headers, and in volumes; real RAR 4 and RAR 5 files from the
   `rarfile` package's source (tests/edge/data/inspect/README.md), password-protected ones and one
   with encrypted headers included; a RAR that holds an `.exe` (simnews.archives);
3. a post whose `.nfo` names an IMDb id;
4. hostile bodies: yEnc lying about its sizes, par2 packets with huge lengths and loops, archive
   headers with absurd sizes (simnews.archives).

Two edge nodes index the group; the first is killed (kill -9) while it holds inspections, the
second takes over its ranges and its inspections once their leases lapse. Then: every post worth
it was inspected, each once into the catalog; post 1 is one post under its real name, found by
that name through the newznab API over HTTPS, and NZBGet downloads its NZB, renames its files by
the par2 set and verifies them; the archives carry the `password` attr their headers warrant and
the `.exe` one is dropped by the built-in rule; post 3 is found by `t=movie&imdbid=`; the hostile
bodies are counted and the node goes on.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
import shutil
import signal
import subprocess
import urllib.parse
import xml.etree.ElementTree as ET
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import feedparser
import pytest

from simnews import archives
from simnews.generator import Article, Config, generate, make_article
from simnews.nzbpost import mixed_with
from simnews.proxy import ProviderProxy
from simnews.yencpost import Release, make_release, post_files, post_obfuscated, yenc_body
from tests.e2e.conftest import DataCenter, News
from tests.e2e.test_nzbget_round_trip import NEWZNAB_NS, NZBGet, check_success, https_get
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.services

GROUP = "alt.binaries.inspected"
POSTER = "Archive Poster <poster@archives.example>"
PART_SIZE = 200_000
OTHER_TRAFFIC = 1_000
HOSTILE_CASES = 2  # of each kind of lie
DATA = Path(__file__).resolve().parents[1] / "edge" / "data" / "inspect"
SEVEN_ZIP = shutil.which("7z") or "/usr/bin/7z"
# 1: the obfuscated post, three volumes and a par2 set of four files.
HIDDEN = "Hidden.Film.2021.1080p.BluRay.x264-GRP"
# 3: the post whose .nfo names the film.
NFO_FILM = "Nfo.Film.2017.1080p.BluRay.x264-GRP"
IMDB = 111161
NFO = (
    f"                 Nfo Film (2017)\r\n\r\n  Release....: {NFO_FILM}\r\n"
    f"  IMDb.......: https://www.imdb.com/title/tt0{IMDB}/\r\n  Size.......: 150 KB\r\n"
).encode()


@dataclass
class Archive:
    """A post of one archive (or one set of 7z volumes): what its headers warrant."""

    name: str  # the post's name (its files: name + extension)
    files: list[Path]
    password: int  # newznab's: 0 none, 1 passworded
    flags: set[str] = field(default_factory=set)
    inside: set[str] = field(default_factory=set)  # names its headers list (empty when they are encrypted)


@dataclass
class Contents:
    hidden: Release
    hidden_articles: list[Article]
    archives: list[Archive]
    hostile: dict[str, str]  # the hostile posts: what lies -> its article's message-id
    words: str  # the hidden post's real name, as a user types it


def seven_zip(directory: Path, name: str, inner: Path, *options: str) -> list[Path]:
    """`7z a` of one file, stored (-mx0: the archive is as big as its random content, and its
    header, at the end, falls in the last article)."""
    before = set(directory.iterdir())
    result = subprocess.run(
        [SEVEN_ZIP, "a", "-bd", "-mx0", *options, str(directory / f"{name}.7z"), str(inner)],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return sorted(set(directory.iterdir()) - before)


def make_archives(directory: Path) -> list[Archive]:
    made = []
    inner = directory / "The.Inner.Film.2020.1080p.BluRay.x264-GRP.mkv"
    inner.write_bytes(secrets.token_bytes(300_000))  # two articles of the archive
    for name, options, password, flags in [
        ("Open.Film.2020.1080p.BluRay.x264-GRP", (), 0, set()),
        ("Locked.Film.2020.1080p.BluRay.x264-GRP", ("-pSecret",), 1, set()),
        ("Sealed.Film.2020.1080p.BluRay.x264-GRP", ("-pSecret", "-mhe=on"), 1, {"encrypted_headers"}),
        ("Split.Film.2020.1080p.BluRay.x264-GRP", ("-pSecret", "-v120k"), 1, set()),
    ]:
        files = seven_zip(directory, name, inner, *options)
        made.append(Archive(name, files, password, flags, set() if flags else {inner.name}))
    for name, source, password, flags, inside in [
        ("Rar4.Locked.Show.S01E01.720p.HDTV.x264-GRP", "rar3-comment-psw.rar", 1, set(), {"file1.txt", "file2.txt"}),
        ("Rar5.Locked.Show.S01E02.720p.HDTV.x264-GRP", "rar5-psw.rar", 1, set(), {"stest1.txt", "stest2.txt"}),
        ("Rar5.Sealed.Show.S01E03.720p.HDTV.x264-GRP", "rar5-hpsw.rar", 1, {"encrypted_headers"}, set()),
        ("Rar5.Open.Show.S01E04.720p.HDTV.x264-GRP", "rar5-solid.rar", 0, set(), {"stest1.txt", "stest2.txt"}),
    ]:
        path = directory / f"{name}.rar"
        shutil.copyfile(DATA / source, path)
        made.append(Archive(name, [path], password, flags, inside))
    trojan = "Trojan.Film.2020.1080p.BluRay.x264-GRP"
    path = directory / f"{trojan}.rar"
    path.write_bytes(
        archives.rar4_stored(
            [("setup.exe", b"MZ" + secrets.token_bytes(5_000)), ("readme.txt", b"run setup.exe to watch the film\r\n")]
        )
    )
    made.append(Archive(trojan, [path], 0, {"executable"}, {"setup.exe", "readme.txt"}))
    return made


@pytest.fixture(scope="module")
def contents(news: News, tmp_path_factory) -> Contents:
    news.inn.add_group(GROUP)
    token = secrets.token_hex(4)  # message-ids of this run only
    hidden = make_release(
        tmp_path_factory.mktemp("hidden"),
        HIDDEN,
        seed=41,
        size=900_000,
        volumes=3,
        part_size=PART_SIZE,
        par2_redundancy=10,
    )
    hidden_articles = post_obfuscated(hidden.files, GROUP, namespace=token, seed=41, part_size=PART_SIZE)
    posts = [hidden_articles]
    directory = tmp_path_factory.mktemp("archives")
    made = make_archives(directory)
    for index, archive in enumerate(made):
        posts.append(post_files(archive.files, GROUP, POSTER, namespace=f"{token}.{index}", part_size=PART_SIZE))
    film = tmp_path_factory.mktemp("nfo")
    (film / f"{NFO_FILM}.mkv").write_bytes(secrets.token_bytes(150_000))
    (film / f"{NFO_FILM}.nfo").write_bytes(NFO)
    posts.append(
        post_files(
            [film / f"{NFO_FILM}.nfo", film / f"{NFO_FILM}.mkv"],
            GROUP,
            POSTER,
            namespace=f"{token}.nfo",
            part_size=PART_SIZE,
        )
    )
    hostile = {}
    for label, body in hostile_bodies():
        name = f"Hostile.{label}"
        message_id = f"<{token}.{label}@hostile.example>"
        posts.append([make_article([GROUP], f'{name} - "{name}" yEnc (1/1)', message_id, poster=POSTER, body=body)])
        hostile[label] = message_id
    other = [
        a
        for a in generate(
            OTHER_TRAFFIC, Config(seed=41, groups=(GROUP,), namespace=f"contents.{token}", kind="general")
        )
        if not a.lost
    ]
    everything = other
    for index, articles in enumerate(posts):
        everything = mixed_with(articles, everything, seed=41 + index)
    assert news.inn.post(everything) == len(everything)
    return Contents(hidden, hidden_articles, made, hostile, "hidden film 2021")


def hostile_bodies() -> list[tuple[str, bytes]]:
    """Article bodies that lie (simnews.archives): the first cases of each kind, each a post of
    its own. Files are yEnc-encoded as they are posted; the yEnc lies are bodies already."""
    found = []
    for kind, cases, extension in [
        ("par2", archives.par2_huge_lengths(), "par2"),
        ("loop", archives.par2_loop(), "par2"),
        ("rar", archives.rar_absurd_sizes(), "rar"),
        ("7z", archives.sevenzip_absurd(), "7z"),
        ("zip", archives.zip_absurd(), "zip"),
    ]:
        for case, data in list(cases.items())[:HOSTILE_CASES]:
            label = f"{kind}.{re.sub(r'[^A-Za-z0-9]+', '-', case).strip('-')}.{extension}"
            found.append((label, yenc_body(data, f"Hostile.{label}", 1, 1, 1, len(data), zlib.crc32(data))))
    for case, body in list(archives.yenc_lying_sizes().items())[: HOSTILE_CASES * 2]:
        found.append((f"yenc.{re.sub(r'[^A-Za-z0-9]+', '-', case).strip('-')}.rar", body))
    return found


# -- indexing: two nodes, one killed while it holds inspections -----------------------------------


def node_id(dc: DataCenter, name: str) -> int:
    return dc.value("SELECT id FROM seed_nodes WHERE name = :n", n=name)


def unsettled(dc: DataCenter) -> int:
    return dc.value("SELECT count(*) FROM post_inspections WHERE state IN ('queued', 'leased')")


@pytest.fixture(scope="module")
def indexed(news: News, contents: Contents, datacenter: DataCenter) -> dict:
    """The group indexed and inspected by two nodes, the first killed part way: what the test
    cases look at (the catalog stays as it is for them all)."""
    dc = datacenter
    dc.ensure_running()
    dc.reset()
    dc.add_groups(GROUP)
    try:
        with ProviderProxy(news.inn.host, news.inn.reader_port) as proxy:
            dc.plan(proxy, GROUP, range_size=500)
            tokens = {name: dc.create_node(name) for name in ("edge-a", "edge-b")}
            first = dc.edge("edge-a", dc.node_env(tokens["edge-a"], proxy.port, INSPECT_BATCH="3"))
            held = f"SELECT id FROM post_inspections WHERE state = 'leased' AND node_id = {node_id(dc, 'edge-a')}"
            wait_until(
                lambda: dc.rows(held),
                120,
                lambda: f"edge-a holding inspections; its log:\n{first.log()}",
                interval=0.05,
            )
            first.kill()  # kill -9: its ranges and inspections stay leased until their leases lapse
            killed_with = {row.id for row in dc.rows(held)}
            second = dc.edge("edge-b", dc.node_env(tokens["edge-b"], proxy.port, INSPECT_BATCH="5"))
            wait_until(
                lambda: dc.ranges_done() and dc.all_joined() and unsettled(dc) == 0,
                240,
                lambda: f"every range done and every inspection settled; edge-b's log:\n{second.log()[-5000:]}",
                interval=0.5,
                tick=lambda: dc.send("leases.expire") and dc.sweep(),
            )
            second.signal(signal.SIGTERM)
            assert second.wait(60) == 143, second.log()
        return {"killed_with": killed_with, "second": second, "first": first}
    finally:
        dc.kill_edges()


def post_of(dc: DataCenter, message_id: str) -> int:
    return dc.value(
        "SELECT coalesce(rp.post_key, r.key) FROM fragments_with_ids f"
        " JOIN files fi ON fi.group_id = f.group_id AND fi.key = f.file_key"
        " JOIN releases r ON r.group_id = fi.group_id AND r.key = fi.release_key"
        " LEFT JOIN release_posts rp ON rp.group_id = r.group_id AND rp.key = r.key"
        " WHERE f.message_id = :m",
        m=message_id,
    )


def newznab(dc: DataCenter, **params: str | int) -> tuple[bytes, feedparser.FeedParserDict]:
    key = json.loads(dc.flask("apikeys", "create", f"contents-{secrets.token_hex(3)}", "--json"))["key"]
    _, body = https_get(dc, f"{dc.api.url}/api?{urllib.parse.urlencode(params | {'apikey': key})}")
    feed = feedparser.parse(body)
    assert not feed.bozo, feed.bozo_exception
    return body, feed


def attrs(body: bytes, title: str) -> dict[str, list[str]]:
    """The newznab attrs of the feed's item of this title."""
    for item in ET.fromstring(body).iter("item"):
        if item.findtext("title") == title:
            found: dict[str, list[str]] = {}
            for attr in item.iter(f"{{{NEWZNAB_NS}}}attr"):
                found.setdefault(attr.get("name"), []).append(attr.get("value"))
            return found
    raise AssertionError(f"{title} is not in the feed: {body[:2000]!r}")


# -- the cases ----------------------------------------------------------------------------------


def test_every_post_worth_it_is_inspected_once_though_a_node_died_holding_some(datacenter, indexed, contents):
    dc = datacenter
    assert indexed["killed_with"], "edge-a held no inspection when it was killed"
    # Nothing lost: every inspection done, those the killed node held by the other one, on a
    # second attempt; each stored once (one row a post, its result posted by one node).
    states = dict(dc.rows("SELECT state, count(*) FROM post_inspections GROUP BY 1"))
    assert set(states) == {"done"}, states
    redone = dc.rows(
        "SELECT id, attempts, node_id FROM post_inspections WHERE id = ANY(:ids)", ids=sorted(indexed["killed_with"])
    )
    assert {(row.attempts, row.node_id) for row in redone} == {(2, node_id(dc, "edge-b"))}
    counts = indexed["second"].named("stop")[0]["inspections"]
    assert counts["inspected"] == dc.value(
        "SELECT count(*) FROM post_inspections WHERE node_id = :n", n=node_id(dc, "edge-b")
    )
    assert counts["dropped"] == 0
    # Every post of the obfuscated files, the archives and the .nfo was inspected.
    names = {
        row.name
        for row in dc.rows(
            "SELECT p.name FROM post_inspections i JOIN posts p ON p.group_id = i.group_id AND p.key = i.post_key"
        )
    }
    assert {HIDDEN, NFO_FILM, *(a.name for a in contents.archives if "executable" not in a.flags)} <= names


def test_the_obfuscated_post_is_one_post_under_its_real_name(datacenter, indexed, contents):
    dc = datacenter
    posts = {post_of(dc, article.message_id) for article in contents.hidden_articles}
    assert len(posts) == 1, f"the obfuscated post came out as {len(posts)} posts"
    (post,) = posts
    row = dc.rows("SELECT name, releases, files_seen, category FROM posts WHERE key = :k", k=post)[0]
    assert (row.name, row.releases, row.files_seen) == (HIDDEN, len(contents.hidden.files), len(contents.hidden.files))
    assert row.category == 2040  # Movies > HD, by its real name
    # Its posted (hashed) subjects are kept and still find it; its real name finds it.
    body, feed = newznab(dc, t="search", q=contents.words)
    assert [entry.title for entry in feed.entries] == [HIDDEN], [
        tuple(r)
        for r in dc.rows(
            "SELECT p.key, p.releases, p.files_seen, p.bytes, i.reason, i.files IS NOT NULL, i.attempts"
            " FROM posts p LEFT JOIN (SELECT *, 0 AS read_count FROM post_inspections) i ON i.post_key = p.key"
            " WHERE p.name = :n",
            n=HIDDEN,
        )
    ]


def test_nzbget_downloads_the_obfuscated_post_renames_and_verifies_it(datacenter, indexed, contents, news):
    dc = datacenter
    body, feed = newznab(dc, t="movie", q="hidden film", cat=2000)
    assert [entry.title for entry in feed.entries] == [HIDDEN]
    (enclosure,) = feed.entries[0].enclosures
    _, nzb = https_get(dc, enclosure.href)
    with NZBGet(news.inn.reader_port) as nzbget:
        nzbget.wait_ready()
        nzb_id = nzbget.append(f"{HIDDEN}.nzb", nzb)
        entry = nzbget.wait_done(nzb_id)
        messages = nzbget.job_log(nzb_id)
        check_success(entry, messages)
        written = {
            path.name: hashlib.sha256(path.read_bytes()).hexdigest()
            for path in Path(entry["DestDir"]).iterdir()
            if path.is_file()
        }
    # NZBGet wrote every file the par2 set lists under its real name (the par2 set told it), byte
    # for byte (the par2 files themselves keep the names they were posted under).
    expected = {f.path.name: f.sha256 for f in contents.hidden.files if not f.path.name.endswith(".par2")}
    assert len(expected) == 3
    assert {name: digest for name, digest in written.items() if name in expected} == expected, messages


def test_archives_carry_the_password_their_headers_warrant_and_the_exe_is_dropped(datacenter, indexed, contents):
    dc = datacenter
    rows = {
        row.name: row
        for row in dc.rows(
            "SELECT p.name, p.password, i.flags, i.files, i.dropped_by FROM post_inspections i"
            " JOIN posts p ON p.group_id = i.group_id AND p.key = i.post_key"
        )
    }
    for archive in contents.archives:
        if "executable" in archive.flags:
            continue  # dropped from posts: below
        row = rows[archive.name]
        flags = set(row.flags.split(",")) if row.flags else set()
        inside = {f["name"] for f in row.files or [] if f["source"] != "par2"}
        assert (row.password, flags, inside, row.dropped_by) == (
            archive.password,
            archive.flags,
            archive.inside,
            None,
        ), archive.name
    # The newznab feed says each one's password.
    body, feed = newznab(dc, t="search", q="film 2020", limit=100)
    for archive in contents.archives:
        if archive.name.endswith("Film.2020.1080p.BluRay.x264-GRP") and "executable" not in archive.flags:
            assert attrs(body, archive.name)["password"] == [str(archive.password)], archive.name
    # The rar holding an .exe: flagged, dropped by the built-in rule, out of search.
    (trojan,) = [a for a in contents.archives if "executable" in a.flags]
    dropped = dc.rows("SELECT flags, dropped_by, files FROM post_inspections WHERE dropped_by IS NOT NULL")
    assert [(row.flags, row.dropped_by, {f["name"] for f in row.files}) for row in dropped] == [
        ("executable", "inspected-executable", trojan.inside)
    ]
    assert trojan.name not in {entry.title for entry in feed.entries}
    assert dc.value("SELECT count(*) FROM posts WHERE name = :n", n=trojan.name) == 0


def test_the_film_an_nfo_names_is_found_by_its_imdb_id(datacenter, indexed):
    body, feed = newznab(datacenter, t="movie", imdbid=f"{IMDB:07d}", extended=1)
    assert [entry.title for entry in feed.entries] == [NFO_FILM]
    assert attrs(body, NFO_FILM)["imdb"] == [f"{IMDB:07d}"]


def test_hostile_bodies_are_counted_and_never_block_a_node(datacenter, indexed, contents):
    dc = datacenter
    # Each hostile post was inspected from what could be read of it (its one article).
    for label, message_id in contents.hostile.items():
        rows = dc.rows(
            "SELECT state, articles_read FROM post_inspections WHERE post_key = :k", k=post_of(dc, message_id)
        )
        assert [tuple(row) for row in rows] == [("done", 1)], label
    # The nodes counted what they refused in their events, each lie at least once, stored each
    # result, and went on to the end (above). Two cases need not count: packets repeated as
    # recovery volumes repeat them, and a ZIP whose central directory is absurd while its local
    # headers are whole (read from those): tests/simnews/test_archives.py expects no counter.
    events = {event["post_key"]: event for node in ("first", "second") for event in indexed[node].named("inspected")}
    hostile = {label: events[post_of(dc, message_id)] for label, message_id in contents.hostile.items()}
    assert {event["status"] for event in hostile.values()} == {"stored"}
    uncounted = {label for label, event in hostile.items() if event["malformed"] < 1}
    assert uncounted <= {label for label in hostile if "repeated" in label or "central-directory-absurd" in label}, (
        hostile
    )
