"""Gathering a batch: files with their fragments, releases, stable keys, rules, release chunks."""

import itertools
import json
import threading
from contextlib import nullcontext
from collections import defaultdict
from functools import cache
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge.digest import gather as gather_module
from edge.digest import namecolumns
from edge.digest.namecolumns import columns_of
from edge.digest.names import parse
from edge.digest.gather import Gatherer, file_key, release_key
from edge.digest.overview import REJECT_REASONS
from edge.digest.rules import RuleSet
from simnews.generator import Config, generate
from simnews.scripted import overview_lines
from tests.edge.helpers import as_received, block, overview_line, python_twins

GROUP = "alt.binaries.test"
FIRST = 7_000_000_000


@cache
def generated(seed: int = 5, count: int = 40_000):
    articles = list(generate(count, Config(seed=seed, groups=(GROUP,))))
    return {article.message_id: article.truth for article in articles}, list(overview_lines(articles, GROUP, FIRST))


def gather(lines, chunk=2000, per_batch=10, rules=None, first=FIRST, group=GROUP):
    """Batches of `per_batch` chunks of `chunk` article numbers, from `first` on."""
    batches = []
    span = chunk * per_batch
    for batch_start in range(0, len(lines), span):
        gatherer = Gatherer(group, rules=rules if rules is not None else RuleSet(executable=False))
        for start in range(batch_start, min(len(lines), batch_start + span), chunk):
            gatherer.add_chunk(first + start, first + start + chunk - 1, [block(lines[start : start + chunk])])
        batches.append(as_received(gatherer.build()))
    return batches


def fragments(batch):
    columns = batch["fragments"]
    return zip(columns["file"], columns["part"], columns["article"], columns["bytes"], columns["message_id"])


def test_files_and_releases_are_what_was_posted():
    truths, lines = generated()
    batches = gather(lines)
    file_truths, release_truths = defaultdict(set), defaultdict(set)
    seen = 0
    for batch in batches:
        release_of = dict(zip(batch["files"]["key"], batch["files"]["release"]))
        assert len(release_of) == len(batch["files"]["key"])  # details once per batch
        assert (
            sorted(batch["releases"]["key"])
            == sorted(batch["release_chunks"]["release"])
            == sorted(set(batch["releases"]["key"]))
        )  # one release chunk per release and batch
        for key, part, _article, size, message_id in fragments(batch):
            truth = truths[message_id]
            assert (part, size) == (truth.part, truth.bytes)
            file_truths[key].add((truth.release_key, truth.file_index))
            release_truths[release_of[key]].add(truth.release_key)
            seen += 1
    assert seen == len(lines)
    assert all(len(posted) == 1 for posted in file_truths.values())
    assert all(len(posted) == 1 for posted in release_truths.values())
    assert len(file_truths) == len({(t.release_key, t.file_index) for t in truths.values()})
    assert len(release_truths) == len({t.release_key for t in truths.values()})


def test_keys_are_the_same_whatever_the_batching():
    truths, lines = generated()

    def keys(batches):
        result = {}
        for batch in batches:
            release_of = dict(zip(batch["files"]["key"], batch["files"]["release"]))
            for key, _, _, _, message_id in fragments(batch):
                result[message_id] = (key, release_of[key])
        return result

    by_ten = keys(gather(lines))
    assert keys(gather(lines, chunk=1000, per_batch=1)) == by_ten
    assert keys(gather(lines, chunk=3000, per_batch=3)) == by_ten
    assert all(-(2**63) <= key < 2**63 for pair in by_ten.values() for key in pair)


def test_the_executable_rule_drops_the_floods_and_counts_them():
    truths, lines = generated()
    batch = gather(lines, chunk=len(lines), per_batch=1, rules=RuleSet())[0]
    kept = set(batch["fragments"]["message_id"])
    floods = [t for t in truths.values() if t.is_flood]
    assert kept == {t.message_id for t in truths.values() if not t.is_flood}
    dropped = batch["rules"]["executable"]
    assert dropped == [
        len({t.release_key for t in floods}),
        len({(t.release_key, t.file_index) for t in floods}),
        len(floods),
        sum(t.bytes for t in floods),
    ]
    kept_counts = batch["rules"][""]
    assert kept_counts == [
        len(batch["releases"]["key"]),
        len(batch["files"]["key"]),
        len(kept),
        sum(batch["fragments"]["bytes"]),
    ]
    assert batch["stats"] == {
        "lines": len(lines),
        "rejected": dict.fromkeys(batch["stats"]["rejected"], 0),
        "bad_dates": 0,
    }


