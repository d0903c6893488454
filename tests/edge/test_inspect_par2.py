"""edge.inspect.par2: the files a par2 set lists, from sets Debian's par2 made (names in UTF-8 and
Latin-1, a release of simnews.yencpost), and packets that lie (lengths past the data or absurd,
bad MD5s, other sets, unknown types, too many files, long names): skipped and counted, the scan
always moving forward."""

from __future__ import annotations

import hashlib
import struct
import time
from pathlib import Path


from edge.inspect import par2
from edge.inspect.par2 import read_par2
from simnews.yencpost import make_release

DATA = Path(__file__).parent / "data" / "inspect"
SET_ID = b"S" * 16
EXPECTED = {
    "Die.Serie.S01E01.German.720p.WEB.x264-GRP.mkv": 5000,
    "café crème.txt": 9,  # its name in Latin-1 bytes
    "Ünïcödé – ☃.nfo": 9,  # in UTF-8
}


def packet(
    kind: bytes, body: bytes, set_id: bytes = SET_ID, *, length: int | None = None, digest: bytes | None = None
) -> bytes:
    body += b"\0" * (-len(body) % 4)
    rest = set_id + kind + body
    size = 32 + len(rest) if length is None else length
    return par2.MAGIC + struct.pack("<Q", size) + (digest or hashlib.md5(rest).digest()) + rest


def main_packet(ids: list[bytes], slice_size: int = 1024) -> bytes:
    return packet(par2.MAIN, struct.pack("<QI", slice_size, len(ids)) + b"".join(ids))


def description(file_id: bytes, name: bytes, size: int = 100) -> bytes:
    return packet(par2.FILE_DESCRIPTION, file_id + b"M" * 16 + b"H" * 16 + struct.pack("<Q", size) + name)


def test_the_index_and_a_recovery_volume_list_the_same_files_by_their_real_names():
    for name in ("par2-names.par2", "par2-names.vol0+1.par2"):
        found = read_par2((DATA / name).read_bytes())
        assert {f.name: f.size for f in found.files} == EXPECTED
        assert found.slice_size == 1024 and found.skipped == {}
        assert found.creator == "Created by par2cmdline version 0.8.1."
        small = {f.name: f for f in found.files}["café crème.txt"]
        assert small.hash16k == hashlib.md5(b"latin one").hexdigest() == small.md5


def test_the_first_article_of_an_index_is_enough_and_a_cut_one_counts_the_cut_packet():
    data = (DATA / "par2-names.par2").read_bytes()  # main, 3 descriptions, checksums, creator
    assert read_par2(data[:700]).files == read_par2(data).files
    cut = read_par2(data[:500])  # inside the third description
    assert len(cut.files) == 2 and {f.name for f in cut.files} < set(EXPECTED)
    assert cut.skipped == {"truncated": 1}


def test_a_release_made_by_par2_create_lists_its_volumes(tmp_path):
    release = make_release(
        tmp_path, "Some.Release.2024.1080p.WEB.h264-GRP", seed=5, size=400_000, volumes=4, part_size=100_000
    )
    index = release.par2_files[0]
    assert index.name == "Some.Release.2024.1080p.WEB.h264-GRP.par2"
    found = read_par2(index.path.read_bytes())
    assert {f.name: f.size for f in found.files} == {v.name: v.size for v in release.volumes}
    first_16k = {v.name: hashlib.md5(v.path.read_bytes()[:16384]).hexdigest() for v in release.volumes}
    assert {f.name: f.hash16k for f in found.files} == first_16k
    # a recovery volume's first 700 KB (an article) lists them too, past its recovery slices
    volume = release.par2_files[-1]
    again = read_par2(volume.path.read_bytes()[:700_000])
    assert {f.name for f in again.files} == {v.name for v in release.volumes}


