"""The batch codec: msgpack and JSON, gzip or not, both directions, size cap, malformed bodies."""

import gzip
import json
import tracemalloc
import zlib

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge.digest.batch import (
    JSON_TYPE,
    MSGPACK_TYPE,
    TABLES,
    BatchFormatError,
    BatchTooLarge,
    decode_batch,
    encode_batch,
    validate_batch,
)
from edge.digest.gather import Gatherer
from edge.digest.rules import RuleSet
from tests.edge.helpers import as_received, block, overview_line

FORMATS = [("msgpack", True), ("msgpack", False), ("json", True), ("json", False)]
INT64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)


def small_batch() -> dict:
    gatherer = Gatherer(
        "alt.binaries.test", rules=RuleSet.from_data([{"name": "r", "field": "subject", "pattern": "zzz"}])
    )
    gatherer.add_chunk(
        2**40,
        2**40 + 9,
        [
            block(
                overview_line(2**40 + n, f'Rel [{n % 2 + 1}/2] - "Rel.part{n % 2 + 1}.rar" yEnc ({n // 2 + 1}/5)')
                for n in range(9)
            )
        ],
    )
    return gatherer.build()


@pytest.mark.parametrize(("fmt", "compressed"), FORMATS)
def test_round_trip(fmt, compressed):
    batch = small_batch()
    body, content_type, encoding = encode_batch(batch, fmt=fmt, gzip=compressed)
    assert content_type == (MSGPACK_TYPE if fmt == "msgpack" else JSON_TYPE)
    assert encoding == ("gzip" if compressed else None)
    assert decode_batch(body, content_type, encoding) == as_received(batch)
    assert batch["fragments"]["message_id"][0] == b"<1099511627776@example.net>"  # bytes until encoded
    assert (
        batch["rules"][""][1] == 2
        and batch["rules"]["r"] == [0, 0, 0, 0]
        and batch["missing"] == [[2**40 + 9, 2**40 + 9]]
    )


def test_gzip_bodies_are_standard_gzip():
    body, _, _ = encode_batch(small_batch(), fmt="json")
    assert json.loads(gzip.decompress(body))["version"] == 1


def _column(kind: str):
    values = {"int": INT64, "str": st.text(max_size=20)}[kind.rstrip("?")]
    return st.none() | values if kind.endswith("?") else values


@st.composite
def batches(draw):
    def table(columns):
        rows = draw(st.integers(min_value=0, max_value=6))
        return {name: draw(st.lists(_column(kind), min_size=rows, max_size=rows)) for name, kind in columns.items()}

    first = draw(INT64)
    return {
        "version": 1,
        "group": draw(st.text(min_size=1, max_size=30)),
        "first": first,
        "last": draw(st.integers(min_value=first, max_value=2**63 - 1)),
        "chunks": draw(st.lists(st.lists(INT64, min_size=4, max_size=4), max_size=4)),
        "missing": draw(st.lists(st.lists(INT64, min_size=2, max_size=2), max_size=4)),
        **{name: table(columns) for name, columns in TABLES.items()},
        "rules": {
            "": draw(st.lists(INT64, min_size=4, max_size=4)),
            **draw(st.dictionaries(st.text(max_size=10), st.lists(INT64, min_size=4, max_size=4), max_size=3)),
        },
        "stats": {
            "lines": draw(INT64),
            "bad_dates": draw(INT64),
            "rejected": draw(st.dictionaries(st.text(max_size=10), INT64, max_size=3)),
        },
    }


@settings(max_examples=200, deadline=None)
@given(batches(), st.sampled_from(FORMATS))
def test_any_batch_survives_a_round_trip(batch, fmt):
    body, content_type, encoding = encode_batch(batch, fmt=fmt[0], gzip=fmt[1])
    assert decode_batch(body, content_type, encoding) == batch


def test_a_gzip_bomb_is_refused_without_inflating_it_whole():
    bomb = gzip.compress(b"\0" * (64 * 1024 * 1024), compresslevel=9)  # 64 KiB on the wire
    cap = 1024 * 1024
    tracemalloc.start()
    with pytest.raises(BatchTooLarge):
        decode_batch(bomb, MSGPACK_TYPE, "gzip", max_decoded=cap)
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert peak < 4 * cap


def test_too_large_plain_body():
    body, content_type, _ = encode_batch(small_batch(), gzip=False)
    with pytest.raises(BatchTooLarge):
        decode_batch(body, content_type, None, max_decoded=len(body) - 1)
    assert decode_batch(body, content_type, None, max_decoded=len(body))["version"] == 1