def test_release_chunks_sum_what_the_batch_saw():
    lines = [
        overview_line(
            FIRST + i,
            f'Show.S01E01 [{i % 2 + 1}/2] - "Show.S01E01.part{i % 2 + 1}.rar" yEnc ({i // 2 + 1}/3)',
            date=b"Sat, 01 Nov 2025 07:27:%02d +0000" % i,
            size=1000 + i,
        )
        for i in range(6)
    ]
    first, second = gather(lines, chunk=2, per_batch=2)
    assert first["release_chunks"] == {
        "release": [first["releases"]["key"][0]],
        "files": [2],
        "fragments": [4],
        "bytes": [4006],
        "first_date": [1761982020],
        "last_date": [1761982023],
    }
    assert second["release_chunks"]["fragments"] == [2] and second["releases"]["key"] == first["releases"]["key"]
    assert first["files"]["parts"] == [3, 3] and first["files"]["count"] == [2, 2]
    assert sorted(first["files"]["subject"]) == [
        'Show.S01E01 [1/2] - "Show.S01E01.part1.rar" yEnc',
        'Show.S01E01 [2/2] - "Show.S01E01.part2.rar" yEnc',
    ]
    assert first["releases"]["name"] == ["Show.S01E01"] and first["releases"]["file_count"] == [2]


def test_files_releases_and_chunks_come_in_key_order():
    """The order the data center stores them in (it then only checks it): docs/batch-format.md."""
    for batch in gather(generated()[1]):
        for table, key in (("files", "key"), ("releases", "key"), ("release_chunks", "release")):
            keys = batch[table][key]
            assert len(keys) > 100 and keys == sorted(keys), table
        assert batch["release_chunks"]["release"] == batch["releases"]["key"]


def test_missing_numbers_and_bad_lines():
    good = [overview_line(FIRST + n) for n in (0, 1, 5, 6, 9)]
    bad = [b"garbage", overview_line(FIRST + 7, message_id=b""), overview_line(FIRST + 50)]
    gatherer = Gatherer(GROUP)
    # Each chunk's lines, accepted and rejected, are what add_chunk returns (the node's count).
    assert gatherer.add_chunk(FIRST, FIRST + 9, [block(good[:2] + bad[:1]), block(good[2:] + bad[1:])]) == 8
    assert gatherer.add_chunk(FIRST + 10, FIRST + 19, []) == 0
    batch = as_received(gatherer.build())
    assert batch["chunks"] == [[FIRST, FIRST + 9, 8, 3], [FIRST + 10, FIRST + 19, 0, 0]]
    assert batch["missing"] == [[FIRST + 2, FIRST + 4], [FIRST + 7, FIRST + 8], [FIRST + 10, FIRST + 19]]
    assert batch["stats"]["rejected"] == {
        **dict.fromkeys(REJECT_REASONS, 0),
        "too_few_fields": 1,
        "empty_message_id": 1,
        "out_of_range": 1,
    }
    assert batch["stats"]["lines"] == 8 and (batch["first"], batch["last"]) == (FIRST, FIRST + 19)


@pytest.mark.parametrize(
    "numbers_per_block",
    [
        [[0, 1, 2, 2, 3]],  # twice in a row, one block
        [[0, 1, 2], [2, 3]],  # across blocks
        [[0, 2, 1, 3, 1]],  # out of order
        [range(0, 3), range(1, 4)],  # clean blocks that overlap
    ],
)
def test_an_article_listed_twice_is_kept_once(numbers_per_block):
    """A broken server may list an article twice: kept once, the repeat counted as rejected, so
    the file's and release's counts hold each article once."""

    def line(n):
        return overview_line(FIRST + n, f'Show [1/1] - "show.rar" yEnc ({n + 1}/4)', size=100 + n)

    gatherer = Gatherer(GROUP, rules=RuleSet(executable=False))
    gatherer.add_chunk(FIRST, FIRST + 9, [block(map(line, numbers)) for numbers in numbers_per_block])
    batch = as_received(gatherer.build())
    lines = sum(map(len, numbers_per_block))
    assert sorted(batch["fragments"]["article"]) == [FIRST + n for n in range(4)]
    assert sorted(batch["fragments"]["part"]) == [1, 2, 3, 4]
    assert batch["stats"]["rejected"]["repeated_number"] == lines - 4
    assert batch["chunks"] == [[FIRST, FIRST + 9, lines, lines - 4]]
    assert batch["release_chunks"]["fragments"] == [4] and batch["release_chunks"]["bytes"] == [406]
    assert batch["rules"][""] == [1, 1, 4, 406]
    assert batch["missing"] == [[FIRST + 4, FIRST + 9]]


