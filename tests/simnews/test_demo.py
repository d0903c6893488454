"""The local demo's posts (simnews.demo): names that read as the kind and category they stand for,
subjects that name each post, and, through a real INN 2 with ops/inn's mixed storage, the real
posts' bodies kept whole while the overview-only sample keeps none; a trash INN turned mixed; the
check ops/run ends with (an NZB's every article read back, CRCs checked; a search the API does not
serve told plainly)."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import subprocess
import sys
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path

import pytest

from edge.digest.categories import category_of
from edge.digest.names import parse
from edge.digest.subjects import parse_subject
from simnews import demo
from simnews.generator import Article
from simnews.yencpost import parse_yenc
from tests.fixtures.inn import OPS_INN, InnServer, running_inn
from tests.simnews.rawnntp import RawNNTP

ALL = (*demo.SAMPLES, *demo.REAL)
# ops/inn's default INN_KEEP_BYTES: mixed storage keeps the bodies of articles of this many bytes
# or more, counted as INN stores them, with the Path entry and Xref header it adds (under 200
# bytes for these groups).
KEEP_BYTES = 1500
INN_ADDS = 200
START = dt.datetime(2026, 1, 5, tzinfo=dt.timezone.utc)


def subject_of(article: Article) -> str:
    return article.raw.split(b"\r\nSubject: ", 1)[1].split(b"\r\n", 1)[0].decode()


@pytest.fixture(scope="module")
def made(tmp_path_factory) -> tuple[list[demo.Posted], list[Article]]:
    return demo.demo_posts("made", START, 1.0, tmp_path_factory.mktemp("demo"))


# -- without a server ------------------------------------------------------------------------------


@pytest.mark.parametrize("sample", ALL, ids=[s.name for s in ALL])
def test_each_name_reads_as_the_kind_and_category_it_stands_for(sample: demo.Sample):
    parsed = parse(sample.name, sample.group)
    assert parsed.kind == sample.kind, parsed
    assert category_of(parsed, sample.group).id == sample.category, parsed


def test_the_sample_has_every_kind_and_the_name_shapes_clients_search_for():
    parsed = {s.name: parse(s.name, s.group) for s in ALL}
    assert {s.kind for s in ALL} == {"tv", "movie", "music", "book", "game"}
    # A daily show (by air date), an anime episode (by absolute number), a season pack (a season
    # and no episode), a UHD WEB movie, a DVD, MP3 and FLAC, an epub, consoles' games.
    assert parsed["Evening.Desk.2014.07.22.720p.HDTV.x264-SEED"].air_date == "2014-07-22"
    assert parsed["[Seed] Harbor Lights - 214 [1080p]"].absolute == (214,)
    pack = parsed["Northern.Lights.S02.1080p.WEB-DL.DDP5.1.H.264-SEED"]
    assert (pack.season, pack.episodes) == (2, ())
    assert {s.category for s in ALL} >= {5010, 5040, 5070, 2040, 2045, 2070, 3010, 3040, 7020, 1090, 1180}
    # The real TV episode is what ops/run searches for: Demo Show, season 1, episode 2, TV > HD.
    show = parsed["Demo.Show.S01E02.720p.HDTV.x264-SEED"]
    assert (show.title, show.season, show.episodes) == ("Demo Show", 1, (2,))
    assert {s.group for s in ALL} == set(demo.GROUPS)
    # No other post answers ops/run's search.
    assert [s.name for s in ALL if parsed[s.name].title == "Demo Show"] == ["Demo.Show.S01E02.720p.HDTV.x264-SEED"]


def test_every_subject_names_its_post_and_counts_its_files_and_parts(made):
    posts, articles = made
    by_id = {a.message_id: a for a in articles}
    assert len(by_id) == len(articles)
    for post in posts:
        subjects = [parse_subject(subject_of(by_id[mid])) for mid in post.message_ids]
        assert {s.release for s in subjects} == {post.name}
        assert [s.filename for s in subjects if s.part == 1] == [f.name for f in post.files]
        assert {(s.filename, s.parts) for s in subjects} == {(f.name, f.parts) for f in post.files}
        assert len(post.files) >= 4 and sum(f.parts for f in post.files) == len(post.message_ids)
        assert all(s.file_count == len(post.files) for s in subjects)


def test_the_sample_is_small_enough_to_be_trashed_and_the_real_posts_big_enough_to_be_kept(made):
    posts, articles = made
    real = {mid for post in posts if post.real for mid in post.message_ids}
    assert {post.name for post in posts if post.real} == {s.name for s in demo.REAL}
    sizes = {a.message_id: len(a.raw) for a in articles}
    assert max(size for mid, size in sizes.items() if mid not in real) + INN_ADDS < KEEP_BYTES
    assert min(size for mid, size in sizes.items() if mid in real) >= KEEP_BYTES
    # Small all the same: tens of KB a file.
    assert all(f.size <= 50_000 for post in posts if post.real for f in post.files)


def test_posts_are_dated_in_posting_order_over_the_days_given(made):
    posts, _ = made
    dates = [dt.datetime.fromisoformat(p.date) for p in posts]
    assert dates == sorted(dates) and dates[0] == START and dates[-1] < START + dt.timedelta(days=1)


def test_new_namespaces_make_new_message_ids_and_keep_the_names(made, tmp_path):
    posts, articles = made
    other_posts, other = demo.demo_posts("other", START, 1.0, tmp_path)
    assert not {a.message_id for a in articles} & {a.message_id for a in other}
    assert [p.name for p in posts] == [p.name for p in other_posts]


def feed(*titles: str) -> bytes:
    items = "".join(
        f'<item><title>{t}</title><enclosure url="https://x/api?t=get&amp;id={i}" length="1"'
        f' type="application/x-nzb"/></item>'
        for i, t in enumerate(titles)
    )
    return f'<?xml version="1.0"?><rss version="2.0"><channel><title>t</title>{items}</channel></rss>'.encode()


def test_the_check_takes_the_first_item_and_its_enclosure():
    assert demo.first_enclosure(feed("First", "Second"), "https://x/api?t=tvsearch&q=a") == (
        "First",
        "https://x/api?t=get&id=0",
    )


def test_the_check_says_plainly_when_the_api_does_not_serve_the_search():
    url = "https://127.0.0.1:1/api?t=tvsearch&q=Demo+Show&season=1&ep=2&cat=5040&apikey=secret"
    answer = b'<?xml version="1.0" encoding="UTF-8"?>\n<error code="202" description="No such function: tvsearch" />'
    with pytest.raises(demo.DemoCheckError) as raised:
        demo.first_enclosure(answer, url)
    message = str(raised.value)
    assert "does not serve t=tvsearch" in message and "error 202" in message
    assert "secret" not in message  # the API key stays out of what ops/run prints
    with pytest.raises(demo.DemoCheckError, match="found nothing"):
        demo.first_enclosure(feed(), url)


# -- through INN 2 ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def mixed_inn() -> Iterator[InnServer]:
    with running_inn(demo.GROUPS, storage="mixed", cnfs_mb=64) as server:
        yield server


def post_with_the_command(inn: InnServer, namespace: str, truth: Path) -> dict:
    """The demo posted by `python -m simnews.demo`, as ops/run posts it; its --truth record."""
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "simnews.demo",
            "--port",
            str(inn.feed_port),
            "--namespace",
            namespace,
            "--date",
            START.isoformat(),
            "--days",
            "1",
            "--truth",
            str(truth),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stderr
    summary = json.loads(completed.stdout)
    record = json.loads(truth.read_text())
    assert summary["accepted"] == summary["posted"] == sum(len(p["message_ids"]) for p in record["posts"])
    assert summary["real"] == [s.name for s in demo.REAL]
    return record


def body(nntp: RawNNTP, message_id: str) -> tuple[bytes, bytes | None]:
    """BODY's status line and the body (CRLF line ends), None when there is none."""
    status = nntp.command(f"BODY {message_id}")
    if not status.startswith(b"222"):
        return status, None
    return status, b"".join(line + b"\r\n" for line in nntp.data())


