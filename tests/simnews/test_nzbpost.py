"""Real posts from NZB files (simnews.nzbpost): loading, the articles made of them, and the posts
through a real INN 2, read back with the edge's own NNTP client.

The NZBs are tests/data/nzb/ (verbatim copies of the real posts given to the project; its
README.md tells each one's origin).
"""

from __future__ import annotations

import hashlib
import html
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from edge.digest.nntp import connect
from simnews.generator import Config, _DateFormatter, generate
from simnews.inject import inject
from simnews.nzbpost import (
    MAX_MESSAGE_ID,
    NZBError,
    NZBTruth,
    file_counter,
    header_bytes,
    is_valid_message_id,
    load_nzb,
    mixed_with,
    post_articles,
    posted_message_id,
    segment_subject,
)
from simnews.ports import free_ports

NZB_DIR = Path(__file__).resolve().parents[1] / "data" / "nzb"
NEWSREAP = NZB_DIR / "newsreap_ubuntu-16.04.1-server-i386.nzb"
UNDERBELLY = NZB_DIR / "nzbmatrix_teevee_underbelly_s05e04.nzb"
WALKING_DEAD = NZB_DIR / "avsnatch_teevee_walking_dead_s03e06.nzb"
ECONOMIST = NZB_DIR / "dlnzb_ngpost_economist.nzb"
SABNZBD = NZB_DIR / "sabnzbd_unicode_rar.nzb"
ALL = (NEWSREAP, UNDERBELLY, WALKING_DEAD, ECONOMIST, SABNZBD)

# The README's table: files and segments of each NZB (sabnzbd's has one file without segments).
README_TABLE = {
    NEWSREAP: (55, 1013),
    UNDERBELLY: (33, 513),
    WALKING_DEAD: (48, 2146),
    ECONOMIST: (37, 72),
    SABNZBD: (20, 41),
}
NZB_HEAD = '<?xml version="1.0" encoding="UTF-8"?>\n<nzb xmlns="http://www.newzbin.com/DTD/2003/nzb">\n'


def write_nzb(tmp_path: Path, files: str, name: str = "made.nzb", head: str = NZB_HEAD) -> Path:
    path = tmp_path / name
    path.write_text(head + files + "</nzb>\n", encoding="utf-8")
    return path


def nzb_file(
    subject: str,
    segments: str,
    *,
    poster: str = "poster@example.net",
    date: str = "1700000000",
    groups: str = "<group>alt.binaries.test</group>",
) -> str:
    return (
        f'<file poster="{poster}" date="{date}" subject="{subject}"><groups>{groups}</groups>'
        f"<segments>{segments}</segments></file>\n"
    )


def headers(raw: bytes) -> list[bytes]:
    return raw.split(b"\r\n\r\n", 1)[0].split(b"\r\n")


def header(raw: bytes, name: bytes) -> bytes:
    return next(line.split(b": ", 1)[1] for line in headers(raw) if line.startswith(name + b": "))


# --- loading -----------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_each_nzb_loads_with_the_files_and_segments_of_the_readme(path):
    files, segments = README_TABLE[path]
    post = load_nzb(path)
    assert post.path == str(path)
    assert len(post.files) == files
    assert post.segment_count == sum(len(f.segments) for f in post.files) == segments
    without = [f for f in post.files if not f.segments]
    assert len(post.posted_files) == files - len(without)
    assert len(without) == (1 if path == SABNZBD else 0)
    for file in post.files:
        assert [s.number for s in file.segments] == sorted(s.number for s in file.segments)
        assert file.groups and all(g.startswith("alt.binaries.") for g in file.groups)