@pytest.mark.parametrize(
    ("body", "content_type", "encoding"),
    [
        (b"\x00\x01garbage", MSGPACK_TYPE, None),
        (b"{not json", JSON_TYPE, None),
        (b'{"version": NaN}', JSON_TYPE, None),
        (b"\x1f\x8b\x08\x00garbage", MSGPACK_TYPE, "gzip"),
        (gzip.compress(msgpack.packb({"version": 1}))[:-6], MSGPACK_TYPE, "gzip"),
        (gzip.compress(msgpack.packb(small_batch())) + b"tail", MSGPACK_TYPE, "gzip"),
        (msgpack.packb(small_batch()), "text/plain", None),
        (msgpack.packb(small_batch()), MSGPACK_TYPE, "br"),
        (msgpack.packb([1, 2]), MSGPACK_TYPE, None),
        (b'{"version": "\xff"}', JSON_TYPE, None),
    ],
)
def test_malformed_bodies(body, content_type, encoding):
    with pytest.raises(BatchFormatError):
        decode_batch(body, content_type, encoding)


@pytest.mark.parametrize(
    "spoil",
    [
        lambda b: b.update(version=2),
        lambda b: b.update(group=""),
        lambda b: b.update(first=b["last"] + 1),
        lambda b: b.update(last=2**63),
        lambda b: b["files"].pop("name"),
        lambda b: b["files"]["key"].append(1),
        lambda b: b["fragments"]["article"].__setitem__(0, True),
        lambda b: b["fragments"]["article"].__setitem__(0, "1"),
        lambda b: b["fragments"]["message_id"].__setitem__(0, None),
        lambda b: b["releases"]["file_count"].__setitem__(0, 2**64),
        lambda b: b["fragments"]["part"].__setitem__(0, True),
        lambda b: b["fragments"]["part"].__setitem__(0, False),
        lambda b: b["fragments"]["part"].__setitem__(0, None),
        lambda b: b["fragments"]["part"].__setitem__(0, 1.0),
        lambda b: b["fragments"]["bytes"].__setitem__(0, -(2**63) - 1),
        lambda b: b["files"]["date"].__setitem__(0, 2**63),
        lambda b: (b["files"]["date"].__setitem__(0, None), b["files"]["index"].__setitem__(0, False)),
        lambda b: b["files"]["name"].__setitem__(0, b"x.rar"),
        lambda b: b["chunks"].append([1, 2, 3, True]),
        lambda b: b["rules"][""].__setitem__(0, 2**63),
        lambda b: b["stats"]["rejected"].update(x=None),
        lambda b: b["chunks"].append([1, 2, 3]),
        lambda b: b["rules"].pop(""),
        lambda b: b["rules"].update(x=[1, 2, 3]),
        lambda b: b["stats"].pop("rejected"),
    ],
)
def test_structure_is_checked(spoil):
    batch = small_batch()
    spoil(batch)
    with pytest.raises(BatchFormatError):
        validate_batch(batch)


def test_the_64_bit_bounds_and_nulls_are_accepted():
    batch = as_received(small_batch())
    batch["fragments"]["article"][0] = 2**63 - 1
    batch["fragments"]["file"][0] = -(2**63)
    batch["files"]["date"][0] = None
    batch["files"]["index"][0] = -(2**63)
    batch["stats"]["rejected"]["x"] = 2**63 - 1
    assert validate_batch(batch) is batch


def test_empty_strings_and_nulls_survive():
    batch = small_batch()
    batch["files"]["name"][0] = None
    batch["files"]["subject"][0] = ""
    batch["releases"]["name"][0] = ""
    for fmt, compressed in FORMATS:
        body, content_type, encoding = encode_batch(batch, fmt=fmt, gzip=compressed)
        decoded = decode_batch(body, content_type, encoding)
        assert decoded["files"]["name"][0] is None and decoded["files"]["subject"][0] == "" and "" in decoded["rules"]


def test_unknown_format():
    with pytest.raises(ValueError):
        encode_batch(small_batch(), fmt="xml")
    assert zlib.decompress(encode_batch(small_batch())[0], 31)


def test_the_kept_packer_packs_as_packb_does(monkeypatch):
    from edge.digest import batch as batch_module

    batches = [small_batch(), as_received(small_batch()), {"x": [1, 2**63 - 1, b"id", None]}]
    for batch in batches + batches:
        assert encode_batch(batch, gzip=False)[0] == msgpack.packb(batch, use_bin_type=False)
        assert gzip.decompress(encode_batch(batch)[0]) == msgpack.packb(batch, use_bin_type=False)
    with pytest.raises(TypeError):
        encode_batch({"x": object()})  # fails part way: the next one starts clean
    assert encode_batch(batches[0], gzip=False)[0] == msgpack.packb(batches[0], use_bin_type=False)
    with batch_module._packer_lock:  # another thread has it: packed the usual way
        assert encode_batch(batches[1], gzip=False)[0] == msgpack.packb(batches[1], use_bin_type=False)
    assert batch_module._packer is not None
    batch_module.clear_packer()  # as in a new process
    assert batch_module._packer is None
    assert encode_batch(batches[0], gzip=False)[0] == msgpack.packb(batches[0], use_bin_type=False)
    monkeypatch.setattr(batch_module, "_PACKER_KEPT_MAX", 10)
    encode_batch(batches[0])
    assert batch_module._packer is None  # a buffer grown past the limit is let go
    assert encode_batch(batches[0], gzip=False)[0] == msgpack.packb(batches[0], use_bin_type=False)
