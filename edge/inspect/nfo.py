"""An .nfo read: its text, the release it names and the ids of the film or show it links to.

The text: at most ``max_bytes`` (64 KiB) of the file; UTF-8 when it is UTF-8 (a byte-order mark
says UTF-8 or UTF-16 outright), else CP437, the code page of the box drawing NFOs are made of.
Line ends become LF; NUL and a trailing SAUCE record (the ANSI art editors' metadata, after
``\\x1a``) go.

What is read from it:

- ids: IMDb (``tt`` and 7 or 8 digits: an imdb.com/title/ URL first, else a bare ``tt`` number),
  TVDB (thetvdb.com URLs with ``seriesid=``, ``tab=series&id=`` or ``/series/N``), TVmaze
  (tvmaze.com/shows/N), TMDB (themoviedb.org/movie/N or /tv/N, the kind kept beside it). The first
  of each kind wins; an id is a positive number below 2**31.
- the release name: a word that looks like ``Name.With.Dots-GROUP`` (two dots or underscores at
  least, a group after the last hyphen, no extension after it), preferring a line that says
  "release" or "rls";
- password sites: URLs with a password word ("password", "passwort", "pass:", "pw:", ...) on
  their line, or on the line above when that line has no URL of its own; flagged, and the first
  few kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

MAX_NFO = 64 * 1024
MAX_ID = 2**31 - 1
MAX_PASSWORD_URLS = 5
MAX_URL = 256

_IMDB_URL = re.compile(
    r"imdb\.[a-z]{2,3}/(?:[a-z]{2}/)?title/tt(\d{7,8})(?!\d)|imdb\.[a-z]{2,3}/title\?(\d{7,8})(?!\d)", re.IGNORECASE
)
_IMDB_BARE = re.compile(r"(?<![A-Za-z0-9])tt(\d{7,8})(?!\d)")
# (Every repetition is bounded: a 64 KiB line of "thetvdb.com/" costs no more than a short one.)
_TVDB = (
    re.compile(r"thetvdb\.com/\S{0,200}?[?&;]seriesid=(\d{1,10})(?!\d)", re.IGNORECASE),
    re.compile(r"thetvdb\.com/\S{0,200}?tab=series\S{0,200}?[?&;]id=(\d{1,10})(?!\d)", re.IGNORECASE),
    re.compile(r"thetvdb\.com/\S{0,200}?[?&;]id=(\d{1,10})(?!\d)\S{0,200}?tab=series", re.IGNORECASE),
    re.compile(r"thetvdb\.com/(?:dereferrer/)?series/(\d{1,10})(?![\d\w])", re.IGNORECASE),
)
_TVMAZE = re.compile(r"tvmaze\.com/shows/(\d{1,10})(?!\d)", re.IGNORECASE)
_TMDB = re.compile(r"themoviedb\.org/(movie|tv)/(\d{1,10})(?!\d)", re.IGNORECASE)
# A word starts after none of its own characters, so each character is scanned from one start only.
_RELEASE = re.compile(
    r"(?<![\w.\-/])([A-Za-z0-9][A-Za-z0-9\-]*(?:[._][A-Za-z0-9\-]+){2,}?-[A-Za-z0-9]{2,20})"
    r"(?![\w.\-])"
)
_RELEASE_LABEL = re.compile(r"\b(?:release|rls)\b", re.IGNORECASE)
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"'()\[\]{}|]{3,500}", re.IGNORECASE)
_PASSWORD_WORD = re.compile(
    r"passwor[dt]|passwd|kennwort|wachtwoord|mot de passe|contrase[ñn]a|senha|has[lł]o"
    r"|\bpass\s*[:=]|\bpwd?\s*[:=]",
    re.IGNORECASE,
)
_DATABASES = re.compile(r"imdb\.|thetvdb\.com|tvmaze\.com|themoviedb\.org", re.IGNORECASE)
_SAUCE = re.compile("\x1a(?:SAUCE00|COMNT|$)")
_BOMS = ((b"\xef\xbb\xbf", "utf-8"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))


@dataclass(frozen=True, slots=True)
class NfoInfo:
    text: str
    release_name: str | None = None
    imdb: int | None = None
    tvdb: int | None = None
    tvmaze: int | None = None
    tmdb: int | None = None
    tmdb_kind: str | None = None  # movie or tv
    password_urls: list[str] = field(default_factory=list)


def decode_nfo(data: bytes, max_bytes: int = MAX_NFO) -> str:
    """The text of an .nfo (its first max_bytes)."""
    data = data[:max_bytes]
    for mark, encoding in _BOMS:
        if data.startswith(mark):
            raw = data[len(mark) :]
            if encoding != "utf-8":
                raw = raw[: len(raw) // 2 * 2]
            text = raw.decode(encoding, "replace")
            break
    else:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as error:
            cut = error.reason == "unexpected end of data" and error.start >= len(data) - 3
            text = data[: error.start].decode("utf-8", "replace") if cut else data.decode("cp437")
    sauce = _SAUCE.search(text)
    if sauce is not None:
        text = text[: sauce.start()]
    return text.replace("\r\n", "\n").replace("\r", "\n").replace("\0", "")


def read_nfo(data: bytes, max_bytes: int = MAX_NFO) -> NfoInfo:
    """The text of an .nfo and what it names."""
    text = decode_nfo(data, max_bytes)
    tmdb = _TMDB.search(text)
    return NfoInfo(
        text=text,
        release_name=release_name(text),
        imdb=imdb_id(text),
        tvdb=_first_id(text, _TVDB),
        tvmaze=_first_id(text, (_TVMAZE,)),
        tmdb=_bounded(tmdb[2]) if tmdb else None,
        tmdb_kind=tmdb[1].lower() if tmdb and _bounded(tmdb[2]) else None,
        password_urls=password_urls(text),
    )


def imdb_id(text: str) -> int | None:
    """The IMDb title id (the number after ``tt``) a text names: an imdb.com URL's, else a bare one."""
    found = _IMDB_URL.search(text)
    if found is not None:
        return _bounded(found[1] or found[2])
    bare = _IMDB_BARE.search(text)
    return _bounded(bare[1]) if bare else None


def release_name(text: str) -> str | None:
    """A release name the text shows (Name.With.Dots-GROUP), from a line saying "release" first."""
    first = None
    for line in text.splitlines():
        found = _RELEASE.search(line)
        if found is None:
            continue
        if _RELEASE_LABEL.search(line, 0, found.start()):  # the label before the name, not in it
            return found[1]
        if first is None:
            first = found[1]
    return first


def password_urls(text: str) -> list[str]:
    """URLs on a line with a password word, or right under a line with one and no URL of its own
    ("Password at:" and the URL below), the first few; links to the film and show databases are
    not password sites."""
    found: list[str] = []
    said_before = False
    for line in text.splitlines():
        says = _PASSWORD_WORD.search(line) is not None
        urls = _URL.findall(line)
        for url in urls:
            if (says or said_before or _PASSWORD_WORD.search(url)) and not _DATABASES.search(url):
                url = url[:MAX_URL]
                if url not in found:
                    found.append(url)
                if len(found) >= MAX_PASSWORD_URLS:
                    return found
        said_before = says and not urls
    return found


def _first_id(text: str, patterns: tuple[re.Pattern[str], ...]) -> int | None:
    for pattern in patterns:
        found = pattern.search(text)
        if found is not None and _bounded(found[1]):
            return _bounded(found[1])
    return None


def _bounded(digits: str) -> int | None:
    value = int(digits)
    return value if 0 < value <= MAX_ID else None
