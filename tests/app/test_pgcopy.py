"""COPY text payloads: escaping, NULLs, big integers."""

from app.services.ingest.pgcopy import copy_payload


def test_payload_escapes_and_nulls():
    payload = copy_payload(
        [("int", [1, None, 2**63 - 1]), ("text", ["a\\b", "tab\there", None]), ("text", ["plain", "new\nline\r", ""])]
    )
    assert payload == (b"1\ta\\\\b\tplain\n\\N\ttab\\there\tnew\\nline\\r\n9223372036854775807\t\\N\t\n")
    assert copy_payload([("int", [])]) == b""


def test_payload_round_trips_through_postgres(engine):
    values = [(2**32 + 5, "<a\\b@x>", None), (-(2**63), "", "é ü \u2603"), (0, "t\tab", "x")]
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            cur.execute("CREATE TEMP TABLE t (n bigint, a text, b text)")
            with cur.copy("COPY t FROM STDIN") as copy:
                copy.write(
                    copy_payload(
                        [
                            ("int", [v[0] for v in values]),
                            ("text", [v[1] for v in values]),
                            ("text", [v[2] for v in values]),
                        ]
                    )
                )
            cur.execute("SELECT n, a, b FROM t ORDER BY n")
            assert sorted(cur.fetchall()) == sorted(values)
        conn.rollback()


def test_binary_payload_round_trips_through_postgres(engine):
    """Binary COPY rows: 64-bit and 32-bit integers, NULLs in any column, floats, unix seconds as
    timestamptz, and any text (tabs, backslashes, newlines, empty, non-ASCII); in slices."""
    import datetime

    from app.services.ingest.pgcopy import binary_payload, binary_slices

    columns = [
        ("int8", [2**63 - 1, -(2**63), 2**32 + 5, 0]),
        ("int4", [2**31 - 1, None, -(2**31), 7]),
        ("float4", [93.25, 0.0, None, 100.0]),
        ("timestamp", [1761982047, None, 0, -86400]),
        ("text", ["a\tb\\c\nd", None, "", "é ü \u2603"]),
        ("text", ["<m@x>", "<n@y>", "", "z"]),
    ]
    payload = binary_payload(columns)
    assert b"".join(binary_slices(columns, rows=3)) == payload
    utc = datetime.timezone.utc
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            cur.execute("CREATE TEMP TABLE b (a bigint, i int, f real, t timestamptz, x text, y text)")
            with cur.copy("COPY b FROM STDIN (FORMAT binary)") as copy:
                for piece in binary_slices(columns, rows=3):
                    copy.write(piece)
            cur.execute("SELECT a, i, f, t, x, y FROM b ORDER BY a")
            assert sorted(cur.fetchall(), key=lambda r: r[0]) == sorted(
                [
                    (
                        2**63 - 1,
                        2**31 - 1,
                        93.25,
                        datetime.datetime(2025, 11, 1, 7, 27, 27, tzinfo=utc),
                        "a\tb\\c\nd",
                        "<m@x>",
                    ),
                    (-(2**63), None, 0.0, None, None, "<n@y>"),
                    (2**32 + 5, -(2**31), None, datetime.datetime(1970, 1, 1, tzinfo=utc), "", ""),
                    (0, 7, 100.0, datetime.datetime(1969, 12, 31, tzinfo=utc), "é ü \u2603", "z"),
                ],
                key=lambda r: r[0],
            )
        conn.rollback()


def test_binary_payload_refuses_values_past_their_width():
    import struct

    import pytest

    from app.services.ingest.pgcopy import binary_payload

    with pytest.raises(struct.error):
        binary_payload([("int4", [2**31])])
    with pytest.raises(ValueError):
        binary_payload([("epoch", [1])])


