"""simnews.yencpost: yEnc 1.3 bodies (round trip, escapes, line edges, CRCs), the release of rar-like
volumes with its par2 set, and the articles as a posting tool sends them."""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import re
import subprocess
import zlib

import pytest

from simnews.yencpost import (
    YencError,
    article_body,
    decode_yenc,
    encode_lines,
    make_release,
    parse_yenc,
    post_files,
    yenc_body,
)

# The input bytes that come out as each critical character ((byte + 42) mod 256 is the output).
NUL, LF, CR, EQUALS, TAB, SPACE, DOT = 0xD6, 0xE0, 0xE3, 0x13, 0xDF, 0xF6, 0x04
PLAIN = 0x00  # comes out as "*"
SUBJECT = re.compile(r'^\[(\d+)/(\d+)\] - "([^"]+)" yEnc \((\d+)/(\d+)\)$')


def body_of(data: bytes, name: str = "f.bin") -> bytes:
    return yenc_body(data, name, 1, 1, 1, len(data), zlib.crc32(data))


def check_lines(lines: list[bytes]) -> None:
    """The yEnc line rules: no bare critical character, no line edge left unescaped, 128 characters
    a line (129 when it ends in an escape pair), no pair split across lines."""
    for index, line in enumerate(lines):
        assert line, "an empty data line"
        assert not set(line) & {0x00, 0x0A, 0x0D}
        assert line[0] not in b"\t .", line[:4]
        assert line[-1] not in b"\t ", line[-4:]
        # every "=" starts a pair whose second character is on the same line
        assert re.fullmatch(rb"(?:[^=]|=.)*", line, re.DOTALL), line[-4:]
        if index < len(lines) - 1:
            assert len(line) in (128, 129), len(line)
            if len(line) == 129:
                assert line[-2] == ord("="), line[-4:]
        else:
            assert len(line) <= 129


def test_every_byte_value_round_trips_and_lines_follow_the_rules():
    data = bytes(range(256)) * 40 + random.Random(3).randbytes(100_000)
    lines = encode_lines(data)
    check_lines(lines)
    assert decode_yenc(body_of(data)) == data


def test_critical_bytes_are_escaped_wherever_they_fall():
    criticals = bytes([NUL, LF, CR, EQUALS, TAB, SPACE, DOT])
    rng = random.Random(5)
    data = bytes(rng.choice(criticals + bytes([PLAIN])) for _ in range(20_000))
    lines = encode_lines(data)
    check_lines(lines)
    assert decode_yenc(body_of(data)) == data
    # NUL, LF, CR and "=" are escaped everywhere: 7/8 of the bytes are critical and about half of
    # them always so, so nearly every line holds escapes
    assert sum(b"=@" in line or b"=J" in line or b"=M" in line or b"=}" in line for line in lines) > len(lines) * 0.9


@pytest.mark.parametrize(
    ("data", "first", "second"),
    [
        # a TAB as the 128th character is a line's last: escaped, the line is 129 characters
        (bytes([PLAIN] * 127 + [TAB, PLAIN]), b"*" * 127 + b"=I", b"*"),
        # a space as the very last character of the data, on a short last line
        (bytes([PLAIN] * 130 + [SPACE]), b"*" * 128, b"**=`"),
        # an always-critical character as the 128th: the pair is not split, the line is 129
        (bytes([PLAIN] * 127 + [EQUALS, PLAIN]), b"*" * 127 + b"=}", b"*"),
        # the 129th character falls to the next line, where a dot, TAB or space first is escaped
        (bytes([PLAIN] * 128 + [DOT, PLAIN]), b"*" * 128, b"=n*"),
        (bytes([PLAIN] * 128 + [TAB]), b"*" * 128, b"=I"),
        (bytes([PLAIN] * 128 + [SPACE] + [PLAIN] * 200), b"*" * 128, b"=`" + b"*" * 126),
        # a TAB or space inside a line is data, as is a dot
        (bytes([PLAIN, TAB, SPACE, DOT, PLAIN]), b"*\t .*", None),
    ],
)
def test_line_edges(data, first, second):
    lines = encode_lines(data)
    assert lines[0] == first
    assert (lines[1] if len(lines) > 1 else None) == second
    check_lines(lines)
    assert decode_yenc(body_of(data)) == data


def test_a_line_that_starts_escaped_still_counts_128_characters():
    data = bytes([PLAIN] * 128 + [DOT] + [PLAIN] * 300)
    lines = encode_lines(data)
    assert lines[1][:2] == b"=n" and len(lines[1]) == 128
    check_lines(lines)


def test_empty_data_has_no_data_line():
    assert encode_lines(b"") == []
    assert decode_yenc(body_of(b"")) == b""


