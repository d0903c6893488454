"""A post exported as an NZB 1.1 file (the newzbin DTD), the format SABnzbd and NZBGet read.

A post is found by its key (``coalesce(release_posts.post_key, releases.key)``, a signed 64-bit
integer), in the group given or else in the group of least id that holds it: a crossposted post
has the same key in every group, because the digest's keys do not depend on the group. A post's
key is always the key of one of its releases, the one without a ``release_posts`` row, so finding
it takes two index probes per group, never the ``posts`` view (which aggregates a whole group).

What the NZB holds:

- ``<head><meta type="name">``: the post's name, the name of its release with the most files (as
  the ``posts`` view names it).
- One ``<file>`` per file of the post's releases that has at least one stored article, in posting
  order: by ``posted_at`` (files without a date last), then the ``[i/N]`` file counter (files
  without one last), then the name (byte order), then the file key.
- ``poster``: ``coalesce(files.poster, releases.poster)``. ``date``: ``files.posted_at`` in unix
  seconds, else the release's first post, else 0.
- ``subject``: ``files.subject`` (the subject as posted with its segment counter cut out) followed
  by `` (1/P)``, P being the file's parts: NZB files show the subject of a file's first segment.
  The counter comes back unpadded and at the end: the digest keeps neither the counter's zero
  padding (``(01/66)``) nor its place when text followed it (``yEnc (1/20) 12345`` comes back as
  ``yEnc 12345 (1/20)``). Downloaders read the file name from the subject's quoted part and the
  parts from the segments, never from this counter. A file whose parts are unknown gets no counter.
- ``<groups>``: every group in which the catalog holds the file (by its key): a crossposted file
  lists each group it was stored in, the post's own group always among them; sorted by name.
- ``<segments>``: one ``<segment bytes number>`` per part number, in number order, with the
  message-id without its angle brackets. ``bytes`` is the article's size from the overview (its
  ``:bytes`` field), the size of the yEnc-encoded article as the server holds it. A part stored
  twice (a reposted segment) is listed once, from its lowest article number.

Everything is XML-escaped; characters XML 1.0 forbids (C0 controls other than tab, LF and CR,
U+FFFE, U+FFFF, lone surrogates) are dropped, since no parser would read the file otherwise; tab,
LF and CR in attributes are written as character references so that a parser's attribute
normalisation keeps them.

The segments are read with a server-side cursor and written out as they come (nzb_chunks), so a
post of 100,000 segments never has all its rows in memory at once; post_nzb joins the chunks.
Writing the XML costs about 1.3 s of CPU per million segments. A post's files are found by the
index of files by release (ix_files_release) and their articles' packs by the packs' index of their
files (app.services.fragments), so an export's time grows with the post, not with its group.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime
from xml.sax.saxutils import escape

from sqlalchemy import text
from sqlalchemy.orm import Session

from app.services.errors import NotFound
from app.services.fragments import file_articles

XML_DECLARATION = '<?xml version="1.0" encoding="utf-8"?>\n'
DOCTYPE = '<!DOCTYPE nzb PUBLIC "-//newzBin//DTD NZB 1.1//EN" "http://www.newzbin.com/DTD/nzb/nzb-1.1.dtd">\n'
NZB_NAMESPACE = "http://www.newzbin.com/DTD/2003/nzb"
# The exported NZB is written out in pieces of about this many bytes.
CHUNK_BYTES = 1 << 16
# Rows fetched from the server-side cursor at a time.
SEGMENT_ROWS = 5_000
MIN_KEY, MAX_KEY = -(2**63), 2**63 - 1

# What XML 1.0 does not allow in a document (its Char production), in text and attributes alike.
_FORBIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
# Besides &, < and > (saxutils.escape): CR as a reference in text (a parser turns a bare one into
# LF); in attributes the quote, and tab, LF and CR, which a parser's normalisation makes spaces.
_TEXT_ENTITIES = {"\r": "&#13;"}
_ATTRIBUTE_ENTITIES = {'"': "&quot;", "\t": "&#9;", "\n": "&#10;", "\r": "&#13;"}
# Any character that escaping or cleaning would change, in text and in attributes: a value without
# one (most names, subjects and message-ids) is written as it is, at the cost of one search.
_TEXT_SPECIAL = re.compile("[&<>\r\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ATTRIBUTE_SPECIAL = re.compile('[&<>"\t\n\r\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]')

# The post of this key: in the group given, else in each group in the order of its id (a probe
# of each group's release and release_posts primary keys), the first that holds it.
FIND_POST = text("""
    SELECT g.id, g.name
      FROM groups g
     WHERE (CAST(:group_id AS integer) IS NULL OR g.id = CAST(:group_id AS integer))
       AND EXISTS (SELECT FROM releases r WHERE r.group_id = g.id AND r.key = :key)
       AND NOT EXISTS (SELECT FROM release_posts p WHERE p.group_id = g.id AND p.key = :key)
     ORDER BY g.id
     LIMIT 1
