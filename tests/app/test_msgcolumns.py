"""A batch's msgpack columns read and checked in C (app/services/_msgcolumns.c): the same values
msgpack reads, and exactly the values the Python checks refuse refused."""

import struct
from array import array

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from app.services import _msgcolumns
from edge.digest.batch import BatchFormatError, check_table

INT64 = st.integers(-(2**63), 2**63 - 1)


def test_the_compiled_reader_is_built():
    """setup.py builds it on every machine of ours; StoredBatch reads the fragments with it."""
    from app.services.ingest import checks, decode, hosts

    assert checks._msgcolumns is decode._msgcolumns is hosts._msgcolumns is _msgcolumns


def whole(data: bytes, *args):
    return _msgcolumns.ints(data, 0, len(data), *args)


@settings(max_examples=300, deadline=None)
@given(st.lists(INT64, max_size=40))
def test_ints_read_what_msgpack_reads(values):
    data = msgpack.packb(values)
    assert whole(data, 64) == array("q", values)
    assert whole(data, 64).typecode == "q"
    if all(-(2**31) <= v < 2**31 for v in values):
        assert whole(data, 32) == array("i", values)
    else:
        with pytest.raises(ValueError, match="32 bits"):
            whole(data, 32)


def test_ints_take_every_msgpack_integer_encoding():
    """Each width, signed or not, whatever the value's own size (a packer may write 1 as int64)."""
    encodings = [
        b"\x05",
        b"\xff",
        b"\xcc\x05",
        b"\xcd\x00\x05",
        b"\xce\x00\x00\x00\x05",
        b"\xcf" + (5).to_bytes(8, "big"),
        b"\xd0\xfb",
        b"\xd1\xff\xfb",
        b"\xd2\xff\xff\xff\xfb",
        b"\xd3" + (-5).to_bytes(8, "big", signed=True),
        b"\xcf" + (2**63 - 1).to_bytes(8, "big"),
        b"\xd3" + (-(2**63)).to_bytes(8, "big", signed=True),
    ]
    data = b"\xdc" + len(encodings).to_bytes(2, "big") + b"".join(encodings)
    assert list(whole(data, 64)) == msgpack.unpackb(data) == [5, -1, 5, 5, 5, 5, -5, -5, -5, -5, 2**63 - 1, -(2**63)]
    big = b"\xdd" + (70000).to_bytes(4, "big") + b"\x01" * 70000  # array32
    assert whole(big, 64) == array("q", [1] * 70000)


@pytest.mark.parametrize(
    "value, message",
    [
        (b"\xcf" + (2**63).to_bytes(8, "big"), "outside 64 bits"),  # uint64 past int64
        (b"\xc0", "integers"),
        (b"\xc2", "integers"),
        (b"\xc3", "integers"),  # nil, false, true
        (b"\xcb" + struct.pack(">d", 1.0), "integers"),
        (b"\xa1a", "integers"),
        (b"\x90", "integers"),
    ],
)
def test_ints_refuse_what_is_not_a_64_bit_integer(value, message):
    data = b"\x92\x01" + value
    with pytest.raises(ValueError, match=message):
        whole(data, 64)
    with pytest.raises(BatchFormatError):  # as the Python check does
        check_table("t", {"c": msgpack.unpackb(data)}, {"c": "int"})


@pytest.mark.parametrize(
    "data",
    [
        b"\x93\x01\x02",  # one value short
        b"\x92\x01\xcd\x00",  # a value cut short
        b"\xdd\x7f\xff\xff\xff\x01",  # a length far past the data
        b"\x01",  # not an array
        b"\x81\xa1a\x01",  # a map
        b"\x91\x01\x02",  # more than the array in the span
        b"",
    ],
)
def test_ints_refuse_a_malformed_column(data):
    with pytest.raises(ValueError):
        whole(data, 64)


def test_a_column_is_read_from_its_span_only():
    data = msgpack.packb({"a": [1, 2], "b": ["x"]})
    unpacker = msgpack.Unpacker()
    unpacker.feed(data)
    unpacker.read_map_header()
    unpacker.unpack()
    start = unpacker.tell()
    unpacker.skip()
    end = unpacker.tell()
    assert _msgcolumns.ints(data, start, end, 64) == array("q", [1, 2])
    assert _msgcolumns.ints(memoryview(data), start, end, 64) == array("q", [1, 2])
    for bad in ((start, end + 1), (start, len(data) + 1), (-1, end), (end, start)):
        with pytest.raises(ValueError):
            _msgcolumns.ints(data, *bad, 64)
    with pytest.raises(ValueError):
        _msgcolumns.ints(data, start, end, 16)


