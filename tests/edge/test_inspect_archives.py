"""edge.inspect.archives on real archives (RAR from rarfile's test files, 7z and ZIP made with
7-Zip: tests/edge/data/inspect/README.md) and on hostile ones: every prefix of every sample, bytes
flipped at random, and headers crafted with absurd sizes and counts read without an exception,
in bounded time, with what was malformed counted."""

from __future__ import annotations

import random
import struct
import subprocess
import time
import zlib
from pathlib import Path

import pytest

from edge.inspect import archives
from edge.inspect.archives import archive_kind, read_archive

DATA = Path(__file__).parent / "data" / "inspect"
FILM = "The.Film.2019.1080p.BluRay.x264-GRP.mkv"

# sample: (kind, encrypted headers, complete, [(name, size, encrypted)], password level)
SAMPLES = {
    "rar3-comment-psw.rar": ("rar4", False, True, [("file1.txt", 0, True), ("file2.txt", 0, True)], 1),
    "rar3-comment-hpsw.rar": ("rar4", True, False, [], 1),
    "rar202-comment-psw.rar": ("rar4", False, False, [("FILE1.TXT", 7, True), ("FILE2.TXT", 7, True)], 1),
    "rar5-psw.rar": ("rar5", False, True, [("stest1.txt", 2048, True), ("stest2.txt", 2048, True)], 1),
    "rar5-hpsw.rar": ("rar5", True, False, [], 1),
    "rar5-solid.rar": ("rar5", False, True, [("stest1.txt", 2048, False), ("stest2.txt", 2048, False)], 0),
    "unicode.rar": ("rar4", False, True, [("уииоотивл.txt", 2, False), ("𝐀𝐁𝐁𝐂.txt", 2, False)], 0),
    "unicode2.rar": ("rar4", False, True, [("𝐀𝐁𝐁𝐂.txt", 2, False), ("уииоотивл.txt", 2, False)], 0),
    "rar3-vols.part1.rar": ("rar4", False, False, [("vols/bigfile.txt", 205000, False)], 0),
    "rar5-vols.part1.rar": ("rar5", False, False, [("vols/bigfile.txt", 205000, False)], 0),
    "rar3-old.r00": ("rar4", False, False, [("vols/bigfile.txt", 205000, False)], 0),
    "7z-plain.7z": (
        "7z",
        False,
        True,
        [(FILM, 144, False), ("Ünïcödé name.txt", 3, False), ("setup.exe", 9, False)],
        0,
    ),
    "7z-plain-header.7z": ("7z", False, True, [("Inner.Archive.rar", 5, False), (FILM, 144, False)], 2),
    "7z-encrypted-files.7z": ("7z", False, True, [(FILM, 144, True), ("setup.exe", 9, True)], 1),
    "7z-encrypted-headers.7z": ("7z", True, False, [], 1),
    "7z-volumes.7z.001": ("7z", False, False, [], 0),
    "zip-plain.zip": (
        "zip",
        False,
        True,
        [(FILM, 144, False), ("Ünïcödé name.txt", 3, False), ("setup.exe", 9, False)],
        0,
    ),
    "zip-zipcrypto.zip": ("zip", False, True, [("Inner.Archive.rar", 5, True), (FILM, 144, True)], 1),
    "zip-aes.zip": ("zip", False, True, [(FILM, 144, True)], 1),
}


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_samples_read_as_their_makers_list_them(name):
    kind, encrypted_headers, complete, files, password = SAMPLES[name]
    info = read_archive((DATA / name).read_bytes())
    assert info is not None and info.kind == kind
    assert info.encrypted_headers is encrypted_headers and info.complete is complete
    assert sorted((f.name, f.size, f.encrypted) for f in info.files) == sorted(files)
    assert info.password == password and info.malformed == {}


def test_volumes_say_so():
    first = read_archive((DATA / "rar3-vols.part1.rar").read_bytes())
    assert (first.volume, first.first_volume) == (True, True)
    second = read_archive((DATA / "rar3-old.r00").read_bytes())
    assert (second.volume, second.first_volume) == (True, False)  # the file continues from the .rar
    rar5 = read_archive((DATA / "rar5-vols.part1.rar").read_bytes())
    assert (rar5.volume, rar5.first_volume) == (True, True)
    single = read_archive((DATA / "rar5-solid.rar").read_bytes())
    assert (single.volume, single.solid) == (False, True)


