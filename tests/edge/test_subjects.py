"""The subject parser on real subjects (tests/edge/data) and on the generator's ground truth."""

import json
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge.digest.overview import decode_text
from edge.digest import subjects
from edge.digest.subjects import (
    ParsedSubject,
    base_name,
    extension,
    file_subject,
    find_segment_counter,
    parse_pieces,
    parse_subject,
)
from simnews.generator import Config, generate

REAL = [
    json.loads(line)
    for line in (Path(__file__).parent / "data" / "real_subjects.jsonl").read_text("utf-8").splitlines()
]
FIELDS = ("filename", "part", "parts", "file_index", "file_count", "release")


@pytest.mark.parametrize("record", REAL, ids=[record["subject"][:60] for record in REAL])
def test_real_subjects(record):
    assert parse_subject(record["subject"])._asdict() == {field: record[field] for field in FIELDS}


def test_real_subjects_cite_their_source():
    assert len(REAL) >= 50
    assert all(record["source"].startswith("https://github.com/") for record in REAL)


@pytest.mark.parametrize("kind", ["general", "ebook", "iso"])
def test_generator_ground_truth(kind):
    """Every posting style of the generator, 8-bit e-book subjects included, floods included."""
    checked = 0
    for article in generate(6000, Config(seed=11, kind=kind)):
        truth = article.truth
        intended = truth.intended
        parsed = parse_subject(decode_text(truth.subject))
        assert tuple(parsed) == (
            intended.filename,
            intended.part,
            intended.parts,
            intended.file_index,
            intended.file_count,
            intended.release,
        ), truth.subject
        checked += 1
    assert checked == 6000


def test_segment_counter_is_the_last_one():
    assert find_segment_counter('[1/5] "a.rar" yEnc (3/9) (12/40)') == (25, 32, 12, 40)
    assert find_segment_counter(b"x (1/2) (not one)") == (2, 7, 1, 2)
    assert find_segment_counter("no counter (here)") is None
    assert find_segment_counter("") is None


def test_round_file_counter_before_the_segment_counter():
    parsed = parse_subject('(03/12) "name.r01" - 12,34 MB - yEnc (7/50)')
    assert (parsed.file_index, parsed.file_count, parsed.part, parsed.parts) == (3, 12, 7, 50)


def test_subject_without_counters_names_its_release_by_the_text():
    assert parse_subject("Some plain text post") == (None, None, None, None, None, "Some plain text post")


def test_obfuscated_names_are_grouped_by_the_text_around_the_counters():
    first = parse_subject('Team Upload [1/3] - "8d7f0a1c9b2e4f6a8d7f0a1c" yEnc (1/10)')
    second = parse_subject('Team Upload [2/3] - "0f1e2d3c4b5a69788796a5b4" yEnc (1/10)')
    assert first.release == second.release == "Team Upload"


def test_par2_volumes_and_numbered_archives_share_the_base_name():
    names = [
        "X.Y-Z.par2",
        "X.Y-Z.vol00+01.par2",
        "X.Y-Z.vol31-63.PAR2",
        "X.Y-Z.part001.rar",
        "X.Y-Z.r00",
        "X.Y-Z.7z.001",
        "X.Y-Z.nfo",
        "X.Y-Z.sfv",
    ]
    assert {base_name(name) for name in names} == {"X.Y-Z"}
    assert base_name("Release.Name.2023") == "Release.Name.2023"
    assert extension("Setup.EXE") == "exe" and extension("x.r07") == "r07" and extension("noext") == ""


def test_pieces_give_what_the_whole_subject_gives():
    subject = 'Name [02/10] - "Name.part02.rar" yEnc (5/99) 52428800'
    start, end, part, parts = find_segment_counter(subject)
    assert parse_pieces(subject[:start], subject[end:], part, parts) == parse_subject(subject)
    assert file_subject(subject[:start], subject[end:]) == 'Name [02/10] - "Name.part02.rar" yEnc 52428800'


