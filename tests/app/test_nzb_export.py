"""A post exported as an NZB (app.services.nzbexport, `flask seed nzb`) on the real database: the
five real posts of tests/data/nzb/ stored the normal way (overview lines -> the digest's batches
-> accept -> store -> join into posts) come back as NZBs that the `nzb` package from PyPI reads,
listing exactly the original's files, segments, message-ids and groups; hostile subjects and
posters still give a valid NZB; article numbers are past 2^32."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from pathlib import Path

import pytest
from nzb import Nzb
from nzb import File as NzbFile
from sqlalchemy import text

from app.db import session_scope
from app.services import leases
from app.services.groups import add_groups
from app.services.ingest import posts, store
from app.services.nzbexport import DOCTYPE, XML_DECLARATION, PostNotFound, find_post, post_nzb
from edge.digest.gather import Gatherer
from simnews.generator import Article
from simnews.nzbpost import file_counter, load_nzb, post_articles
from simnews.scripted import overview_lines
from tests.app.factories import BIG, accept, make_node, make_plan
from tests.app.overview import raw
from tests.fixtures.queries import query

NZB_DIR = Path(__file__).resolve().parents[1] / "data" / "nzb"
NZBS = sorted(NZB_DIR.glob("*.nzb"))
NS = "{http://www.newzbin.com/DTD/2003/nzb}"
BATCH_LINES = 500
# The digest cuts a subject's segment counter; the export puts back the first segment's, unpadded,
# at the end.
SEGMENT_COUNTER = re.compile(r"\s*\(\s*\d{1,9}\s*/\s*(\d{1,9})\s*\)")


def store_groups(lines_by_group: dict[str, list[bytes]], first: int = BIG) -> dict[str, int]:
    """Each group's overview lines (numbered from `first`) stored as the edge and the data
    center do: batches of BATCH_LINES lines digested, accepted in order, each stored and joined
    into posts. Returns each group's id."""
    names = sorted(lines_by_group)
    with session_scope() as s:
        groups = add_groups(s, names)
        ranges = {g.name: make_plan(s, g, [(first, first + len(lines_by_group[g.name]) - 1)])[0].id for g in groups}
        node, _ = make_node(s)
        for _ in groups:
            leases.lease(s, node, max_leases=len(groups))
        ids = {g.name: g.id for g in groups}
    batch_ids = []
    for name in names:
        lines = lines_by_group[name]
        for start in range(0, len(lines), BATCH_LINES):
            cut = lines[start : start + BATCH_LINES]
            gatherer = Gatherer(name)
            gatherer.add_chunk(first + start, first + start + len(cut) - 1, [raw(cut)])
            batch_ids.append(accept(node, ranges[name], gatherer.build()))
    for batch_id in batch_ids:
        with session_scope() as s:
            result = store.store_batch(s, batch_id)
            assert result.stored
        with session_scope() as s:  # with what the node read of the names, as the task joins
            assert posts.join_batch(s, batch_id, result.names) is not None
    return ids


def posted_real_posts(paths) -> tuple[dict, dict[str, int]]:
    """The NZBs posted one after another, each file to its own groups (a crosspost is in each
    group's overview), and stored: ({path: (NZBPost, {message-id: NZBTruth})}, group ids)."""
    truths, articles = {}, []
    for path in paths:
        post = load_nzb(path)
        posted = post_articles(post)
        truths[path] = (post, {a.message_id: a.truth for a in posted})
        # Without their truth: overview_lines then goes by each article's Newsgroups header.
        articles += [Article(a.message_id, a.raw) for a in posted]
    groups = sorted({g for post, _ in truths.values() for f in post.posted_files for g in f.groups})
    ids = store_groups({g: list(overview_lines(articles, g, BIG)) for g in groups})
    return truths, ids


def posts_holding(clean_db, message_ids) -> set[tuple[int, str, int]]:
    """(group id, group name, post key) of every post holding one of these articles."""
    return set(
        query(
            clean_db,
            """
        SELECT DISTINCT g.id, g.name, coalesce(p.post_key, r.key)
          FROM fragments_with_ids f
          JOIN files x ON x.group_id = f.group_id AND x.key = f.file_key
          JOIN releases r ON r.group_id = x.group_id AND r.key = x.release_key
          LEFT JOIN release_posts p ON p.group_id = r.group_id AND p.key = r.key
          JOIN groups g ON g.id = f.group_id
         WHERE f.message_id = ANY(:ids)""",
            ids=list(message_ids),
        )
    )


def export(post_key: int, group_id: int | None = None) -> bytes:
    with session_scope() as s:
        return post_nzb(s, post_key, group_id)


def parsed(document: bytes) -> tuple[Nzb, ET.Element]:
    """The export read by the `nzb` package and by ElementTree (which keeps the files' order)."""
    assert document.startswith((XML_DECLARATION + DOCTYPE).encode())
    root = ET.fromstring(document)
    assert root.tag == f"{NS}nzb"
    return Nzb.from_str(document.decode("utf-8")), root


