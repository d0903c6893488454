"""The multi-line reply reader (RFC 3977 3.1.1) on replies cut into pieces anywhere: every line
comes out once, unstuffed, the terminator is found wherever the cuts fall, and what follows
it is kept."""

from __future__ import annotations

from contextlib import nullcontext

from hypothesis import given, settings
from hypothesis import strategies as st

from edge.digest import nntp
from edge.digest.nntp import _DotTerminatedBody
from tests.edge.helpers import python_twins

# Lines as servers send them: mostly overview-like, some starting with dots (stuffed on the wire).
line_text = st.one_of(
    st.from_regex(rb"\A[0-9]{1,12}\t[^\r\n]{0,40}\Z"),
    st.from_regex(rb"\A\.{1,3}[^\r\n]{0,10}\Z"),
    st.just(b""),
)


def wire(lines: list[bytes]) -> bytes:
    stuffed = [b"." + line if line.startswith(b".") else line for line in lines]
    return b"".join(line + b"\r\n" for line in stuffed) + b".\r\n"


def read(data: bytes, cuts: list[int]) -> tuple[bytes, bytes]:
    body, out = _DotTerminatedBody(), []
    points = sorted({0, len(data), *[c % (len(data) + 1) for c in cuts]})
    for a, b in zip(points, points[1:]):
        if body.done:
            break
        out.append(body.feed(data[a:b]))
        if body.done:
            return b"".join(out), body.rest + data[b:]
    raise AssertionError("no terminator found")


@settings(max_examples=400, deadline=None)
@given(
    st.lists(line_text, max_size=30),
    st.lists(st.integers(min_value=0), max_size=12),
    st.sampled_from([b"", b"211 next reply\r\n"]),
)
def test_every_line_comes_out_once_unstuffed_wherever_the_reply_is_cut(lines, cuts, after):
    for twins in (False, True):  # the dot lines found in C (edge/digest/_overview.c), then in Python
        with python_twins() if twins else nullcontext():
            got, rest = read(wire(lines) + after, cuts)
        assert got == b"".join(line + b"\r\n" for line in lines)
        assert rest == after


@settings(max_examples=400, deadline=None)
@given(st.binary(max_size=60).map(lambda raw: raw.replace(b"a", b"\n").replace(b"b", b".")))
def test_the_compiled_dot_search_equals_the_python_one(data):
    assert nntp._dot_line_c is not None
    assert nntp._dot_line_c(data) == nntp._dot_line_python(data)


@settings(max_examples=400, deadline=None)
@given(
    st.binary(max_size=80).map(lambda raw: raw.replace(b"a", b"\n").replace(b"b", b"\r")),
    st.integers(min_value=0, max_value=12),
)
def test_the_compiled_long_line_search_equals_the_python_one(data, longest):
    assert nntp._compiled is not None
    assert nntp._compiled.long_line(data, longest) == nntp._long_line_python(data, longest)


# Lines of any length, some past MAX_KEPT_LINE (as anyone can post): cut to it, the others whole.
long_lines = st.one_of(
    line_text,
    st.builds(
        lambda head, n, c: head + c * n,
        st.sampled_from([b"1\t", b".", b""]),
        st.integers(0, 3 * nntp.MAX_KEPT_LINE),
        st.sampled_from([b"x", b".", b"\r"]),
    ),
)


def kept(line: bytes) -> bytes:
    """A line as the reader gives it: cut to MAX_KEPT_LINE as it came on the wire (a line starting
    with a dot has one more there)."""
    stuffed = b"." + line if line.startswith(b".") else line
    cut = stuffed[: nntp.MAX_KEPT_LINE]
    return cut[1:] if line.startswith(b".") else cut


@settings(max_examples=150, deadline=None)
@given(st.lists(long_lines, max_size=8), st.lists(st.integers(min_value=0), max_size=12))
def test_lines_past_the_kept_length_are_cut_wherever_the_reply_is_cut(lines, cuts):
    for twins in (False, True):
        with python_twins() if twins else nullcontext():
            got, rest = read(wire(lines), cuts)
        assert got == b"".join(kept(line) + b"\r\n" for line in lines)
        assert rest == b""


def test_an_empty_reply_and_a_terminator_split_over_three_pieces():
    assert read(b".\r\n", []) == (b"", b"")
    data = wire([b"1\tsubject", b".hidden", b"2\tmore"])
    body = _DotTerminatedBody()
    pieces = [data[:-4], data[-4:-2], data[-2:]]
    out = b"".join(body.feed(piece) for piece in pieces)
    assert body.done and out == b"1\tsubject\r\n.hidden\r\n2\tmore\r\n"


def test_a_piece_without_a_line_end_is_held_back_whole():
    # A piece like this must not give its first byte as a line of its own (the property test found
    # such a case): article 123 would then come out as a bad line "1" and an article 23.
    body = _DotTerminatedBody()
    assert body.feed(b"123\tlong subj") == b""
    assert body.feed(b"ect\r\n.\r\n") == b"123\tlong subject\r\n" and body.done