def by_steps(subject: str) -> ParsedSubject:
    """parse_subject without its shortcut for the usual shapes."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subjects, "_USUAL_SHAPE", re.compile(r"(?!)"))
        patch.setattr(subjects, "_usual_subject", None)  # nor its C twin
        return parse_subject(subject)


def in_python(subject: str) -> ParsedSubject:
    """parse_subject with its shortcut in Python (as an install without the compiled part)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subjects, "_usual_subject", None)
        return parse_subject(subject)


@settings(max_examples=400, deadline=None)
@given(
    st.sampled_from(["", "Name", "Name.2024", "Re: x", "a (1/2)", "x 3 of 4", "[FR]", "Some yEnc", "Name -"]),
    st.one_of(st.none(), st.tuples(st.integers(0, 999), st.integers(0, 999))),
    st.sampled_from(["a.rar", "Name.part01.rar", "Name.2024.exe", "x.vol00+01.par2", "8d7f0a1c9b2e4f6a8d7f", "b c"]),
    st.sampled_from(["", " 12345", " - 1,2 MB"]),
)
def test_the_shortcut_gives_what_the_steps_give(front, counter, filename, after):
    text = " ".join(
        piece
        for piece in (front, f"[{counter[0]}/{counter[1]}] -" if counter else "", f'"{filename}" yEnc (1/2){after}')
        if piece
    )
    assert parse_subject(text) == by_steps(text)


def test_the_shortcut_on_every_known_subject():
    subjects_seen = [record["subject"] for record in REAL]
    subjects_seen += [decode_text(article.truth.subject) for article in generate(3000, Config(seed=4))]
    for subject in subjects_seen:
        assert parse_subject(subject) == by_steps(subject) == in_python(subject), subject


def test_the_compiled_shortcut_decides_ascii_text_only():
    assert subjects._usual_subject is not None
    cuts = subjects._CUT_SUFFIXES, subjects._cuts
    assert subjects._usual_subject('[1/2] - "a.part1.rar" yEnc', *cuts) == ("a.part1.rar", 1, 2, "a")
    assert subjects._usual_subject('Name.2024 [03/12] - "Name.2024.r01" yEnc', *cuts) == (
        "Name.2024.r01",
        3,
        12,
        "Name.2024",
    )
    assert subjects._usual_subject('Other [03/12] - "Name.r01" yEnc', *cuts) is False  # the steps read it
    assert subjects._usual_subject('[1/2] - "é.rar" yEnc', *cuts) is None  # not ASCII: the Python decides
    assert subjects._usual_subject('"a.rar" yEnc', {"rar": None}, subjects._cuts)[3] == "a"  # None: not known yet


_LAZY_USUAL_SHAPE = re.compile(r'(?:([^"\[\]]*?) )?(?:\[(\d{1,6})/(\d{1,6})\] - )?"([^"]+)" yEnc')
_SHAPE_PIECES = [
    '"',
    "[",
    "]",
    " ",
    "-",
    "/",
    "1",
    "42",
    "٣",
    "a",
    "B.c",
    "\n",
    " - ",
    " yEnc",
    "[1/2] - ",
    "[012/300] - ",
    "[1234567/2] - ",
    "[1/2]",
    " [3/4] - ",
    "yEnc",
]


_SHAPE_FRONT = st.one_of(
    st.just(""), st.text('ab .-:1٣\n[]"', max_size=8), st.text("ab .-1", max_size=8).map(lambda front: front + " ")
)
_SHAPE_COUNTER = st.one_of(
    st.sampled_from(["", "[1/2] - ", "[012/300] - ", "[1234567/2] - ", "[٣/1] - ", "[1/2]- ", "[1/2/3] - "]),
    st.lists(st.sampled_from(_SHAPE_PIECES), max_size=3).map("".join),
)
_SHAPE_NAME = st.one_of(
    st.text("ab.[]/ -1", max_size=8), st.lists(st.sampled_from(_SHAPE_PIECES), max_size=4).map("".join)
)