def test_a_7z_header_at_the_end_is_read_from_the_tail_given():
    first = (DATA / "7z-volumes.7z.001").read_bytes()
    last = (DATA / "7z-volumes.7z.003").read_bytes()
    alone = read_archive(first)
    assert alone.headers_at_end and not alone.header_read and alone.files == []
    assert alone.header_offset > len(first) and alone.header_size > 0
    both = read_archive(first, tail=last, tail_offset=2 * 4096)
    assert both.header_read and both.complete
    assert [(f.name, f.size, f.encrypted) for f in both.files] == [("big.bin", 9000, False)]


def test_executables_inside_are_named():
    assert read_archive((DATA / "7z-plain.7z").read_bytes()).executables == ["setup.exe"]
    assert read_archive((DATA / "zip-aes.zip").read_bytes()).executables == []
    assert archives.is_executable("Setup.EXE") and archives.is_executable("x.lnk") and not archives.is_executable("exe")


def test_what_is_no_archive_is_none():
    assert read_archive(b"") is None and read_archive(b"PAR2\0PKT" + b"\0" * 100) is None
    assert archive_kind(b"Rar!\x1a\x07") is None  # too short to tell


# --- hostile bytes -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_prefix_of_a_sample_reads_without_error(name):
    data = (DATA / name).read_bytes()
    expected = {f.name for f in read_archive(data).files}
    step = max(1, len(data) // 600)
    for cut in range(0, len(data), step):
        info = read_archive(data[:cut])
        if info is not None:
            assert {f.name for f in info.files} <= expected


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_bytes_flipped_at_random_never_raise(name):
    data = (DATA / name).read_bytes()
    rng = random.Random(name)
    started = time.perf_counter()
    for _ in range(300):
        broken = bytearray(data)
        for _ in range(rng.randint(1, 4)):
            position = rng.randrange(min(len(broken), 600))
            broken[position] = rng.randrange(256)
        info = read_archive(bytes(broken))
        assert info is None or len(info.files) <= archives.MAX_FILES
    assert time.perf_counter() - started < 30


def rar4_block(kind: int, flags: int, body: bytes) -> bytes:
    size = 7 + len(body)
    header = struct.pack("<BHH", kind, flags, size) + body
    return struct.pack("<H", zlib.crc32(header) & 0xFFFF) + header


def rar4_file(
    name: bytes, packed: int, unpacked: int, flags: int = 0x8000, high: tuple[int, int] | None = None
) -> bytes:
    body = struct.pack("<IIBIIBBHI", packed & 0xFFFFFFFF, unpacked & 0xFFFFFFFF, 3, 0, 0, 29, 0x30, len(name), 0)
    if high is not None:
        body += struct.pack("<II", *high)
    return rar4_block(0x74, flags, body + name)


def test_rar4_headers_with_absurd_sizes():
    main = rar4_block(0x73, 0, b"\0" * 6)
    # a data size past everything: the walk ends there, quietly (the volume goes on elsewhere)
    info = read_archive(archives.RAR4_MARK + main + rar4_file(b"a.mkv", 0xFFFFFFFF, 10) + rar4_file(b"b.mkv", 1, 1))
    assert [f.name for f in info.files] == ["a.mkv"] and not info.complete and info.malformed == {}
    # a 64-bit unpacked size past belief: kept without its size, counted
    huge = rar4_file(b"c.mkv", 0, 0, flags=0x8100, high=(0, 0xFFFFFFFF))
    info = read_archive(archives.RAR4_MARK + main + huge)
    assert [(f.name, f.size) for f in info.files] == [("c.mkv", None)] and info.malformed == {"absurd_size": 1}
    # a name longer than its header, a header shorter than its fields, a bad CRC
    bad_name = bytearray(rar4_file(b"d.mkv", 0, 0))
    bad_name[7 + 19 : 7 + 21] = struct.pack("<H", 60_000)
    assert read_archive(archives.RAR4_MARK + main + bytes(bad_name)).malformed == {"bad_header": 1}
    short = rar4_block(0x74, 0x8000, b"\0" * 10)
    assert read_archive(archives.RAR4_MARK + main + short).malformed == {"bad_header": 1}
    flipped = bytearray(rar4_file(b"e.mkv", 0, 0))
    flipped[-1] ^= 1
    assert read_archive(archives.RAR4_MARK + main + bytes(flipped)).malformed == {"bad_crc": 1}
    tiny = rar4_block(0x73, 0, b"")[:5] + b"\x03\x00"  # a header size under 7
    assert read_archive(archives.RAR4_MARK + tiny).malformed == {"bad_header": 1}


def test_rar4_with_more_files_or_blocks_than_allowed():
    main = rar4_block(0x73, 0, b"\0" * 6)
    many = archives.RAR4_MARK + main + b"".join(rar4_file(b"f%04d.txt" % i, 0, 1) for i in range(50))
    info = read_archive(many, max_files=20)
    assert len(info.files) == 20 and info.malformed == {"too_many_files": 1}
    comments = archives.RAR4_MARK + main + rar4_block(0x75, 0, b"") * (archives.MAX_BLOCKS + 5)
    started = time.perf_counter()
    assert read_archive(comments).malformed == {"too_many_blocks": 1}
    assert time.perf_counter() - started < 10


def vint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def rar5_header(body: bytes) -> bytes:
    size = vint(len(body))
    return struct.pack("<I", zlib.crc32(size + body)) + size + body


def rar5_file(name: bytes, size: int, data_size: int = 0) -> bytes:
    flags = 0x0002 if data_size else 0
    fields = vint(2) + vint(flags) + (vint(data_size) if data_size else b"")
    return rar5_header(fields + vint(0) + vint(size) + vint(0) + vint(0) + vint(1) + vint(len(name)) + name)


def test_rar5_headers_with_absurd_sizes_and_integers():
    main = rar5_header(vint(1) + vint(0) + vint(0))
    ok = read_archive(archives.RAR5_MARK + main + rar5_file(b"a.mkv", 100, data_size=2**61) + rar5_file(b"b", 1))
    assert [f.name for f in ok.files] == ["a.mkv"] and not ok.complete and ok.malformed == {}
    huge = read_archive(archives.RAR5_MARK + main + rar5_file(b"c.mkv", 2**62))
    assert [(f.name, f.size) for f in huge.files] == [("c.mkv", None)] and huge.malformed == {"absurd_size": 1}
    # a header size over the format's 2 MB, an 11-byte integer, a name past its header
    oversized = struct.pack("<I", 0) + vint(3 * 1024 * 1024)
    assert read_archive(archives.RAR5_MARK + main + oversized + b"\0" * 100).malformed == {"bad_header": 1}
    endless = rar5_header(vint(2) + b"\xff" * 11 + b"\x01")
    assert read_archive(archives.RAR5_MARK + main + endless).malformed == {"bad_header": 1}
    long_name = rar5_header(vint(2) + vint(0) + vint(0) + vint(1) + vint(0) + vint(0) + vint(1) + vint(500) + b"x")
    assert read_archive(archives.RAR5_MARK + main + long_name).malformed == {"bad_header": 1}
    bad_crc = bytearray(rar5_file(b"d.mkv", 1))
    bad_crc[0] ^= 1
    assert read_archive(archives.RAR5_MARK + main + bytes(bad_crc)).malformed == {"bad_crc": 1}


def seven_zip(header: bytes, packed: bytes = b"") -> bytes:
    start = struct.pack("<QQI", len(packed), len(header), zlib.crc32(header))
    return archives.SEVEN_ZIP_MARK + b"\x00\x04" + struct.pack("<I", zlib.crc32(start)) + start + packed + header


def test_7z_headers_with_absurd_offsets_and_counts():
    start = struct.pack("<QQI", 2**63, 10, 0)
    absurd = archives.SEVEN_ZIP_MARK + b"\x00\x04" + struct.pack("<I", zlib.crc32(start)) + start
    assert read_archive(absurd).malformed == {"bad_header": 1}
    far = struct.pack("<QQI", 2**40, 10, 0)
    info = read_archive(archives.SEVEN_ZIP_MARK + b"\x00\x04" + struct.pack("<I", zlib.crc32(far)) + far)
    assert info.headers_at_end and not info.header_read and info.header_offset == 32 + 2**40 and info.malformed == {}
    # a header that claims 2**40 files, folders or unpacked header bytes
    files = bytes([0x01, 0x05, 0xFF]) + struct.pack("<Q", 2**40)
    assert read_archive(seven_zip(files)).malformed == {"bad_header": 1}
    folders = bytes([0x01, 0x04, 0x07, 0x0B, 0xFF]) + struct.pack("<Q", 2**40)
    assert read_archive(seven_zip(folders)).malformed == {"bad_header": 1}
    encoded = (
        bytes(
            [
                0x17,
                0x06,
                0x00,
                0x01,
                0x09,
                0x05,
                0x00,
                0x07,
                0x0B,
                0x01,
                0x00,
                0x01,
                0x23,
                0x03,
                0x01,
                0x01,
                0x05,
                0x5D,
                0x00,
                0x00,
                0x01,
                0x00,
                0x0C,
                0xFF,
            ]
        )
        + struct.pack("<Q", 2**40)
        + b"\x00\x00"
    )
    assert read_archive(seven_zip(encoded, packed=b"\0" * 5)).malformed == {"header_too_large": 1}
    # a header cut before its end, and one whose CRC does not match
    assert read_archive(seven_zip(bytes([0x01, 0x05]))).malformed == {"bad_header": 1}
    wrong = bytearray(seven_zip(bytes([0x01, 0x00])))
    wrong[-1] ^= 1
    assert read_archive(bytes(wrong)).malformed == {"bad_crc": 1}


def test_a_7z_header_claiming_a_huge_dictionary_still_unpacks_within_bounds():
    data = bytearray((DATA / "7z-plain.7z").read_bytes())
    header_at = 32 + struct.unpack_from("<Q", data, 12)[0]
    props = data.index(bytes.fromhex("030101"), header_at) + 4  # method id, then the 5 property bytes
    data[props + 1 : props + 5] = b"\xff\xff\xff\xff"  # a 4 GiB dictionary
    header = bytes(data[header_at:])
    data[28:32] = struct.pack("<I", zlib.crc32(header))
    data[8:12] = struct.pack("<I", zlib.crc32(bytes(data[12:32])))
    info = read_archive(bytes(data))
    assert info.malformed == {} and len(info.files) == 3


def zip_entry(name: bytes, packed: int, flags: int = 0, data: bytes = b"") -> bytes:
    return (
        struct.pack("<4sHHHHHIIIHH", archives.ZIP_LOCAL, 20, flags, 0, 0, 0, 0, packed, packed, len(name), 0)
        + name
        + data
    )


def test_zip_headers_with_absurd_sizes_counts_and_data_descriptors():
    info = read_archive(zip_entry(b"a.txt", 0xFFFFFFF0) + zip_entry(b"b.txt", 1, data=b"x"))
    assert [f.name for f in info.files] == ["a.txt"] and not info.complete
    many = b"".join(zip_entry(b"f%04d.txt" % i, 1, data=b"x") for i in range(40))
    info = read_archive(many, max_files=25)
    assert len(info.files) == 25 and info.malformed == {"too_many_files": 1}
    streamed = zip_entry(b"s.txt", 0, flags=0x0008) + b"compressed data of unknown length" + zip_entry(b"t.txt", 0)
    info = read_archive(streamed)
    assert [(f.name, f.size) for f in info.files] == [("s.txt", None)] and not info.complete
    cut_name = zip_entry(b"n" * 60_000, 0)[:1000]
    assert read_archive(cut_name).files == []
    garbage = zip_entry(b"g.txt", 2, data=b"xx") + b"not a header at all, 30 bytes at least......"
    assert read_archive(garbage).malformed == {"bad_header": 1}


def test_a_first_article_of_real_multi_volume_archives(tmp_path):
    """A zip of many files and a 7z in volumes, as 7-Zip makes them, read from their first
    700 KB (an article)."""
    source = tmp_path / "source"
    source.mkdir()
    rng = random.Random(9)
    for index in range(200):
        (source / f"Track.{index:03d}.flac").write_bytes(rng.randbytes(rng.randrange(100, 20_000)))
    subprocess.run(
        ["7z", "a", "-bd", "-bso0", "-tzip", "-mx0", "-pX", str(tmp_path / "many.zip"), "."], cwd=source, check=True
    )
    info = read_archive((tmp_path / "many.zip").read_bytes()[:700_000])
    assert 20 < len(info.files) <= 200 and all(f.encrypted for f in info.files) and info.password == 1
    assert {f.name for f in info.files} <= {p.name for p in source.iterdir()}
    (source / "big.bin").write_bytes(rng.randbytes(2_000_000))
    subprocess.run(
        ["7z", "a", "-bd", "-bso0", "-mx0", "-v1m", str(tmp_path / "vol.7z"), "big.bin"], cwd=source, check=True
    )
    volumes = sorted(tmp_path.glob("vol.7z.*"))
    first = volumes[0].read_bytes()[:700_000]
    alone = read_archive(first)
    assert alone.headers_at_end and not alone.header_read
    last = volumes[-1].read_bytes()
    both = read_archive(first, tail=last, tail_offset=(len(volumes) - 1) * 1024 * 1024)
    assert [(f.name, f.size) for f in both.files] == [("big.bin", 2_000_000)]