def decoded_files(nntp: RawNNTP, post: dict) -> dict[str, str]:
    """The SHA-256 of each file of a post, its parts read back with BODY and yEnc-decoded."""
    data: dict[str, bytearray] = {}
    for message_id in post["message_ids"]:
        status, text = body(nntp, message_id)
        assert text is not None, (post["name"], message_id, status)
        part = parse_yenc(text)  # each part's size and CRC checked
        data.setdefault(part.name, bytearray()).extend(part.data)
    return {name: hashlib.sha256(content).hexdigest() for name, content in data.items()}


def overview_ids(nntp: RawNNTP, group: str) -> set[str]:
    assert nntp.command(f"GROUP {group}").startswith(b"211")
    return {row[4].decode() for row in nntp.over("1-")}


@pytest.mark.services
def test_mixed_storage_keeps_the_real_posts_whole_and_no_body_of_the_sample(mixed_inn, tmp_path):
    record = post_with_the_command(mixed_inn, "kept", tmp_path / "demo.json")
    with RawNNTP(mixed_inn.host, mixed_inn.reader_port) as nntp:
        for post in record["posts"]:
            if post["real"]:
                assert decoded_files(nntp, post) == {f["name"]: f["sha256"] for f in post["files"]}
            else:
                for message_id in post["message_ids"]:
                    assert body(nntp, message_id)[0].startswith(b"430"), (post["name"], message_id)
        # The overview keeps every article, kept whole or not: what the indexer reads.
        for group in demo.GROUPS:
            posted = {mid for p in record["posts"] if p["group"] == group for mid in p["message_ids"]}
            assert posted and posted <= overview_ids(nntp, group)