@settings(max_examples=2000, deadline=None)
@given(_SHAPE_FRONT, _SHAPE_COUNTER, _SHAPE_NAME, st.booleans())
def test_the_usual_shape_matches_as_its_lazy_form_did(front, counter, name, quoted):
    """The text in front of the usual shape is matched possessively, with its space (faster); the
    match is unique, so the groups, that space cut off, are those the lazy pattern found."""
    text = front + counter + ('"' + name + '" yEnc' if quoted else name)
    lazy, possessive = _LAZY_USUAL_SHAPE.fullmatch(text), subjects._USUAL_SHAPE.fullmatch(text)
    if possessive:
        around, *rest = possessive.groups()
        assert around is None or around.endswith(" ")
        assert lazy and (around and around[:-1], *rest) == lazy.groups()
    else:
        assert not lazy


_ASCII_PIECES = [piece for piece in _SHAPE_PIECES if piece.isascii()] + [
    ".rar",
    ".part01.rar",
    ".vol00+01.par2",
    ".r00",
    ".7z.001",
    "Name",
    "yEnc ",
    "\t",
    "-:|",
    "<a>",
    "0/0",
]


@settings(max_examples=3000, deadline=None)
@given(
    _SHAPE_FRONT,
    _SHAPE_COUNTER,
    st.one_of(_SHAPE_NAME, st.lists(st.sampled_from(_ASCII_PIECES), max_size=5).map("".join)),
    st.booleans(),
    st.booleans(),
)
def test_the_compiled_shortcut_gives_what_the_python_one_gives(front, counter, name, quoted, stem_in_front):
    """edge/digest/_overview.c usual_subject against the regex and base_name it stands for, on texts of
    the usual shape and near it (the name's base in front, as NZB style posts it; ASCII, and
    not, which it hands back)."""
    if stem_in_front and quoted:
        front = subjects.base_name(name) + " " + front
    text = front + counter + ('"' + name + '" yEnc' if quoted else name)
    assert parse_subject(text + " (1/2)") == in_python(text + " (1/2)")
    assert subjects.parse_pieces(text, "", 3, 4) == in_python_pieces(text)


def in_python_pieces(text: str) -> ParsedSubject:
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subjects, "_usual_subject", None)
        return subjects.parse_pieces(text, "", 3, 4)


# The plain forms of the patterns edge.digest.subjects writes to start with a character class.
_PLAIN_FORMS = {
    "_YENC": re.compile(r"\byEnc\b(?:\s+\d+\b)?", re.IGNORECASE),
    "_SIZE": re.compile(r"\b\d+(?:[.,]\d+)?\s*(?:[KMGT]i?B|bytes|B)\b", re.IGNORECASE),
    "_SEPARATOR_RUN": re.compile(r"(?: ?[-:|~]){2,} ?"),
}
# Pieces of what these forms look at, with every letter that IGNORECASE matches beside ASCII
# (KELVIN SIGN, İ, ı, ſ), and other digits and word characters.
_NOISE_PIECES = [
    "y",
    "Y",
    "e",
    "E",
    "n",
    "N",
    "c",
    "C",
    "yEnc",
    "YENC",
    "yenc 123",
    " ",
    "\t",
    "\n",
    "1",
    "22",
    "٣",
    "²",
    ".",
    ",",
    "k",
    "K",
    "\u212a",
    "m",
    "G",
    "t",
    "T",
    "i",
    "I",
    "\u0130",
    "\u0131",
    "B",
    "b",
    "bytes",
    "BYTES",
    "s",
    "S",
    "\u017f",
    "-",
    ":",
    "|",
    "~",
    "_",
    "a",
    "é",
    "MB",
    "GiB",
    " 12 ",
    "x",
    "ǅ",
    "3\u212aB",
    "4 K\u0130B",
    "5m\u0131b",
    "6 byte\u017f",
]


@settings(max_examples=3000, deadline=None)
@given(st.lists(st.sampled_from(_NOISE_PIECES), max_size=12).map("".join))
def test_the_noise_patterns_match_as_their_plain_forms(text):
    for name, plain in _PLAIN_FORMS.items():
        fast = getattr(subjects, name)
        assert [match.span() for match in fast.finditer(text)] == [match.span() for match in plain.finditer(text)]
        assert fast.sub("<>", text) == plain.sub("<>", text)