def test_poster_separates_files_and_a_repost_is_one_file():
    subject = '[1/1] - "same.name.rar" yEnc (1/1)'
    lines = [
        overview_line(FIRST, subject, poster=b"A <a@x>"),
        overview_line(FIRST + 1, subject, poster=b"B <b@x>"),
        overview_line(FIRST + 2, 'repost [1/1] - "same.name.rar" yEnc (1/1)', poster=b"A <a@x>"),
    ]
    batch = gather(lines, chunk=3, per_batch=1)[0]
    assert len(batch["files"]["key"]) == 2 and len(batch["releases"]["key"]) == 2
    assert batch["fragments"]["file"][0] == batch["fragments"]["file"][2] != batch["fragments"]["file"][1]
    assert batch["fragments"]["file"][0] == file_key(release_key(b"A <a@x>", "same.name", 1), "same.name.rar")
    assert set(batch["files"]["key"]) == set(batch["fragments"]["file"])


def test_eight_bit_subjects_and_unreadable_dates():
    latin = 'Émile Zola - Germinal [1/1] - "Émile Zola - Germinal.epub" yEnc (1/1)'.encode("latin-1")
    lines = [overview_line(FIRST, latin, poster="Bibliothécaire <b@x>".encode(), date=b"not a date")]
    batch = gather(lines, chunk=1, per_batch=1, group="alt.binaries.e-book.french")[0]
    assert batch["files"]["name"] == ["Émile Zola - Germinal.epub"]
    assert batch["files"]["poster"] == ["Bibliothécaire <b@x>"]
    assert batch["releases"]["name"] == ["Émile Zola - Germinal"]
    assert batch["files"]["date"] == [None] and batch["stats"]["bad_dates"] == 1


def test_subjects_without_counters_and_odd_parentheses():
    lines = [
        overview_line(FIRST, "A text post (no counter)"),
        overview_line(FIRST + 1, '"x.rar" yEnc (2/3) (by someone)'),
        overview_line(FIRST + 2, '"x.rar" yEnc (3/3) (by someone)'),
        overview_line(FIRST + 3, "(1/2)"),
    ]
    batch = gather(lines, chunk=4, per_batch=1)[0]
    assert batch["fragments"]["part"] == [1, 2, 3, 1]
    files = sorted(zip(batch["files"]["subject"], batch["files"]["parts"]))
    assert files == [("", 2), ('"x.rar" yEnc (by someone)', 3), ("A text post (no counter)", 1)]


def test_chunks_follow_each_other():
    gatherer = Gatherer(GROUP)
    with pytest.raises(ValueError, match="at least one chunk"):
        gatherer.build()
    gatherer.add_chunk(1, 10, [])
    with pytest.raises(ValueError, match="does not follow"):
        gatherer.add_chunk(20, 30, [])
    with pytest.raises(ValueError, match="empty chunk"):
        gatherer.add_chunk(11, 10, [])


def test_the_documented_example_is_what_the_code_builds():
    doc = (Path(__file__).resolve().parents[2] / "docs" / "batch-format.md").read_text()
    example = json.loads(doc.split("```json\n")[1].split("```")[0])
    first = 6_000_000_001
    lines = [
        overview_line(
            first, 'Show.S01E01 [1/2] - "Show.S01E01.part1.rar" yEnc (1/3)', poster=b"P <p@x>", message_id=b"<a1@x>"
        ),
        overview_line(first + 1, '"Film.2024.exe" yEnc (1/1)', poster=b"Q <q@x>", message_id=b"<b1@x>", size=300000),
        overview_line(
            first + 2,
            'Show.S01E01 [1/2] - "Show.S01E01.part1.rar" yEnc (2/3)',
            poster=b"P <p@x>",
            message_id=b"<a2@x>",
            date=b"Sat, 01 Nov 2025 07:28:27 +0000",
        ),
        b"garbage",
    ]
    gatherer = Gatherer(GROUP)
    gatherer.add_chunk(first, first + 4, [block(lines)])
    # The reading's version changes with the name parser's code (edge.digest.namecolumns).
    example["release_names"]["version"] = namecolumns.VERSION
    assert as_received(gatherer.build()) == example