""")
# The post's releases: its own key's and those release_posts joins to it (ix_release_posts_post),
# each found by the releases' primary key.
POST_RELEASES = text("""
    SELECT r.key, r.name, r.files_seen
      FROM releases r
     WHERE r.group_id = :group_id AND r.key = :key
     UNION ALL
    SELECT r.key, r.name, r.files_seen
      FROM release_posts p
      JOIN releases r ON r.group_id = p.group_id AND r.key = p.key
     WHERE p.group_id = :group_id AND p.post_key = :key
""")
POST_FILES = text("""
    SELECT f.key, f.posted_at, f.file_index, f.parts, f.subject,
           coalesce(f.poster, r.poster) AS poster, r.first_post
      FROM files f
      JOIN releases r ON r.group_id = f.group_id AND r.key = f.release_key
     WHERE f.group_id = :group_id AND r.group_id = :group_id
       AND f.release_key = ANY(CAST(:releases AS bigint[]))
     ORDER BY f.posted_at NULLS LAST, f.file_index NULLS LAST, f.name COLLATE "C", f.key
""")
# The other groups that hold some of these files (a crosspost): a probe of each group's files.
CROSSPOSTED = text("""
    SELECT g.name, f.key
      FROM groups g
     CROSS JOIN LATERAL (SELECT x.key FROM files x
                          WHERE x.group_id = g.id AND x.key = ANY(CAST(:files AS bigint[]))) f
     WHERE g.id <> :group_id
""")
# The files' articles, each file's by part and article number, the files in the order given.
SEGMENTS = text(f"""
    SELECT o.position, f.part, f.bytes, f.message_local || h.host AS message_id
      FROM unnest(CAST(:files AS bigint[])) WITH ORDINALITY AS o(key, position)
     CROSS JOIN LATERAL ({file_articles(":group_id", "o.key")}) f
      JOIN message_hosts h ON h.id = f.host_id
     ORDER BY o.position, f.part, f.article
