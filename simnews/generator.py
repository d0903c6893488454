"""Synthetic binary-group articles with their ground truth: seeded, deterministic and fast.

A number of posting streams run side by side; each posts one release at a time, a few of its
files in flight at once (segments of a file in order, files interleaved), so a big release
spans far more article numbers than it has articles. Release kinds follow the group's name:

- e-book groups (``e-book``): small epub/pdf/mobi sets with French authors and titles, their
  subjects in UTF-8, Latin-1 or broken UTF-8 (raw 8-bit bytes);
- image groups (``cd.image``, ``dvdiso``, ``iso``): big PS2 DVD sets, hundreds of rar volumes;
- any other group: TV and film releases and obfuscated (random hash) releases.

Everywhere, malware floods (single bare executables named after films and software, 1-3
segments) make about 21% of the articles and so about 92% of the files of the default mix.

Every article has a :class:`Truth` (what was really posted) with its :class:`Intended` parse
(what a subject parser should read from the subject alone). ``generate(count, config)`` yields
:class:`Article` objects; ``write_truth``/``load_truth`` keep the truth in JSON lines.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field, fields
from typing import IO, Generic, TypeVar

DEFAULT_GROUPS = (
    "alt.binaries.test",
    "alt.binaries.e-book.french",
    "alt.binaries.cd.image.playstation2.dvdiso",
)
FIXED_START = dt.datetime(2025, 6, 1, tzinfo=dt.timezone.utc)
SEGMENT_BYTES = 716_800  # the usual 700 KiB yEnc part


@dataclass(frozen=True)
class Config:
    seed: int = 1
    groups: tuple[str, ...] = DEFAULT_GROUPS
    start: dt.datetime = FIXED_START  # the first Date header; nothing depends on the clock
    days: float = 120.0  # Date headers are spread evenly over this many days
    lost_rate: float = 0.0  # share of articles never posted (missing segments)
    flood_share: float = 0.21  # share of articles that belong to malware floods
    crosspost_rate: float = 0.03  # share of releases posted to two of the groups
    streams: int = 12  # releases posted side by side
    kind: str | None = None  # force one release kind ("general", "ebook", "iso") for every group
    namespace: str = ""  # makes message-ids of runs with the same seed and groups distinct


@dataclass(slots=True)
class Intended:
    """What a subject parser should find in the subject; None where the subject does not say."""

    filename: str
    part: int
    parts: int
    file_index: int | None
    file_count: int | None
    release: str


@dataclass(slots=True)
class Truth:
    """What was really posted in one article."""

    message_id: str
    groups: tuple[str, ...]
    subject: bytes  # raw, possibly 8-bit
    poster: str
    date: int  # unix seconds of the Date header
    release_key: str  # unique per release
    release: str  # the release's name
    filename: str
    file_index: int
    file_count: int
    part: int
    parts: int
    bytes: int  # size of the article as posted (INN reports more: it adds Path and Xref headers)
    file_size: int
    lost: bool  # never posted
    is_flood: bool  # a bare executable of a malware flood
    intended: Intended


# What an article's maker knows of it: Truth for generated articles, YencTruth and NZBTruth for
# simnews.yencpost's and simnews.nzbpost's.
TruthT = TypeVar("TruthT")


@dataclass(slots=True)
class Article(Generic[TruthT]):
    message_id: str
    raw: bytes  # header and body, CRLF line ends, not dot-stuffed, no terminating dot
    lost: bool = False
    truth: TruthT | None = None


def decode_header(raw: bytes) -> str:
    """The reference decoding of 8-bit header bytes: UTF-8 if valid, else Latin-1."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


# --- wire format -------------------------------------------------------------------------------

_WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