def test_the_post_name_is_the_meta_name_when_there_is_one():
    assert load_nzb(NEWSREAP).name == "Ubuntu-16.04.1-Server-i386"
    assert load_nzb(ECONOMIST).name == '[04/36] "The_Economist_USA_-_April_19_2025.part04.rar" yEnc'
    assert load_nzb(WALKING_DEAD).name is None


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_load_agrees_with_the_raw_xml(path):
    """The NZB read again with regular expressions, independently of ElementTree."""
    raw = path.read_bytes()
    encoding = re.search(rb'encoding="([^"]+)"', raw[:200]).group(1).decode()
    text = raw.decode(encoding)
    chunks = re.split(r"<file\s", text)[1:]
    post = load_nzb(path)
    assert len(chunks) == len(post.files)
    for chunk, file in zip(chunks, post.files):
        attributes = dict(re.findall(r'(\w+)="([^"]*)"', chunk.split(">", 1)[0]))
        assert file.subject == html.unescape(attributes["subject"])
        assert file.poster == html.unescape(attributes["poster"])
        assert file.date == int(attributes["date"])
        assert file.groups == tuple(re.findall(r"<group>([^<]+)</group>", chunk))
        segments = re.findall(r"<segment\s([^>]*)>([^<]*)</segment>", chunk)
        assert len(segments) == len(file.segments)
        expected = sorted(
            (
                int(re.search(r'number="(\d+)"', a).group(1)),
                int(re.search(r'bytes="(\d+)"', a).group(1)),
                html.unescape(mid),
            )
            for a, mid in segments
        )
        assert [(s.number, s.bytes, s.message_id) for s in file.segments] == expected
    assert sum(len(f.segments) for f in post.files) == len(re.findall(r"<segment\s", text))


def test_an_nzb_without_the_namespace_reads_the_same(tmp_path):
    files = nzb_file(
        "&quot;a.rar&quot; yEnc (1/2)",
        '<segment bytes="10" number="2">b@x</segment><segment bytes="20" number="1">a@x</segment>',
    )
    with_ns = load_nzb(write_nzb(tmp_path, files))
    without = load_nzb(write_nzb(tmp_path, files, "bare.nzb", '<?xml version="1.0"?>\n<nzb>\n'))
    assert with_ns.files == without.files
    assert [s.message_id for s in without.files[0].segments] == ["a@x", "b@x"]
    assert without.files[0].subject == '"a.rar" yEnc (1/2)'


@pytest.mark.parametrize(
    ("content", "wanted"),
    [
        ("this is not XML", "not XML"),
        ('<?xml version="1.0"?><html><body/></html>', "not an NZB"),
        (NZB_HEAD + "</nzb>", "no <file>"),
        (NZB_HEAD + nzb_file("s", '<segment bytes="10">a@x</segment>') + "</nzb>", "number is missing"),
        (NZB_HEAD + nzb_file("s", '<segment bytes="10" number="one">a@x</segment>') + "</nzb>", "not an integer"),
        (NZB_HEAD + nzb_file("s", '<segment number="1">a@x</segment>') + "</nzb>", "bytes is missing"),
        (NZB_HEAD + nzb_file("s", '<segment bytes="1.5" number="1">a@x</segment>') + "</nzb>", "not an integer"),
        (NZB_HEAD + nzb_file("s", '<segment bytes="-3" number="1">a@x</segment>') + "</nzb>", "below 0"),
        (NZB_HEAD + nzb_file("s", '<segment bytes="3" number="1"> </segment>') + "</nzb>", "no message-id"),
        (
            NZB_HEAD + nzb_file("s", '<segment bytes="3" number="1">a@x</segment>', date="yesterday") + "</nzb>",
            "date is not an integer",
        ),
    ],
)
def test_broken_nzbs_raise_nzberror_with_the_path(tmp_path, content, wanted):
    path = tmp_path / "broken.nzb"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(NZBError, match=re.escape(wanted)) as error:
        load_nzb(path)
    assert str(path) in str(error.value)
    assert isinstance(error.value, ValueError)


def test_a_missing_nzb_raises_nzberror(tmp_path):
    with pytest.raises(NZBError, match="cannot read"):
        load_nzb(tmp_path / "nowhere.nzb")


# --- subjects ----------------------------------------------------------------------------------


