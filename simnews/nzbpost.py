"""Real posts from NZB files, posted as articles with the NZB as their ground truth.

An NZB (version 1.0 or 1.1, with or without its namespace) lists a post's files, each with its
poster, unix date, subject and groups, and each file's segments with their number, size in bytes
and message-id. :func:`load_nzb` reads one into an :class:`NZBPost`; :func:`post_articles` turns
it into :class:`simnews.generator.Article` objects, one per segment, as a posting tool would
have sent them, each carrying an :class:`NZBTruth`; :func:`mixed_with` interleaves them with a
group's other traffic; ``python -m simnews.nzbpost`` posts NZBs to innd's feed port.

An article per segment:

- Subject: the file's subject with its segment counter set to the segment's number. The counter
  is the subject's last ``(p/P)``; its ``p`` is replaced keeping its zero padding (``(01/66)``
  becomes ``(02/66)`` ... ``(66/66)``). A subject without one (an NZB written by a test tool)
  gets `` (i/N)`` appended, N being the file's number of segments, as a posting tool writes it.
- From: the poster verbatim; Date: the file's date (RFC 5322, UTC); Newsgroups: the group given,
  else the file's groups. Header text is UTF-8; CR, LF and NUL, which would break the header
  apart, become spaces. XML allows no other C0 control character, so nothing else is touched
  (U+0095 and the like are kept, as UTF-8).
- Message-ID: the NZB's own when INN accepts it (``local@host``, both dot-atom text: printable
  ASCII, no whitespace, no ``<>``, one ``@``; at most 250 bytes with its angle brackets).
  Otherwise (an NZB of a test tool may hold file references) a made-up, deterministic one:
  ``<nzb.{sha1(NZB file name + id + namespace)[:24]}@simnews.invalid>``. With a namespace every
  message-id is made distinct, the NZB's own becoming ``<local.namespace@host>``: INN refuses a
  message-id it has seen, so a test posts one NZB twice, to two groups, under two namespaces.

Bodies are small. The segments of an NZB add up to gigabytes (a segment is some 700 KiB), far too
much to post for a test of overview data, which never reads a body. Each article gets a
yEnc-looking body of a few hundred bytes (``=ybegin``, ``=ypart``, two data lines, ``=yend``)
with the file's real sizes in its keywords; so the Bytes field of the overview is the size of the
article as posted (and as INN stored it, with its Path and Xref), not the NZB's: the truth keeps
the NZB's bytes apart. ``full_size=True`` pads the body with filler so that each article is
exactly its segment's bytes on the wire (header and body, CRLF line ends, not dot-stuffed), for
checks of the NZB's bytes through a server; where a segment is smaller than the article's header
and the shortest body, its article keeps the small body.

A file without segments (an NZB may list one) is kept in :attr:`NZBPost.files` but never posted:
:attr:`NZBPost.posted_files` leaves it out. Files are posted in the order of their date, then of
their ``[i/N]`` file counter where the subject has one, then of the NZB (NZBs list files in any
order); each file's segments in the order of their numbers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import re
import sys
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from simnews.generator import Article, _DateFormatter, _raw_article
from simnews.inject import InjectError, inject

NZB_NAMESPACE = "http://www.newzbin.com/DTD/2003/nzb"
MADE_UP_HOST = "simnews.invalid"
MAX_MESSAGE_ID = 250  # RFC 3977 and INN: the message-id with its angle brackets
DATA_LINE = 128  # the data line length the yEnc-looking bodies announce (line=128)

_SEGMENT_COUNTER = re.compile(r"\(\s*(\d{1,9})\s*/\s*(\d{1,9})\s*\)")
_FILE_COUNTER = re.compile(r"\[\s*(\d{1,9})\s*/\s*(\d{1,9})\s*\]")
_QUOTED = re.compile(r'"([^"]+)"')
_UNSAFE = re.compile("[\r\n\0]")
# RFC 5536 message-ids as INN checks them: dot-atom text on the left, dot-atom text or a
# no-fold-literal on the right.
_ATEXT = r"[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~]+"
_DOT_ATOM = re.compile(rf"{_ATEXT}(?:\.{_ATEXT})*")
_LITERAL = re.compile(r"\[[A-Za-z0-9!#$%&'*+\-/=?^_`{|}~\"(),.:;<@]*\]")


class NZBError(ValueError):
    """An NZB that cannot be read as a post: not XML, not an NZB, or a broken file or segment."""


@dataclass(frozen=True, slots=True)
class NZBSegment:
    number: int
    bytes: int  # the size of the article the NZB lists (yEnc encoded, with its header)
    message_id: str  # as the NZB gives it, without angle brackets


@dataclass(slots=True)
class NZBFile:
    poster: str
    date: int  # unix seconds
    subject: str  # as the NZB gives it, XML entities decoded
    groups: tuple[str, ...]
    segments: list[NZBSegment]  # sorted by number

    @property
    def bytes(self) -> int:
        return sum(segment.bytes for segment in self.segments)


@dataclass(slots=True)
class NZBPost:
    name: str | None  # the NZB's <meta type="name">, when it has one
    path: str
    files: list[NZBFile] = field(default_factory=list)  # in the NZB's order, files without segments included

    @property
    def posted_files(self) -> list[NZBFile]:
        """The files that have at least one segment: the others are never posted."""
        return [file for file in self.files if file.segments]

    @property
    def segment_count(self) -> int:
        return sum(len(file.segments) for file in self.files)


@dataclass(slots=True)
class NZBTruth:
    """What one article of a post is, by the NZB."""

    name: str | None  # the post's name (NZBPost.name)
    nzb_path: str
    file_index: int  # the file's position in the NZB (NZBPost.files, counting from 0)
    file_subject: str  # the file's subject as the NZB gives it
    poster: str
    date: int  # unix seconds, the Date posted
    segment: int  # the segment's number
    segments: int  # the file's number of segments
    nzb_bytes: int  # the segment's bytes in the NZB (not the article's size: bodies are small)
    message_id: str  # as posted, with angle brackets
    nzb_message_id: str  # as the NZB gives it
    subject: bytes  # as posted
    newsgroups: tuple[str, ...]  # as posted
    bytes: int  # the size of the article as posted


# --- reading -----------------------------------------------------------------------------------


def _local(tag: object) -> str:
    """An element's name without its namespace: NZBs come with NZB 1.1's namespace or none."""
    return tag.rpartition("}")[2] if isinstance(tag, str) else ""


def _children(element: ET.Element, name: str) -> list[ET.Element]:
    return [child for child in element if _local(child.tag) == name]


def _integer(value: str | None, what: str, path: str, minimum: int) -> int:
    if value is None:
        raise NZBError(f"{path}: {what} is missing")
    try:
        number = int(value.strip())
    except ValueError:
        raise NZBError(f"{path}: {what} is not an integer: {value!r}") from None
    if number < minimum:
        raise NZBError(f"{path}: {what} is below {minimum}: {value!r}")
    return number


def _segment(element: ET.Element, path: str, where: str) -> NZBSegment:
    number = _integer(element.get("number"), f"{where}: a segment's number", path, 1)
    where = f"{where}, segment {number}"
    size = _integer(element.get("bytes"), f"{where}: bytes", path, 0)
    message_id = (element.text or "").strip()
    if message_id.startswith("<") and message_id.endswith(">"):
        message_id = message_id[1:-1].strip()  # some tools write the angle brackets too
    if not message_id:
        raise NZBError(f"{path}: {where} has no message-id")
    return NZBSegment(number, size, message_id)


def _file(element: ET.Element, path: str, position: int) -> NZBFile:
    where = f"file {position + 1}"
    date = _integer(element.get("date"), f"{where}: date", path, 0)
    groups = tuple(
        text
        for group in _children(element, "groups")
        for g in _children(group, "group")
        if (text := (g.text or "").strip())
    )
    segments = [
        _segment(s, path, where) for block in _children(element, "segments") for s in _children(block, "segment")
    ]
    segments.sort(key=lambda segment: segment.number)
    return NZBFile(element.get("poster", ""), date, element.get("subject", ""), groups, segments)


def load_nzb(path: str | os.PathLike) -> NZBPost:
    """The post an NZB file describes; NZBError when it is unreadable, not an NZB, or has a
    file without a date or a segment without an integer number, bytes or a message-id."""
    path = os.fspath(path)
    try:
        root = ET.parse(path).getroot()
    except ET.ParseError as exc:
        raise NZBError(f"{path}: not XML: {exc}") from None
    except OSError as exc:
        raise NZBError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if _local(root.tag) != "nzb":
        raise NZBError(f"{path}: not an NZB: the root element is <{_local(root.tag)}>, not <nzb>")
    name = None
    for head in _children(root, "head"):
        for meta in _children(head, "meta"):
            if meta.get("type") == "name" and (text := (meta.text or "").strip()):
                name = text
                break
    files = [_file(element, path, position) for position, element in enumerate(_children(root, "file"))]
    if not files:
        raise NZBError(f"{path}: the NZB lists no <file>")
    return NZBPost(name, path, files)


# --- subjects and message-ids ------------------------------------------------------------------


def segment_subject(subject: str, number: int, count: int) -> str:
    """The subject of segment `number`: the last ``(p/P)`` counter with p set to `number` (its
    zero padding kept), or `` (number/count)`` appended when the subject has no counter."""
    counters = list(_SEGMENT_COUNTER.finditer(subject))
    if not counters:
        return f"{subject} ({number}/{count})"
    last = counters[-1]
    width = len(last.group(1))
    return f"{subject[: last.start(1)]}{number:0{width}d}{subject[last.end(1) :]}"


def file_counter(subject: str) -> tuple[int, int] | None:
    """The subject's ``[i/N]`` file counter (its first), or None."""
    match = _FILE_COUNTER.search(subject)
    return (int(match.group(1)), int(match.group(2))) if match else None


