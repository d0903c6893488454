"""The generator alone: determinism, the catalog mix, subjects and their intended parse, the truth file."""

from __future__ import annotations

import re
from collections import Counter, defaultdict

import pytest

from simnews import generator
from simnews.generator import Config, decode_header, generate, load_truth, write_truth

SEGMENT_RE = re.compile(rb"\((\d+)/(\d+)\)$")


@pytest.fixture(scope="module")
def default_mix() -> list[generator.Article]:
    return list(generate(300_000))


def test_same_config_same_articles_and_seed_changes_them():
    first = [a.raw for a in generate(2_000, Config(seed=5))]
    assert first == [a.raw for a in generate(2_000, Config(seed=5))]
    assert first != [a.raw for a in generate(2_000, Config(seed=6))]
    other_namespace = [a.message_id for a in generate(2_000, Config(seed=5, namespace="x"))]
    assert not set(other_namespace) & {a.message_id for a in generate(2_000, Config(seed=5))}


def test_message_ids_are_unique(default_mix):
    assert len({a.message_id for a in default_mix}) == len(default_mix)


def test_floods_are_92_percent_of_files_and_21_percent_of_segments(default_mix):
    files, flood_files = set(), set()
    for article in default_mix:
        key = (article.truth.release_key, article.truth.file_index)
        files.add(key)
        if article.truth.is_flood:
            flood_files.add(key)
    flood_segments = sum(a.truth.is_flood for a in default_mix) / len(default_mix)
    assert len(flood_files) / len(files) == pytest.approx(0.92, abs=0.03)
    assert flood_segments == pytest.approx(0.21, abs=0.02)
    floods = [a.truth for a in default_mix if a.truth.is_flood]
    assert all(t.filename.endswith(".exe") and t.file_count == 1 and 1 <= t.parts <= 3 for t in floods)


def test_segments_of_a_file_come_in_order_and_files_interleave(default_mix):
    last_part: dict[tuple, int] = {}
    files_of_release: dict[str, list[int]] = defaultdict(list)
    for article in default_mix:
        t = article.truth
        key = (t.release_key, t.file_index)
        assert t.part == last_part.get(key, 0) + 1
        assert 1 <= t.file_index <= t.file_count and 1 <= t.part <= t.parts
        last_part[key] = t.part
        files = files_of_release[t.release_key]
        if not files or files[-1] != t.file_index:
            files.append(t.file_index)
    # a file that comes back after another file of its release started: the two were interleaved
    assert any(len(files) > len(set(files)) for files in files_of_release.values())


def test_a_big_release_spans_more_than_one_20000_article_chunk(default_mix):
    position_in_group = Counter()
    first_last: dict[str, list[int]] = {}
    for article in default_mix:
        group = article.truth.groups[0]
        position_in_group[group] += 1
        span = first_last.setdefault(article.truth.release_key, [position_in_group[group]] * 2)
        span[1] = position_in_group[group]
    assert max(last - first for first, last in first_last.values()) > 20_000


def test_every_subject_style_and_the_intended_parse(default_mix):
    styles = {
        "nzb": rb'^\S.* \[\d+/\d+\] - ".+" yEnc \(',
        "bracket": rb'^\[\d+/\d+\] - ".+" yEnc \(',
        "wtfnzb": rb'^\[PRiVATE\]-\[WtFnZb\]-\[.+\]-\[\d+/\d+\] - "" yEnc \(',
        "sized": rb'^\(\d+/\d+\) ".+" - \d+,\d\d MB - yEnc \(',
        "file_of": rb' - File \d+ of \d+: ".+" yEnc \(',
        "bare": rb'^\[\d+/\d+\] - [^"]+ yEnc \(',
        "quoted": rb'^".+\.exe" yEnc \(',
    }
    seen = Counter()
    for article in default_mix:
        t = article.truth
        intended = t.intended
        subject = decode_header(t.subject)
        assert SEGMENT_RE.search(t.subject).groups() == (str(t.part).encode(), str(t.parts).encode())
        assert (intended.part, intended.parts) == (t.part, t.parts)
        assert intended.filename in subject
        assert intended.release in subject or intended.release in intended.filename
        if intended.file_index is not None:
            assert (intended.file_index, intended.file_count) == (t.file_index, t.file_count)
        for style, pattern in styles.items():
            if re.search(pattern, t.subject):
                seen[style] += 1
    assert set(seen) == set(styles)


def test_obfuscated_names_and_par2_volumes(default_mix):
    names = {a.truth.filename for a in default_mix}
    assert any(re.fullmatch(r"[0-9a-zA-Z]{12,32}\.part\d+\.rar", name) for name in names)
    assert any(re.search(r"\.vol\d\d\+\d\d\.par2$", name) for name in names)
    assert any(name.endswith(".nfo") for name in names) and any(name.endswith(".sfv") for name in names)
    assert any(re.search(r"\.r\d\d$", name) for name in names)


def test_ebook_subjects_are_8bit_latin1_or_broken_utf8():
    articles = list(generate(5_000, Config(groups=("alt.binaries.e-book.french",))))
    kinds = Counter()
    for article in articles:
        subject = article.truth.subject
        if subject.isascii():
            kinds["ascii"] += 1
            continue
        try:
            subject.decode("utf-8")
            kinds["utf-8"] += 1
        except UnicodeDecodeError:
            kinds["not utf-8"] += 1
        assert article.truth.intended.filename in decode_header(subject)
        assert b"Subject: " + subject + b"\r\n" in article.raw
    assert kinds["utf-8"] and kinds["not utf-8"]
    assert any(ext in a.truth.filename for a in articles for ext in (".epub", ".pdf", ".mobi"))


def test_crossposts_dates_and_lost_articles():
    config = Config(lost_rate=0.05, days=90)
    articles = list(generate(50_000, config))
    crossposted = [a for a in articles if len(a.truth.groups) == 2]
    assert crossposted and all(b"Newsgroups: " + ",".join(a.truth.groups).encode() in a.raw for a in crossposted)
    dates = [a.truth.date for a in articles]
    start = int(config.start.timestamp())
    assert min(dates) >= start and max(dates) - min(dates) > 89 * 86400
    lost = sum(a.lost for a in articles)
    assert lost / len(articles) == pytest.approx(0.05, abs=0.01)
    assert all(a.lost == a.truth.lost for a in articles)


def test_truth_round_trip(tmp_path):
    articles = list(
        generate(3_000, Config(seed=9, groups=("alt.binaries.e-book.french", "alt.binaries.test"), lost_rate=0.1))
    )
    path = tmp_path / "truth.jsonl"
    with path.open("w", encoding="utf-8") as out:
        passed = [a.message_id for a in write_truth(articles, out)]
    assert passed == [a.message_id for a in articles]
    assert list(load_truth(str(path)).values()) == [a.truth for a in articles]
