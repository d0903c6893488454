"""The overview parser: fields by format, 64-bit numbers, malformed lines counted, dates."""

import calendar
import email.utils

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge.digest import overview
from edge.digest.overview import (
    DEFAULT_LAYOUT,
    MAX_ARTICLE_BYTES,
    MAX_INT64,
    MAX_KEPT_LINE,
    MAX_MESSAGE_ID_BYTES,
    MAX_TEXT_BYTES,
    OverviewLayout,
    decode_text,
    new_reject_counts,
    parse_block,
    parse_date,
)
from tests.edge.helpers import block, overview_line, python_twins

INN_FORMAT = ["Subject:", "From:", "Date:", "Message-ID:", "References:", "Bytes:", "Lines:", "Xref:full"]
INN = OverviewLayout.from_format(INN_FORMAT)


def test_layout_follows_the_servers_format():
    assert (INN.subject, INN.poster, INN.date, INN.message_id, INN.bytes, INN.min_fields) == (1, 2, 3, 4, 6, 7)
    assert (
        OverviewLayout.from_format(["Subject:", "From:", "Date:", "Message-ID:", "References:", ":bytes", ":lines"])
        == DEFAULT_LAYOUT
    )
    reordered = OverviewLayout.from_format(["From:", "Subject:", "Message-ID:", "Date:", ":bytes"])
    line = b"7\tposter\tsubject\t<m@x>\tSat, 01 Nov 2025 07:27:27 +0000\t99"
    columns = parse_block(line + b"\r\n", reordered, new_reject_counts())
    assert columns == ([7], [b"subject"], [b"poster"], [b"Sat, 01 Nov 2025 07:27:27 +0000"], [b"<m@x>"], [99])
    with pytest.raises(ValueError, match="message-id"):
        OverviewLayout.from_format(["Subject:", "From:", "Date:", "Bytes:"])