def test_the_body_keywords_and_crcs():
    data = random.Random(8).randbytes(5_000)
    whole = data + b"rest of the file"
    body = yenc_body(data, "name with spaces.bin", 2, 3, 701, 9_999, zlib.crc32(whole))
    lines = body.split(b"\r\n")
    assert lines[0] == b"=ybegin part=2 total=3 line=128 size=9999 name=name with spaces.bin"
    assert lines[1] == b"=ypart begin=701 end=5700"
    assert lines[-2] == b"=yend size=5000 part=2 pcrc32=%08x crc32=%08x" % (zlib.crc32(data), zlib.crc32(whole))
    assert lines[-1] == b"" and all(b"\n" not in line for line in lines)
    part = parse_yenc(body)
    assert (part.name, part.part, part.total, part.line, part.file_size) == ("name with spaces.bin", 2, 3, 128, 9_999)
    assert (part.begin, part.end, part.pcrc32, part.crc32, part.data) == (
        701,
        5_700,
        zlib.crc32(data),
        zlib.crc32(whole),
        data,
    )
    assert re.search(rb"pcrc32=[0-9a-f]{8} crc32=[0-9a-f]{8}\r\n$", body)


def test_a_damaged_body_is_refused():
    data = random.Random(9).randbytes(3_000)
    lines = body_of(data).split(b"\r\n")
    line = lines[2]
    # one data character changed (one that is no part of an escape pair): the CRC no longer matches
    at = next(i for i in range(1, len(line)) if line[i] != ord("=") and line[i - 1] != ord("="))
    changed = line[:at] + (b"B" if line[at] == ord("A") else b"A") + line[at + 1 :]
    with pytest.raises(YencError, match="CRC"):
        decode_yenc(b"\r\n".join(lines[:2] + [changed] + lines[3:]))
    # one data line lost: the size no longer matches
    with pytest.raises(YencError, match="size"):
        decode_yenc(b"\r\n".join(lines[:2] + lines[3:]))
    # a wrong pcrc32
    with pytest.raises(YencError, match="CRC"):
        decode_yenc(re.sub(rb"pcrc32=[0-9a-f]{8}", b"pcrc32=00000000", b"\r\n".join(lines)))
    # no =ypart line
    with pytest.raises(YencError, match="ypart"):
        decode_yenc(b"\r\n".join(lines[:1] + lines[2:]))


def test_make_release_writes_volumes_and_a_par2_set(tmp_path):
    release = make_release(tmp_path, "Some.Release.2026", seed=4, size=1_000_000, volumes=3, part_size=100_000)
    names = [f.name for f in release.files]
    assert names[:3] == ["Some.Release.2026.part01.rar", "Some.Release.2026.part02.rar", "Some.Release.2026.part03.rar"]
    assert names[3] == "Some.Release.2026.par2"
    assert all(re.fullmatch(r"Some\.Release\.2026\.vol\d+\+\d+\.par2", n) for n in names[4:]) and names[4:]
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(names)
    for file in release.files:
        data = file.path.read_bytes()
        assert (file.size, file.sha256) == (len(data), hashlib.sha256(data).hexdigest())
    assert [f.size for f in release.volumes] == [333_334, 333_334, 333_332]
    blob = b"".join(f.path.read_bytes() for f in release.volumes)
    assert blob == random.Random(4).randbytes(1_000_000)
    assert release.payload_sha256 == hashlib.sha256(blob).hexdigest()
    verify = subprocess.run(["par2", "verify", "-q", "Some.Release.2026.par2"], cwd=tmp_path, capture_output=True)
    assert verify.returncode == 0, verify.stdout


def test_a_release_is_the_same_for_the_same_seed(tmp_path):
    one = make_release(tmp_path / "a", "R", seed=1, size=50_000, volumes=2, part_size=10_000)
    two = make_release(tmp_path / "b", "R", seed=1, size=50_000, volumes=2, part_size=10_000)
    other = make_release(tmp_path / "c", "R", seed=2, size=50_000, volumes=2, part_size=10_000)
    assert [f.sha256 for f in one.volumes] == [f.sha256 for f in two.volumes]
    assert one.payload_sha256 != other.payload_sha256


def test_the_par2_set_repairs_a_lost_article(tmp_path):
    # 30% recovery covers one article of 100,000 bytes out of 1,000,000 with room to spare.
    release = make_release(tmp_path, "Rep", seed=6, size=1_000_000, volumes=2, part_size=100_000, par2_redundancy=30)
    volume = release.volumes[1]
    data = bytearray(volume.path.read_bytes())
    data[100_000:200_000] = bytes(100_000)  # its second article never came
    volume.path.write_bytes(data)
    repair = subprocess.run(["par2", "repair", "-q", "Rep.par2"], cwd=tmp_path, capture_output=True, text=True)
    assert repair.returncode == 0, repair.stdout
    assert hashlib.sha256(volume.path.read_bytes()).hexdigest() == volume.sha256