class _DateFormatter:
    """RFC 5322 dates in UTC; the day part is cached because consecutive dates share their day."""

    def __init__(self) -> None:
        self.day = -1
        self.prefix = b""

    def __call__(self, ts: int) -> bytes:
        day, second = divmod(ts, 86400)
        if day != self.day:
            d = dt.datetime.fromtimestamp(day * 86400, dt.timezone.utc)
            self.day = day
            self.prefix = f"{_WEEKDAYS[d.weekday()]}, {d.day:02d} {_MONTHS[d.month - 1]} {d.year}".encode()
        hours, rest = divmod(second, 3600)
        return b"%s %02d:%02d:%02d +0000" % (self.prefix, hours, rest // 60, rest % 60)


def _raw_article(
    poster: bytes, newsgroups: bytes, subject: bytes, date: bytes, message_id: bytes, body: bytes, lines: int
) -> bytes:
    return b"".join(
        (
            b"Path: not-for-mail\r\nFrom: ",
            poster,
            b"\r\nNewsgroups: ",
            newsgroups,
            b"\r\nSubject: ",
            subject,
            b"\r\nDate: ",
            date,
            b"\r\nMessage-ID: ",
            message_id,
            b"\r\nLines: %d\r\n\r\n" % lines,
            body,
        )
    )


def make_article(
    groups: Iterable[str],
    subject: str | bytes,
    message_id: str,
    *,
    poster: str = "Tester <tester@example.net>",
    date: dt.datetime = FIXED_START,
    body: bytes = b"test\r\n",
) -> Article:
    """A hand-made article (no truth) for tests that need one exact subject."""
    lines = body.count(b"\n")
    raw = _raw_article(
        poster.encode(),
        ",".join(groups).encode(),
        subject.encode() if isinstance(subject, str) else subject,
        _DateFormatter()(int(date.timestamp())),
        message_id.encode(),
        body,
        lines,
    )
    return Article(message_id, raw)


# --- names -------------------------------------------------------------------------------------

_FILMS = (
    "Avatar.The.Way.of.Water",
    "Oppenheimer",
    "Barbie",
    "Dune.Part.Two",
    "John.Wick.Chapter.4",
    "The.Super.Mario.Bros.Movie",
    "Guardians.of.the.Galaxy.Vol.3",
    "Killers.of.the.Flower.Moon",
    "Mission.Impossible.Dead.Reckoning",
    "Spider-Man.Across.the.Spider-Verse",
    "Top.Gun.Maverick",
    "The.Batman",
    "Fast.X",
    "Wonka",
    "Napoleon",
    "Aquaman.and.the.Lost.Kingdom",
    "The.Marvels",
    "Indiana.Jones.and.the.Dial.of.Destiny",
    "Deadpool.and.Wolverine",
    "Inside.Out.2",
    "Gladiator.II",
    "Joker.Folie.a.Deux",
    "Alien.Romulus",
    "Furiosa",
    "Kung.Fu.Panda.4",
    "Godzilla.x.Kong",
)
_SOFTWARE = (
    "Adobe.Photoshop",
    "Microsoft.Office.ProPlus",
    "Windows.11.Pro.Activator",
    "AutoCAD",
    "CorelDRAW",
    "Adobe.Premiere.Pro",
    "VMware.Workstation",
    "Nero.Platinum",
    "WinRAR",
    "Avast.Premium.Security",
    "Kaspersky.Total.Security",
    "FL.Studio",
    "Ableton.Live",
    "Sony.Vegas.Pro",
    "IDM.Internet.Download.Manager",
)
_SHOWS = (
    "The.Expanse",
    "Severance",
    "Slow.Horses",
    "The.Bear",
    "Shogun",
    "Fallout",
    "Andor",
    "The.Boys",
    "Bluey",
    "Top.Chef",
    "Taskmaster",
    "Silo",
    "Reacher",
    "Only.Murders.in.the.Building",
    "Hacks",
)
_GAMES = (
    "Gran.Turismo.4",
    "Shadow.of.the.Colossus",
    "Metal.Gear.Solid.3.Snake.Eater",
    "Final.Fantasy.X",
    "Kingdom.Hearts.II",
    "Okami",
    "Ico",
    "God.of.War.II",
    "Silent.Hill.2",
    "Ratchet.and.Clank",
    "Jak.and.Daxter",
    "Burnout.3.Takedown",
    "Tekken.5",
    "Devil.May.Cry.3",
    "Grand.Theft.Auto.San.Andreas",
    "Prince.of.Persia.Les.Sables.du.Temps",
    "Pro.Evolution.Soccer.6",
    "Sly.Cooper",
    "Beyond.Good.and.Evil",
)
_AUTHORS = (
    "Émile Zola",
    "Victor Hugo",
    "Honoré de Balzac",
    "Gustave Flaubert",
    "Jules Verne",
    "Albert Camus",
    "Marguerite Yourcenar",
    "Françoise Sagan",
    "Antoine de Saint-Exupéry",
    "Guy de Maupassant",
    "Simone de Beauvoir",
    "Georges Simenon",
    "Amélie Nothomb",
    "Michel Houellebecq",
    "Fred Vargas",
    "Boris Vian",
    "Marcel Proust",
    "Colette",
    "Stendhal",
    "Alexandre Dumas",
    "Annie Ernaux",
    "Jean-Christophe Grangé",
    "Pierre Lemaitre",
    "Leïla Slimani",
    "Joël Dicker",
    "Bernard Minier",
)
_TITLES = (
    "Les Misérables",
    "L'Assommoir",
    "Le Père Goriot",
    "Madame Bovary",
    "Vingt mille lieues sous les mers",
    "L'Étranger",
    "Mémoires d'Hadrien",
    "Bonjour tristesse",
    "Le Petit Prince",
    "Bel-Ami",
    "Le Deuxième Sexe",
    "Maigret et la Grande Perche",
    "Stupeur et tremblements",
    "Sérotonine",
    "Pars vite et reviens tard",
    "L'Écume des jours",
    "Du côté de chez Swann",
    "Chéri",
    "Le Rouge et le Noir",
    "Les Trois Mousquetaires",
    "Les Années",
    "Les Rivières pourpres",
    "Au revoir là-haut",
    "Chanson douce",
    "La Vérité sur l'affaire Harry Quebert",
    "Glacé",
    "La Bête humaine",
    "Notre-Dame de Paris",
    "Germinal",
    "Le Comte de Monte-Cristo",
    "Cœur de pirate",
)
_TEAMS = ("NTb", "FLUX", "SiGMA", "RARBG", "EDITH", "playWEB", "CAKES", "GGEZ", "PS2DVD", "RiTUEL", "ZZGtv")
_POSTERS = (
    "JBinUp <jbinup@example.net>",
    "Anonymous <anonymous@poster.invalid>",
    "yEncBin <yenc@bin.example>",
    "NewsUP <newsup@localhost.local>",
    "Ngposter <ngp@nospam.example>",
    "Lecteur <lecteur@free.example>",
)
_EBOOK_POSTERS = (
    "Bibliothécaire <biblio@orange.example>",
    "Lecteur <lecteur@free.example>",
    "Anonymous <anonymous@poster.invalid>",
)
_HEX = "0123456789abcdef"
_ALNUM = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"


# --- releases ----------------------------------------------------------------------------------


@dataclass(slots=True)
class _File:
    name: str
    size: int
    parts: int = 0

    def __post_init__(self) -> None:
        self.parts = self.parts or max(1, -(-self.size // SEGMENT_BYTES))


@dataclass(slots=True)
class _Release:
    key: str
    name: str  # the release name as a prefix style shows it
    stem: str  # the base name its files share
    files: list[_File]
    poster: str
    groups: tuple[str, ...]
    style: str
    encoding: str = "ascii"  # "utf-8", "latin-1" or "broken" (UTF-8 with cut characters)
    is_flood: bool = False
    in_flight: int = 1  # files posted side by side


def _word(rng: random.Random, alphabet: str, low: int, high: int) -> str:
    return "".join(rng.choices(alphabet, k=rng.randint(low, high)))


def _random_poster(rng: random.Random) -> str:
    name = _word(rng, _ALNUM[:26], 5, 10)
    return f"{name} <{_word(rng, _HEX, 8, 8)}@{_word(rng, _HEX, 4, 6)}.com>"


def _rar_names(rng: random.Random, stem: str, count: int) -> list[str]:
    if rng.random() < 0.7:
        width = max(2, len(str(count)))
        return [f"{stem}.part{i:0{width}d}.rar" for i in range(1, count + 1)]
    return [f"{stem}.rar"] + [f"{stem}.r{i:02d}" for i in range(count - 1)]


def _par2_files(rng: random.Random, stem: str, payload: int) -> list[_File]:
    """The index and recovery volumes (vol00+01, vol01+02, vol03+04, ...) for ~10% redundancy."""
    volumes = rng.randint(2, 6)
    blocks = [1 << i for i in range(volumes)]
    block = max(1, payload // 10 // sum(blocks))
    files = [_File(f"{stem}.par2", rng.randint(8_000, 60_000))]
    first = 0
    for count in blocks:
        files.append(_File(f"{stem}.vol{first:02d}+{count:02d}.par2", count * block))
        first += count
    return files


def _archive_files(rng: random.Random, stem: str, total: int, volume: int) -> list[_File]:
    count = max(1, -(-total // volume))
    files = [_File(f"{stem}.nfo", rng.randint(2_000, 9_000))]
    if rng.random() < 0.6:
        files.append(_File(f"{stem}.sfv", 40 * count + 100))
    sizes = [volume] * (count - 1) + [total - volume * (count - 1)]
    files += [_File(name, size) for name, size in zip(_rar_names(rng, stem, count), sizes)]
    return files + _par2_files(rng, stem, total)


_GENERAL_STYLES = ("nzb", "bracket", "sized", "file_of", "nzb")
_OBFUSCATED_STYLES = ("bracket", "wtfnzb", "bare", "bracket")
_EBOOK_STYLES = ("nzb", "sized", "file_of", "bracket")
_FLOOD_STYLES = ("quoted", "quoted", "bracket", "nzb")


class _Catalog:
    """Draws new releases; all randomness comes from the generator's one rng."""

    def __init__(self, rng: random.Random, config: Config):
        self.rng = rng
        self.config = config
        self.serial = 0

    def _key(self) -> str:
        self.serial += 1
        return f"{self.config.seed}{self.config.namespace}.{self.serial}"

    def _groups(self, group: str) -> tuple[str, ...]:
        others = [g for g in self.config.groups if g != group]
        if others and self.rng.random() < self.config.crosspost_rate:
            return (group, self.rng.choice(others))
        return (group,)

    def kind_of(self, group: str) -> str:
        if self.config.kind:
            return self.config.kind
        if "e-book" in group or "ebook" in group:
            return "ebook"
        if "cd.image" in group or "dvdiso" in group or ".iso" in group:
            return "iso"
        return "general"

    def release(self, flood: bool) -> _Release:
        group = self.rng.choice(self.config.groups)
        if flood:
            return self.flood(group)
        return {"ebook": self.ebook, "iso": self.iso, "general": self.general}[self.kind_of(group)](group)

    def flood(self, group: str) -> _Release:
        rng = self.rng
        if rng.random() < 0.6:
            stem = (
                f"{rng.choice(_FILMS)}.{rng.randint(2019, 2025)}.{rng.choice(('1080p', '2160p', '720p'))}"
                f".{rng.choice(('WEB-DL', 'BluRay', 'WEBRip', 'HDRip'))}"
            )
        else:
            stem = (
                f"{rng.choice(_SOFTWARE)}.{rng.randint(2019, 2025)}.v{rng.randint(1, 30)}.{rng.randint(0, 9)}"
                f"{rng.choice(('', '.Multilingual', '.x64', '.Crack', '.Portable'))}"
            )
        parts = rng.choice((1, 2, 2, 3))
        size = (parts - 1) * SEGMENT_BYTES + rng.randint(20_000, SEGMENT_BYTES)
        return _Release(
            self._key(),
            stem,
            stem,
            [_File(f"{stem}.exe", size, parts)],
            _random_poster(rng),
            self._groups(group),
            rng.choice(_FLOOD_STYLES),
            is_flood=True,
        )

    def general(self, group: str) -> _Release:
        rng = self.rng
        if rng.random() < 0.35:
            stem = _word(rng, rng.choice((_HEX, _ALNUM)), 12, 32)
            poster = _random_poster(rng)
            style = rng.choice(_OBFUSCATED_STYLES)
            total = rng.randint(300, 4_000) * 1_000_000
        else:
            res, src = rng.choice(("1080p", "2160p", "720p")), rng.choice(("WEB", "BluRay", "HDTV"))
            if rng.random() < 0.5:
                stem = (
                    f"{rng.choice(_SHOWS)}.S{rng.randint(1, 9):02d}E{rng.randint(1, 24):02d}.{res}.{src}"
                    f".x264-{rng.choice(_TEAMS)}"
                )
                total = rng.randint(400, 3_000) * 1_000_000
            else:
                stem = f"{rng.choice(_FILMS)}.{rng.randint(2019, 2025)}.{res}.{src}.x265-{rng.choice(_TEAMS)}"
                total = rng.randint(2_000, 12_000) * 1_000_000
            poster = rng.choice(_POSTERS)
            style = rng.choice(_GENERAL_STYLES)
        files = _archive_files(rng, stem, total, rng.choice((50_000_000, 100_000_000)))
        return _Release(self._key(), stem, stem, files, poster, self._groups(group), style, in_flight=rng.randint(1, 4))

    def iso(self, group: str) -> _Release:
        rng = self.rng
        game = rng.choice(_GAMES)
        stem = f"{game}.{rng.choice(('PAL', 'NTSC', 'PAL.MULTi5', 'NTSC.FRENCH'))}.PS2DVD-{rng.choice(_TEAMS)}"
        total = rng.randint(1_500, 8_000) * 1_000_000
        files = _archive_files(rng, stem, total, rng.choice((50_000_000, 100_000_000)))
        return _Release(
            self._key(),
            stem,
            stem,
            files,
            rng.choice(_POSTERS),
            self._groups(group),
            rng.choice(_GENERAL_STYLES),
            in_flight=rng.randint(1, 4),
        )

    def ebook(self, group: str) -> _Release:
        rng = self.rng
        stem = f"{rng.choice(_AUTHORS)} - {rng.choice(_TITLES)}"
        name = f"{stem} ({rng.randint(1830, 2024)}) [FR]"
        formats = rng.sample(
            (
                ("epub", 200_000, 3_000_000),
                ("pdf", 1_000_000, 30_000_000),
                ("mobi", 300_000, 5_000_000),
                ("azw3", 300_000, 5_000_000),
            ),
            rng.randint(1, 4),
        )
        files = [_File(f"{stem}.{ext}", rng.randint(low, high)) for ext, low, high in formats]
        if rng.random() < 0.3:
            files.append(_File(f"{stem}.par2", rng.randint(8_000, 40_000)))
        encoding = rng.choices(("utf-8", "latin-1", "broken"), (75, 15, 10))[0]
        return _Release(
            self._key(),
            name,
            stem,
            files,
            rng.choice(_EBOOK_POSTERS),
            self._groups(group),
            rng.choice(_EBOOK_STYLES),
            encoding,
            in_flight=rng.randint(1, 2),
        )


# --- subjects ----------------------------------------------------------------------------------


def _encode(text: str, encoding: str) -> bytes:
    if encoding == "latin-1":
        return text.encode("latin-1", "replace")
    data = text.encode("utf-8")
    if encoding != "broken":
        return data
    # cut the first multi-byte character short: the rest of the subject stays valid UTF-8
    for i, byte in enumerate(data):
        if byte >= 0xC0:
            return data[: i + 1] + data[i + 2 :]
    return data


def _french_size(size: int) -> str:
    return f"{size / 1_048_576:.2f}".replace(".", ",")


def _subject_pieces(release: _Release, index: int) -> tuple[bytes, bytes, Intended]:
    """The subject before the part number, after it, and the intended parse (part filled in later)."""
    file = release.files[index - 1]
    count = len(release.files)
    counter = f"{index:0{len(str(count))}d}/{count}"
    enc = release.encoding
    name, filename = _encode(release.name, enc), _encode(file.name, enc)
    stem = _encode(release.stem, enc)
    style = release.style
    if style == "nzb":
        head = b'%s [%s] - "%s" yEnc (' % (name, counter.encode(), filename)
    elif style == "bracket":
        head = b'[%s] - "%s" yEnc (' % (counter.encode(), filename)
    elif style == "wtfnzb":
        head = b'[PRiVATE]-[WtFnZb]-[%s]-[%d/%d] - "" yEnc (' % (filename, index, count)
    elif style == "sized":
        head = b'(%d/%d) "%s" - %s MB - yEnc (' % (index, count, filename, _french_size(file.size).encode())
    elif style == "file_of":
        head = b'%s - File %d of %d: "%s" yEnc (' % (name, index, count, filename)
    elif style == "bare":
        head = b"[%s] - %s yEnc (" % (counter.encode(), filename)
    elif style == "quoted":
        head = b'"%s" yEnc (' % filename
    else:
        raise ValueError(f"unknown subject style {style!r}")
    tail = b"/%d)" % file.parts
    # the parser sees one subject: if any of it is invalid UTF-8, all of it reads as Latin-1
    codec = "utf-8"
    try:
        head.decode("utf-8")
    except UnicodeDecodeError:
        codec = "latin-1"
    shows_name = style in ("nzb", "file_of")
    has_counter = style != "quoted"
    intended = Intended(
        filename=filename.decode(codec),
        part=0,
        parts=file.parts,
        file_index=index if has_counter else None,
        file_count=count if has_counter else None,
        release=(name if shows_name else stem).decode(codec),
    )
    return head, tail, intended


# --- the article stream ------------------------------------------------------------------------


@dataclass(slots=True)
class _FileCursor:
    """One file being posted: everything that is the same for all of its articles."""

    release: _Release
    index: int
    file: _File
    head: bytes
    tail: bytes
    intended: Intended
    yenc_name: bytes
    token: str
    poster: bytes
    newsgroups: bytes
    part: int = 0


@dataclass(slots=True)
class _Stream:
    release: _Release
    next_file: int = 1
    cursors: list[_FileCursor] = field(default_factory=list)


class _Generator:
    def __init__(self, config: Config):
        self.config = config
        self.rng = random.Random(config.seed)
        self.catalog = _Catalog(self.rng, config)
        self.posted = 0
        self.flood_posted = 0
        self.files_opened = 0
        self.format_date = _DateFormatter()
        # the groups are part of it so that runs differing only in their groups never share an id
        groups_digest = zlib.crc32(",".join(config.groups).encode())
        self.host = f"{config.seed}{config.namespace}.{groups_digest:08x}.simnews.invalid"

    def _new_stream(self, slot: int | None = None) -> _Stream:
        # floods are drawn whenever they lag behind their share of the articles posted so far;
        # of the first streams, that share of them are floods, so even a short run has some
        if slot is not None:
            flood = slot < round(self.config.streams * self.config.flood_share)
        else:
            flood = self.flood_posted < self.config.flood_share * self.posted
        stream = _Stream(self.catalog.release(flood))
        while self._open_file(stream):
            pass
        return stream

    def _open_file(self, stream: _Stream) -> bool:
        release = stream.release
        if len(stream.cursors) >= release.in_flight or stream.next_file > len(release.files):
            return False
        index = stream.next_file
        stream.next_file += 1
        head, tail, intended = _subject_pieces(release, index)
        file = release.files[index - 1]
        self.files_opened += 1
        token = f"{self.files_opened}${_word(self.rng, _HEX, 10, 10)}"
        stream.cursors.append(
            _FileCursor(
                release,
                index,
                file,
                head,
                tail,
                intended,
                _encode(file.name, release.encoding),
                token,
                release.poster.encode(),
                ",".join(release.groups).encode(),
            )
        )
        return True

    def articles(self, count: int) -> Iterator[Article[Truth]]:
        config = self.config
        random_ = self.rng.random
        streams = [self._new_stream(slot) for slot in range(config.streams)]
        start = int(config.start.timestamp())
        interval = config.days * 86400 / max(count, 1)
        for position in range(count):
            # int(random() * n) rather than randrange(n): a third of the cost on this hot path
            slot = int(random_() * len(streams))
            stream = streams[slot]
            cursor = stream.cursors[int(random_() * len(stream.cursors))]
            yield self._article(cursor, start + int(position * interval + random_() * 60))
            if cursor.part == cursor.file.parts:
                stream.cursors.remove(cursor)
                self._open_file(stream)
                if not stream.cursors:
                    streams[slot] = self._new_stream()

    def _article(self, cursor: _FileCursor, date: int) -> Article[Truth]:
        rng = self.rng
        release, file = cursor.release, cursor.file
        cursor.part += 1
        part = cursor.part
        self.posted += 1
        if release.is_flood:
            self.flood_posted += 1
        message_id = f"<part{part}of{file.parts}.{cursor.token}@{self.host}>"
        subject = b"%s%d%s" % (cursor.head, part, cursor.tail)
        begin = (part - 1) * SEGMENT_BYTES + 1
        end = min(part * SEGMENT_BYTES, file.size)
        body = (
            b"=ybegin part=%d total=%d line=128 size=%d name=%s\r\n=ypart begin=%d end=%d\r\n%064x\r\n"
            b"=yend size=%d part=%d pcrc32=%08x\r\n"
            % (
                part,
                file.parts,
                file.size,
                cursor.yenc_name,
                begin,
                end,
                rng.getrandbits(256),
                end - begin + 1,
                part,
                rng.getrandbits(32),
            )
        )
        raw = _raw_article(
            cursor.poster, cursor.newsgroups, subject, self.format_date(date), message_id.encode(), body, 4
        )
        lost = bool(self.config.lost_rate) and rng.random() < self.config.lost_rate
        shared = cursor.intended
        intended = Intended(shared.filename, part, shared.parts, shared.file_index, shared.file_count, shared.release)
        truth = Truth(
            message_id,
            release.groups,
            subject,
            release.poster,
            date,
            release.key,
            release.name,
            file.name,
            cursor.index,
            len(release.files),
            part,
            file.parts,
            len(raw),
            file.size,
            lost,
            release.is_flood,
            intended,
        )
        return Article(message_id, raw, lost, truth)


def generate(count: int, config: Config = Config()) -> Iterator[Article[Truth]]:
    """Yields `count` articles (lost ones included, marked); the same config gives the same articles."""
    return _Generator(config).articles(count)


# --- ground truth files ------------------------------------------------------------------------

_TRUTH_FIELDS = tuple(f.name for f in fields(Truth))
_INTENDED_FIELDS = tuple(f.name for f in fields(Intended))


def _truth_record(truth: Truth) -> dict:
    # by hand: dataclasses.asdict deep-copies and costs seven times as much
    record = {name: getattr(truth, name) for name in _TRUTH_FIELDS}
    record["subject"] = truth.subject.decode("latin-1")  # a lossless byte-for-char mapping
    record["intended"] = {name: getattr(truth.intended, name) for name in _INTENDED_FIELDS}
    return record


def write_truth(articles: Iterable[Article[Truth]], out: IO[str]) -> Iterator[Article[Truth]]:
    """Passes the articles through, writing each one's truth as a JSON line to `out`."""
    for article in articles:
        assert article.truth is not None, "only generated articles carry a truth to write"
        out.write(json.dumps(_truth_record(article.truth), ensure_ascii=False))
        out.write("\n")
        yield article


def load_truth(path: str) -> dict[str, Truth]:
    """The truth written by `write_truth`, by message-id, in posting order."""
    truths = {}
    with open(path, encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            record["subject"] = record["subject"].encode("latin-1")
            record["groups"] = tuple(record["groups"])
            record["intended"] = Intended(**record["intended"])
            truths[record["message_id"]] = Truth(**record)
    return truths


# --- command line helpers ----------------------------------------------------------------------


def add_config_arguments(parser: argparse.ArgumentParser) -> None:
    defaults = Config()
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--groups", default=",".join(defaults.groups), help="comma-separated")
    parser.add_argument(
        "--start",
        default=defaults.start.date().isoformat(),
        help="date of the first article (UTC, ISO format); fixed by default for determinism",
    )
    parser.add_argument("--days", type=float, default=defaults.days)
    parser.add_argument("--lost-rate", type=float, default=defaults.lost_rate)
    parser.add_argument("--flood-share", type=float, default=defaults.flood_share)
    parser.add_argument("--crosspost-rate", type=float, default=defaults.crosspost_rate)
    parser.add_argument("--kind", choices=("general", "ebook", "iso"), default=None)
    parser.add_argument(
        "--namespace", default="", help="distinguishes message-ids of runs with the same seed and groups"
    )


def config_from_arguments(args: argparse.Namespace) -> Config:
    start = dt.datetime.fromisoformat(args.start)
    if start.tzinfo is None:
        start = start.replace(tzinfo=dt.timezone.utc)
    return Config(
        seed=args.seed,
        groups=tuple(g for g in args.groups.split(",") if g),
        start=start,
        days=args.days,
        lost_rate=args.lost_rate,
        flood_share=args.flood_share,
        crosspost_rate=args.crosspost_rate,
        kind=args.kind,
        namespace=args.namespace,
    )
