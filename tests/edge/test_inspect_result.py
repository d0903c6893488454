"""edge.inspect.result: which files of a post to read, and a post's articles (yEnc-encoded as
posting tools encode them) turned into the result a node posts back, within the bounds the data
center checks and the same through JSON and msgpack."""

from __future__ import annotations

import json
import random
import zlib
from pathlib import Path

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edge.inspect import result
from edge.inspect.result import inspect_post, wanted_files
from simnews.yencpost import PART_SIZE, yenc_body

DATA = Path(__file__).parent / "data" / "inspect"
NFO = (
    "╔═══════════════╗\r\n║ The Film 2019 ║\r\n╚═══════════════╝\r\n".encode("cp437")
    + b"Release: The.Film.2019.1080p.BluRay.x264-GRP\r\n"
    + b"IMDb: https://www.imdb.com/title/tt0111161/\r\n"
    + b"Password at http://getpass.example.com\r\n"
)


def first_article(data: bytes, name: str, part_size: int = PART_SIZE) -> bytes:
    """The first article's body of a file posted in parts of part_size."""
    parts = max(1, -(-len(data) // part_size))
    return yenc_body(data[:part_size], name, 1, parts, 1, len(data), zlib.crc32(data))


def article(data: bytes, name: str, part: int, part_size: int = PART_SIZE) -> bytes:
    parts = max(1, -(-len(data) // part_size))
    begin = (part - 1) * part_size
    return yenc_body(data[begin : begin + part_size], name, part, parts, begin + 1, len(data), zlib.crc32(data))


# --- which files -------------------------------------------------------------------------------


def test_the_nfo_the_par2_index_and_the_first_volume_are_wanted_small_ones_first():
    names = [f"Film.part{i:02d}.rar" for i in range(1, 30)] + [
        "Film.vol00+01.par2",
        "Film.vol01+02.par2",
        "Film.par2",
        "film.nfo",
        "Film.sfv",
    ]
    assert wanted_files(names) == ["film.nfo", "Film.par2", "Film.part01.rar"]


def test_first_volumes_of_every_naming():
    assert wanted_files(["a.rar", "a.r00", "a.r01"]) == ["a.rar"]
    assert wanted_files(["a.r00", "a.r01", "a.r02"]) == ["a.r00"]  # the .rar is missing
    assert wanted_files(["a.part001.rar", "a.part002.rar"]) == ["a.part001.rar"]
    assert wanted_files(["a.part2.rar", "a.part1.rar"]) == ["a.part1.rar"]
    assert wanted_files(["a.7z.001", "a.7z.002"]) == ["a.7z.001"]
    assert wanted_files(["a.7z", "b.zip"]) == ["a.7z", "b.zip"]
    assert wanted_files(["a.z01", "a.z02", "a.zip"]) == ["a.z01"]
    assert wanted_files(["a.zip.001", "a.zip.002"]) == ["a.zip.001"]
    assert wanted_files(["A.PART01.RAR", "A.PAR2", "A.NFO"]) == ["A.NFO", "A.PAR2", "A.PART01.RAR"]


def test_without_an_index_the_smallest_recovery_volume_and_at_most_four():
    assert wanted_files(["x.vol07+08.par2", "x.vol00+01.par2", "x.vol01+02.par2"]) == ["x.vol00+01.par2"]
    many = ["n.nfo", "x.par2"] + [f"set{i}.part01.rar" for i in range(5)]
    assert wanted_files(many) == ["n.nfo", "x.par2", "set0.part01.rar", "set1.part01.rar"]
    assert result.MAX_WANTED == 4


def test_obfuscated_names_give_the_smallest_file_or_the_first():
    names = ["9f8e7d6c5b4a", "1a2b3c4d5e6f", "0f0e0d0c0b0a"]
    assert wanted_files(names) == ["0f0e0d0c0b0a"]
    assert wanted_files(names, sizes=[50_000, 700, 9_000_000]) == ["1a2b3c4d5e6f"]
    assert wanted_files([]) == []


# --- a post inspected --------------------------------------------------------------------------


def test_a_rar_post_with_par2_and_nfo():
    par2_index = (DATA / "par2-names.par2").read_bytes()
    volume = (DATA / "rar3-comment-psw.rar").read_bytes()
    bodies = {
        "film.nfo": first_article(NFO, "film.nfo"),
        "names.par2": first_article(par2_index, "names.par2"),
        "Film.part01.rar": first_article(volume, "Film.part01.rar"),
    }
    found = inspect_post(bodies, missing=1)
    assert found.name == "The.Film.2019.1080p.BluRay.x264-GRP" and found.imdb == 111161
    assert found.nfo is not None and found.nfo.startswith("╔═══")
    assert found.password_urls == ["http://getpass.example.com"]
    assert found.password == 1 and found.flags == ["password_url"]
    by_source = {(f.source, f.name) for f in found.files}
    assert {("par2", "café crème.txt"), ("rar4", "file1.txt"), ("rar4", "file2.txt")} <= by_source
    assert (found.articles_read, found.articles_missing) == (3, 1)
    assert found.bytes_read == sum(len(body) for body in bodies.values()) and found.malformed == {}


def test_content_is_recognised_whatever_the_names_say():
    """Obfuscated names: the bytes tell what each file is."""
    bodies = {
        "a1b2c3": first_article((DATA / "7z-encrypted-headers.7z").read_bytes(), "a1b2c3"),
        "d4e5f6": first_article((DATA / "par2-names.par2").read_bytes(), "d4e5f6"),
        "0a0b0c": first_article(b"nothing known" * 10, "0a0b0c"),
    }
    found = inspect_post(bodies)
    assert found.password == 1 and found.flags == ["encrypted_headers"]
    assert len([f for f in found.files if f.source == "par2"]) == 3
    assert found.malformed == {"unrecognised": 1}


def test_inner_archives_and_executables():
    bodies = {
        "x.7z": first_article((DATA / "7z-plain-header.7z").read_bytes(), "x.7z"),
        "y.zip": first_article((DATA / "zip-plain.zip").read_bytes(), "y.zip"),
    }
    found = inspect_post(bodies)
    assert found.password == 2 and found.flags == ["executable"]
    assert [a.kind for a in found.archives] == ["7z", "zip"]


def test_bodies_refused_or_broken_are_counted_and_the_rest_read():
    volume = (DATA / "rar5-psw.rar").read_bytes()
    good = first_article(volume, "a.rar")
    bodies = {
        "a.rar": good,
        "b.rar": good[: len(good) // 2],  # cut short
        "c.rar": good.replace(b"end=%d" % len(volume), b"end=%d" % (len(volume) * 3)),  # a lying size
        "d.rar": good.replace(b"pcrc32=%08x" % zlib.crc32(volume), b"pcrc32=00000000"),  # a bad CRC: still read
        "e.rar": b"=ybegin " + b"x" * 100,
        "f.rar": b"x" * 200,
    }
    found = inspect_post(bodies, max_body=150)
    assert found.malformed == {"too_large": 5, "yenc_bad_header": 1}
    found = inspect_post(bodies)
    assert found.malformed == {
        "yenc_truncated": 1,
        "yenc_size_mismatch": 1,
        "yenc_crc": 1,
        "yenc_bad_header": 1,
        "unrecognised": 1,
    }
    assert [(f.name, f.encrypted) for f in found.files] == [("stest1.txt", True), ("stest2.txt", True)]


def test_a_7z_end_header_found_in_a_later_article_of_the_file():
    rng = random.Random(3)
    first = (DATA / "7z-volumes.7z.001").read_bytes()
    last = (DATA / "7z-volumes.7z.003").read_bytes()
    # as one file posted in articles of 1,000 bytes: its first and its last article
    archive = first + rng.randbytes(4096) + last  # the middle volume's bytes do not matter here
    parts = -(-len(archive) // 1000)
    bodies = {"x.7z": article(archive, "x.7z", 1, 1000), "x.7z#last": article(archive, "x.7z", parts, 1000)}
    found = inspect_post(bodies)
    assert [(f.name, f.size) for f in found.files] == [("big.bin", 9000)]
    # as 7-Zip's volumes: the first article of the first and of the last volume
    bodies = {"x.7z.001": first_article(first, "x.7z.001"), "x.7z.003": first_article(last, "x.7z.003")}
    found = inspect_post(bodies)
    assert [(f.name, f.size) for f in found.files] == [("big.bin", 9000)] and found.malformed == {}
    # the first alone: the header is elsewhere, which the result says
    found = inspect_post({"x.7z.001": first_article(first, "x.7z.001")})
    assert found.files == [] and found.archives[0].headers_at_end and not found.archives[0].header_read


def test_a_body_that_is_not_yenc_is_taken_as_it_is():
    found = inspect_post({"plain.nfo": NFO, "v.rar": (DATA / "unicode.rar").read_bytes()})
    assert found.imdb == 111161 and {f.name for f in found.files} == {"уииоотивл.txt", "𝐀𝐁𝐁𝐂.txt"}


def test_to_dict_is_plain_data_within_the_data_centers_bounds():
    bodies = {
        "film.nfo": first_article(NFO + b"x" * 100_000, "film.nfo"),
        "names.par2": first_article((DATA / "par2-names.par2").read_bytes(), "names.par2"),
        "a.7z": first_article((DATA / "7z-encrypted-files.7z").read_bytes(), "a.7z"),
    }
    out = inspect_post(bodies).to_dict()
    assert json.loads(json.dumps(out)) == out
    assert msgpack.unpackb(msgpack.packb(out)) == out
    # what app/services/inspections.py's check_result takes (docs/api.md, Inspections)
    assert out["password"] in (0, 1, 2) and out["password"] == 1
    assert set(out["flags"]) <= {"executable", "password_url", "encrypted_headers"}
    assert out["flags"] == ["executable", "password_url"]
    assert len(out["nfo"]) <= 64 * 1024 and "\0" not in out["nfo"]
    assert out["name"] == "The.Film.2019.1080p.BluRay.x264-GRP"
    assert all(0 < out[kind] <= 2**31 - 1 for kind in ("imdb",)) and out["tvdb"] is None
    assert len(out["files"]) <= 10_000
    for entry in out["files"]:
        assert isinstance(entry["name"], str) and 0 < len(entry["name"]) <= 1024
        assert len(entry["source"]) <= 16 and type(entry.get("size", 0)) is int
    for key in ("articles_read", "articles_missing", "bytes_read"):
        assert type(out[key]) is int and out[key] >= 0


@pytest.mark.parametrize("name", sorted(p.name for p in DATA.iterdir() if p.name != "README.md"))
def test_every_sample_posted_alone_inspects_without_error(name):
    data = (DATA / name).read_bytes()
    found = inspect_post({name: first_article(data, name)})
    assert found.articles_read == 1
    json.dumps(found.to_dict())


def test_a_result_of_the_most_files_with_the_longest_names_stays_under_4_mib_of_json():
    long_names = result.PostInspection(
        files=[
            result.InspectedFile(name=f"{index:05d}" + "☃" * 1019, size=2**47, source="par2", hash16k="0" * 32)
            for index in range(result.MAX_FILES)
        ],
        nfo="\u2592" * 65536,
    )
    out = long_names.to_dict()
    assert len(json.dumps(out)) < 4 * 1024 * 1024
    assert 0 < len(out["files"]) < result.MAX_FILES and out["files_left_out"] == result.MAX_FILES - len(out["files"])
    small = result.PostInspection(files=[result.InspectedFile(name="a", size=1, source="zip")] * 5).to_dict()
    assert len(small["files"]) == 5 and small["files_left_out"] == 0


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(sorted(p.name for p in DATA.iterdir() if p.name != "README.md")),
    st.lists(st.tuples(st.integers(min_value=0), st.integers(min_value=0, max_value=255)), max_size=6),
    st.sampled_from(["x.nfo", "x.rar", "x.par2", "x.7z.001"]),
)
def test_yenc_bodies_of_samples_with_bytes_changed_never_raise(name, changes, label):
    body = bytearray(first_article((DATA / name).read_bytes(), label))
    for position, value in changes:
        body[position % len(body)] = value
    out = inspect_post({label: bytes(body)}).to_dict()
    assert out["articles_read"] == 1 and out["password"] in (0, 1, 2)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=2000), st.sampled_from(["a.nfo", "a.rar", "a"]))
def test_any_bytes_never_raise(data, label):
    inspect_post({label: data, label + "#y": b"=ybegin line=128 size=9 name=a\r\n" + data}).to_dict()


def test_files_read_from_their_start_carry_the_hash_their_par2_set_lists(tmp_path):
    """An obfuscated file (a random name on Usenet) is tied to the par2 set that lists it under its
    real name by the MD5 of its first 16 KiB and its size."""
    from simnews.yencpost import make_release

    release = make_release(
        tmp_path, "Real.Name.2024.1080p.WEB.h264-GRP", seed=3, size=300_000, volumes=2, part_size=100_000
    )
    index = next(f for f in release.par2_files if ".vol" not in f.name)
    volume = release.files[0]
    data = volume.path.read_bytes()
    bodies = {
        "a1b2c3": first_article(index.path.read_bytes(), "a1b2c3"),
        "d4e5f6": first_article(data, "d4e5f6", part_size=50_000),
    }
    found = inspect_post(bodies)
    listed = {f.hash16k: (f.name, f.size) for f in found.files if f.source == "par2"}
    read = {r.name: r for r in found.read}
    assert listed[read["d4e5f6"].hash16k] == (volume.name, len(data)) and read["d4e5f6"].size == len(data)
    assert found.to_dict()["read"] == [{"name": r.name, "size": r.size, "hash16k": r.hash16k} for r in found.read]
    # A later article alone (not the file's start) gives no hash.
    assert inspect_post({"d4e5f6": article(data, "d4e5f6", 2, part_size=50_000)}).read == []