def nzb_of(posts: list[dict]) -> bytes:
    """An NZB of the posts, as the catalog's t=get writes one: a file a subject, its segments."""
    ns = demo.NZB_NS
    root = ET.Element(f"{{{ns}}}nzb")
    for post in posts:
        first = 0
        for file in post["files"]:
            element = ET.SubElement(root, f"{{{ns}}}file", subject=f'"{file["name"]}" yEnc (1/{file["parts"]})')
            segments = ET.SubElement(element, f"{{{ns}}}segments")
            for number, message_id in enumerate(post["message_ids"][first : first + file["parts"]], 1):
                ET.SubElement(segments, f"{{{ns}}}segment", number=str(number)).text = message_id.strip("<>")
            first += file["parts"]
    return ET.tostring(root)


@pytest.mark.services
def test_the_check_reads_every_article_an_nzb_names_and_tells_one_missing(mixed_inn, tmp_path):
    record = post_with_the_command(mixed_inn, "checked", tmp_path / "demo.json")
    show = next(p for p in record["posts"] if p["name"] == "Demo.Show.S01E02.720p.HDTV.x264-SEED")
    files, articles, size = demo.check_nzb(nzb_of([show]), mixed_inn.host, mixed_inn.reader_port)
    assert (files, articles, size) == (
        len(show["files"]),
        len(show["message_ids"]),
        sum(f["size"] for f in show["files"]),
    )
    sample = next(p for p in record["posts"] if not p["real"])
    with pytest.raises(demo.DemoCheckError, match="430"):
        demo.check_nzb(nzb_of([sample]), mixed_inn.host, mixed_inn.reader_port)


def ops_inn(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([str(OPS_INN), *args], capture_output=True, text=True, timeout=120)


@pytest.mark.services
def test_a_trash_inn_turned_mixed_keeps_the_bodies_of_what_is_posted_after(tmp_path):
    with running_inn(demo.GROUPS, storage="trash") as inn:
        before = post_with_the_command(inn, "before", tmp_path / "before.json")
        root = str(inn.root)
        assert ops_inn("storage", root).stdout.strip() == "trash"
        refused = ops_inn("storage", root, "mixed")
        assert refused.returncode == 1 and "stop it first" in refused.stderr
        assert ops_inn("stop", root).returncode == 0
        turned = ops_inn("storage", root, "mixed")
        assert turned.returncode == 0, turned.stderr
        assert ops_inn("storage", root).stdout.strip() == "mixed"
        started = ops_inn("start", root)
        assert started.returncode == 0, started.stderr
        after = post_with_the_command(inn, "after", tmp_path / "after.json")
        with RawNNTP(inn.host, inn.reader_port) as nntp:
            for old, new in zip(before["posts"], after["posts"]):
                if new["real"]:
                    assert decoded_files(nntp, new) == {f["name"]: f["sha256"] for f in new["files"]}
                else:
                    assert body(nntp, new["message_ids"][0])[0].startswith(b"430")
                # What trash took stays overview only, listed as before.
                assert body(nntp, old["message_ids"][0])[0].startswith(b"430")
            for group in demo.GROUPS:
                posted = {
                    mid for r in (before, after) for p in r["posts"] if p["group"] == group for mid in p["message_ids"]
                }
                assert posted <= overview_ids(nntp, group)