def test_post_files_makes_articles_as_a_posting_tool_does(tmp_path):
    release = make_release(tmp_path, "Post.Test", seed=7, size=250_000, volumes=2, part_size=50_000)
    date = dt.datetime(2026, 3, 1, 12, 30, 5, tzinfo=dt.timezone.utc)
    articles = post_files(
        release.files, "alt.binaries.test", "Poster <p@example.net>", namespace="t1", part_size=50_000, date=date
    )
    count = len(release.files)
    assert len({a.message_id for a in articles}) == len(articles)
    rebuilt: dict[str, bytearray] = {}
    for article in articles:
        header, body = article.raw.split(b"\r\n\r\n", 1)
        assert body == article_body(article)
        fields = dict(line.split(b": ", 1) for line in header.split(b"\r\n"))
        truth = article.truth
        assert fields[b"Message-ID"].decode() == article.message_id
        assert re.fullmatch(r"<[0-9a-f]{24}\.\d+@yencpost\.invalid>", article.message_id)
        assert fields[b"From"] == b"Poster <p@example.net>"
        assert fields[b"Newsgroups"] == b"alt.binaries.test"
        assert fields[b"Date"] == b"Sun, 01 Mar 2026 12:30:05 +0000"
        assert int(fields[b"Lines"]) == body.count(b"\r\n")
        match = SUBJECT.match(fields[b"Subject"].decode())
        assert match, fields[b"Subject"]
        assert match.groups() == (str(truth.file_index), str(count), truth.filename, str(truth.part), str(truth.parts))
        assert body.endswith(b"\r\n") and not body.endswith(b"\r\n.\r\n")
        part = parse_yenc(body)
        assert (part.name, part.part, part.total, part.begin, part.end, part.file_size) == (
            truth.filename,
            truth.part,
            truth.parts,
            truth.begin,
            truth.end,
            truth.file_size,
        )
        assert truth.bytes == len(article.raw)
        rebuilt.setdefault(truth.filename, bytearray()).extend(part.data)
        assert part.crc32 == zlib.crc32(next(f for f in release.files if f.name == truth.filename).path.read_bytes())
    assert {name: hashlib.sha256(data).hexdigest() for name, data in rebuilt.items()} == release.sha256_by_name()
    # each 125,000-byte volume is three parts of at most 50,000 bytes; par2 files are one part each
    volume_parts = [a.truth for a in articles if a.truth.filename == "Post.Test.part01.rar"]
    assert [(t.part, t.parts, t.begin, t.end) for t in volume_parts] == [
        (1, 3, 1, 50_000),
        (2, 3, 50_001, 100_000),
        (3, 3, 100_001, 125_000),
    ]
    assert all(
        a.truth.parts == 1 for a in articles if a.truth.filename.endswith(".par2") and a.truth.file_size <= 50_000
    )
    # another namespace, other message-ids
    again = post_files(
        release.files, "alt.binaries.test", "Poster <p@example.net>", namespace="t2", part_size=50_000, date=date
    )
    assert not {a.message_id for a in again} & {a.message_id for a in articles}


def test_the_file_counter_is_padded_to_the_width_of_the_count(tmp_path):
    paths = []
    for index in range(12):
        path = tmp_path / f"f{index}.bin"
        path.write_bytes(bytes([index]) * 10)
        paths.append(path)
    articles = post_files(paths, "alt.binaries.test", "P <p@example.net>", namespace="pad")
    subjects = [a.raw.split(b"\r\nSubject: ", 1)[1].split(b"\r\n", 1)[0].decode() for a in articles]
    assert subjects[0] == '[01/12] - "f0.bin" yEnc (1/1)'
    assert subjects[11] == '[12/12] - "f11.bin" yEnc (1/1)'


def test_obfuscated_posting_hides_every_files_name_and_poster(tmp_path):
    from simnews.yencpost import post_obfuscated

    release = make_release(
        tmp_path, "Real.Name.2024.1080p.WEB.h264-GRP", seed=9, size=200_000, volumes=2, part_size=50_000
    )
    articles = post_obfuscated(release.files, "alt.binaries.misc", namespace="obf", seed=4, part_size=50_000)
    by_file: dict[str, list] = {}
    for posted in articles:
        by_file.setdefault(posted.truth.filename, []).append(posted)
    assert set(by_file) == {f.name for f in release.files}
    headers = {}
    for name, posted in by_file.items():
        head = posted[0].raw.split(b"\r\n\r\n", 1)[0].decode()
        subject = next(line for line in head.split("\r\n") if line.startswith("Subject: "))[9:]
        poster = next(line for line in head.split("\r\n") if line.startswith("From: "))[6:]
        hidden = subject.split(" yEnc ")[0]
        assert len(hidden) == 32 and hidden.isalnum() and "Real" not in subject, subject
        headers[name] = (hidden, poster)
        # Every part of a file by one poster under one name; the file comes back whole.
        data = b"".join(decode_yenc(article_body(a)) for a in posted)
        assert data == next(f for f in release.files if f.name == name).path.read_bytes()
    assert len({h for h, _ in headers.values()}) == len(headers)
    assert len({p.split("@")[1] for _, p in headers.values()}) == len(headers)  # a domain of its own each