def python_takes(text: bytes) -> bool:
    """What StoredBatch's Python check takes as text: UTF-8 (strict) without NUL."""
    try:
        text.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return b"\0" not in text


UTF8_EDGES = [
    b"",
    b"a",
    b"\0",
    b"a\0",
    b"abcdefgh\0",
    b"\xc2\x80",
    b"\xc1\xbf",
    b"\xe0\xa0\x80",
    b"\xe0\x9f\xbf",
    b"\xed\x9f\xbf",
    b"\xed\xa0\x80",
    b"\xef\xbf\xbf",
    b"\xf0\x90\x80\x80",
    b"\xf0\x8f\xbf\xbf",
    b"\xf4\x8f\xbf\xbf",
    b"\xf4\x90\x80\x80",
    b"\xf5\x80\x80\x80",
    b"\xc3",
    b"\xe2\x82",
    b"\x80",
    b"\xc3\x28",
    "é ü \u2603 \U0001f600".encode(),
    b"12345678\xc3\xa9",
    b"\xff" * 9,
]


@settings(max_examples=500, deadline=None)
@given(
    st.lists(
        st.one_of(st.binary(max_size=24), st.text(max_size=12).map(str.encode), st.sampled_from(UTF8_EDGES)), max_size=8
    ),
    st.booleans(),
)
def test_texts_take_exactly_what_the_python_check_takes(values, as_bin):
    data = msgpack.packb(values, use_bin_type=as_bin)  # str (as the edge writes) or bin
    if all(map(python_takes, values)):
        assert _msgcolumns.texts(data, 0, len(data), True) == values
        assert _msgcolumns.texts(data, 0, len(data), False) == len(values)
    else:
        with pytest.raises(ValueError, match="UTF-8 strings without NUL"):
            _msgcolumns.texts(data, 0, len(data), True)


def test_texts_take_every_msgpack_string_encoding_and_nothing_else():
    long = "x" * 70000
    values = ["", "a" * 31, "b" * 32, "c" * 300, long]
    data = msgpack.packb(values)  # fixstr, str8, str16, str32
    assert _msgcolumns.texts(data, 0, len(data), True) == [v.encode() for v in values]
    data = msgpack.packb([v.encode() for v in values], use_bin_type=True)  # bin8, bin16, bin32
    assert _msgcolumns.texts(data, 0, len(data), True) == [v.encode() for v in values]
    for wrong in ([None], [1], [["a"]], [True]):
        data = msgpack.packb(["a", *wrong])
        with pytest.raises(ValueError, match="strings"):
            _msgcolumns.texts(data, 0, len(data), True)
    with pytest.raises(ValueError):
        _msgcolumns.texts(b"\x91\xa5abc", 0, 5, True)  # a string cut short


@settings(max_examples=300, deadline=None)
@given(st.lists(INT64, max_size=30), st.lists(INT64, min_size=1, max_size=30), st.data())
def test_bounds_and_among_answer_as_min_max_and_a_set(keys, others, data):
    values = data.draw(st.lists(st.sampled_from(keys + others), max_size=40))
    column = array("q", values)
    assert _msgcolumns.bounds(column) == ((min(values), max(values)) if values else None)
    assert _msgcolumns.among(column, array("q", keys)) == set(keys).issuperset(values)
    if all(-(2**31) <= v < 2**31 for v in values):
        assert _msgcolumns.bounds(array("i", values)) == _msgcolumns.bounds(column)
        assert _msgcolumns.ascending(array("i", values)) == _msgcolumns.ascending(column)
    assert _msgcolumns.ascending(column) == all(a < b for a, b in zip(values, values[1:]))
    ascending = sorted(set(values))
    assert _msgcolumns.ascending(array("q", ascending)) is True