def test_packets_that_lie_are_skipped_and_counted():
    good = description(b"a" * 16, b"good.mkv")
    data = b"".join(
        [
            main_packet([b"a" * 16]),
            packet(par2.FILE_DESCRIPTION, b"x" * 60, length=2**63),  # past the data
            packet(par2.FILE_DESCRIPTION, b"x" * 60, length=30),  # under a header
            packet(par2.FILE_DESCRIPTION, b"x" * 60, length=70),  # not a multiple of 4
            packet(par2.FILE_DESCRIPTION, b"x" * 60, digest=b"\0" * 16),  # bad md5
            packet(b"PAR 2.0\0Whatever", b"x" * 8),  # unknown type
            packet(
                par2.FILE_DESCRIPTION, b"b" * 16 + b"M" * 32 + struct.pack("<Q", 5) + b"other.mkv", set_id=b"T" * 16
            ),
            packet(par2.FILE_DESCRIPTION, b"c" * 20),  # body too short
            description(b"d" * 16, b"absurd.mkv", size=2**60),
            good,
            good,
            good,  # repeats, as every volume repeats them
            b"garbage between packets",
            packet(b"PAR 2.0\0RecvSlic", b"r" * 4096),  # known and skipped quietly
        ]
    )
    found = read_par2(data)
    assert [(f.name, f.size) for f in found.files] == [("good.mkv", 100)]
    assert found.skipped == {"truncated": 1, "bad_length": 2, "bad_md5": 1, "unknown": 1, "other_set": 1, "bad_body": 2}


def test_a_main_packet_that_lies_about_its_count_is_skipped():
    lying = packet(par2.MAIN, struct.pack("<QI", 1024, 10_000) + b"a" * 16)
    found = read_par2(lying + description(b"a" * 16, b"a.bin"))
    assert found.slice_size is None and found.skipped == {"bad_body": 1}
    assert [f.name for f in found.files] == ["a.bin"]


def test_at_most_max_files_are_kept_and_names_are_cut():
    data = b"".join(description(b"%016d" % i, b"f%05d.bin" % i) for i in range(30))
    found = read_par2(data, max_files=20)
    assert len(found.files) == 20 and found.skipped == {"too_many_files": 10}
    assert par2.MAX_FILES == 10_000
    long_name = read_par2(description(b"x" * 16, "é".encode() * 2000)).files[0].name
    assert long_name == "é" * 512  # 1,024 bytes


def test_a_unicode_name_packet_wins_over_the_description():
    data = description(b"u" * 16, b"?.mkv") + packet(par2.UNICODE_NAME, b"u" * 16 + "Ωmega.mkv".encode("utf-16-le"))
    assert [f.name for f in read_par2(data).files] == ["Ωmega.mkv"]


def test_hostile_data_is_scanned_in_linear_time():
    # Magic after magic, each with a length past the data: every one is looked at once.
    flood = (par2.MAGIC + struct.pack("<Q", 2**40) + b"\0" * 48) * 60_000  # 3.8 MB
    started = time.perf_counter()
    found = read_par2(flood)
    assert time.perf_counter() - started < 10
    assert found.files == [] and found.skipped == {"truncated": 60_000}
    # Valid packets of nothing but headers, many thousands: bounded by the data.
    empty = packet(b"PAR 2.0\0Whatever", b"") * 50_000
    found = read_par2(empty)
    assert found.skipped == {"unknown": 50_000}


def test_packets_that_overlap_are_hashed_within_a_budget():
    # A main packet's header every 64 bytes, each claiming the rest of the data with a wrong MD5:
    # hashing each would cost the square of the data's size; the reader stops at twice its size.
    size = 320 * 1024
    headers = b"".join(
        par2.HEADER.pack(par2.MAGIC, (size - 64 * i) // 4 * 4, b"\0" * 16, b"s" * 16, par2.MAIN)
        for i in range(size // 64)
    )
    found = read_par2(headers)
    assert found.skipped == {"bad_md5": 2, "hash_budget": 1} and found.files == []