def test_each_release_name_is_read_for_its_post():
    """release_names holds, row for row with releases, what the name gives a post of the group
    (what the data center would read of it), and nothing for a name that is a hash."""
    hashed = "a1b2c3d4e5f60718293a4b5c6d7e8f90"
    lines = [
        overview_line(FIRST, 'Show.S02E03.720p.WEB.x264-GRP [1/1] - "a.rar" yEnc (1/1)', poster=b"A <a@x>"),
        overview_line(FIRST + 1, f'{hashed} [1/1] - "{hashed}.rar" yEnc (1/1)', poster=b"B <b@x>"),
        overview_line(FIRST + 2, 'Film.Title.2019.1080p.BluRay [1/1] - "f.mkv" yEnc (1/1)', poster=b"C <c@x>"),
    ]
    gatherer = Gatherer("alt.binaries.multimedia")
    gatherer.add_chunk(FIRST, FIRST + 2, [block(lines)])
    batch = gatherer.build()
    names = batch["releases"]["name"]
    rows = namecolumns.rows_of(batch["release_names"])
    assert len(rows) == len(names) == 3
    by_name = dict(zip(names, rows))
    assert by_name[hashed] is None
    show = by_name["Show.S02E03.720p.WEB.x264-GRP"]
    assert show is not None
    assert (show.category, show.season, show.episode, show.resolution, show.title) == (5010, 2, 3, 720, "Show")
    film = by_name["Film.Title.2019.1080p.BluRay"]
    assert film is not None
    assert (film.category, film.year, film.resolution, film.source, film.title) == (
        2040,
        2019,
        1080,
        "bluray",
        "Film Title",
    )
    for name, row in by_name.items():
        assert row == (
            None if name == hashed else columns_of(parse(name, "alt.binaries.multimedia"), "alt.binaries.multimedia")
        )
    namecolumns.check(batch["release_names"], 3)


def test_message_ids_stay_bytes_until_encoded():
    lines = [overview_line(FIRST, message_id=b"<a@x>"), overview_line(FIRST + 1, message_id="<é@x>".encode("latin-1"))]
    gatherer = Gatherer(GROUP)
    gatherer.add_chunk(FIRST, FIRST + 1, [block(lines)])
    batch = gatherer.build()
    assert batch["fragments"]["message_id"] == [b"<a@x>", "<é@x>".encode()]
    assert as_received(batch)["fragments"]["message_id"] == ["<a@x>", "<é@x>"]


@pytest.mark.parametrize(
    ("numbers_per_block", "missing"),
    [
        ([range(0, 5), range(5, 10)], []),  # clean blocks, every number in order
        ([range(0, 5), range(6, 10)], [[FIRST + 5, FIRST + 5]]),  # a gap between clean blocks
        ([range(5, 10), range(0, 5)], []),  # blocks out of order: every number all the same
        ([range(1, 5), range(5, 10)], [[FIRST, FIRST]]),  # the chunk's first number never came
        ([range(0, 5), range(5, 9)], [[FIRST + 9, FIRST + 9]]),  # nor its last
        ([range(0, 5), [], range(5, 10)], []),  # an empty block between
        ([range(0, 5), [4, 5, 6, 7, 8, 9]], []),  # a number twice
    ],
)
def test_missing_numbers_across_clean_blocks(numbers_per_block, missing):
    gatherer = Gatherer(GROUP)
    gatherer.add_chunk(
        FIRST, FIRST + 9, [block(overview_line(FIRST + n) for n in numbers) for numbers in numbers_per_block]
    )
    assert gatherer.build()["missing"] == missing


