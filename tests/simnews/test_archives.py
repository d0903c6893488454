"""simnews.archives: the RAR 4 archives it writes, read back by 7-Zip and by edge.inspect; its par2
index, verified by par2; and the inspection proof: every hostile case, posted beside good files as
a posting tool posts them (yEnc, simnews.yencpost.post_files) and read as a node reads them
(edge.inspect.result.inspect_post on the first article's body), comes back promptly, without an
exception, with the problem counted in the result's ``malformed`` and the good files still read."""

from __future__ import annotations

import json
import random
import struct
import subprocess
import time
import zlib
from collections.abc import Callable
from pathlib import Path

import pytest

from edge.inspect import par2 as par2_reader
from edge.inspect.archives import read_archive
from edge.inspect.result import PostInspection, inspect_post
from simnews import archives
from simnews.archives import (
    AFTER,
    BEFORE,
    PAR2_LISTED,
    ZIP_GOOD,
    par2_huge_lengths,
    par2_index,
    par2_loop,
    rar4_stored,
    rar_absurd_sizes,
    sevenzip_absurd,
    yenc_lying_sizes,
    zip_absurd,
)
from simnews.yencpost import YencTruth, article_body, post_files, yenc_body

GROUP, POSTER = "alt.binaries.test", "Tester <tester@example.net>"
RELEASE = "Good.Release.2024.1080p.WEB.h264-GRP"
FILM = (f"{RELEASE}.mkv", random.Random(7).randbytes(30_000))
SAMPLE = (f"Sample/{RELEASE}.sample.mkv", random.Random(8).randbytes(2_000))
NFO = (f"Release: {RELEASE}\r\nIMDb: https://www.imdb.com/title/tt0111161/\r\n").encode("ascii")
PROMPT = 2.0  # seconds: each post here is read in milliseconds; a reader that loops takes far longer


