"""Real binary content posted as Usenet posting tools post it: files of known SHA-256, yEnc 1.3.

:func:`make_release` writes a release into a directory: a random payload (from a seed) cut
rar-like into volumes ``name.part01.rar`` ... ``name.partNN.rar`` (raw byte slices of one blob,
no rar format: a downloader told not to unpack never looks inside), and a par2 recovery set over
them made by Debian's ``par2 create`` (``name.par2``, ``name.vol00+01.par2``, ...). Each file
comes back with its size and SHA-256, so that a test can check what a downloader wrote.

:func:`post_files` turns files into :class:`simnews.generator.Article` objects, one per yEnc
part, as a posting tool sends them:

- Subject ``[i/N] - "file name" yEnc (p/P)``: ``i`` the file's place among the ``N`` files
  (zero-padded to the width of ``N``), ``p`` the part among the file's ``P`` parts.
- Body: yEnc 1.3 multipart, even for a file of one part::

      =ybegin part=p total=P line=128 size=<file size> name=<file name>
      =ypart begin=<first byte, 1-based> end=<last byte, inclusive>
      <encoded lines>
      =yend size=<part size> part=p pcrc32=<CRC-32 of the part> crc32=<CRC-32 of the file>

  CRCs are zlib's CRC-32 as 8 lowercase hex digits. Each byte is written as ``(byte + 42) mod
  256``; NUL, LF, CR and ``=`` are always escaped (``=`` then ``(char + 64) mod 256``), and so
  are TAB and space at the start or end of a line and ``.`` at the start of a line. Lines hold
  128 characters, an escape pair counting 2; a line that would end in the middle of a pair takes
  the pair whole (129 characters). Lines end with CRLF.
- Message-ID ``<hash.p@yencpost.invalid>``, the hash taken over the namespace, group, file name
  and file place: a test makes each run's ids new with a fresh namespace (INN refuses an id it
  has seen). From: the poster; Date: the time given (now by default); Newsgroups: the group.
- ``Article.raw`` is not dot-stuffed: :mod:`simnews.inject` does that on the wire. Each
  article's :class:`YencTruth` says which file and part it carries.

:func:`parse_yenc` and :func:`decode_yenc` read such a body back and check its sizes and CRCs.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import random
import re
import subprocess
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from simnews.generator import Article, _DateFormatter, _raw_article

LINE_LENGTH = 128
PART_SIZE = 700_000  # decoded bytes per article, about what posting tools use
HOST = "yencpost.invalid"
PAR2 = "par2"

_SHIFT = bytes((b + 42) & 0xFF for b in range(256))
_UNSHIFT = bytes((b - 42) & 0xFF for b in range(256))
_ALWAYS_CRITICAL = re.compile(rb"[\x00\n\r=]")
_ESCAPED = re.compile(rb"=(.)", re.DOTALL)
_EQUALS = 0x3D
_LINE_START_CRITICAL = b"\t ."  # also escaped as a line's first character
_LINE_END_CRITICAL = b"\t "  # also escaped as a line's last character
_KEYWORD = re.compile(rb"(\w+)=(\S*)")


class YencError(ValueError):
    """A yEnc body that cannot be read, or whose size or CRC does not match its data."""


@dataclass(frozen=True, slots=True)
class ReleaseFile:
    name: str
    path: Path
    size: int
    sha256: str


@dataclass(frozen=True, slots=True)
class Release:
    name: str
    directory: Path
    files: list[ReleaseFile]  # the volumes in order, then the par2 index, then the recovery volumes
    payload_sha256: str  # of the whole blob the volumes are slices of

    @property
    def volumes(self) -> list[ReleaseFile]:
        return [f for f in self.files if not f.name.endswith(".par2")]

    @property
    def par2_files(self) -> list[ReleaseFile]:
        return [f for f in self.files if f.name.endswith(".par2")]

    def sha256_by_name(self) -> dict[str, str]:
        return {f.name: f.sha256 for f in self.files}


@dataclass(frozen=True, slots=True)
class YencTruth:
    """What one posted article carries."""

    filename: str
    file_index: int  # 1-based place among the files posted together
    file_count: int
    part: int  # 1-based
    parts: int
    begin: int  # 1-based first byte of the file in this part
    end: int  # inclusive
    file_size: int
    group: str
    bytes: int  # the article as posted: header and body, CRLF line ends, not dot-stuffed


@dataclass(frozen=True, slots=True)
class YencPart:
    """A yEnc body read back: its keywords and decoded data (sizes and CRCs checked)."""

    name: str
    part: int
    total: int
    line: int
    file_size: int
    begin: int
    end: int
    pcrc32: int
    crc32: int | None
    data: bytes


# --- the release ----------------------------------------------------------------------------------


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _file(path: Path) -> ReleaseFile:
    data = path.read_bytes()
    return ReleaseFile(path.name, path, len(data), _sha256(data))


def make_release(
    directory: str | Path,
    name: str,
    seed: int,
    *,
    size: int = 3_000_000,
    volumes: int = 3,
    part_size: int = PART_SIZE,
    par2_redundancy: int = 10,
    par2_files: int = 3,
) -> Release:
    """Writes the release `name` into `directory`: `size` random bytes (from `seed`) cut into
    `volumes` rar-like volumes, and a par2 set with `par2_redundancy` percent of recovery data
    in up to `par2_files` recovery volumes.

    The par2 block size follows `part_size` (an eighth of it, rounded down to a multiple of 4,
    as par2 wants): a lost article then costs about eight blocks, so the redundancy needed to
    repair one is about part_size / size, plus a block for where the part falls."""
    if size < 1 or volumes < 1 or volumes > size:
        raise ValueError("a release needs at least one byte per volume")
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    blob = random.Random(seed).randbytes(size)
    width = max(2, len(str(volumes)))
    volume_size = -(-size // volumes)
    names = []
    for index in range(volumes):
        volume_name = f"{name}.part{index + 1:0{width}d}.rar"
        (directory / volume_name).write_bytes(blob[index * volume_size : (index + 1) * volume_size])
        names.append(volume_name)
    block = max(4, part_size // 8 // 4 * 4)
    blocks = sum(-(-(directory / n).stat().st_size // block) for n in names)
    recovery = max(1, -(-blocks * par2_redundancy // 100))
    par2_name = f"{name}.par2"
    before = set(directory.iterdir())
    # Relative names, run in the directory: par2 records the names as given, and a downloader
    # matches them against the files it wrote.
    result = subprocess.run(
        [
            PAR2,
            "create",
            "-q",
            "-q",
            f"-s{block}",
            f"-c{recovery}",
            f"-n{min(par2_files, recovery)}",
            par2_name,
            *names,
        ],
        cwd=directory,
        capture_output=True,
        text=True,
        timeout=120,
    )
    if result.returncode != 0:
        raise RuntimeError(f"par2 create failed ({result.returncode}): {result.stdout}{result.stderr}")
    made = sorted((p for p in set(directory.iterdir()) - before if p.name.endswith(".par2")), key=_par2_order)
    if not made or made[0].name != par2_name:
        raise RuntimeError(f"par2 create made {[p.name for p in made]}")
    files = [_file(directory / n) for n in names] + [_file(p) for p in made]
    return Release(name, directory, files, _sha256(blob))


def _par2_order(path: Path) -> tuple[int, str]:
    """The index file first, then the recovery volumes by their first block (vol00, vol01, vol03...)."""
    match = re.search(r"\.vol(\d+)\+\d+\.par2$", path.name)
    return (int(match[1]) + 1 if match else 0, path.name)


# --- yEnc ----------------------------------------------------------------------------------------


def _escape(match: re.Match) -> bytes:
    return bytes((_EQUALS, (match[0][0] + 64) & 0xFF))


def encode_lines(data: bytes, line_length: int = LINE_LENGTH) -> list[bytes]:
    """The yEnc-encoded lines of `data` (without line ends)."""
    # All of the always-critical characters are escaped at once; what is left is where lines
    # break and the edge rules, which look at one line at a time. An "=" in the escaped stream
    # always starts a pair: no escaped character (critical + 64) is "=".
    stream = _ALWAYS_CRITICAL.sub(_escape, data.translate(_SHIFT))
    lines = []
    position, length = 0, len(stream)
    while position < length:
        first = stream[position]
        if first in _LINE_START_CRITICAL:
            head = bytes((_EQUALS, first + 64))
            position += 1
            width = line_length - 2
        else:
            head = b""
            width = line_length
        end = min(position + width, length)
        if end > position and stream[end - 1] == _EQUALS:
            end += 1  # the pair stays whole
        text = head + stream[position:end]
        position = end
        # The second character of a pair is never TAB or space: a TAB or space at the end is data.
        if text[-1] in _LINE_END_CRITICAL:
            text = text[:-1] + bytes((_EQUALS, text[-1] + 64))
        lines.append(text)
    return lines


def yenc_body(
    data: bytes,
    name: str,
    part: int,
    total: int,
    begin: int,
    file_size: int,
    file_crc: int,
    line_length: int = LINE_LENGTH,
) -> bytes:
    """One multipart yEnc body: `data` is the file's bytes begin..begin+len-1 (1-based)."""
    end = begin + len(data) - 1
    lines = [
        b"=ybegin part=%d total=%d line=%d size=%d name=%s" % (part, total, line_length, file_size, name.encode()),
        b"=ypart begin=%d end=%d" % (begin, end),
        *encode_lines(data, line_length),
        b"=yend size=%d part=%d pcrc32=%08x crc32=%08x" % (len(data), part, zlib.crc32(data), file_crc),
    ]
    return b"".join(line + b"\r\n" for line in lines)