def test_among_and_bounds_take_only_integer_arrays():
    assert _msgcolumns.among(array("q", [5, 5, 5, 7]), array("q", [7, 5])) is True
    assert _msgcolumns.among(array("q", [5, 5, 6]), array("q", [5])) is False
    assert _msgcolumns.among(array("q", []), array("q", [])) is True
    assert _msgcolumns.among(array("q", [1]), array("q", [])) is False
    assert _msgcolumns.ascending(array("q", [-(2**63), 0, 2**32 + 1, 2**63 - 1])) is True
    assert _msgcolumns.ascending(array("q", [2**32 + 1, 2**32 + 1])) is False
    assert _msgcolumns.ascending(array("q", [])) is True
    for wrong in ([1, 2], array("d", [1.0]), b"12345678", array("h", [1])):
        with pytest.raises(TypeError):
            _msgcolumns.bounds(wrong)
        with pytest.raises(TypeError):
            _msgcolumns.ascending(wrong)
        with pytest.raises(TypeError):
            _msgcolumns.among(wrong, array("q", [1]))


def test_among_answers_for_keys_chosen_to_collide():
    """Keys a body could choose to land in one slot of a table placed by a fixed public hash
    (multiples of the inverse of the golden-ratio constant: all in slot 0 of a multiplicative
    hash, which made 160,000 of them take seconds): among places keys by a keyed mix (a random
    seed a process) and gives up to a set should probes still run long; its answer is the set's."""
    inverse = pow(0x9E3779B97F4A7C15, -1, 2**64)
    keys = [(i * inverse) % 2**64 for i in range(1, 160_001)]
    keys = [k - 2**64 if k >= 2**63 else k for k in keys]
    present = array("q", keys[::7] + keys[:1000])
    assert _msgcolumns.among(present, array("q", keys)) in (True, None)
    assert _msgcolumns.among(array("q", [*keys[:10], 12345]), array("q", keys)) in (False, None)


def test_a_fragment_file_check_falls_back_to_the_set_when_among_gives_up(monkeypatch):
    from app.services.ingest import checks

    class GivesUp:
        def __getattr__(self, name):
            return getattr(_msgcolumns, name)

        @staticmethod
        def among(values, keys):
            return None

    monkeypatch.setattr(checks, "_msgcolumns", GivesUp())
    assert checks._among(array("q", [1, 2, 2]), {1, 2}, [1, 2]) is True
    assert checks._among(array("q", [1, 3]), {1, 2}, [1, 2]) is False


_IDS = st.lists(
    st.one_of(
        st.sampled_from(
            [
                "<a@h.example>",
                "<b@h.example>",
                "<a@b@two.example>",
                "<no-at>",
                "<@>",
                "@lead>",
                "<x@>",
                "<é ü@hôte.example>",
                "",
            ]
        ),
        st.text(alphabet="ab@<>.é", max_size=8),
    ).map(str.encode),
    max_size=30,
)


@settings(max_examples=300, deadline=None)
@given(_IDS)
def test_split_hosts_cuts_each_message_id_before_its_last_at_as_the_python_twin(ids):
    """A message-id is its local part and its host (from its last '@' on, b'' without one);
    hosts are numbered in the order first seen, the same in C and in Python."""
    from app.services.ingest import hosts as hosts_module

    locals_, numbers, hosts = _msgcolumns.split_hosts(ids)
    assert [local + hosts[n] for local, n in zip(locals_, numbers)] == ids
    for local, n in zip(locals_, numbers):
        assert b"@" not in hosts[n][1:] and (hosts[n][:1] == b"@" or hosts[n] == b"")
        assert hosts[n] or b"@" not in local
    assert len(set(hosts)) == len(hosts) and numbers.typecode == "i"
    assert [hosts[n] for n in sorted(set(numbers), key=list(numbers).index)] == hosts
    compiled = hosts_module.MessageHosts(*_msgcolumns.split_hosts(ids))
    import pytest

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(hosts_module, "_msgcolumns", None)
        assert hosts_module.split_message_ids(ids) == compiled  # the Python twin
        assert hosts_module.split_message_ids([i.decode() for i in ids]) == compiled


def test_split_hosts_and_take_refuse_what_is_not_theirs():
    with pytest.raises(TypeError):
        _msgcolumns.split_hosts([b"<a@b>", "<str@b>"])
    assert _msgcolumns.take(array("i", [1, 0, 1]), array("i", [7, 9])) == array("i", [9, 7, 9])
    with pytest.raises(IndexError):
        _msgcolumns.take(array("i", [2]), array("i", [7, 9]))
    with pytest.raises(IndexError):
        _msgcolumns.take(array("i", [-1]), array("i", [7, 9]))
    with pytest.raises(TypeError):
        _msgcolumns.take(array("q", [0]), array("i", [7]))
