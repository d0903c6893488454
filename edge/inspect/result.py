"""A post inspected: the few article bodies an edge node read of it, turned into the compact
result it posts back (docs/api.md, Inspections), and which of a post's files to read.

:func:`wanted_files` picks, from a post's file names, the files whose first article tells the
most: the .nfo, the par2 index (the .par2 without ``.volNN+NN``, else the smallest recovery
volume), the first volume of each archive set (.part01.rar, .rar, .r00 when there is no .rar,
.7z.001, .7z, .z01, .zip), at most MAX_WANTED, in that order (the small ones first: a caller
that stops at a byte budget keeps them).

:func:`inspect_post` reads the bodies: each is decoded from yEnc (edge.inspect.yenc; one that is
not yEnc is taken as the file's bytes as they are) and recognised by its first bytes, whatever
its name: PAR2 packets (edge.inspect.par2), a RAR, 7z or ZIP archive (edge.inspect.archives);
else a file named .nfo is read as one (edge.inspect.nfo; the first such only). Several bodies of
one file (its yEnc name, else the name given) are put together by their yEnc offsets, and the
volumes of a 7z split (name.7z.001, .002...) at theirs, so that a 7z archive's end header read
from a later article is found. Nothing raises: a body refused or a header malformed is counted in
``malformed`` (a body whose CRC does not match is counted and still read) and the rest is read.

The result: the files the par2 set lists (``source`` par2, with the MD5 of their first 16 KiB)
and those inside the archives (``source`` the archive's kind, with ``encrypted``); the .nfo's
text, release name and ids; newznab's password level (1 when any archive read has encrypted files
or headers, else 2 when one holds an archive, else 0: the .nfo's password sites are a flag, not a
level); the flags ``encrypted_headers``, ``executable`` (a file listed, by par2 or inside an
archive, with an executable's extension: edge.digest.rules.EXECUTABLE_EXTENSIONS) and
``password_url``.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from edge.inspect import archives, nfo, par2, yenc
from edge.inspect.archives import ArchiveInfo

MAX_WANTED = 4
MAX_FILES = 10_000  # entries in a result, par2's and archives' together
# The files' share of a result's JSON: with the rest (an .nfo of 64 KiB is at most 384 KiB of
# JSON) far under the 4 MiB the data center takes.
MAX_FILES_JSON = 3 * 1024 * 1024
MAX_NAME = 1_024
HASH16K = 16 * 1024  # PAR2 hashes a file's first 16 KiB (its hash16k)
FLAGS = ("encrypted_headers", "executable", "password_url")

_PAR2_VOLUME = re.compile(r"\.vol(\d+)\+(\d+)\.par2$", re.IGNORECASE)
_RAR_PART = re.compile(r"\.part(\d+)\.rar$", re.IGNORECASE)
_7Z_VOLUME = re.compile(r"^(.*\.7z)\.(\d{3})$", re.IGNORECASE)
_FIRST_VOLUMES = (
    re.compile(r"\.part0*1\.rar$", re.IGNORECASE),
    re.compile(r"\.7z\.0*1$", re.IGNORECASE),
    re.compile(r"\.7z$", re.IGNORECASE),
    re.compile(r"\.z01$", re.IGNORECASE),
    re.compile(r"\.zip\.0*1$", re.IGNORECASE),
)


@dataclass(frozen=True, slots=True)
class ReadFile:
    """A file whose first article was read, as posted: its name and size as its yEnc header
    gives them, and the MD5 of its first 16 KiB (PAR2's hash16k), which is what ties an
    obfuscated file to the par2 set that lists it under its real name."""

    name: str
    size: int
    hash16k: str


@dataclass(frozen=True, slots=True)
class InspectedFile:
    name: str
    size: int | None
    source: str  # par2, or the archive's kind: rar4, rar5, 7z, zip
    encrypted: bool | None = None  # an archive's file: its data needs a password
    hash16k: str | None = None  # par2: hex MD5 of the file's first 16 KiB


@dataclass(slots=True)
class PostInspection:
    files: list[InspectedFile] = field(default_factory=list)
    read: list[ReadFile] = field(default_factory=list)  # the files read from their start
    name: str | None = None  # the release name the .nfo shows
    nfo: str | None = None
    imdb: int | None = None
    tvdb: int | None = None
    tvmaze: int | None = None
    tmdb: int | None = None
    tmdb_kind: str | None = None
    password_urls: list[str] = field(default_factory=list)
    password: int = 0  # newznab's: 0 none seen, 1 passworded, 2 potentially (an archive inside)
    flags: list[str] = field(default_factory=list)  # of FLAGS
    archives: list[ArchiveInfo] = field(default_factory=list)
    par2_creator: str | None = None
    articles_read: int = 0
    articles_missing: int = 0
    bytes_read: int = 0
    malformed: dict[str, int] = field(default_factory=dict)  # what was refused or skipped, by why

    def count(self, why: str, times: int = 1) -> None:
        if times:
            self.malformed[why] = self.malformed.get(why, 0) + times

    def to_dict(self) -> dict[str, Any]:
        """The result as a node posts it: plain dicts, lists, str, int and bool (JSON and msgpack
        alike), each field within the bounds the data center checks, and in all well under the
        4 MiB it takes as JSON: the files stop at MAX_FILES_JSON bytes of JSON (``files_left_out``
        says how many did not fit)."""
        files = []
        budget = MAX_FILES_JSON
        for entry in self.files[:MAX_FILES]:
            item: dict[str, Any] = {"name": entry.name, "source": entry.source}
            if entry.size is not None:
                item["size"] = entry.size
            if entry.encrypted is not None:
                item["encrypted"] = entry.encrypted
            if entry.hash16k is not None:
                item["hash16k"] = entry.hash16k
            budget -= len(json.dumps(item)) + 2
            if budget < 0:
                break
            files.append(item)
        return {
            "files": files,
            "files_left_out": len(self.files) - len(files),
            "read": [{"name": entry.name, "size": entry.size, "hash16k": entry.hash16k} for entry in self.read],
            "name": self.name,
            "nfo": self.nfo,
            "imdb": self.imdb,
            "tvdb": self.tvdb,
            "tvmaze": self.tvmaze,
            "tmdb": self.tmdb,
            "tmdb_kind": self.tmdb_kind,
            "password_urls": list(self.password_urls),
            "password": self.password,
            "flags": sorted(set(self.flags)),
            "archives": [_archive_dict(info) for info in self.archives],
            "par2_creator": self.par2_creator,
            "articles_read": self.articles_read,
            "articles_missing": self.articles_missing,
            "bytes_read": self.bytes_read,
            "malformed": dict(sorted(self.malformed.items())),
        }


def _archive_dict(info: ArchiveInfo) -> dict[str, Any]:
    return {
        "kind": info.kind,
        "volume": info.volume,
        "first_volume": info.first_volume,
        "encrypted_headers": info.encrypted_headers,
        "solid": info.solid,
        "complete": info.complete,
        "headers_at_end": info.headers_at_end,
        "header_offset": info.header_offset,
        "header_size": info.header_size,
        "header_read": info.header_read,
        "files": len(info.files),
        "password": info.password,
    }


# --- which files to read ------------------------------------------------------------------------


def wanted_files(file_names: Sequence[str], sizes: Sequence[int] | None = None) -> list[str]:
    """The files of a post worth reading the first article of, at most MAX_WANTED, the small
    ones first. When no name says what it is (obfuscated names), the smallest file when sizes
    (one per name) are given, else the first name: its yEnc header may tell its real name."""
    names = sorted(dict.fromkeys(file_names))
    chosen = named_files(names)
    if not chosen and names:
        if sizes is not None and len(sizes) == len(file_names):
            by_name = dict(zip(file_names, sizes))
            chosen.append(min(names, key=lambda name: (by_name[name], name)))
        else:
            chosen.append(names[0])
    return chosen[:MAX_WANTED]


def named_files(file_names: Sequence[str]) -> list[str]:
    """The files wanted_files picks by what their names say (an .nfo, the par2 index, the first
    archive volumes), in its order; none when no name says what its file is."""
    names = sorted(dict.fromkeys(file_names))
    lowered = {name: name.lower() for name in names}
    chosen: list[str] = []
    nfos = [name for name in names if lowered[name].endswith(".nfo")]
    if nfos:
        chosen.append(min(nfos, key=lambda name: (len(name), name)))
    par2s = [name for name in names if lowered[name].endswith(".par2")]
    if par2s:
        chosen.append(min(par2s, key=_par2_order))
    chosen += _first_volumes(names, lowered)
    return chosen


def _par2_order(name: str) -> tuple[int, int, str]:
    """The index first (no .volNN+NN), then the recovery volume with the fewest blocks."""
    volume = _PAR2_VOLUME.search(name)
    return (1, int(volume[2]), name) if volume else (0, len(name), name)


def _first_volumes(names: list[str], lowered: dict[str, str]) -> list[str]:
    present = set(lowered.values())
    first = []
    for name in names:
        low = lowered[name]
        if (
            any(pattern.search(low) for pattern in _FIRST_VOLUMES)
            # the old naming: name.rar, then name.r00, name.r01...; a .r00 alone stands for it
            or (low.endswith(".rar") and not _RAR_PART.search(low))
            or (low.endswith(".r00") and low[:-4] + ".rar" not in present)
            # a spanned zip: name.z01, name.z02... name.zip (the last)
            or (low.endswith(".zip") and low[:-4] + ".z01" not in present)
        ):
            first.append(name)
    return first


# --- reading the bodies -------------------------------------------------------------------------


@dataclass(slots=True)
class _File:
    names: list[str]  # the yEnc name and the name given, as they differ
    pieces: list[tuple[int, bytes]] = field(default_factory=list)  # (offset in the file, data)
    size: int | None = None  # the whole file's, as yEnc gives it


def inspect_post(bodies: Mapping[str, bytes], *, missing: int = 0, max_body: int = yenc.MAX_BODY) -> PostInspection:
    """What a post's bodies tell. bodies: a file's name (as the post lists it; a suffix such as
    ``#2`` may tell apart several articles of one file) -> that article's body as NNTP BODY gave
    it, dot-stuffing taken off. missing: articles asked for and not found (counted as given)."""
    result = PostInspection(articles_missing=max(0, missing))
    files: dict[str, _File] = {}
    for label, body in bodies.items():
        result.articles_read += 1
        result.bytes_read += len(body)
        if len(body) > max_body:
            result.count("too_large")
            continue
        offset, name, data, size = 0, label, body, None
        if yenc.looks_like_yenc(body):
            try:
                decoded = yenc.decode(body, max_body)
            except yenc.YencError as error:
                result.count(f"yenc_{error.reason}")
                continue
            if decoded.crc_ok is False:
                result.count("yenc_crc")
            offset, data, size = decoded.begin - 1, decoded.data, decoded.size
            name = decoded.name or label
        entry = files.setdefault(name, _File(names=[name]))
        if label not in entry.names:
            entry.names.append(label)
        entry.pieces.append((offset, data))
        entry.size = entry.size or size
    _join_7z_volumes(files)
    nfo_read = False
    for entry in files.values():
        runs = _runs(entry.pieces)
        head = runs[0][1] if runs and runs[0][0] == 0 else None
        if head is not None and entry.size is not None and len(head) >= min(entry.size, HASH16K):
            result.read.append(ReadFile(entry.names[0][:MAX_NAME], entry.size, hashlib.md5(head[:HASH16K]).hexdigest()))
        if head is None:
            result.count("no_first_article")
        elif par2.is_par2(head):
            _add_par2(result, [data for _, data in runs])
        elif archives.archive_kind(head) is not None:
            _add_archive(result, head, runs[1:])
        elif any(name.lower().endswith(".nfo") for name in entry.names) and not nfo_read:
            _add_nfo(result, head)
            nfo_read = True
        else:
            result.count("unrecognised")
    _conclude(result)
    return result


def _join_7z_volumes(files: dict[str, _File]) -> None:
    """The pieces of name.7z.002, .003... moved into name.7z.001 at their place in the archive
    (7-Zip's volumes are cuts of one archive, each the size of the first but the last), so that
    an end header read from the last volume is found."""
    firsts: dict[str, _File] = {}
    for name, entry in files.items():
        found = _7Z_VOLUME.search(name)
        if found and int(found[2]) == 1 and entry.size:
            firsts[found[1].lower()] = entry
    for name, entry in list(files.items()):
        found = _7Z_VOLUME.search(name)
        first = firsts.get(found[1].lower()) if found else None
        if found is None or first is None or int(found[2]) <= 1 or first.size is None:
            continue
        start = (int(found[2]) - 1) * first.size
        first.pieces += [(start + offset, data) for offset, data in entry.pieces]
        del files[name]


def _runs(pieces: list[tuple[int, bytes]]) -> list[tuple[int, bytes]]:
    """Pieces of one file joined where they touch, in file order (overlaps: the first one wins)."""
    runs: list[tuple[int, bytearray]] = []
    for offset, data in sorted(pieces, key=lambda piece: piece[0]):
        if runs and offset <= runs[-1][0] + len(runs[-1][1]):
            start, run = runs[-1]
            run += data[start + len(run) - offset :]
        else:
            runs.append((offset, bytearray(data)))
    return [(offset, bytes(run)) for offset, run in runs]


def _add_par2(result: PostInspection, runs: list[bytes]) -> None:
    seen = {(entry.hash16k, entry.name) for entry in result.files if entry.source == "par2"}
    for data in runs:
        found = par2.read_par2(data)
        for why, times in found.skipped.items():
            result.count(f"par2_{why}", times)
        result.par2_creator = result.par2_creator or found.creator
        for entry in found.files:
            if not entry.name:
                result.count("par2_nameless")
            elif (entry.hash16k, entry.name) not in seen:
                seen.add((entry.hash16k, entry.name))
                result.files.append(
                    InspectedFile(name=entry.name, size=entry.size, source="par2", hash16k=entry.hash16k)
                )


def _add_archive(result: PostInspection, head: bytes, later: list[tuple[int, bytes]]) -> None:
    tail_offset, tail = later[-1] if later else (None, None)
    info = archives.read_archive(head, tail=tail, tail_offset=tail_offset)
    if info is None:
        return
    result.archives.append(info)
    for why, times in info.malformed.items():
        result.count(f"{info.kind}_{why}", times)
    for entry in info.files:
        if not entry.name:
            result.count(f"{info.kind}_nameless")
            continue
        result.files.append(
            InspectedFile(name=entry.name, size=entry.size, source=info.kind, encrypted=entry.encrypted)
        )


def _add_nfo(result: PostInspection, data: bytes) -> None:
    found = nfo.read_nfo(data)
    result.nfo = found.text or None
    name = found.release_name
    result.name = name if name is not None and len(name) <= MAX_NAME else None
    result.imdb, result.tvdb, result.tvmaze = found.imdb, found.tvdb, found.tvmaze
    result.tmdb, result.tmdb_kind = found.tmdb, found.tmdb_kind
    result.password_urls = list(found.password_urls)


def _conclude(result: PostInspection) -> None:
    """The password level and flags, from every archive and list read."""
    levels = {info.password for info in result.archives}
    result.password = 1 if 1 in levels else 2 if 2 in levels else 0
    flags = set()
    if any(info.encrypted_headers for info in result.archives):
        flags.add("encrypted_headers")
    if any(archives.is_executable(entry.name) for entry in result.files):
        flags.add("executable")
    if result.password_urls:
        flags.add("password_url")
    result.flags = sorted(flags)
    del result.files[MAX_FILES:]