def test_clean_block_in_columns_with_64_bit_numbers():
    numbers = [2**32 + 5, 6_000_000_000, MAX_INT64]
    columns = parse_block(
        block(overview_line(n, size=MAX_ARTICLE_BYTES) for n in numbers), INN, rejects := new_reject_counts()
    )
    assert columns.numbers == numbers and columns.sizes == [MAX_ARTICLE_BYTES] * 3
    assert columns.message_ids == [b"<%d@example.net>" % n for n in numbers]
    assert sum(rejects.values()) == 0


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        (overview_line(1).replace(b"\t4\t", b"\t\0\t"), "nul_byte"),
        (b"1\tsubject\tposter\tdate\t<m@x>", "too_few_fields"),
        (b"", "too_few_fields"),
        (overview_line(1).replace(b"1\t", b"x1\t", 1), "bad_number"),
        (overview_line(0), "bad_number"),
        (overview_line(2**63), "bad_number"),
        (overview_line(1, size=2**63), "bad_number"),
        (overview_line(1).replace(b"\t716800\t", b"\t\t"), "bad_number"),
        (overview_line(1).replace(b"1\t", b" 1\t", 1), "bad_number"),
        (overview_line(1, message_id=b""), "empty_message_id"),
        (overview_line(10**6), "out_of_range"),
        (overview_line(1, message_id=b"<" + b"m" * (MAX_MESSAGE_ID_BYTES - 7) + b"@x.net>"), "message_id_too_long"),
        (overview_line(1, subject=b"w " * (MAX_TEXT_BYTES // 2) + b"x"), "subject_too_long"),
        (overview_line(1, subject=" ".join(f"w{i}" for i in range(200_000))), "subject_too_long"),
        (overview_line(1, poster=b"P" * MAX_TEXT_BYTES + b" <p@example.net>"), "poster_too_long"),
        (overview_line(2**40, subject=b"s" * 900_000), "subject_too_long"),
        # Cut by the NNTP client at MAX_KEPT_LINE: the field it was cut in is the one too long.
        (overview_line(7, subject=b"s" * 900_000)[:MAX_KEPT_LINE], "subject_too_long"),
        (overview_line(7, poster=b"p" * 900_000)[:MAX_KEPT_LINE], "poster_too_long"),
        (overview_line(7).replace(b"\t\t716800", b"\t" + b"r" * 90_000 + b"\t716800")[:MAX_KEPT_LINE], "line_too_long"),
    ],
)
def test_malformed_lines_are_counted_and_skipped(line, reason):
    good = [overview_line(n) for n in (1, 2, 3)]
    rejects = new_reject_counts()
    columns = parse_block(block([good[0], line, *good[1:]]), INN, rejects, 1, 1000)
    assert columns.numbers == [1, 2, 3]
    assert rejects == {**new_reject_counts(), reason: 1}


@pytest.mark.parametrize("twins", [False, True])
def test_text_at_the_limit_is_kept_and_one_byte_past_it_is_rejected(twins):
    at = MAX_TEXT_BYTES
    mid = MAX_MESSAGE_ID_BYTES
    lines = [
        overview_line(1, subject=b"s" * at, poster=b"p" * at, message_id=b"<" + b"m" * (mid - 8) + b"@x.net>"),
        overview_line(2, subject=b"s" * (at + 1)),
        overview_line(3, poster=b"p" * (at + 1)),
        overview_line(4, message_id=b"<" + b"m" * (mid - 7) + b"@x.net>"),
    ]
    rejects = new_reject_counts()
    if twins:
        with python_twins():
            columns = parse_block(block(lines), INN, rejects)
    else:
        columns = parse_block(block(lines), INN, rejects)
    assert columns.numbers == [1] and len(columns.subjects[0]) == len(columns.posters[0]) == at
    assert len(columns.message_ids[0]) == mid
    assert rejects == {**new_reject_counts(), "subject_too_long": 1, "poster_too_long": 1, "message_id_too_long": 1}


def test_a_line_without_its_crlf_is_still_read():
    rejects = new_reject_counts()
    columns = parse_block(block([overview_line(1)]) + overview_line(2), INN, rejects)
    assert columns.numbers == [1, 2]


# A line built to be good or bad, and which.
_FIELD_ALPHABET = st.characters(blacklist_characters="\t\r\n\0", codec="utf-8")


def _field(alphabet=_FIELD_ALPHABET):
    return st.text(alphabet, max_size=30).map(str.encode)


@st.composite
def overview_lines(draw):
    number = draw(st.integers(min_value=-5, max_value=2**64))
    size = draw(st.integers(min_value=0, max_value=2**64))
    fields = [
        str(number).encode() if draw(st.booleans()) else draw(_field()),
        draw(_field()),
        draw(_field()),
        draw(_field()),
        draw(_field()),
        b"",
        str(size).encode(),
        b"4",
        b"Xref: h g:1",
    ]
    fields = fields[: draw(st.integers(min_value=0, max_value=len(fields)))] + draw(st.lists(_field(), max_size=2))
    line = b"\t".join(fields)
    if draw(st.booleans()) and draw(st.booleans()):
        at = draw(st.integers(min_value=0, max_value=len(line)))
        line = line[:at] + b"\0" + line[at:]
    good = (
        len(fields) >= INN.min_fields
        and b"\0" not in line
        and fields[0].isdigit()
        and 0 < int(fields[0]) <= MAX_INT64
        and fields[6].isdigit()
        and int(fields[6]) <= MAX_ARTICLE_BYTES
        and fields[4] != b""
    )
    return line, good


@settings(max_examples=300, deadline=None)
@given(st.lists(overview_lines(), max_size=40))
def test_fuzzed_lines_never_raise_and_rejects_equal_the_bad_lines(lines):
    rejects = new_reject_counts()
    columns = parse_block(block(line for line, _ in lines), INN, rejects)
    good = [line for line, is_good in lines if is_good]
    assert len(columns.numbers) == len(good)
    assert sum(rejects.values()) == len(lines) - len(good)
    assert columns.numbers == [int(line.split(b"\t")[0]) for line in good]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(max_size=80).filter(lambda line: b"\r\n" not in line and not line.endswith(b"\r")), max_size=30)
)
def test_random_bytes_never_raise(lines):
    rejects = new_reject_counts()
    columns = parse_block(block(lines), INN, rejects)
    assert len(columns.numbers) + sum(rejects.values()) == len(lines)


def test_eight_bit_text_decodes_losslessly():
    assert decode_text("Émile Zola".encode()) == "Émile Zola"
    latin = "Émile Zola".encode("latin-1")
    assert decode_text(latin) == "Émile Zola" and decode_text(latin).encode("latin-1") == latin