def _keywords(line: bytes, prefix: bytes) -> dict[str, bytes]:
    if not line.startswith(prefix):
        raise YencError(f"expected {prefix.decode()}, got {line[:60]!r}")
    rest = line[len(prefix) :]
    name = None
    if prefix == b"=ybegin ":
        # name= is the last keyword and runs to the end of the line, spaces and all
        before, found, name = rest.partition(b" name=")
        if not found:
            if not rest.startswith(b"name="):
                raise YencError("=ybegin without name=")
            before, name = b"", rest[5:]
        rest = before
    words = {k.decode(): v for k, v in _KEYWORD.findall(rest)}
    if name is not None:
        words["name"] = name
    return words


def _number(words: dict[str, bytes], key: str, base: int = 10) -> int:
    try:
        return int(words[key], base)
    except (KeyError, ValueError):
        raise YencError(f"bad or missing {key}=") from None


def parse_yenc(body: bytes) -> YencPart:
    """Reads a multipart yEnc body (CRLF line ends, not dot-stuffed) and checks it: the part's
    size against =yend size and =ypart, its CRC against pcrc32."""
    lines = body.split(b"\r\n")
    while lines and lines[-1] == b"":
        lines.pop()
    if len(lines) < 3:
        raise YencError("a yEnc body has at least =ybegin, =ypart and =yend")
    begin_words = _keywords(lines[0], b"=ybegin ")
    part_words = _keywords(lines[1], b"=ypart ")
    end_words = _keywords(lines[-1], b"=yend ")
    data = _ESCAPED.sub(lambda m: bytes(((m[1][0] - 64) & 0xFF,)), b"".join(lines[2:-1])).translate(_UNSHIFT)
    begin, end = _number(part_words, "begin"), _number(part_words, "end")
    size = _number(end_words, "size")
    if not (len(data) == size == end - begin + 1):
        raise YencError(f"size mismatch: {len(data)} bytes decoded, =yend size={size}, =ypart {begin}..{end}")
    pcrc32 = _number(end_words, "pcrc32", 16)
    if zlib.crc32(data) != pcrc32:
        raise YencError(f"CRC mismatch: {zlib.crc32(data):08x} decoded, pcrc32={pcrc32:08x}")
    part = _number(begin_words, "part")
    if _number(end_words, "part") != part:
        raise YencError("=yend part differs from =ybegin part")
    return YencPart(
        name=begin_words["name"].decode("utf-8", "replace"),
        part=part,
        total=_number(begin_words, "total"),
        line=_number(begin_words, "line"),
        file_size=_number(begin_words, "size"),
        begin=begin,
        end=end,
        pcrc32=pcrc32,
        crc32=_number(end_words, "crc32", 16) if "crc32" in end_words else None,
        data=data,
    )