def test_the_last_segment_counter_is_set_keeping_its_padding():
    assert segment_subject('[34/48] - "x.r22" yEnc (01/66)', 7, 66) == '[34/48] - "x.r22" yEnc (07/66)'
    assert segment_subject('[34/48] - "x.r22" yEnc (01/66)', 66, 66) == '[34/48] - "x.r22" yEnc (66/66)'
    assert segment_subject('"b2d3.10" yEnc (1/20)', 12, 20) == '"b2d3.10" yEnc (12/20)'
    assert segment_subject('"a (1/3) b.rar" yEnc (001/120)', 5, 120) == '"a (1/3) b.rar" yEnc (005/120)'
    assert segment_subject("name ( 1 / 5 )", 4, 5) == "name ( 4 / 5 )"


def test_a_subject_without_a_counter_gets_one_appended():
    assert segment_subject('"你好世界.part01.rar"', 2, 3) == '"你好世界.part01.rar" (2/3)'
    assert segment_subject("[01/36] no segment counter", 1, 1) == "[01/36] no segment counter (1/1)"


def test_file_counters():
    assert file_counter('[01/36] "The_Economist.part01.rar" yEnc (1/2)') == (1, 36)
    assert file_counter('[108505]-[FULL]-[#a.b.teevee@EFNet]-[ U ]-[32/33] - "u.par2" yEnc (01/17)') == (32, 33)
    assert file_counter('"b2d3075d94af88c6742b1fdfc34b225e.10" yEnc (1/20)') is None


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_every_segment_becomes_one_article_with_its_subject_and_truth(path):
    post = load_nzb(path)
    articles = post_articles(post)
    assert len(articles) == post.segment_count
    assert len({a.message_id for a in articles}) == len(articles)
    format_date = _DateFormatter()
    for article in articles:
        truth = article.truth
        assert isinstance(truth, NZBTruth) and not article.lost
        file = post.files[truth.file_index]
        segment = next(s for s in file.segments if s.number == truth.segment)
        assert (truth.name, truth.nzb_path, truth.file_subject, truth.poster) == (
            post.name,
            post.path,
            file.subject,
            file.poster,
        )
        assert (truth.segments, truth.nzb_bytes, truth.nzb_message_id) == (
            len(file.segments),
            segment.bytes,
            segment.message_id,
        )
        assert truth.subject == segment_subject(file.subject, segment.number, len(file.segments)).encode()
        assert header(article.raw, b"Subject") == truth.subject
        assert header(article.raw, b"From") == file.poster.encode()
        assert header(article.raw, b"Date") == format_date(file.date)
        assert header(article.raw, b"Newsgroups") == ",".join(file.groups).encode()
        assert header(article.raw, b"Message-ID") == article.message_id.encode() == truth.message_id.encode()
        assert truth.bytes == len(article.raw) < 1_000  # small bodies: never the NZB's bytes
        assert article.raw.split(b"\r\n\r\n", 1)[1].startswith(
            b"=ybegin part=%d total=%d " % (segment.number, len(file.segments))
        )


def test_subjects_of_a_real_post_count_its_segments():
    articles = post_articles(load_nzb(WALKING_DEAD))
    first = [a.truth.subject for a in articles if a.truth.file_index == 0]
    assert len(first) == 66
    assert first[0].endswith(b'.r22" yEnc (01/66)') and first[6].endswith(b"(07/66)") and first[65].endswith(b"(66/66)")
    sab = post_articles(load_nzb(SABNZBD))
    part01 = [a.truth.subject for a in sab if a.truth.file_subject == '"你好世界.part01.rar"']
    assert part01 == [f'"你好世界.part01.rar" ({i}/3)'.encode() for i in (1, 2, 3)]
    # the stray U+0095 U+008C stay, as UTF-8
    assert any(b"\xe7\x95\x8c\xc2\x95\xc2\x8c.part02.rar" in a.truth.subject for a in sab)


def test_no_cr_lf_or_nul_ever_goes_into_a_header(tmp_path):
    assert header_bytes("a\r\nb\0c\td\u0095") == b"a  b c\td\xc2\x95"
    path = write_nzb(
        tmp_path,
        nzb_file(
            "two&#13;&#10;lines&#10;&quot;x.rar&quot; yEnc (1/1)",
            '<segment bytes="900" number="1">a@x.example</segment>',
            poster="Someone&#13;&#10;Bcc: &lt;s@x&gt;",
        ),
    )
    articles = [a for full in (False, True) for a in post_articles(load_nzb(path), full_size=full)]
    articles += [a for p in ALL for a in post_articles(load_nzb(p))]
    for article in articles:
        lines = headers(article.raw)
        assert len(lines) == 7
        assert all(b"\r" not in line and b"\n" not in line and b"\0" not in line for line in lines)
    assert header(articles[0].raw, b"Subject") == b'two  lines "x.rar" yEnc (1/1)'
    assert header(articles[0].raw, b"From") == b"Someone  Bcc: <s@x>"