_SUBJECT_PIECES = [
    b"(",
    b")",
    b"1/2)",
    b" (3/4)",
    b'"',
    b"[",
    b"]",
    b" yEnc",
    b" ",
    b"a.rar",
    b"x.exe",
    b"y.par2",
    b"\xe9",
    b"\xc3\xa9",
    b"Re: ",
    b" - ",
    b"[1/2] - ",
    b"File 1 of 2: ",
    b"(1/1)",
    b"\\::",
    b"12,5 MB",
]


@st.composite
def odd_lines(draw):
    lines, number = [], FIRST
    for _ in range(draw(st.integers(min_value=1, max_value=30))):
        number += draw(st.sampled_from([1, 1, 1, 2, 0]))
        subject = b"".join(draw(st.lists(st.sampled_from(_SUBJECT_PIECES), max_size=8)))
        poster = draw(st.sampled_from([b"A <a@x>", b"B <b@x>", b"\xe9 <c@x>"]))
        lines.append(
            overview_line(
                number,
                subject,
                poster=poster,
                date=draw(st.sampled_from([b"Sat, 01 Nov 2025 07:27:27 +0000", b"bad", b""])),
                size=draw(st.integers(min_value=0, max_value=2**40)),
            )
        )
    return lines


@settings(max_examples=200, deadline=None)
@given(odd_lines(), st.sampled_from(["executable", "none", "operator"]))
def test_block_boundaries_change_nothing(lines, rules):
    """The same lines in one block, or one block per line, make the same batch."""
    operator_rules = [
        {"name": "a", "field": "poster", "pattern": "^A"},
        {"name": "k", "field": "subject", "pattern": "rar", "action": "keep"},
    ]
    rule_sets = {
        "executable": lambda: RuleSet(),
        "none": lambda: RuleSet(executable=False),
        "operator": lambda: RuleSet.from_data(operator_rules),
    }
    batches = []
    for blocks in ([block(lines)], [block([line]) for line in lines]):
        gatherer = Gatherer(GROUP, rules=rule_sets[rules]())
        gatherer.add_chunk(FIRST, FIRST + 40, blocks)
        batches.append(gatherer.build())
    assert batches[0] == batches[1]
    assert as_received(batches[0])["rules"][""][2] == len(batches[0]["fragments"]["file"])


def _digest_both_ways(blocks: list[bytes]):
    """A chunk's blocks digested with the compiled part (edge/digest/_overview.c) and with its Python
    twins, each from empty caches: the batch and the lines' numbering into files."""
    results = []
    for twins in (False, True):
        gather_module.clear_caches()
        with python_twins() if twins else nullcontext():
            gatherer = Gatherer(GROUP)
            gatherer.add_chunk(FIRST, FIRST + 40, blocks)
            results.append((gatherer.build(), gatherer._files, gatherer._counters, dict(gatherer._file_numbers)))
    return results


@settings(max_examples=300, deadline=None)
@given(odd_lines(), st.booleans())
def test_the_compiled_numbering_equals_the_python_one(lines, one_block):
    """Subjects without "(", with one but no counter after it, counters in the middle, empty
    text before the counter: numbered in C or in Python, the same files and batch."""
    assert gather_module._number_lines is not None
    compiled, python = _digest_both_ways([block(lines)] if one_block else [block([line]) for line in lines])
    assert compiled == python


def test_the_compiled_numbering_hands_odd_blocks_back():
    tails, numbers = {}, defaultdict(itertools.count().__next__)
    number_lines = gather_module._number_lines
    read = gather_module._counter_after_paren
    assert number_lines([b"a (1/2)", b"b (2/2) x"], [b"P", b"P"], tails, read, numbers) == (
        [0, 1],
        [(1, 2, b""), (2, 2, b" x")],
    )
    assert numbers == {(b"P", b"a ", b""): 0, (b"P", b"b ", b" x"): 1}
    assert number_lines([b"a (1/2)", b"no counter"], [b"P", b"P"], tails, read, numbers) is None
    assert number_lines([b"a (1/2)", b"(x) y"], [b"P", b"P"], tails, read, numbers) is None  # "x) y": no counter
    assert tails[b"x) y"] is False
    assert number_lines([b"a (1/2)"], [b"P", b"Q"], tails, read, numbers) is None  # columns of unequal length
    assert number_lines(["str (1/2)"], [b"P"], tails, read, numbers) is None
    assert number_lines([b"(1/1)"], [b"P"], tails, read, numbers) == ([2], [(1, 1, b"")])  # nothing before it