def test_binary_rows_without_nulls_equal_the_null_aware_packing():
    """The common case (no NULL) is packed without scanning for NULLs; a NULL anywhere falls back
    to the value-by-value packing, which gives the same bytes for the same rows."""
    import struct

    import pytest

    from app.services.ingest.pgcopy import _pack_rows, binary_payload, binary_slices

    columns = [
        ("int8", [2**63 - 1, -5]),
        ("text", ["a", "é"]),
        ("int4", [1, 2]),
        ("float4", [1.5, 0.0]),
        ("timestamp", [1761982047, 0]),
        ("text", ["x", ""]),
        ("int8", [3, 4]),
    ]
    assert _pack_rows(columns, scan=False) == _pack_rows(columns, scan=True)
    with_null = [(kind, values[:1] + [None]) for kind, values in columns]
    assert binary_payload(with_null)[19:] == _pack_rows(with_null, scan=True) + b"\xff\xff"
    with pytest.raises(TypeError):
        binary_payload([("text", ["a", 5])])  # not a string
    with pytest.raises(TypeError):
        binary_payload([("text", ["a", b"bytes"])])
    with pytest.raises(struct.error):
        binary_payload([("int8", [1, "2"])])
    with pytest.raises(struct.error):
        binary_payload([("int8", [2**63])])
    # Text given as UTF-8 bytes packs as the same text; anything else than bytes is refused.
    as_bytes = [(kind, [v.encode() for v in values]) if kind == "text" else (kind, values) for kind, values in columns]
    as_bytes = [("utf8" if kind == "text" else kind, values) for kind, values in as_bytes]
    assert _pack_rows(as_bytes, scan=False) == _pack_rows(columns, scan=False)
    assert b"".join(binary_slices(as_bytes, rows=1, nulls=False)) == binary_payload(columns)
    assert binary_payload([("utf8", [b"a", None])]) == binary_payload([("text", ["a", None])])
    for wrong in ("a", 5, [1]):
        with pytest.raises(TypeError):
            b"".join(binary_slices([("utf8", [b"a", wrong])], nulls=False))
    # Where no NULL may be, a None is refused as a wrong value is.
    for kind, values in with_null:
        with pytest.raises((struct.error, TypeError)):
            b"".join(binary_slices([(kind, values)], nulls=False))


def test_binary_rows_with_a_null_in_the_first_column():
    from app.services.ingest.pgcopy import binary_payload

    payload = binary_payload([("int8", [None, 1]), ("text", ["a", None])])
    assert payload[19:] == (
        b"\x00\x02"
        + b"\xff\xff\xff\xff"
        + b"\x00\x00\x00\x01a"
        + b"\x00\x02"
        + b"\x00\x00\x00\x08"
        + (1).to_bytes(8, "big")
        + b"\xff\xff\xff\xff"
        + b"\xff\xff"
    )


# -- the compiled packing (app/services/_copyrows.c) against the Python one ------------------------


def test_the_compiled_packing_is_built_and_used():
    """setup.py builds it on every machine of ours (a C compiler is part of ops/setup's machine);
    pgcopy packs with it."""
    from app.services.ingest import pgcopy

    assert pgcopy._pack_rows_c is not None


_KINDS = ("int8", "int4", "float4", "timestamp", "text", "utf8")