# --- message-ids -------------------------------------------------------------------------------


def test_message_id_validity():
    for good in (
        "1353357073.38975.1@eu.news.astraweb.com",
        "7a729338dfe5482e8692eb8dfae64d79@ngPost",
        "WkDiEy2wT9GD@1469191673.73366j2ZZTZEsTPGqzA",
        "a+b$c@[127.0.0.1]",
        "x@y",
    ):
        assert is_valid_message_id(good), good
    for bad in (
        "no-at-sign",
        "two@at@signs",
        "with space@host",
        "tab\t@host",
        "<a@b>",
        "a>b@c",
        "é@host",
        "a..b@host",
        ".a@host",
        "a@",
        "@host",
        "a@host.",
        "file=C:\\x\\y.rar|part=1|start=0|size=3",
        "x" * (MAX_MESSAGE_ID - 3) + "@y",
    ):
        assert not is_valid_message_id(bad), bad
    assert is_valid_message_id("x" * (MAX_MESSAGE_ID - 4) + "@y")  # 250 bytes with its brackets


@pytest.mark.parametrize("path", (NEWSREAP, UNDERBELLY, WALKING_DEAD, ECONOMIST), ids=lambda p: p.stem)
def test_real_message_ids_are_posted_as_they_are(path):
    articles = post_articles(load_nzb(path))
    assert all(a.message_id == f"<{a.truth.nzb_message_id}>" for a in articles)


def test_message_ids_that_are_not_valid_are_made_up_deterministically():
    articles = post_articles(load_nzb(SABNZBD))
    for article in articles:
        digest = hashlib.sha1((SABNZBD.name + article.truth.nzb_message_id).encode()).hexdigest()[:24]
        assert article.message_id == f"<nzb.{digest}@simnews.invalid>"
        assert is_valid_message_id(article.message_id[1:-1])
    assert [a.raw for a in post_articles(load_nzb(SABNZBD))] == [a.raw for a in articles]


@pytest.mark.parametrize("path", (ECONOMIST, SABNZBD), ids=lambda p: p.stem)
def test_a_namespace_makes_every_message_id_distinct(path):
    post = load_nzb(path)
    runs = {ns: [a.message_id for a in post_articles(post, namespace=ns)] for ns in ("", "a", "b", "alt.binaries.x")}
    everything = [mid for mids in runs.values() for mid in mids]
    assert len(set(everything)) == len(everything) == 4 * post.segment_count
    assert all(is_valid_message_id(mid[1:-1]) for mid in everything)
    if path == ECONOMIST:
        assert runs["a"][0] == "<7a729338dfe5482e8692eb8dfae64d79.a@ngPost>"


def test_a_namespaced_id_too_long_for_inn_is_made_up():
    local = "x" * 200
    assert posted_message_id("p.nzb", f"{local}@host", "") == f"<{local}@host>"
    made_up = posted_message_id("p.nzb", f"{local}@host", "n" * 60)
    assert made_up.endswith("@simnews.invalid>") and len(made_up) < MAX_MESSAGE_ID


def test_bad_namespaces_and_groups_are_refused():
    post = load_nzb(ECONOMIST)
    for namespace in ("with space", "a..b", ".a", "a>", "é"):
        with pytest.raises(ValueError, match="namespace"):
            post_articles(post, namespace=namespace)
    for group in ("", "a b", "a,b", "a\r\nb"):
        with pytest.raises(ValueError, match="newsgroup"):
            post_articles(post, group)


# --- order and bodies --------------------------------------------------------------------------