def name_of(subject: str) -> str | None:
    """A file's name as the `nzb` package reads it from the subject."""
    return NzbFile(poster="", posted_at=datetime.now(timezone.utc), subject=subject, groups=(), segments=()).name


def bare(message_id: str) -> str:
    return message_id[1:-1]


def first_segment_subject(subject: str, parts: int) -> str:
    """The subject the export gives a file posted with `subject`: its counter cut, and (1/parts)
    put at the end."""
    return f"{SEGMENT_COUNTER.sub('', subject, count=1).strip()} (1/{parts})".strip()


def test_real_posts_round_trip(clean_db):
    truths, group_ids = posted_real_posts(NZBS)
    # The articles were numbered past 2^32, as on today's servers.
    assert query(clean_db, "SELECT min(article) > 4294967295 FROM fragments") == [(True,)]
    for path, (post, truth) in truths.items():
        where = path.name
        holding = posts_holding(clean_db, truth)
        exported: dict[str, NzbFile] = {}
        for group_id, group, key in sorted(holding):
            document = export(key, group_id)
            nzb, root = parsed(document)
            # A crossposted post has one key in every group: the key alone finds it in the group
            # of least id, which exports the same NZB.
            least = min(g for g, _, k in holding if k == key)
            assert export(key) == export(key, least), where
            head = root.find(f"{NS}head/{NS}meta[@type='name']")
            assert (
                head.text
                == query(clean_db, "SELECT name FROM posts WHERE group_id = :g AND key = :k", g=group_id, k=key)[0][0]
            ), where
            # Files in posting order: date, then [i/N] (files without one last), then name.
            order = [
                (int(f.get("date")), file_counter(f.get("subject")), name_of(f.get("subject")))
                for f in root.iter(f"{NS}file")
            ]
            assert order == sorted(order, key=lambda o: (o[0], o[1] is None, o[1] or (0, 0), o[2])), where
            assert len(nzb.files) == len(order)
            for file in nzb.files:
                assert group in file.groups, where
                if file.name in exported:  # the same file from another group of the crosspost
                    assert exported[file.name] == file, (where, file.name)
                exported[file.name] = file
        originals = {name_of(f.subject): f for f in post.posted_files}
        assert len(originals) == len(post.posted_files), where  # names tell the files apart
        # The exports of the posts holding the articles list exactly the original's files.
        assert set(exported) == set(originals), where
        by_id = {t.nzb_message_id: t for t in truth.values() if t.nzb_path == str(path)}
        for name, original in originals.items():
            file = exported[name]
            assert file.poster == original.poster, (where, name)
            assert int(file.posted_at.timestamp()) == original.date, (where, name)
            assert file.subject == first_segment_subject(original.subject, len(original.segments)), (where, name)
            assert file.groups == tuple(sorted(original.groups)), (where, name)
            posted = [by_id[s.message_id] for s in original.segments]
            # Numbers and message-ids as posted (simnews makes one up where the NZB's cannot be
            # posted, as in the sabnzbd post); bytes are the articles' sizes from the overview
            # (simnews posts small bodies), not the NZB's segment sizes.
            assert [(s.number, s.message_id) for s in file.segments] == [
                (t.segment, bare(t.message_id)) for t in posted
            ], (where, name)
            assert [s.size for s in file.segments] == [t.bytes for t in posted], (where, name)
        assert sum(f.size for f in exported.values()) < sum(f.bytes for f in post.posted_files), where


def test_crossposts_and_companions_of_the_real_posts(clean_db):
    """What the round trip rests on, said plainly: the teevee posts are one post in each of their
    two groups, under one key; the ngPost post is one post of 36 files over two posters, and its
    .nfo, posted to another group, a post of its own there."""
    truths, _ = posted_real_posts(
        [NZB_DIR / "avsnatch_teevee_walking_dead_s03e06.nzb", NZB_DIR / "dlnzb_ngpost_economist.nzb"]
    )
    for path, (_, truth) in truths.items():
        holding = posts_holding(clean_db, truth)
        if path.name.startswith("avsnatch"):
            assert {g for _, g, _ in holding} == {"alt.binaries.multimedia", "alt.binaries.teevee"}
            assert len({k for _, _, k in holding}) == 1
        else:
            assert {g for _, g, _ in holding} == {"alt.binaries.misc", "alt.binaries.multimedia.aviation"}
            files = {g: len(parsed(export(k, i))[0].files) for i, g, k in holding}
            assert files == {"alt.binaries.misc": 36, "alt.binaries.multimedia.aviation": 1}


HOSTILE_SUBJECT = "Nasty <b>&amp; \"quoted\" 'single' & more"
HOSTILE_POSTER = 'Ev\'il "Poster" <e&v@x.example>'
# Every C0 control XML 1.0 forbids (NUL cannot be in a PostgreSQL text), and U+FFFE.
FORBIDDEN = "".join(map(chr, [*range(1, 9), 11, 12, *range(14, 32)])) + "\ufffe"