def test_the_compiled_numbering_takes_a_line_like_the_one_before_only_when_its_whole_key_is_the_same():
    """A line like the one before goes in its file without its key looked up, only when poster,
    text before the counter and text after it are all the same: a change in any one is
    another file."""
    tails, numbers = {}, defaultdict(itertools.count().__next__)
    number_lines = gather_module._number_lines
    read = gather_module._counter_after_paren
    subjects = [
        b"x.rar (1/3)",
        b"x.rar (2/3)",
        b"x.rar (3/3) more",
        b"x.rar (1/3) more",
        b"x.rar (2/3)",
        b"x.rar (3/3)",
        b"y.rar (1/3)",
        b"x.ra (2/3)",
        b"x.rar (2/3)",
    ]
    posters = [b"P", b"P", b"P", b"P", b"Q", b"P", b"P", b"P", bytes(b"P")]
    found, counters = number_lines(subjects, posters, tails, read, numbers)
    assert found == [0, 0, 1, 1, 2, 0, 3, 4, 0]
    assert counters[2] == (3, 3, b" more")
    assert len(numbers) == 5


def test_the_compiled_numbering_survives_callbacks_that_change_its_lists():
    """read_tail and the defaultdict's factory are Python code: what the C read of the lists is
    held while they run, and the lists' sizes are read again for each line, so a callback that
    empties the lists, or puts other subjects and posters in them, ends in a hand-back or in the
    numbers of what the lines were when read, never in a read of freed memory (ops/sanitize runs
    this under AddressSanitizer)."""
    number_lines = gather_module._number_lines

    def fresh(text):  # objects only the lists hold, so that taking them out frees them
        return bytes(bytearray(text))

    subjects = [fresh(b"s" * 60 + b" (1/2)"), fresh(b"s" * 60 + b" (2/2)")]
    posters = [fresh(b"P" * 40), fresh(b"P" * 40)]

    def emptying(tail):
        subjects.clear()
        posters.clear()
        [bytes(bytearray(b"y" * 66)) for _ in range(1000)]  # the freed memory used again
        return gather_module._counter_after_paren(tail)

    assert number_lines(subjects, posters, {}, emptying, defaultdict(itertools.count().__next__)) is None

    subjects = [fresh(b"s" * 60 + b" (1/2)"), fresh(b"s" * 60 + b" (2/2)")]
    posters = [fresh(b"P" * 40), fresh(b"P" * 40)]
    counter = itertools.count()

    def replacing():  # the defaultdict's factory, run for the first line's new key
        subjects[0], posters[0] = fresh(b"other"), fresh(b"other")
        [bytes(bytearray(b"y" * 66)) for _ in range(1000)]
        return next(counter)

    numbers = defaultdict(replacing)
    found, counters = number_lines(subjects, posters, {}, gather_module._counter_after_paren, numbers)
    assert found == [0, 0]  # the second line is in the first one's file, as it was read
    assert counters == [(1, 2, b""), (2, 2, b"")]
    assert list(numbers) == [(b"P" * 40, b"s" * 60 + b" ", b"")]


def test_the_compiled_loop_adds_lines_to_their_files_or_hands_odd_ones_back_untouched():
    add_to_files = gather_module._add_to_files
    assert add_to_files is not None
    big = 2**40  # a total past 32 bits
    fragments, sizes, last_dates = [0, 3], [0, big], [b"", b"d0"]
    assert add_to_files([1, 0, 1], [10, 20, 30], [b"d1", b"d2", b"d3"], fragments, sizes, last_dates) is True
    assert (fragments, sizes, last_dates) == ([1, 5], [20, big + 40], [b"d2", b"d3"])
    before = ([1, 5], [20, big + 40], [b"d2", b"d3"])
    for numbers, line_sizes, dates in (
        ([0, 2], [1, 1], [b"x", b"x"]),  # no file 2
        ([0, -1], [1, 1], [b"x", b"x"]),  # nor -1 (the Python loop's last file)
        ([0, 2**70], [1, 1], [b"x", b"x"]),
        ([0, True], [1, 1], [b"x", b"x"]),  # a bool is not a file number here
        ([0, 1], [1, 1.5], [b"x", b"x"]),
        ([0, 1], [1, 1], [b"x", "x"]),
        ([0, 1], [1], [b"x", b"x"]),  # columns of unequal length
        ((0, 1), [1, 1], [b"x", b"x"]),
    ):
        assert add_to_files(numbers, line_sizes, dates, fragments, sizes, last_dates) is None
        assert (fragments, sizes, last_dates) == before  # nothing changed: the Python loop does it all
    assert add_to_files([0], [1], [b"x"], fragments, sizes[:1], last_dates) is None  # files' columns unequal