def _values(kind: str, draw_from):
    from hypothesis import strategies as st

    value = {
        "int8": st.integers(-(2**63), 2**63 - 1),
        "int4": st.integers(-(2**31), 2**31 - 1),
        "float4": st.floats(width=32, allow_nan=False),
        "timestamp": st.integers(-(2**63) // 1_000_000 + 946_684_801, (2**63 - 1) // 1_000_000 + 946_684_799),
        "text": st.text(),
        "utf8": st.text().map(str.encode),
    }[kind]
    return st.one_of(st.none(), value) if draw_from else value


def _columns_strategy(nulls: bool):
    from hypothesis import strategies as st

    @st.composite
    def columns(draw):
        kinds = draw(st.lists(st.sampled_from(_KINDS), min_size=1, max_size=7))
        rows = draw(st.integers(0, 12))
        return [(kind, draw(st.lists(_values(kind, nulls), min_size=rows, max_size=rows))) for kind in kinds]

    return columns()


def test_compiled_and_python_packing_give_the_same_bytes():
    """Any columns of any kinds, with and without NULLs, 64-bit extremes, any text (the surrogate-
    free str hypothesis draws, as UTF-8 bytes too)."""
    from hypothesis import given, settings

    from app.services.ingest.pgcopy import _pack_rows_c, _pack_rows_python

    def kinds_values(columns):
        return [kind for kind, _ in columns], [values for _, values in columns]

    @settings(max_examples=400, deadline=None)
    @given(_columns_strategy(nulls=True))
    def with_nulls(columns):
        assert _pack_rows_c(*kinds_values(columns), True) == _pack_rows_python(columns, scan=True)

    @settings(max_examples=400, deadline=None)
    @given(_columns_strategy(nulls=False))
    def without_nulls(columns):
        packed = _pack_rows_python(columns, scan=False)
        assert _pack_rows_c(*kinds_values(columns), False) == packed
        assert _pack_rows_c(*kinds_values(columns), True) == packed

    with_nulls()
    without_nulls()

    @settings(max_examples=200, deadline=None)
    @given(_columns_strategy(nulls=False))
    def without_counts(columns):
        """Without each row's field count: what array_value packs, one column at a time."""
        for column in columns:
            packed = _pack_rows_python([column], scan=False, counts=False)
            assert _pack_rows_c(*kinds_values([column]), False, False) == packed
            assert len(packed) == len(_pack_rows_python([column], scan=False)) - 2 * len(column[1])

    without_counts()


def test_array_values_round_trip_through_postgres(engine):
    """A row of binary array values (array_value): 64-bit and 32-bit integers past 2^32 and at
    their extremes, UTF-8 text (empty, non-ASCII, a comma, a brace, a quote), an empty array; a
    value out of its kind's range or of the wrong type is refused as the store's packing refuses."""
    import struct

    import pytest

    from app.services.ingest.pgcopy import BINARY_HEADER, BINARY_TRAILER, array_value

    big = [2**32 + 5, -(2**63), 2**63 - 1]
    small = [-(2**31), 0, 2**31 - 1]
    texts = [b"<a,b@", "\u00e9 {x}".encode(), b'"', b""]
    fields = [array_value("int8", big), array_value("int4", small), array_value("utf8", texts), array_value("int8", [])]
    row = struct.pack("!h", len(fields)) + b"".join(struct.pack("!i", len(f)) + f for f in fields)
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        with raw.cursor() as cur:
            cur.execute("CREATE TEMP TABLE t (a bigint[], b integer[], c text[], d bigint[])")
            with cur.copy("COPY t FROM STDIN (FORMAT binary)") as copy:
                copy.write(BINARY_HEADER + row + BINARY_TRAILER)
            cur.execute("SELECT a, b, c, d FROM t")
            assert cur.fetchall() == [(big, small, [t.decode() for t in texts], [])]
        conn.rollback()
    with pytest.raises(struct.error):
        array_value("int4", [2**31])
    with pytest.raises(struct.error):
        array_value("int8", [1, "2"])
    with pytest.raises(TypeError):
        array_value("utf8", [b"a", "b"])
    with pytest.raises(ValueError):
        array_value("float4", [1.0])


def test_compiled_packing_refuses_what_the_python_packing_refuses():
    """The same refusals, of the classes the store turns into a malformed batch (struct.error,
    TypeError), for each kind of wrong value, and the caller's mistakes as ValueError."""
    import struct

    import pytest

    from app.services.ingest.pgcopy import _pack_rows_c, _pack_rows_python

    class Index:  # an integer that is not an int, as struct takes it
        def __index__(self):
            return 7

    assert _pack_rows_c(["int8", "int4"], [[Index()], [Index()]], False) == _pack_rows_python(
        [("int8", [7]), ("int4", [7])], scan=False
    )
    assert _pack_rows_c(["float4", "int8"], [[3], [True]], False) == _pack_rows_python(
        [("float4", [3]), ("int8", [True])], scan=False
    )
    wrong = [
        ("int8", 2**63),
        ("int8", -(2**63) - 1),
        ("int8", "1"),
        ("int8", 1.5),
        ("int4", 2**31),
        ("int4", -(2**31) - 1),
        ("timestamp", 2**62),
        ("timestamp", -(2**62)),
        ("timestamp", 2**64),
        ("float4", "x"),
        ("float4", None),
        ("int8", None),
        ("int4", None),
        ("timestamp", None),
        ("text", None),
        ("utf8", None),
        ("text", b"bytes"),
        ("text", 5),
        ("utf8", "str"),
        ("utf8", [1]),
        ("utf8", 5),
    ]
    for kind, value in wrong:
        with pytest.raises((struct.error, TypeError)):
            _pack_rows_python([(kind, [value])], scan=False)
        with pytest.raises((struct.error, TypeError)):
            _pack_rows_c([kind], [[value]], False)
    for kind, value in wrong[:10]:  # with NULLs allowed, the same numbers are still refused
        with pytest.raises((struct.error, TypeError)):
            _pack_rows_c([kind], [[None, value]], True)
    with pytest.raises(UnicodeEncodeError):
        _pack_rows_c(["text"], [["\udc80"]], False)
    with pytest.raises(ValueError):
        _pack_rows_c(["epoch"], [[1]], False)
    with pytest.raises(ValueError):
        _pack_rows_c(["int8", "int8"], [[1, 2], [1]], False)
    with pytest.raises(ValueError):
        _pack_rows_c([], [], False)


def test_compiled_packing_packs_the_columns_as_they_were_when_called():
    """A value's __index__ and a column's __iter__ are Python code, which could change a column
    while it is packed: the packing works on copies of the columns (tuples of their values), so
    it packs them as they were, never reads or writes past what it sized."""
    from app.services.ingest.pgcopy import _pack_rows_c, _pack_rows_python

    texts = ["a"] * 3

    class Grows:
        def __index__(self):
            texts[2] = "a much longer text than was sized"
            return 1

    packed = _pack_rows_c(["int8", "text"], [[Grows(), 1, 2], texts], False)
    assert packed == _pack_rows_python([("int8", [1, 1, 2]), ("text", ["a"] * 3)], scan=False)

    first = ["a"] * 1000

    class Clears:  # opened after `first`, it empties it
        def __iter__(self):
            first.clear()
            return iter([1] * 1000)

    packed = _pack_rows_c(["text", "int8"], [first, Clears()], False)
    assert packed == _pack_rows_python([("text", ["a"] * 1000), ("int8", [1] * 1000)], scan=False)


def test_both_packings_refuse_columns_of_different_lengths_and_unknown_kinds():
    import pytest

    from app.services.ingest.pgcopy import _pack_rows_c, _pack_rows_python

    with pytest.raises(ValueError):
        _pack_rows_python([("int8", [1, 2]), ("int8", [1])], scan=False)  # zip would drop a row
    with pytest.raises(ValueError):
        _pack_rows_c(["int8", "int8"], [[1, 2], [1]], False)
    for kind in ("int8\0junk", "INT8", "int"):
        with pytest.raises(ValueError):
            _pack_rows_c([kind], [[1]], False)
        with pytest.raises(ValueError):
            _pack_rows_python([(kind, [1])], scan=False)


def test_compiled_packing_takes_integer_arrays_as_lists():
    """Integer columns given as arrays (as _msgcolumns reads them) pack as the same lists do; an
    array of another kind, or a value past an int4 column's width, is refused."""
    import struct
    from array import array

    import pytest

    from app.services.ingest.pgcopy import _pack_rows_c, _pack_rows_python

    big = [2**63 - 1, -(2**63), 2**32 + 5, 0]
    small = [2**31 - 1, -(2**31), 7, 0]
    texts = [b"<a@x>", b"", "é".encode(), b"z"]
    expected = _pack_rows_python([("int8", big), ("int4", small), ("int8", small), ("utf8", texts)], scan=False)
    for scan in (False, True):
        assert (
            _pack_rows_c(
                ["int8", "int4", "int8", "utf8"], [array("q", big), array("i", small), array("i", small), texts], scan
            )
            == expected
        )
        assert _pack_rows_c(["int4"], [array("q", small)], scan) == _pack_rows_python([("int4", small)], scan=False)
    with pytest.raises(struct.error):
        _pack_rows_c(["int4"], [array("q", [2**31])], False)
    for wrong in (array("h", [1]), array("d", [1.0]), memoryview(b"12345678").cast("B")):
        with pytest.raises(TypeError):
            _pack_rows_c(["int8"], [wrong], False)
    with pytest.raises(ValueError):
        _pack_rows_c(["int8", "int8"], [array("q", [1, 2]), [1]], False)
    with pytest.raises(TypeError):  # an array is no text
        _pack_rows_c(["utf8"], [array("q", [1])], False)