def header_bytes(text: str) -> bytes:
    """Header text as posted: UTF-8, with CR, LF and NUL (never allowed in a header) as spaces."""
    return _UNSAFE.sub(" ", text).encode("utf-8")


def is_valid_message_id(message_id: str) -> bool:
    """Whether ``<message_id>`` is a message-id INN accepts (RFC 5536; INN's strict syntax)."""
    if len(message_id) + 2 > MAX_MESSAGE_ID or message_id.count("@") != 1:
        return False
    local, _, host = message_id.partition("@")
    return bool(_DOT_ATOM.fullmatch(local)) and bool(_DOT_ATOM.fullmatch(host) or _LITERAL.fullmatch(host))


def check_namespace(namespace: str) -> str:
    """The namespace, when it can go into a message-id (dot-atom text, or empty); else ValueError."""
    if namespace and not _DOT_ATOM.fullmatch(namespace):
        raise ValueError(
            f"namespace {namespace!r} cannot go into a message-id: use letters, digits, "
            "dots (not first, last or doubled) and !#$%&'*+-/=?^_`{|}~"
        )
    return namespace


def posted_message_id(nzb_path: str, message_id: str, namespace: str = "") -> str:
    """The message-id a segment is posted with, angle brackets included (see the module's text)."""
    if is_valid_message_id(message_id):
        if not namespace:
            return f"<{message_id}>"
        local, _, host = message_id.partition("@")
        spaced = f"{local}.{namespace}@{host}"
        if len(spaced) + 2 <= MAX_MESSAGE_ID:
            return f"<{spaced}>"
    digest = hashlib.sha1((os.path.basename(nzb_path) + message_id + namespace).encode("utf-8")).hexdigest()
    return f"<nzb.{digest[:24]}@{MADE_UP_HOST}>"