def first_articles(directory: Path, files: dict[str, bytes]) -> dict[str, bytes]:
    """Each file's first article body (dot-stuffing off, as a node's NNTP BODY gives it), the
    files posted together by post_files, keyed by file name."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for name, data in files.items():
        (directory / name).write_bytes(data)
        paths.append(directory / name)
    bodies: dict[str, bytes] = {}
    for article in post_files(paths, GROUP, POSTER, namespace=directory.name):
        assert isinstance(article.truth, YencTruth)
        if article.truth.part == 1:
            bodies[article.truth.filename] = article_body(article)
    return bodies


def good_files() -> dict[str, bytes]:
    """What every hostile post holds beside its hostile file: a rar, a par2 index, an .nfo."""
    return {
        f"{RELEASE}.part01.rar": rar4_stored([FILM, SAMPLE]),
        f"{RELEASE}.par2": par2_index([FILM, (f"{RELEASE}.nfo", NFO)]),
        f"{RELEASE}.nfo": NFO,
    }


def assert_good_files_read(found: PostInspection) -> None:
    listed = {(f.source, f.name, f.size) for f in found.files}
    assert {
        ("rar4", FILM[0], len(FILM[1])),
        ("rar4", SAMPLE[0], len(SAMPLE[1])),
        ("par2", FILM[0], len(FILM[1])),
        ("par2", f"{RELEASE}.nfo", len(NFO)),
    } <= listed
    assert found.name == RELEASE and found.imdb == 111161


def inspect_timed(bodies: dict[str, bytes]) -> PostInspection:
    started = time.perf_counter()
    found = inspect_post(bodies)
    elapsed = time.perf_counter() - started
    assert elapsed < PROMPT, f"inspect_post took {elapsed:.1f} s"
    out = found.to_dict()
    assert json.loads(json.dumps(out)) == out
    return found


# --- rar4_stored ---------------------------------------------------------------------------------

FILES = [FILM, SAMPLE, ("Setup/setup.exe", b"MZ" + bytes(200)), ("Ünïcödé – ☃.txt", b"abc"), ("empty.txt", b"")]


def test_rar4_stored_blocks_are_as_rar_writes_them() -> None:
    data = rar4_stored(FILES)
    assert data.startswith(b"Rar!\x1a\x07\x00")
    position, blocks = 7, []
    while position < len(data):
        crc, kind, flags, size = struct.unpack_from("<HBHH", data, position)
        header = data[position : position + size]
        assert zlib.crc32(header[2:]) & 0xFFFF == crc  # HEAD_CRC: from HEAD_TYPE to the header's end
        blocks.append((kind, flags, header))
        position += size
        if kind == 0x74:
            packed, unpacked, host, file_crc, _, version, method, name_size, attributes = struct.unpack_from(
                "<IIBIIBBHI", header, 7
            )
            name, content = FILES[len(blocks) - 2]
            assert flags & 0x8000 and (packed, unpacked) == (len(content), len(content))
            assert (host, version, method, attributes) == (2, 29, 0x30, 0x20)
            assert file_crc == zlib.crc32(content) and data[position : position + packed] == content
            raw = header[32 : 32 + name_size]
            assert raw.decode("utf-8") == name.replace("/", "\\") and bool(flags & 0x0200) is (not name.isascii())
            position += packed
    assert position == len(data)
    assert [kind for kind, _, _ in blocks] == [0x73] + [0x74] * len(FILES) + [0x7B]
    assert len(blocks[0][2]) == 13 and blocks[0][1] == 0  # the main header: one volume, not solid


def test_rar4_stored_is_listed_and_extracted_by_7zip(tmp_path: Path) -> None:
    archive = tmp_path / "stored.rar"
    archive.write_bytes(rar4_stored(FILES))
    listing = subprocess.run(["7z", "l", "-slt", str(archive)], capture_output=True, text=True, check=True).stdout
    entries = [
        dict(line.split(" = ", 1) for line in block.splitlines() if " = " in line)
        for block in listing.split("\n\n")
        if "\nMethod = " in "\n" + block
    ]
    assert [(e["Path"], int(e["Size"]), e["Method"]) for e in entries] == [
        (name, len(content), "m0:16") for name, content in FILES
    ]  # m0: stored (RAR's 0x30)
    assert {e["Modified"][:19] for e in entries} == {"2024-01-01 12:00:00"} and {e["Host OS"] for e in entries} == {
        "Win32"
    }
    subprocess.run(["7z", "t", "-bso0", str(archive)], check=True)  # every file's CRC checked
    subprocess.run(["7z", "x", "-bso0", f"-o{tmp_path / 'out'}", str(archive)], check=True)
    for name, content in FILES:
        assert (tmp_path / "out" / name).read_bytes() == content


def test_rar4_stored_is_read_by_the_inspection() -> None:
    info = read_archive(rar4_stored(FILES))
    assert info is not None and info.kind == "rar4" and info.complete and info.malformed == {}
    assert [(f.name, f.size, f.encrypted) for f in info.files] == [
        (name, len(content), False) for name, content in FILES
    ]
    assert (info.volume, info.solid, info.encrypted_headers, info.password) == (False, False, False, 0)
    assert info.executables == ["Setup/setup.exe"]


def test_a_rar_holding_setup_exe_posted_is_flagged_executable() -> None:
    data = rar4_stored([FILM, ("setup.exe", b"MZ" + bytes(500))])
    found = inspect_post({"x.rar": yenc_body(data, "Some.Film.rar", 1, 1, 1, len(data), zlib.crc32(data))})
    assert found.flags == ["executable"] and found.password == 0 and found.malformed == {}
    assert [(f.source, f.name, f.size, f.encrypted) for f in found.files] == [
        ("rar4", FILM[0], len(FILM[1]), False),
        ("rar4", "setup.exe", 502, False),
    ]
    assert rar4_stored([FILM]) and inspect_post({"y.rar": rar4_stored([FILM])}).flags == []


def test_rar4_stored_refuses_what_a_rar_4_header_cannot_hold() -> None:
    with pytest.raises(ValueError):
        rar4_stored([("n" * 70_000, b"x")])


def test_par2_index_is_verified_by_par2_and_read_by_the_inspection(tmp_path: Path) -> None:
    files = [FILM, (f"{RELEASE}.nfo", NFO), ("café crème.txt", b"latte"), ("empty.txt", b"")]
    for name, content in files:
        (tmp_path / name).write_bytes(content)
    (tmp_path / "index.par2").write_bytes(par2_index(files, slice_size=1024))
    verified = subprocess.run(["par2", "verify", "-q", "index.par2"], cwd=tmp_path, capture_output=True, text=True)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    found = par2_reader.read_par2(par2_index(files))
    assert found.skipped == {} and found.creator == "simnews.archives" and found.slice_size == 4096
    assert sorted((f.name, f.size) for f in found.files) == sorted(
        (n, len(c)) for n, c in files if c
    )  # empty: left out


# --- the hostile cases ---------------------------------------------------------------------------

# case -> what inspect_post counts in ``malformed`` (the good files beside it count nothing)
YENC_EXPECTED = {
    "size-2**62": {"yenc_bad_header": 1},
    "size-20-digits": {"yenc_bad_header": 1},
    "end-past-size": {"yenc_size_mismatch": 1},
    "begin-zero": {"yenc_size_mismatch": 1},
    "begin-after-end": {"yenc_size_mismatch": 1},
    "end-20-digits": {"yenc_bad_header": 1},
    "begin-negative": {"yenc_bad_header": 1},
    "end-past-data": {"yenc_size_mismatch": 1},
    "end-one-short": {"yenc_size_mismatch": 1},
    "yend-size-lies": {"yenc_size_mismatch": 1},
    "yend-size-20-digits": {"yenc_bad_header": 1},
    "part-without-ypart": {"yenc_bad_header": 1},
    "no-yend": {"yenc_truncated": 1},
    "endless-header-line": {"yenc_bad_header": 1},
    "far-offset": {"no_first_article": 1},
}
NESTED = 320 * 1024 // 16  # the headers of par2_loop's nested case
FILE_EXPECTED: dict[str, dict[str, int]] = {
    "par2-length-2**63.par2": {"par2_truncated": 1},
    "par2-length-2**64-4.par2": {"par2_truncated": 1},
    "par2-length-under-header.par2": {"par2_bad_length": 1},
    "par2-length-not-4-aligned.par2": {"par2_bad_length": 1},
    "par2-file-size-2**63.par2": {"par2_bad_body": 1},
    "par2-main-count-4g.par2": {"par2_bad_body": 1},
    "par2-length-zero.par2": {"par2_bad_length": 1000},
    "par2-repeated.par2": {},
    # Packets of a type never read are not hashed: the scan goes on inside them (what it finds
    # there is counted as any packet is) and past headers of such a type.
    "par2-magic-inside.par2": {"par2_unknown": 1, "par2_truncated": 256},
    "par2-nested-lengths.par2": {"par2_unknown": NESTED},
    "rar4-head-size-3.rar": {"rar4_bad_header": 1},
    "rar4-head-size-under-fields.rar": {"rar4_bad_header": 1},
    "rar4-name-size-65535.rar": {"rar4_bad_header": 1},
    "rar4-unpacked-2**63.rar": {"rar4_absurd_size": 1},
    "rar4-bad-crc.rar": {"rar4_bad_crc": 1},
    "rar4-pack-size-past-article.rar": {},
    "rar4-head-size-past-article.rar": {},
    "rar5-head-size-0.rar": {"rar5_bad_header": 1},
    "rar5-head-size-5-byte-vint.rar": {"rar5_bad_header": 1},
    "rar5-vint-overflow.rar": {"rar5_bad_header": 1},
    "rar5-name-size-2**40.rar": {"rar5_bad_header": 1},
    "rar5-extra-size-2**60.rar": {"rar5_bad_header": 1},
    "rar5-data-size-2**63.rar": {"rar5_bad_header": 1},
    "rar5-unpacked-2**63.rar": {"rar5_absurd_size": 1},
    "rar5-data-size-past-article.rar": {},
    "7z-offset-2**63.7z": {"7z_bad_header": 1},
    "7z-size-2**63.7z": {"7z_bad_header": 1},
    "7z-offset-and-size-2**64-1.7z": {"7z_bad_header": 1},
    "7z-start-crc-wrong.7z": {"7z_bad_crc": 1},
    "7z-header-crc-wrong.7z": {"7z_bad_crc": 1},
    "7z-files-2**40.7z": {"7z_bad_header": 1},
    "7z-encoded-header-2**40.7z": {"7z_header_too_large": 1},
    "7z-offset-and-size-past-article.7z": {},
    "zip-central-directory-absurd.zip": {},
    "zip-local-zip64-2**63.zip": {"zip_absurd_size": 1},
    "zip-local-size-lands-in-data.zip": {"zip_bad_header": 1},
    "zip-local-size-past-article.zip": {},
    "zip-name-size-past-article.zip": {},
}
# archive case -> (the files read from it, (name, size) in order; complete)
LIE = "Lie.mkv"
ARCHIVE_FILES: dict[str, tuple[list[tuple[str, int | None]], bool]] = {
    **{case: ([(BEFORE[0], len(BEFORE[1]))], False) for case in FILE_EXPECTED if case.startswith("rar")},
    "rar4-unpacked-2**63.rar": ([(BEFORE[0], len(BEFORE[1])), (LIE, None), (AFTER[0], len(AFTER[1]))], True),
    "rar5-unpacked-2**63.rar": ([(BEFORE[0], len(BEFORE[1])), (LIE, None), (AFTER[0], len(AFTER[1]))], True),
    "rar4-pack-size-past-article.rar": ([(BEFORE[0], len(BEFORE[1])), (LIE, 4)], False),
    "rar5-data-size-past-article.rar": ([(BEFORE[0], len(BEFORE[1])), (LIE, 4)], False),
    **{case: ([], False) for case in FILE_EXPECTED if case.startswith("7z")},
    "zip-central-directory-absurd.zip": ([(name, len(content)) for name, content in ZIP_GOOD], True),
    "zip-local-zip64-2**63.zip": ([(ZIP_GOOD[0][0], 50), ("Zip.Lie.bin", None), (ZIP_GOOD[1][0], 50)], True),
    "zip-local-size-lands-in-data.zip": ([(ZIP_GOOD[0][0], 50), ("Zip.Lie.bin", 27)], False),
    "zip-local-size-past-article.zip": ([(ZIP_GOOD[0][0], 50), ("Zip.Lie.bin", 27)], False),
    "zip-name-size-past-article.zip": ([(ZIP_GOOD[0][0], 50)], False),
}
MAKERS: list[Callable[[], dict[str, bytes]]] = [
    par2_huge_lengths,
    par2_loop,
    rar_absurd_sizes,
    sevenzip_absurd,
    zip_absurd,
]
HOSTILE = {case: data for make in MAKERS for case, data in make().items()}


def test_every_case_has_its_expectation() -> None:
    assert set(yenc_lying_sizes()) == set(YENC_EXPECTED)
    assert set(HOSTILE) == set(FILE_EXPECTED)
    assert {case for case in HOSTILE if not case.startswith("par2")} == set(ARCHIVE_FILES)


@pytest.mark.parametrize("case", sorted(YENC_EXPECTED))
def test_a_yenc_body_lying_about_sizes_is_counted_and_the_rest_read(tmp_path: Path, case: str) -> None:
    bodies = first_articles(tmp_path / "post", good_files())
    bodies["Lying.Sizes.rar"] = yenc_lying_sizes()[case]
    found = inspect_timed(bodies)
    assert found.malformed == YENC_EXPECTED[case]
    assert_good_files_read(found)
    assert "Lying.Inside.mkv" not in {f.name for f in found.files}  # a body refused is not read


def test_every_yenc_lie_in_one_post(tmp_path: Path) -> None:
    bodies = first_articles(tmp_path / "post", good_files())
    lies = yenc_lying_sizes()
    bodies.update({f"{case}.rar": body for case, body in lies.items()})
    found = inspect_timed(bodies)
    expected: dict[str, int] = {}
    for counts in YENC_EXPECTED.values():
        for why, times in counts.items():
            expected[why] = expected.get(why, 0) + times
    assert found.malformed == expected and found.articles_read == 3 + len(lies)
    assert_good_files_read(found)


@pytest.mark.parametrize("case", sorted(FILE_EXPECTED))
def test_a_hostile_file_posted_is_counted_and_the_good_files_read(tmp_path: Path, case: str) -> None:
    files = good_files()
    files[case] = HOSTILE[case]
    bodies = first_articles(tmp_path / "post", files)
    assert len(bodies[case]) < 4 * 1024 * 1024  # one article, within what a node reads of one
    found = inspect_timed(bodies)
    assert found.malformed == FILE_EXPECTED[case]
    assert_good_files_read(found)
    if case.startswith("par2"):
        listed = {(f.name, f.size) for f in found.files if f.source == "par2"}
        assert {(name, len(content)) for name, content in PAR2_LISTED} <= listed  # read after the lie
        return
    names, complete = ARCHIVE_FILES[case]
    good, hostile = found.archives  # in the order posted: the good rar, then the hostile file
    assert good.complete and good.malformed == {} and hostile.kind == case.split("-")[0]
    assert [(f.name, f.size) for f in hostile.files] == names
    assert hostile.complete is complete and not hostile.encrypted_headers
    if case.startswith("7z"):  # the header is read (its CRC holds) only where its counts lie
        assert hostile.headers_at_end
        assert hostile.header_read is (case in ("7z-files-2**40.7z", "7z-encoded-header-2**40.7z"))


def test_a_7z_header_pointed_past_the_article_is_where_the_start_header_says() -> None:
    info = read_archive(sevenzip_absurd()["7z-offset-and-size-past-article.7z"])
    assert info is not None and (info.header_offset, info.header_size) == (32 + 2**62, 2**62)


def test_the_hostile_files_are_what_they_claim_to_be() -> None:
    """The lies sit in otherwise well-made files: the good parts are read by the tools."""
    import zipfile
    from io import BytesIO

    # The ZIP whose ZIP64 local size lies has a true central directory: Python's zipfile lists it.
    with zipfile.ZipFile(BytesIO(zip_absurd()["zip-local-zip64-2**63.zip"])) as listed:
        assert [i.filename for i in listed.infolist()] == [ZIP_GOOD[0][0], "Zip.Lie.bin", ZIP_GOOD[1][0]]
        assert listed.read(ZIP_GOOD[1][0]) == ZIP_GOOD[1][1]
    # Each hostile par2 file holds the good index after its lie; the nested case its headers.
    index = par2_index(PAR2_LISTED, slice_size=1024)
    for case, data in {**par2_huge_lengths(), **par2_loop(nested_bytes=1024)}.items():
        assert all(archives.PAR2_MAGIC + packet in data for packet in index.split(archives.PAR2_MAGIC)[1:]), case
    assert archives.RAR4_MARK == b"Rar!\x1a\x07\x00" and archives.RAR5_MARK == b"Rar!\x1a\x07\x01\x00"