def posted_files(articles) -> list[int]:
    """The file indexes in posting order, checking that each file's segments go in a row, ascending."""
    order: list[int] = []
    for article in articles:
        truth = article.truth
        if not order or order[-1] != truth.file_index:
            assert truth.file_index not in order
            order.append(truth.file_index)
            expected = 0
        assert truth.segment > expected
        expected = truth.segment
    return order


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.stem)
def test_files_are_posted_by_date_then_file_counter_then_nzb_order(path):
    post = load_nzb(path)
    order = posted_files(post_articles(post))
    assert sorted(order) == [i for i, f in enumerate(post.files) if f.segments]

    def key(i):
        counter = file_counter(post.files[i].subject)
        return (post.files[i].date, counter is None, counter[0] if counter else 0, i)

    assert [key(i) for i in order] == sorted(key(i) for i in order)


def test_the_posting_order_of_the_economist_ends_with_its_later_nfo():
    post = load_nzb(ECONOMIST)
    order = posted_files(post_articles(post))
    assert [file_counter(post.files[i].subject) for i in order] == [(n, 36) for n in range(1, 37)] + [(1, 1)]
    assert post.files[order[-1]].subject.endswith('.nfo" yEnc (1/1)')


def test_files_of_one_date_go_by_their_counter(tmp_path):
    files = "".join(
        nzb_file(f"[{n:02d}/03] - &quot;f{n}.rar&quot; yEnc (1/1)", f'<segment bytes="5" number="1">f{n}@x</segment>')
        for n in (3, 1, 2)
    )
    files += nzb_file(
        "&quot;early.nfo&quot; yEnc (1/1)", '<segment bytes="5" number="1">e@x</segment>', date="1600000000"
    )
    files += nzb_file("&quot;uncounted.par2&quot; yEnc (1/1)", '<segment bytes="5" number="1">u@x</segment>')
    articles = post_articles(load_nzb(write_nzb(tmp_path, files)))
    assert [a.message_id for a in articles] == ["<e@x>", "<f1@x>", "<f2@x>", "<f3@x>", "<u@x>"]


def test_a_file_without_segments_is_never_posted():
    post = load_nzb(SABNZBD)
    empty = [i for i, f in enumerate(post.files) if not f.segments]
    assert empty == [0] and post.files[0].subject == '"unicode_rar.nzb"'
    assert empty[0] not in {a.truth.file_index for a in post_articles(post)}
    assert post.files[0] not in post.posted_files


def test_full_size_articles_are_exactly_the_segments_bytes():
    post = load_nzb(ECONOMIST)
    nfo = next(i for i, f in enumerate(post.files) if f.subject.endswith('.nfo" yEnc (1/1)'))
    small = [a for a in post_articles(post, full_size=True) if a.truth.file_index == nfo]
    assert len(small) == 1
    article = small[0]
    assert len(article.raw) == article.truth.bytes == post.files[nfo].segments[0].bytes
    body = article.raw.split(b"\r\n\r\n", 1)[1]
    assert body.startswith(b"=ybegin part=1 total=1 ") and body.endswith(b"pcrc32=%s\r\n" % body[-10:-2])
    assert int(header(article.raw, b"Lines")) == body.count(b"\r\n")
    assert all(len(line) <= 128 for line in body.split(b"\r\n"))
    sab = post_articles(load_nzb(SABNZBD), full_size=True)
    assert [len(a.raw) for a in sab] == [a.truth.nzb_bytes for a in sab]


def test_full_size_is_exact_from_the_header_up(tmp_path):
    segments = "".join(
        f'<segment bytes="{n}" number="{i}">s{i}@x</segment>' for i, n in enumerate(range(150, 1_400), start=1)
    )
    post = load_nzb(write_nzb(tmp_path, nzb_file("&quot;tiny.bin&quot; yEnc (1/1250)", segments)))
    natural = {a.message_id: a.raw for a in post_articles(post)}
    assert all(500 < len(raw) < 800 for raw in natural.values())
    kept = []
    for article in post_articles(post, full_size=True):
        raw, target = article.raw, article.truth.nzb_bytes
        # the header alone, with an empty body (Lines: 0 is as long as the natural Lines: 5)
        bare = len(natural[article.message_id].split(b"\r\n\r\n", 1)[0]) + 4
        if len(raw) == target:
            assert int(header(raw, b"Lines")) == raw.split(b"\r\n\r\n", 1)[1].count(b"\r\n")
            if target > 700:
                assert raw.split(b"\r\n\r\n", 1)[1].startswith(b"=ybegin ")
        else:  # no article can be that size (a body line takes at least its CRLF): the small body stays
            assert raw == natural[article.message_id]
            kept.append(target - bare)
    assert kept and max(kept) == 1 and all(k < 0 or k == 1 for k in kept)