def _rows_both_ways(subjects, first_dates, last_dates, releases):
    """gather._file_rows of each release, in C and in Python, with their file keys."""
    from edge.digest.overview import _zoned_day_start, parse_date

    counters = [(1, 1, b"")] * len(subjects)
    first_lines = list(range(len(subjects)))
    results = []
    for compiled in (True, False):
        keys = [None] * len(subjects)
        found = []
        for rkey, numbers in releases:
            prefix = gather_module._FILE_KEY_PREFIX + rkey.to_bytes(8, "big", signed=True)
            columns = (
                numbers,
                gather_module._file_keys(numbers, subjects, prefix),
                subjects,
                first_dates,
                last_dates,
                counters,
                first_lines,
                rkey,
                "Poster",
                keys,
            )
            if compiled:
                rows = gather_module._compiled_file_rows(*columns, parse_date, _zoned_day_start)
                assert rows is not None
            else:
                rows = gather_module._file_rows(*columns)
            found.append(rows)
        results.append((found, keys))
    return results


def _subject(filename, index=None, subject="the subject"):
    parsed = gather_module.ParsedSubject(filename, None, None, index, 3, "release")
    identity = (filename or (f"#{index}" if index is not None else subject)).encode()
    return (parsed, ("release", 3), 0, subject, "", subject, len(identity).to_bytes(4, "big") + identity)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.text(max_size=300), min_size=1, max_size=6), st.integers(-(2**63), 2**63 - 1))
def test_the_compiled_file_rows_give_the_keys_file_key_gives(names, rkey):
    """The keys the rows and file_keys get, for names of any length: file_key's, in C as in Python."""
    subjects = [_subject(name or None, index=i) for i, name in enumerate(names)]
    dates = [b"Sat, 01 Nov 2025 07:27:27 +0000"] * len(names)
    compiled, python = _rows_both_ways(subjects, dates, dates, [(rkey, list(range(len(names))))])
    assert compiled == python
    assert compiled[1] == [file_key(rkey, name or f"#{i}") for i, name in enumerate(names)]


RAW_DATES = [
    b"Sat, 01 Nov 2025 07:27:27 +0000",
    b"Sat, 01 Nov 2025 07:27:28 +0000",
    b"01 Nov 2025 23:59:59 -0130",
    b"Sun, 02 Nov 2025 00:00:00 +1400",
    b"Sat, 01 Nov 2025 99:99:99 +0000",
    b"Thu, 01 Jan 1970 00:00:00 +0001",
    b"Wed, 31 Dec 1969 23:59:59 +0000",
    b"Sat, 01 Nov 2025 07:27:27 GMT",
    b"Sat, 01 Nov 2025 07:27:27",
    b"not a date at all, 07:27:27 +0000",
    b"Foo, 99 Abc 2025 07:27:27 +0000",
    b"Sat, 01 Nov 2025 07:27:27 +00x0",
    b"",
    b"garbage",
    b" 07:27:27 +0000 ",
    b"1 nov 25 7:27:27 +0000",
    b"Sat, 01 Nov 99999 07:27:27 +0000",
    "Sa, 01 Nov 2025 07:27:27 +0000".encode("utf-16-le"),
    b"Sat, 01 Nov 2025 07:27:27 +0000\xff",
]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.sampled_from(RAW_DATES), st.sampled_from(RAW_DATES), st.integers(0, 2)), min_size=1, max_size=8
    )
)
def test_the_compiled_file_rows_read_dates_and_merge_rows_as_python_does(files):
    """Dates of every kind (the fast path's shape, other shapes, unreadable, before 1970, far
    out), files reposted under another subject (the same name: one row, its dates widened)."""
    subjects = [_subject(f"name{name}.rar", subject=f"subject {i}") for i, (_, _, name) in enumerate(files)]
    compiled, python = _rows_both_ways(
        subjects, [f[0] for f in files], [f[1] for f in files], [(7, list(range(len(files))))]
    )
    assert compiled == python