def hostile_post() -> dict[str, int]:
    """A post of two files whose subject and poster hold XML's special characters."""
    lines = []
    for index in (1, 2):
        for part in (1, 2):
            number = BIG + len(lines)
            subject = (f'[{index}/2] - "{HOSTILE_SUBJECT} x.part{index}.rar" yEnc ({part}/2)').encode()
            lines.append(
                b"\t".join(
                    [
                        str(number).encode(),
                        subject,
                        HOSTILE_POSTER.encode(),
                        b"Sat, 01 Nov 2025 07:27:27 +0000",
                        b"<a&'%d@example.net>" % number,
                        b"",
                        b"4000",
                        b"30",
                        b"",
                    ]
                )
            )
    return store_groups({"alt.binaries.test": lines})


def test_xml_special_and_forbidden_characters_give_a_valid_nzb(clean_db):
    hostile_post()
    ((key,),) = query(clean_db, "SELECT key FROM posts")
    # Control characters and tab, LF and CR put into what the export writes (the digest's
    # parser would not leave them in a subject).
    with clean_db.begin() as conn:
        conn.execute(text("UPDATE files SET subject = subject || :junk || ' \t\n\r end'"), {"junk": FORBIDDEN})
        conn.execute(
            text("UPDATE releases SET poster = poster || :junk, name = name || ' <&> ' || :junk"), {"junk": FORBIDDEN}
        )
    document = export(key)
    assert not any(chr(c).encode() in document for c in [*range(1, 9), 11, 12, *range(14, 32)])
    nzb, root = parsed(document)
    files = list(root.iter(f"{NS}file"))
    assert len(files) == len(nzb.files) == 2
    for file in files:
        assert file.get("poster") == HOSTILE_POSTER
        # Tab, LF and CR survive as references; the forbidden characters are gone.
        assert re.fullmatch(
            rf'\[[12]/2\] - "{re.escape(HOSTILE_SUBJECT)} x\.part[12]\.rar" yEnc \t\n\r end \(1/2\)',
            file.get("subject"),
        ), file.get("subject")
        assert [s.text for s in file.iter(f"{NS}segment")][0].startswith("a&'")
    assert root.find(f"{NS}head/{NS}meta").text.endswith(" <&> ")
    assert {f.name for f in nzb.files} == {f"{HOSTILE_SUBJECT} x.part1.rar", f"{HOSTILE_SUBJECT} x.part2.rar"}


def test_unknown_posts(clean_db):
    ids = hostile_post()
    ((key,),) = query(clean_db, "SELECT key FROM posts")
    with session_scope() as s:
        assert find_post(s, key).group_id == ids["alt.binaries.test"]
        # The export's queries read one snapshot.
        assert s.execute(text("SHOW transaction_isolation")).scalar() == "repeatable read"
        for missing, group_id in ((key + 1, None), (key, ids["alt.binaries.test"] + 1), (2**63, None)):
            with pytest.raises(PostNotFound, match="no such post"):
                find_post(s, missing, group_id)
    # A release joined into another post is no post of its own.
    with clean_db.begin() as conn:
        conn.execute(text("INSERT INTO release_posts SELECT group_id, key, key - 1 FROM releases"))
    with session_scope() as s, pytest.raises(LookupError):
        find_post(s, key)


def test_cli_writes_the_nzb_to_stdout_or_a_file(cli_runner, clean_db, tmp_path):
    hostile_post()
    ((key,),) = query(clean_db, "SELECT key FROM posts")
    assert key < 0  # a key is a hash: this one is negative, and is given without `--` before it
    expected = export(key)
    shown = cli_runner.invoke(args=["seed", "nzb", str(key)])
    assert shown.exit_code == 0, shown.output
    assert shown.stdout_bytes == expected
    target = tmp_path / "post.nzb"
    written = cli_runner.invoke(args=["seed", "nzb", "-o", str(target), "--group", "alt.binaries.test", str(key)])
    assert written.exit_code == 0, written.output
    assert target.read_bytes() == expected and f"{len(expected)} bytes to {target}" in written.output
    assert [p.name for p in tmp_path.iterdir()] == ["post.nzb"]  # no temporary file left


@pytest.mark.parametrize(
    "args, code, message",
    [
        (["12345"], 1, "Error: no such post: 12345"),
        (["-12345"], 1, "Error: no such post: -12345"),  # a negative key is a key, not an option
        (["12345", "--group", "alt.binaries.none"], 1, "Error: no such group: alt.binaries.none"),
        (["abc"], 2, "'abc' is not a post key"),
        ([str(2**63)], 2, "is not a post key"),
        (["--bogus"], 2, "'--bogus' is not a post key"),
        ([], 2, "Missing argument 'POST_KEY'"),
        (["1", "2"], 2, "Got unexpected extra argument"),
    ],
)
def test_cli_refuses_unknown_posts_and_bad_arguments(cli_runner, clean_db, tmp_path, args, code, message):
    target = tmp_path / "post.nzb"
    result = cli_runner.invoke(args=["seed", "nzb", "-o", str(target), *args])
    assert result.exit_code == code, result.output
    assert message in result.output
    if code == 1:
        assert result.output.strip().count("\n") == 0  # one line
    assert not target.exists()