def test_mixed_with_keeps_each_stream_in_order_and_depends_on_the_seed():
    ours = [f"p{i}" for i in range(50)]
    theirs = [f"g{i}" for i in range(200)]
    mixed = mixed_with(ours, theirs, seed=3)
    assert sorted(mixed) == sorted(ours + theirs)
    assert [x for x in mixed if x.startswith("p")] == ours
    assert [x for x in mixed if x.startswith("g")] == theirs
    assert mixed == mixed_with(iter(ours), iter(theirs), seed=3)
    assert mixed != mixed_with(ours, theirs, seed=4)
    positions = [i for i, x in enumerate(mixed) if x.startswith("p")]
    assert positions[0] < 50 and positions[-1] > 200  # spread through the traffic, not in one block
    assert mixed_with([], theirs, 1) == theirs and mixed_with(ours, [], 1) == ours


# --- the command line --------------------------------------------------------------------------


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "simnews.nzbpost", *args], capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize("case", ["no port", "no nzb", "port", "not xml", "missing", "namespace", "group"])
def test_the_command_refuses_bad_arguments_and_nzbs_with_exit_2(tmp_path, case):
    junk = tmp_path / "junk.nzb"
    junk.write_text("not XML at all", encoding="utf-8")
    args = {
        "no port": [str(ECONOMIST)],
        "no nzb": ["--port", "119"],
        "port": ["--port", "70000", str(ECONOMIST)],
        "not xml": ["--port", "119", str(ECONOMIST), str(junk)],
        "missing": ["--port", "119", str(tmp_path / "nowhere.nzb")],
        "namespace": ["--port", "119", "--namespace", "a b", str(ECONOMIST)],
        "group": ["--port", "119", "--group", "a,b", str(ECONOMIST)],
    }[case]
    completed = run_cli(*args)
    assert completed.returncode == 2
    assert "error:" in completed.stderr and "Traceback" not in completed.stderr
    assert completed.stdout == ""
    if case in ("not xml", "missing"):
        assert str(junk if case == "not xml" else tmp_path / "nowhere.nzb") in completed.stderr


def test_the_command_says_so_when_nothing_listens():
    (port,) = free_ports(1)
    completed = run_cli("--port", str(port), str(ECONOMIST))
    assert completed.returncode == 1
    assert f"cannot post to 127.0.0.1:{port}" in completed.stderr and "Traceback" not in completed.stderr


# --- through INN 2 -----------------------------------------------------------------------------


def overview(inn, group: str) -> list[list[bytes]]:
    """The group's overview lines as fields, read with the edge's client over plain TCP."""
    with connect(inn.host, inn.reader_port) as client:
        info = client.group(group)
        data = b"".join(client.over(info.first, info.last))
    return [line.split(b"\t") for line in data.split(b"\r\n")[:-1]]