def _stdlib_date(raw: bytes) -> int | None:
    parsed = email.utils.parsedate_tz(raw.decode())
    seconds = calendar.timegm(parsed[:9]) - (parsed[9] or 0)
    return seconds if seconds >= 0 else None  # dates before 1970 are unreadable in a batch


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=4_000_000_000), st.integers(min_value=-1439, max_value=1439), st.booleans())
def test_dates_read_by_hand_equal_the_standard_parser(seconds, offset_minutes, weekday):
    raw = email.utils.formatdate(seconds, localtime=False).encode()  # "Sat, 01 Nov 2025 07:27:27 -0000"
    sign = b"+" if offset_minutes >= 0 else b"-"
    raw = raw[:-5] + sign + b"%02d%02d" % divmod(abs(offset_minutes), 60)
    if not weekday:
        raw = raw[5:]
    assert parse_date(raw) == _stdlib_date(raw)


@pytest.mark.parametrize(
    ("raw", "seconds"),
    [
        (b"Sat, 01 Nov 2025 07:27:27 +0000", 1761982047),
        (b"Sat, 01 Nov 2025 08:27:27 +0100", 1761982047),
        (b"1 Nov 2025 07:27 GMT", 1761982020),
        (b"Sat, 01 Nov 2025 07:27:27", 1761982047),  # no zone: UTC
        (b"garbage", None),
        (b"", None),
        (b"Mon, 99 Foo 2025 07:27:27 +0000", None),
        # A clock is read as written, whether it is in range or not.
        (b"Sat, 01 Nov 2025 99:99:99 -9999", 1761955200 + 99 * 3600 + 99 * 60 + 99 + 99 * 3600 + 99 * 60),
        (b"Sat, 01 Nov 2025 00:00:00 -0000", 1761955200),
        # A date without the usual clock is read by the standard parser.
        (b"Sat, 01 Nov 2025 07:27:27 +01x0", _stdlib_date(b"Sat, 01 Nov 2025 07:27:27 +01x0")),
        (b"Sat, 01 Nov 2025 07:27:2x +0100", None),
        (b"Sat, 01 Nov 2025 07-27:27 +0100", None),
    ],
)
def test_dates(raw, seconds):
    assert parse_date(raw) == seconds


# Blocks the fast path must read exactly like the line-by-line path: lone CR and LF inside
# fields, lines of other widths, numbers out of order, with leading zeros or of other lengths.
_ODD_PIECES = [b"\r", b"\n", b"\t", b"\r\r", b"x", b"", b"0", b"\xe9"]


@st.composite
def odd_blocks(draw):
    count = draw(st.integers(min_value=1, max_value=12))
    start = draw(st.integers(min_value=1, max_value=2**40))
    order = draw(st.sampled_from(["consecutive", "gaps", "shuffled", "repeated"]))
    numbers = [start + n for n in range(count)]
    if order == "gaps":
        numbers = sorted(draw(st.sets(st.integers(min_value=1, max_value=60), min_size=count, max_size=count)))
    elif order == "shuffled":
        numbers = draw(st.permutations(numbers))
    elif order == "repeated":
        numbers = [numbers[0]] * count
    lines = []
    for number in numbers:
        digits = str(number).encode()
        if draw(st.integers(min_value=0, max_value=9)) == 0:
            digits = b"0" + digits  # a leading zero: another length, the same number
        fields = [
            digits,
            b"subject (1/2)",
            b"poster",
            b"Sat, 01 Nov 2025 07:27:27 +0000",
            b"<%d@x>" % number,
            b"",
            b"%d" % draw(st.integers(min_value=0, max_value=2**63)),
            b"4",
            b"Xref: h g:1",
        ]
        if draw(st.integers(min_value=0, max_value=5)) == 0:
            at = draw(st.integers(min_value=1, max_value=len(fields) - 1))
            fields[at] += draw(st.sampled_from(_ODD_PIECES))
        lines.append(b"\t".join(fields))
    return b"".join(line + b"\r\n" for line in lines)


@settings(max_examples=500, deadline=None)
@given(odd_blocks(), st.integers(min_value=1, max_value=2**40 + 20))
def test_the_fast_path_reads_blocks_like_the_line_by_line_path(data, highest):
    rejects, expected_rejects = new_reject_counts(), new_reject_counts()
    columns = parse_block(data, INN, rejects, 1, highest)
    lines = data.split(b"\r\n")
    assert lines.pop() == b""
    expected = overview._parse_lines(lines, INN, expected_rejects, 1, highest)
    assert columns == expected and rejects == expected_rejects