def decode_yenc(body: bytes) -> bytes:
    """The decoded data of a multipart yEnc body, its size and CRC checked (YencError if not)."""
    return parse_yenc(body).data


# --- posting --------------------------------------------------------------------------------------


def message_id(namespace: str, group: str, filename: str, file_index: int, part: int) -> str:
    digest = hashlib.sha1(f"{namespace}\0{group}\0{file_index}\0{filename}".encode()).hexdigest()[:24]
    return f"<{digest}.{part}@{HOST}>"


def post_files(
    files: Sequence[ReleaseFile | str | Path],
    group: str,
    poster: str,
    *,
    namespace: str,
    part_size: int = PART_SIZE,
    date: dt.datetime | None = None,
) -> list[Article[YencTruth]]:
    """The articles of `files` posted together to `group`, in posting order (files in the order
    given, each file's parts in order)."""
    if part_size < 1:
        raise ValueError("part_size must be positive")
    paths = [f.path if isinstance(f, ReleaseFile) else Path(f) for f in files]
    moment = date or dt.datetime.now(dt.timezone.utc)
    date_bytes = _DateFormatter()(int(moment.timestamp()))
    count = len(paths)
    width = len(str(count))
    articles = []
    for index, path in enumerate(paths, 1):
        data = path.read_bytes()
        name = path.name
        parts = max(1, -(-len(data) // part_size))
        file_crc = zlib.crc32(data)
        for part in range(1, parts + 1):
            chunk = data[(part - 1) * part_size : part * part_size]
            begin = (part - 1) * part_size + 1
            body = yenc_body(chunk, name, part, parts, begin, len(data), file_crc)
            subject = f'[{index:0{width}d}/{count}] - "{name}" yEnc ({part}/{parts})'
            mid = message_id(namespace, group, name, index, part)
            raw = _raw_article(
                poster.encode(), group.encode(), subject.encode(), date_bytes, mid.encode(), body, body.count(b"\r\n")
            )
            truth = YencTruth(
                filename=name,
                file_index=index,
                file_count=count,
                part=part,
                parts=parts,
                begin=begin,
                end=begin + len(chunk) - 1,
                file_size=len(data),
                group=group,
                bytes=len(raw),
            )
            articles.append(Article(mid, raw, truth=truth))
    return articles


_OBFUSCATED_ALPHABET = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


def post_obfuscated(
    files: Sequence[ReleaseFile | str | Path],
    group: str,
    *,
    namespace: str,
    seed: int,
    part_size: int = PART_SIZE,
    date: dt.datetime | None = None,
) -> list[Article[YencTruth]]:
    """The articles of `files` posted as obfuscating posting tools post them: every file under a
    random 32-character name of its own (its subject ``NAME yEnc (p/P)``, no file counter, and
    its yEnc ``name=``) by a random poster from a random mail domain of its own, so that nothing
    in the headers ties the files together or tells what they are; only the par2 set among them
    lists their real names. The truth keeps each file's real name."""
    rng = random.Random(seed)
    paths = [f.path if isinstance(f, ReleaseFile) else Path(f) for f in files]
    moment = date or dt.datetime.now(dt.timezone.utc)
    date_bytes = _DateFormatter()(int(moment.timestamp()))
    articles = []
    for index, path in enumerate(paths, 1):
        data = path.read_bytes()
        hidden = "".join(rng.choice(_OBFUSCATED_ALPHABET) for _ in range(32))
        user = "".join(rng.choice(_OBFUSCATED_ALPHABET) for _ in range(rng.randint(6, 12)))
        domain = "".join(rng.choice(_OBFUSCATED_ALPHABET[:26]) for _ in range(rng.randint(5, 10)))
        poster = f"{user} <{user}@{domain}.com>"
        parts = max(1, -(-len(data) // part_size))
        file_crc = zlib.crc32(data)
        for part in range(1, parts + 1):
            chunk = data[(part - 1) * part_size : part * part_size]
            begin = (part - 1) * part_size + 1
            body = yenc_body(chunk, hidden, part, parts, begin, len(data), file_crc)
            subject = f"{hidden} yEnc ({part}/{parts})"
            mid = message_id(namespace, group, hidden, index, part)
            raw = _raw_article(
                poster.encode(), group.encode(), subject.encode(), date_bytes, mid.encode(), body, body.count(b"\r\n")
            )
            truth = YencTruth(
                filename=path.name,
                file_index=index,
                file_count=len(paths),
                part=part,
                parts=parts,
                begin=begin,
                end=begin + len(chunk) - 1,
                file_size=len(data),
                group=group,
                bytes=len(raw),
            )
            articles.append(Article(mid, raw, truth=truth))
    return articles


def article_body(article: Article) -> bytes:
    """The body of an article as posted (after the blank line that ends the header)."""
    return article.raw.split(b"\r\n\r\n", 1)[1]