def test_two_real_posts_come_back_through_inn_with_the_rest_of_the_groups_traffic(inn, fresh_group):
    post = [
        a for path in (ECONOMIST, SABNZBD) for a in post_articles(load_nzb(path), fresh_group, namespace=fresh_group)
    ]
    assert len(post) == 72 + 41
    traffic = list(generate(300, Config(seed=24, groups=(fresh_group,), namespace=fresh_group)))
    mixed = mixed_with(post, traffic, seed=24)
    # one connection: innd numbers the articles in the order they are sent
    result = inject(inn.host, inn.feed_port, mixed, conns=1)
    assert (result.accepted, result.rejected) == (len(mixed), 0)

    rows = overview(inn, fresh_group)
    assert len(rows) == len(mixed)
    by_id = {}
    for row in rows:
        assert row[4].decode() not in by_id  # every article there once
        by_id[row[4].decode()] = row
    assert [int(by_id[a.message_id][0]) for a in mixed] == list(range(1, len(mixed) + 1))
    for article in post:
        number, subject, poster, date, message_id, _references, size, _lines, xref = by_id[article.message_id]
        truth = article.truth
        assert subject == truth.subject
        assert poster == truth.poster.encode()
        assert date == _DateFormatter()(truth.date)
        assert message_id == truth.message_id.encode()
        assert xref == b"Xref: testnews.localdomain %s:%s" % (fresh_group.encode(), number)
        # the overview's bytes are the small article's as INN stored it, not the NZB's
        assert truth.bytes <= int(size) < truth.bytes + 200 < truth.nzb_bytes
    economist = {a.message_id for a in post if a.truth.nzb_path == str(ECONOMIST)}
    assert len(economist) == 72 and all(f".{fresh_group}@" in mid for mid in economist)
    assert sum(mid.endswith(f".{fresh_group}@ngPost>") for mid in economist) == 71  # all but the nfo
    assert (
        sum(by_id[a.message_id][1] == b'"\xe4\xbd\xa0\xe5\xa5\xbd\xe4\xb8\x96\xe7\x95\x8c.par2" (1/1)' for a in post)
        == 1
    )


def test_one_nzb_posts_twice_under_two_namespaces_and_once_under_one(inn, fresh_group):
    second = fresh_group + ".again"
    inn.add_group(second)
    post = load_nzb(ECONOMIST)
    assert inn.post(post_articles(post, fresh_group, namespace=fresh_group)) == 72
    assert inn.post(post_articles(post, second, namespace=fresh_group)) == 0  # the same message-ids
    assert inn.post(post_articles(post, second, namespace=second)) == 72
    assert len(overview(inn, fresh_group)) == len(overview(inn, second)) == 72


def test_every_real_post_is_accepted_by_inn_and_full_size_articles_keep_the_nzbs_bytes(inn, fresh_group):
    articles = [a for path in ALL for a in post_articles(load_nzb(path), fresh_group, namespace=fresh_group)]
    assert len(articles) == sum(segments for _, segments in README_TABLE.values())
    assert inn.post(articles) == len(articles)
    rows = overview(inn, fresh_group)
    assert {row[4].decode(): row[1] for row in rows} == {a.message_id: a.truth.subject for a in articles}

    nfo = [
        a
        for a in post_articles(load_nzb(ECONOMIST), fresh_group, namespace=fresh_group + ".full", full_size=True)
        if a.truth.file_subject.endswith('.nfo" yEnc (1/1)')
    ]
    assert len(nfo) == 1 and len(nfo[0].raw) == nfo[0].truth.nzb_bytes == 2797
    assert inn.post(nfo) == 1
    size = next(int(row[6]) for row in overview(inn, fresh_group) if row[4].decode() == nfo[0].message_id)
    assert 2797 <= size < 2797 + 200  # INN adds to the Path and an Xref


def test_the_command_posts_nzbs_and_reports_them(inn, fresh_group):
    completed = run_cli(
        "--port", str(inn.feed_port), "--group", fresh_group, "--namespace", fresh_group, str(ECONOMIST), str(SABNZBD)
    )
    assert completed.returncode == 0, completed.stderr
    report = json.loads(completed.stdout)
    assert report == {
        "posted": 113,
        "accepted": 113,
        "rejected": 0,
        "posts": [
            {"name": load_nzb(ECONOMIST).name, "path": str(ECONOMIST), "files": 37, "segments": 72},
            {"name": None, "path": str(SABNZBD), "files": 19, "segments": 41},
        ],
    }
    rows = overview(inn, fresh_group)
    expected = {
        a.message_id: a.truth.subject
        for p in (ECONOMIST, SABNZBD)
        for a in post_articles(load_nzb(p), fresh_group, namespace=fresh_group)
    }
    assert {row[4].decode(): row[1] for row in rows} == expected