def test_the_compiled_file_rows_hand_odd_input_back():
    from edge.digest.overview import _zoned_day_start, parse_date

    date = [b"Sat, 01 Nov 2025 07:27:27 +0000"]
    good = [_subject("a.rar")]
    prefix = gather_module._FILE_KEY_PREFIX + (1).to_bytes(8, "big")
    file_rows = gather_module._compiled_file_rows

    def rows(numbers, subjects, first_lines=(0,), counters=((1, 1, b""),), keys=None):
        keys = gather_module._file_keys([0], good, prefix) if keys is None else keys
        return file_rows(
            numbers,
            keys,
            subjects,
            date,
            date,
            list(counters),
            list(first_lines),
            1,
            "P",
            [None],
            parse_date,
            _zoned_day_start,
        )

    assert rows([0], good) is not None
    assert rows([1], good) is None  # no such file
    assert rows([0], [good[0][:5]]) is None  # not a _Subject
    assert rows([0], good, keys=[]) is None  # no key for the file
    assert rows([0], good, keys=[1.5]) is None  # a key that is not an int
    assert rows([0], [(tuple(good[0][0]),) + good[0][1:]]) is None  # a plain tuple, no ParsedSubject
    assert rows([0], good, first_lines=[3]) is None  # no such line
    assert rows([0], good, counters=[None]) is None


def test_the_compiled_file_rows_survive_a_date_reader_that_changes_their_lists():
    """parse_date may run any Python code (it is Python): what the C read is held, the lists'
    sizes read again for each file, so a reader that empties them ends in a hand-back, not a
    crash; and the day start it keeps is the day look-up's that gave it."""
    from edge.digest.overview import _zoned_day_start

    subjects = [_subject(f"{'f' * 50}{i}.rar", subject=f"{'s' * 40}{i}") for i in range(3)]
    counters = [(1, f"{'x' * 30}{i}", b"") for i in range(3)]

    def emptying(raw):
        subjects.clear()
        counters.clear()
        [("y" * 60,) for _ in range(1000)]  # the freed memory used again
        return 5

    dates = [b"d"] * 3  # not the fast path's shape: parse_date reads them
    prefix = gather_module._FILE_KEY_PREFIX + (7).to_bytes(8, "big")
    keys = gather_module._file_keys([0, 1, 2], subjects, prefix)
    assert (
        gather_module._compiled_file_rows(
            [0, 1, 2], keys, subjects, dates, dates, counters, [0, 1, 2], 7, "P", [None] * 3, emptying, _zoned_day_start
        )
        is None
    )
    date = [b"Mon, 01 Jan 2024 00:00:00 +0000"]
    one = [_subject("a.rar")]

    def rows(day_start):
        return gather_module._compiled_file_rows(
            [0], [1], one, date, date, [(1, 1, b"")], [0], 7, "P", [None], lambda raw: None, day_start
        )[0][0][5]

    assert rows(_zoned_day_start) == 1704067200
    assert rows(lambda day, zone: 1000) == 1000  # not the day start the other look-up gave


def test_a_cache_emptied_meanwhile_changes_nothing():
    cache = {"a": "A"}  # "b" and "c" were read into it, then another thread emptied it

    def read(key):
        cache.clear()  # and does again
        return key.upper()

    assert gather_module._looked_up(cache, ["a", "b", "a", "c"], read) == ["A", "B", "A", "C"]


def test_threads_digesting_at_once_while_the_caches_are_emptied():
    _, lines = generated()
    expected = digested(lines[:6000])
    results, stop = [], threading.Event()

    def clearing():
        while not stop.is_set():
            gather_module.clear_caches()

    def digesting():
        results.append(digested(lines[:6000]))

    cleaner = threading.Thread(target=clearing)
    workers = [threading.Thread(target=digesting) for _ in range(3)]
    cleaner.start()
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    stop.set()
    cleaner.join()
    assert results == [expected] * 3


def digested(lines):
    return [as_received(batch) for batch in gather(lines, chunk=500, per_batch=4)]