# --- articles ----------------------------------------------------------------------------------


def _yenc_name(subject: str) -> str:
    """The file name a yEnc header would carry: the subject's quoted name, else the subject."""
    quoted = _QUOTED.findall(subject)
    if quoted:
        return quoted[-1]
    return _SEGMENT_COUNTER.sub("", subject).replace(" yEnc", "").strip() or "file"


def _data(seed: bytes, length: int) -> bytes:
    """`length` bytes of deterministic hex filler (a data line never starts with a dot)."""
    unit = hashlib.sha256(seed).hexdigest().encode()
    return (unit * (length // len(unit) + 1))[:length]


def _filled(
    make: Callable[[list[bytes]], bytes], head: list[bytes], tail: list[bytes], seed: bytes, target: int, least: int
) -> bytes | None:
    """make(head + data lines + tail) of exactly `target` bytes, with at least `least` data
    lines of up to DATA_LINE bytes each, or None when even the shortest such article is longer."""

    def shortest(count: int) -> int:
        return len(make(head + [b""] * count + tail))

    base = shortest(least)
    if base > target:
        return None
    # each data line adds its CRLF and up to DATA_LINE bytes; the Lines header may grow a digit
    guess = max(least, (target - base) // (DATA_LINE + 2))
    for count in range(max(least, guess - 2), guess + 4):
        low = shortest(count)
        if low <= target <= low + DATA_LINE * count:
            spare = target - low
            sizes = [DATA_LINE] * (spare // DATA_LINE) + [spare % DATA_LINE]
            sizes = (sizes + [0] * count)[:count]
            return make(head + [_data(seed + b"%d" % i, size) for i, size in enumerate(sizes)] + tail)
    return None


def _article(
    post: NZBPost,
    index: int,
    file: NZBFile,
    segment: NZBSegment,
    offset: int,
    newsgroups: tuple[str, ...],
    namespace: str,
    format_date: _DateFormatter,
    full_size: bool,
    added: int = 0,
) -> Article[NZBTruth]:
    count = len(file.segments)
    subject = header_bytes(segment_subject(file.subject, segment.number, count))
    message_id = posted_message_id(post.path, segment.message_id, namespace)
    poster = header_bytes(file.poster)
    groups = header_bytes(",".join(newsgroups))
    date = format_date(file.date)
    mid = message_id.encode()
    name = header_bytes(_yenc_name(file.subject))
    data = [_data(mid, DATA_LINE), _data(mid + b"2", DATA_LINE)]
    head = [
        b"=ybegin part=%d total=%d line=%d size=%d name=%s" % (segment.number, count, DATA_LINE, file.bytes, name),
        b"=ypart begin=%d end=%d" % (offset + 1, offset + segment.bytes),
    ]
    tail = [b"=yend size=%d part=%d pcrc32=%08x" % (segment.bytes, segment.number, zlib.crc32(b"".join(data)))]

    def make(lines: list[bytes]) -> bytes:
        body = b"".join(line + b"\r\n" for line in lines)
        return _raw_article(poster, groups, subject, date, mid, body, len(lines))

    raw = make(head + data + tail)
    target = segment.bytes - added
    if full_size and len(raw) != target:
        # the yEnc lines when they fit in the segment's bytes, else data lines alone
        raw = _filled(make, head, tail, mid, target, 1) or _filled(make, [], [], mid, target, 0) or raw
    truth = NZBTruth(
        post.name,
        post.path,
        index,
        file.subject,
        file.poster,
        file.date,
        segment.number,
        count,
        segment.bytes,
        message_id,
        segment.message_id,
        subject,
        newsgroups,
        len(raw),
    )
    return Article(message_id, raw, False, truth)


def posting_order(post: NZBPost) -> list[tuple[int, NZBFile]]:
    """The posted files with their index in the NZB, in the order they are posted: by date, then
    by ``[i/N]`` file counter where the subject has one (files without come after), then NZB order."""

    def key(item: tuple[int, NZBFile]) -> tuple:
        index, file = item
        counter = file_counter(file.subject)
        return (file.date, counter is None, counter[0] if counter else 0, index)

    return sorted(((i, f) for i, f in enumerate(post.files) if f.segments), key=key)


def post_articles(
    post: NZBPost,
    group: str | None = None,
    *,
    namespace: str = "",
    full_size: bool = False,
    server_adds: Callable[[int], int] | None = None,
) -> list[Article[NZBTruth]]:
    """One article per segment of the post's files, in posting order (see the module's text),
    each with its :class:`NZBTruth`; posted to `group` when given, else to each file's groups.

    With full_size, server_adds(i) is what the server adds to the i-th article (0-based) when it
    stores it (INN: its Path entry and an Xref header naming the article's number): the article is
    posted that much shorter, so that the size the server then reports is the NZB's."""
    check_namespace(namespace)
    if group is not None and (not group or _UNSAFE.search(group) or any(c.isspace() or c == "," for c in group)):
        raise ValueError(f"bad newsgroup name {group!r}")
    format_date = _DateFormatter()
    articles: list[Article[NZBTruth]] = []
    for index, file in posting_order(post):
        newsgroups = (group,) if group is not None else file.groups
        if not newsgroups:
            raise ValueError(f"{post.path}: file {index + 1} names no group, and no group was given")
        offset = 0
        for segment in file.segments:
            added = server_adds(len(articles)) if full_size and server_adds is not None else 0
            articles.append(
                _article(post, index, file, segment, offset, newsgroups, namespace, format_date, full_size, added)
            )
            offset += segment.bytes
    return articles


def mixed_with(post_articles: Iterable, other_articles: Iterable, seed: int) -> list:
    """The two streams interleaved at random (the same seed, the same mix), each in its own order:
    every interleaving is equally likely, so a post is spread through the other traffic."""
    rng = random.Random(seed)
    ours, theirs = list(post_articles), list(other_articles)
    mixed = []
    i = j = 0
    while i < len(ours) or j < len(theirs):
        left = len(ours) - i
        if rng.randrange(left + len(theirs) - j) < left:
            mixed.append(ours[i])
            i += 1
        else:
            mixed.append(theirs[j])
            j += 1
    return mixed


# --- command line ------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m simnews.nzbpost",
        description="Post NZB files as articles (one a segment, small bodies) to innd's feed port.",
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True, help="innd feed port")
    parser.add_argument("--group", help="post every article to this group (default: each file's groups)")
    parser.add_argument("--namespace", default="", help="makes every message-id distinct to this namespace")
    parser.add_argument("--conns", type=int, default=1, help="feed connections (1 keeps the posting order)")
    parser.add_argument("nzb", nargs="+", help="NZB files")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port {args.port} is not a TCP port")
    if args.conns < 1:
        parser.error("--conns must be at least 1")
    articles = []
    posts = []
    try:
        check_namespace(args.namespace)
        for path in args.nzb:
            post = load_nzb(path)
            posted = post_articles(post, args.group, namespace=args.namespace)
            articles += posted
            posts.append(
                {"name": post.name, "path": post.path, "files": len(post.posted_files), "segments": len(posted)}
            )
    except ValueError as exc:  # NZBError included
        parser.error(str(exc))
    try:
        result = inject(args.host, args.port, articles, args.conns)
    except (OSError, InjectError) as exc:
        print(f"{parser.prog}: cannot post to {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    print(
        json.dumps(
            {"posted": result.sent, "accepted": result.accepted, "rejected": result.rejected, "posts": posts},
            ensure_ascii=False,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