""")


class PostNotFound(NotFound, LookupError):
    """No post of that key (in that group)."""

    code = "unknown_post"


@dataclass(frozen=True, slots=True)
class Post:
    key: int
    group_id: int
    group: str
    name: str
    release_keys: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class _File:
    key: int
    poster: str
    date: int
    subject: str


def find_post(session: Session, post_key: int, group_id: int | None = None) -> Post:
    """The post of this key in the group given, else in the group of least id that holds it;
    PostNotFound when there is none. A session that has not begun a transaction yet begins a
    repeatable-read one (one_snapshot), so that the export that follows reads one snapshot."""
    one_snapshot(session)
    where = f" in group {group_id}" if group_id is not None else ""
    if not MIN_KEY <= post_key <= MAX_KEY:
        raise PostNotFound(f"no such post: {post_key}{where} (a post key is a signed 64-bit integer)")
    found = session.execute(FIND_POST, {"key": post_key, "group_id": group_id}).first()
    if found is None:
        raise PostNotFound(f"no such post: {post_key}{where}")
    group_id, group = found
    releases = session.execute(POST_RELEASES, {"group_id": group_id, "key": post_key}).all()
    # Named as the table posts names it: the release with the most files, then the least key.
    name = min(releases, key=lambda r: (-r.files_seen, r.key)).name
    return Post(post_key, group_id, group, name, tuple(sorted(r.key for r in releases)))


def one_snapshot(session: Session) -> None:
    """Have the session's next transaction read one snapshot (repeatable read), when it has not
    begun one yet: a join of posts committing between the export's queries would otherwise move
    releases in or out of the post half way."""
    if not session.in_transaction():
        session.connection(execution_options={"isolation_level": "REPEATABLE READ"})


def post_nzb(session: Session, post_key: int, group_id: int | None = None) -> bytes:
    """The post's NZB, UTF-8 XML (see the module's doc); PostNotFound when there is no such post."""
    return b"".join(nzb_chunks(session, find_post(session, post_key, group_id)))


def nzb_chunks(session: Session, post: Post) -> Iterator[bytes]:
    """The post's NZB in pieces of about CHUNK_BYTES, read as they are written out: the session
    must stay open until the last one."""
    return _buffered(_nzb_text(session, post))


def _nzb_text(session: Session, post: Post) -> Iterator[str]:
    files = [
        _File(row.key, row.poster or "", _unix(row.posted_at or row.first_post), _subject(row.subject, row.parts))
        for row in session.execute(POST_FILES, {"group_id": post.group_id, "releases": list(post.release_keys)})
    ]
    keys = [file.key for file in files]
    groups = _file_groups(session, post, keys)
    yield XML_DECLARATION
    yield DOCTYPE
    yield f'<nzb xmlns="{NZB_NAMESPACE}">\n'
    if post.name:
        yield f' <head>\n  <meta type="name">{xml_text(post.name)}</meta>\n </head>\n'
    if keys:
        yield from _files(session, post, files, groups)
    yield "</nzb>\n"


def _files(session: Session, post: Post, files: list[_File], groups: dict[int, str]) -> Iterator[str]:
    """The <file> elements of the files that have segments, their segments from a server-side
    cursor (the rows are ordered by file, then part: a file's element opens at its first row)."""
    rows = session.execute(
        SEGMENTS.execution_options(yield_per=SEGMENT_ROWS),
        {"group_id": post.group_id, "files": [file.key for file in files]},
    )
    try:
        current = part = None
        for position, number, size, message_id in rows:
            if position != current:
                if current is not None:
                    yield "  </segments>\n </file>\n"
                current, part = position, None
                file = files[position - 1]
                yield (
                    f' <file poster="{xml_attribute(file.poster)}" date="{file.date}"'
                    f' subject="{xml_attribute(file.subject)}">\n'
                    f"  <groups>\n{groups.get(file.key, '')}  </groups>\n  <segments>\n"
                )
            if number == part:
                continue  # the part again (a reposted segment): its lowest article is listed
            part = number
            yield (f'   <segment bytes="{size}" number="{number}">{xml_text(_bare(message_id))}</segment>\n')
        if current is not None:
            yield "  </segments>\n </file>\n"
    finally:
        rows.close()


def _file_groups(session: Session, post: Post, keys: list[int]) -> dict[int, str]:
    """Each file's <group> lines: the post's group and every other group holding the file."""
    names: dict[int, list[str]] = {key: [post.group] for key in keys}
    if keys:
        for group, key in session.execute(CROSSPOSTED, {"group_id": post.group_id, "files": keys}):
            names[key].append(group)
    return {key: "".join(f"   <group>{xml_text(g)}</group>\n" for g in sorted(found)) for key, found in names.items()}


def _buffered(pieces: Iterable[str]) -> Iterator[bytes]:
    batch: list[str] = []
    size = 0
    for piece in pieces:
        batch.append(piece)
        size += len(piece)
        if size >= CHUNK_BYTES:
            yield "".join(batch).encode("utf-8")
            batch, size = [], 0
    if batch:
        yield "".join(batch).encode("utf-8")


def _subject(subject: str, parts: int | None) -> str:
    """The subject of the file's first segment (see the module's doc)."""
    if parts is None:
        return subject
    counter = f"(1/{parts})"
    return f"{subject} {counter}" if subject else counter


def _bare(message_id: str) -> str:
    """A message-id without its angle brackets, as NZB files write it."""
    if message_id.startswith("<") and message_id.endswith(">"):
        return message_id[1:-1]
    return message_id


def _unix(moment: datetime | None) -> int:
    return int(moment.timestamp()) if moment is not None else 0


def xml_clean(value: str) -> str:
    """The text without the characters XML 1.0 forbids."""
    return _FORBIDDEN.sub("", value) if _FORBIDDEN.search(value) else value


def xml_text(value: str) -> str:
    """Element text, escaped, without forbidden characters."""
    if not _TEXT_SPECIAL.search(value):
        return value
    return escape(xml_clean(value), _TEXT_ENTITIES)


def xml_attribute(value: str) -> str:
    """An attribute's value (between double quotes), escaped, without forbidden characters."""
    if not _ATTRIBUTE_SPECIAL.search(value):
        return value
    return escape(xml_clean(value), _ATTRIBUTE_ENTITIES)