def test_the_compiled_part_is_built_and_reads_clean_blocks():
    """ops/setup builds edge/digest/_overview.c; a clean block is cut by it (not handed back)."""
    assert overview._compiled is not None
    data = block(overview_line(n) for n in range(2**40, 2**40 + 3))
    found = overview._compiled.clean_columns(
        data,
        INN.subject,
        INN.poster,
        INN.date,
        INN.message_id,
        INN.bytes,
        INN.min_fields,
        1,
        MAX_INT64,
        MAX_ARTICLE_BYTES,
        MAX_TEXT_BYTES,
        MAX_MESSAGE_ID_BYTES,
    )
    assert found is not None and found[0] == range(2**40, 2**40 + 3) and found[6] is True
    assert found[4] == [b"<%d@example.net>" % n for n in range(2**40, 2**40 + 3)] and found[5] == [716800] * 3


def _both_ways(data: bytes, layout: OverviewLayout, lowest: int, highest: int):
    compiled_rejects, python_rejects = new_reject_counts(), new_reject_counts()
    compiled = overview.parse_block_in_order(data, layout, compiled_rejects, lowest, highest)
    with python_twins():
        python = overview.parse_block_in_order(data, layout, python_rejects, lowest, highest)
    return (compiled, compiled_rejects), (python, python_rejects)


@settings(max_examples=800, deadline=None)
@given(odd_blocks(), st.integers(min_value=-5, max_value=2**40), st.integers(min_value=-5, max_value=2**64))
def test_the_compiled_columns_equal_the_python_ones(data, lowest, highest):
    """Odd blocks (leading zeros, gaps, repeats, CR, LF, NUL, tabs, sizes past 2^63) cut in C
    and in Python: the same columns, the same order flag, the same rejects."""
    compiled, python = _both_ways(data, INN, lowest, highest)
    assert compiled == python


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(max_size=60).filter(lambda line: b"\r\n" not in line), max_size=20),
    st.sampled_from([b"\r\n", b"\n", b""]),
)
def test_the_compiled_columns_equal_the_python_ones_on_random_bytes(lines, end):
    data = b"\r\n".join(lines) + end
    for layout in (
        INN,
        DEFAULT_LAYOUT,
        OverviewLayout.from_format(["From:", "Subject:", "Message-ID:", "Date:", ":bytes"]),
    ):
        compiled, python = _both_ways(data, layout, 1, MAX_INT64)
        assert compiled == python


def test_the_compiled_columns_on_edges_of_the_fast_path():
    good = [overview_line(n) for n in (5, 6, 7)]
    cases = [
        block(good),
        block(good)[:-2],  # the last CRLF missing
        block(good)[:-1],  # the last LF missing
        block(good) + b"\n",  # an LF alone at the end
        block(good).replace(b"\t4\t", b"\t4\r\t", 1),  # a CR alone inside a field
        block(good).replace(b"\r\n", b"\n", 1),  # a line ended by an LF alone
        block([good[0], good[1] + b"\textra", good[2]]),  # a line with one field more
        block([good[0] + b"\textra", good[1], good[2]]),
        block([overview_line(5).replace(b"5\t", b"05\t", 1), *good[1:]]),  # leading zero: not consecutive
        block([overview_line(9), overview_line(10), overview_line(11)]),  # lengths differ
        block([overview_line(MAX_INT64 - 1), overview_line(MAX_INT64)]),
        block([overview_line(1).replace(b"1\t", b"00000000000000000000000001\t", 1)]),  # 26 digits, value 1
        block([overview_line(1).replace(b"1\t", b"99999999999999999999\t", 1)]),  # past 2^64
        block([overview_line(1, size=MAX_ARTICLE_BYTES + 1)]),
        block([overview_line(1, message_id=b"")]),
        b"\r\n",
        b"\r\n\r\n",
        b"\t\t\t\t\t\t\r\n",
    ]
    for data in cases:
        for lowest, highest in ((1, MAX_INT64), (6, 6), (5, 7), (8, 4)):
            compiled, python = _both_ways(data, INN, lowest, highest)
            assert compiled == python, data


def test_consecutive_numbers_are_proven_not_assumed():
    lines = [overview_line(n) for n in (19, 2, 200, 22)]  # increasing as text, as many as 19..22
    columns = parse_block(block(lines), INN, new_reject_counts())
    assert columns.numbers == [19, 2, 200, 22]
    lines = [overview_line(10), overview_line(11).replace(b"11\t", b"011\t", 1), overview_line(12)]
    assert parse_block(block(lines), INN, new_reject_counts()).numbers == [10, 11, 12]
