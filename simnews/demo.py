"""The local demo's posts (ops/run): a post of every kind a newznab client asks for, named as real
posts are, in the groups such posts go to; two of them real, so that a result's NZB downloads.

- The sample (:data:`SAMPLES`): TV episodes (a daily show among them), an anime episode, a season
  pack, movies (1080p BluRay, 2160p WEB, a DVD), music (MP3 and FLAC), an e-book and games (NSW,
  PS4). They are overview-only, as the generator's articles are: subjects ``[i/N] - "file" yEnc
  (p/P)``, several files each of several parts, and yEnc-looking bodies of a few hundred bytes
  that INN's mixed storage (ops/inn) does not keep.
- The real posts (:data:`REAL`): ``Demo.Show.S01E02.720p.HDTV.x264-SEED`` and a movie, made by
  :func:`simnews.yencpost.make_release` (random volumes of known SHA-256 and a par2 set, tens of
  KB each) and posted by :func:`simnews.yencpost.post_files` in parts of 30 KB: articles big
  enough for mixed storage to keep their bodies.

Message-ids come from the namespace: INN refuses an id it has seen, so every posting takes a new
one (the names stay). Dates run from --date over --days, one post after the other in posting order,
so that planning's bisection over dates finds them in order.

:func:`check_first_result` is ops/run's proof that the demo serves what it lists: it fetches a
newznab search, the first item's NZB (its enclosure, t=get), and every article the NZB names with
BODY from INN's reader, checks each part's yEnc CRC and each file's, and says how many there were.

    python -m simnews.demo --port 11120 --namespace demo.1 --date 2026-01-01T00:00:00 --days 1 --truth demo.json
    python -m simnews.demo --list-groups
    python -m simnews.demo --check 'https://127.0.0.1:8443/api?t=tvsearch&q=Demo+Show&...' --cafile cert.pem \
        --reader-port 11119
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import socket
import ssl
import sys
import tempfile
import urllib.error
import urllib.request
import xml.etree.ElementTree as ET
import zlib
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

from simnews.generator import SEGMENT_BYTES, Article, _DateFormatter, _raw_article
from simnews.inject import InjectError, inject
from simnews.yencpost import YencError, YencPart, YencTruth, make_release, parse_yenc, post_files

TV = "alt.binaries.teevee"
ANIME = "alt.binaries.anime"
MOVIES = "alt.binaries.moovee"
MP3 = "alt.binaries.sounds.mp3"
FLAC = "alt.binaries.sounds.flac"
EBOOKS = "alt.binaries.e-book"
GAMES = "alt.binaries.games"
GROUPS = (TV, ANIME, MOVIES, MP3, FLAC, EBOOKS, GAMES)
HOST = "demo.simnews.invalid"
POSTERS = ("SeedPoster <poster@seed.example>", "NewsUP <newsup@localhost.local>", "JBinUp <jbinup@example.net>")
REAL_POSTER = "Demo Poster <demo@seed.example>"
# The real posts' parts: small bodies, every one still at least ops/inn's INN_KEEP_BYTES (1500),
# so that mixed storage keeps them all; the smallest is the par2 index's, about 2 KB.
REAL_PART_SIZE = 30_000
# The NZB the check reads (NZB 1.1's namespace).
NZB_NS = "http://www.newzbin.com/DTD/2003/nzb"
TIMEOUT = 30.0


@dataclass(frozen=True)
class Sample:
    """One post of the demo: its release name, group, the kind and newznab category its name
    should give (edge.digest.names, edge.digest.categories), and its files."""

    name: str
    group: str
    kind: str
    category: int
    layout: str = "rar"  # "rar": rar volumes and a par2 set; otherwise one file of this extension and a par2 set
    volumes: int = 3


@dataclass(frozen=True)
class RealSample(Sample):
    """A post made of real content: a release of `size` random bytes from `seed`."""

    seed: int = 0
    size: int = 120_000


SAMPLES: tuple[Sample, ...] = (
    Sample("Harbor.Point.S03E07.1080p.WEB.h264-SEED", TV, "tv", 5010),
    Sample("Quiet.Valley.S01E05.720p.HDTV.x264-SEED", TV, "tv", 5040),
    Sample("Evening.Desk.2014.07.22.720p.HDTV.x264-SEED", TV, "tv", 5040),  # a daily show
    Sample("Northern.Lights.S02.1080p.WEB-DL.DDP5.1.H.264-SEED", TV, "tv", 5010, volumes=5),  # a season pack
    Sample("[Seed] Harbor Lights - 214 [1080p]", ANIME, "tv", 5070, layout="mkv"),
    Sample("Quiet.Harbor.2019.1080p.BluRay.x264-SEED", MOVIES, "movie", 2040, volumes=4),
    Sample("Glass.Orchard.2023.2160p.WEB-DL.DDP5.1.HDR.H.265-SEED", MOVIES, "movie", 2045, volumes=4),
    Sample("Old.Lantern.1998.PAL.DVDR-SEED", MOVIES, "movie", 2070, volumes=4),
    Sample("The_Seed_Band-Night_Drives-(CAT001)-WEB-2023-SEED", MP3, "music", 3010, volumes=2),
    Sample("The_Seed_Band-Night_Drives-(CAT001)-WEB-FLAC-2023-SEED", FLAC, "music", 3040, volumes=2),
    Sample("Jane.Doe.-.The.Quiet.Garden.2020.RETAIL.EPUB.eBook-SEED", EBOOKS, "book", 7020, layout="epub"),
    Sample("Star.Courier.NSW-SEED", GAMES, "game", 1090),
    Sample("Star.Courier.PS4-SEED", GAMES, "game", 1180),
)
REAL: tuple[RealSample, ...] = (
    RealSample("Demo.Show.S01E02.720p.HDTV.x264-SEED", TV, "tv", 5040, seed=102, size=120_000),
    RealSample("Demo.Movie.2021.1080p.BluRay.x264-SEED", MOVIES, "movie", 2040, volumes=4, seed=2021, size=160_000),
)


@dataclass
class PostedFile:
    name: str
    size: int
    parts: int
    sha256: str | None = None  # of the real content; None for an overview-only file


@dataclass
class Posted:
    """What was posted of one sample: its articles' message-ids in posting order."""

    name: str
    group: str
    kind: str
    category: int
    real: bool
    date: str  # ISO, UTC
    files: list[PostedFile] = field(default_factory=list)
    message_ids: list[str] = field(default_factory=list)


# --- the overview-only sample ---------------------------------------------------------------------


def sample_files(sample: Sample) -> list[tuple[str, int]]:
    """(file name, size) of an overview-only sample, as a posting tool would post them: the
    payload (rar volumes, or one file), then a par2 index and two recovery volumes."""
    name = sample.name
    if sample.layout == "rar":
        width = max(2, len(str(sample.volumes)))
        payload = [
            (f"{name}.part{i:0{width}d}.rar", 3 * SEGMENT_BYTES - 1_000 * i) for i in range(1, sample.volumes + 1)
        ]
    else:
        payload = [(f"{name}.{sample.layout}", 4 * SEGMENT_BYTES - 12_345)]
    return payload + [
        (f"{name}.par2", 18_000),
        (f"{name}.vol00+01.par2", SEGMENT_BYTES // 2),
        (f"{name}.vol01+02.par2", SEGMENT_BYTES + 9_000),
    ]


def _digest(*parts: str) -> str:
    return hashlib.sha1("\0".join(parts).encode()).hexdigest()


def sample_articles(
    sample: Sample, namespace: str, poster: str, date: dt.datetime
) -> tuple[Posted, list[Article[YencTruth]]]:
    """The articles of an overview-only sample: subjects as yencpost's, bodies as the generator's
    (the yEnc keywords with the file's real sizes around one line of hex)."""
    files = sample_files(sample)
    count = len(files)
    width = len(str(count))
    date_bytes = _DateFormatter()(int(date.timestamp()))
    posted = Posted(sample.name, sample.group, sample.kind, sample.category, False, date.isoformat())
    articles: list[Article[YencTruth]] = []  # yEnc-like, but made without a truth
    for index, (filename, size) in enumerate(files, 1):
        parts = max(1, -(-size // SEGMENT_BYTES))
        posted.files.append(PostedFile(filename, size, parts))
        token = _digest(namespace, sample.group, sample.name, str(index))
        for part in range(1, parts + 1):
            begin = (part - 1) * SEGMENT_BYTES + 1
            end = min(part * SEGMENT_BYTES, size)
            message_id = f"<{token[:24]}.{part}@{HOST}>"
            filler = hashlib.sha256(message_id.encode()).hexdigest()
            body = (
                b"=ybegin part=%d total=%d line=128 size=%d name=%s\r\n=ypart begin=%d end=%d\r\n%s\r\n"
                b"=yend size=%d part=%d pcrc32=%08x\r\n"
                % (
                    part,
                    parts,
                    size,
                    filename.encode(),
                    begin,
                    end,
                    filler.encode(),
                    end - begin + 1,
                    part,
                    zlib.crc32(filler.encode()),
                )
            )
            subject = f'[{index:0{width}d}/{count}] - "{filename}" yEnc ({part}/{parts})'
            raw = _raw_article(
                poster.encode(), sample.group.encode(), subject.encode(), date_bytes, message_id.encode(), body, 4
            )
            articles.append(Article(message_id, raw))
            posted.message_ids.append(message_id)
    return posted, articles


# --- the real posts -------------------------------------------------------------------------------


def real_articles(
    sample: RealSample, namespace: str, directory: Path, date: dt.datetime
) -> tuple[Posted, list[Article[YencTruth]]]:
    """A real release written into `directory` and its articles (yencpost's), 30 KB parts."""
    release = make_release(
        directory / _digest(sample.name)[:12],
        sample.name,
        sample.seed,
        size=sample.size,
        volumes=sample.volumes,
        part_size=REAL_PART_SIZE,
    )
    articles = post_files(
        release.files, sample.group, REAL_POSTER, namespace=f"demo.{namespace}", part_size=REAL_PART_SIZE, date=date
    )
    posted = Posted(
        sample.name,
        sample.group,
        sample.kind,
        sample.category,
        True,
        date.isoformat(),
        message_ids=[a.message_id for a in articles],
    )
    for file in release.files:
        posted.files.append(PostedFile(file.name, file.size, max(1, -(-file.size // REAL_PART_SIZE)), file.sha256))
    return posted, articles


def demo_posts(
    namespace: str, start: dt.datetime, days: float, directory: Path
) -> tuple[list[Posted], list[Article[YencTruth]]]:
    """Every post of the demo and their articles in posting order: the sample, then the real
    posts; each post dated a step later than the one before, from `start` over `days`."""
    everything: list[Sample] = [*SAMPLES, *REAL]
    step = dt.timedelta(days=days) / len(everything)
    posts, articles = [], []
    for position, sample in enumerate(everything):
        date = start + step * position
        if isinstance(sample, RealSample):
            posted, made = real_articles(sample, namespace, directory, date)
        else:
            posted, made = sample_articles(sample, namespace, POSTERS[position % len(POSTERS)], date)
        posts.append(posted)
        articles += made
    return posts, articles


def post_demo(host: str, port: int, namespace: str, start: dt.datetime, days: float) -> dict:
    """Posts the demo to innd's feed port; what was posted, as --truth writes it. InjectError
    when INN does not take every article (an id it has seen: a namespace used before)."""
    with tempfile.TemporaryDirectory(prefix="simnews-demo.") as directory:
        posts, articles = demo_posts(namespace, start, days, Path(directory))
        result = inject(host, port, articles, conns=1)  # one connection keeps the posting order
    if result.accepted != len(articles):
        raise InjectError(
            f"INN took {result.accepted} of {len(articles)} articles ({result.rejected} refused:"
            " message-ids it has seen; post under a new --namespace)"
        )
    return {
        "namespace": namespace,
        "posted": result.sent,
        "accepted": result.accepted,
        "rejected": result.rejected,
        "groups": list(GROUPS),
        "posts": [asdict(p) for p in posts],
    }


# --- the check: a search's first result downloaded whole ------------------------------------------


class DemoCheckError(RuntimeError):
    """The search, its NZB or an article it names is not what a downloader needs."""


@dataclass(frozen=True)
class NZBCheck:
    title: str
    files: int
    articles: int
    bytes: int  # decoded, over every file

    def line(self) -> str:
        return (
            f"the first result's NZB ({self.title}): {self.files} files, {self.articles} articles,"
            " every one on the server, CRCs right"
        )


@dataclass(frozen=True)
class NZBFileEntry:
    subject: str
    message_ids: list[str]  # in segment order, without angle brackets


def _get(url: str, cafile: str | None) -> bytes:
    context = ssl.create_default_context(cafile=cafile) if url.startswith("https:") else None
    try:
        with urllib.request.urlopen(url, context=context, timeout=TIMEOUT) as response:
            return response.read()
    except urllib.error.HTTPError as exc:
        raise DemoCheckError(f"{_shown(url)} answered HTTP {exc.code} {exc.reason}") from None
    except (urllib.error.URLError, OSError) as exc:
        raise DemoCheckError(f"cannot fetch {_shown(url)}: {getattr(exc, 'reason', exc)}") from None


def _shown(url: str) -> str:
    """The URL without its API key, for messages."""
    head, _, query = url.partition("?")
    kept = [p for p in query.split("&") if not p.startswith("apikey=")]
    return head + ("?" + "&".join(kept) if kept else "")


def first_enclosure(feed: bytes, url: str) -> tuple[str, str]:
    """(title, enclosure URL) of a newznab answer's first item; DemoCheckError for a newznab error
    (202, no such function, said plainly: the API does not serve that search) or no item."""
    try:
        root = ET.fromstring(feed)
    except ET.ParseError as exc:
        raise DemoCheckError(f"{_shown(url)} did not answer XML: {exc}") from None
    if root.tag == "error":
        code, description = root.get("code", "?"), root.get("description", "")
        function = next((p[2:] for p in url.partition("?")[2].split("&") if p.startswith("t=")), "?")
        if code == "202":
            raise DemoCheckError(
                f"the newznab API does not serve t={function} (error 202, {description}): {_shown(url)}"
            )
        raise DemoCheckError(f"the newznab API answered error {code} ({description}) to {_shown(url)}")
    item = root.find("channel/item")
    if item is None:
        raise DemoCheckError(f"{_shown(url)} found nothing")
    enclosure = item.find("enclosure")
    nzb_url = enclosure.get("url") if enclosure is not None else None
    if not nzb_url:
        raise DemoCheckError(f"the first item of {_shown(url)} has no enclosure")
    return item.findtext("title") or "", nzb_url


def nzb_entries(nzb: bytes) -> list[NZBFileEntry]:
    """The files of an NZB with their segments' message-ids by segment number."""
    try:
        root = ET.fromstring(nzb)
    except ET.ParseError as exc:
        raise DemoCheckError(f"the NZB is not XML: {exc}") from None
    entries = []
    for element in root.iter(f"{{{NZB_NS}}}file"):
        segments = sorted(
            (
                (int(s.get("number", "0")), (s.text or "").strip().strip("<>"))
                for s in element.iter(f"{{{NZB_NS}}}segment")
            ),
            key=lambda pair: pair[0],
        )
        entries.append(NZBFileEntry(element.get("subject", ""), [mid for _, mid in segments]))
    if not entries or not all(e.message_ids for e in entries):
        raise DemoCheckError("the NZB lists no file, or a file without segments")
    return entries


class _Reader:
    """Just enough NNTP to read bodies by message-id (the edge's client reads overview only)."""

    def __init__(self, host: str, port: int) -> None:
        try:
            self.sock = socket.create_connection((host, port), timeout=TIMEOUT)
        except OSError as exc:
            raise DemoCheckError(f"cannot reach the news server at {host}:{port}: {exc}") from None
        self.file = self.sock.makefile("rb")
        greeting = self.file.readline()
        if not greeting.startswith((b"200", b"201")):
            raise DemoCheckError(f"the news server at {host}:{port} greeted {greeting.strip()!r}")

    def body(self, message_id: str) -> bytes:
        """The body of <message_id>, dot-unstuffed, CRLF line ends; DemoCheckError when the
        server does not have it."""
        self.sock.sendall(f"BODY <{message_id}>\r\n".encode())
        status = self.file.readline()
        if not status.startswith(b"222"):
            raise DemoCheckError(f"<{message_id}>: {status.decode('latin-1').strip() or 'connection closed'}")
        lines: list[bytes] = []
        while True:
            line = self.file.readline()
            if not line.endswith(b"\r\n"):
                raise DemoCheckError(f"<{message_id}>: the connection closed in the middle of the body")
            if line == b".\r\n":
                return b"".join(lines)
            lines.append(line[1:] if line.startswith(b"..") else line)

    def close(self) -> None:
        try:
            self.sock.sendall(b"QUIT\r\n")
        except OSError:
            pass
        self.file.close()
        self.sock.close()


def check_file(entry: NZBFileEntry, parts: list[YencPart]) -> int:
    """A file's parts joined: each part where its =ypart says, the whole its size, and its CRC
    the file's crc32 of =yend; its decoded size."""
    name = parts[0].name
    size = parts[0].file_size
    data = bytearray()
    for part in sorted(parts, key=lambda p: p.begin):
        if part.begin != len(data) + 1:
            raise DemoCheckError(f"{name}: a part begins at byte {part.begin}, after {len(data)} bytes")
        data += part.data
    if len(data) != size:
        raise DemoCheckError(f"{name}: {len(data)} bytes decoded of {size}")
    crcs = {p.crc32 for p in parts if p.crc32 is not None}
    if crcs != {zlib.crc32(data)}:
        raise DemoCheckError(f"{name}: CRC {zlib.crc32(data):08x} decoded, the posts say {sorted(crcs)}")
    return size


def check_nzb(nzb: bytes, host: str, port: int) -> tuple[int, int, int]:
    """(files, articles, decoded bytes) of an NZB whose every article was read from the news
    server and decoded, every part's and every file's CRC right; DemoCheckError otherwise."""
    entries = nzb_entries(nzb)
    reader = _Reader(host, port)
    articles = total = 0
    try:
        for entry in entries:
            parts = []
            for message_id in entry.message_ids:
                try:
                    parts.append(parse_yenc(reader.body(message_id)))
                except YencError as exc:
                    raise DemoCheckError(f"the NZB's file {entry.subject!r}: <{message_id}>: {exc}") from None
                except DemoCheckError as exc:
                    raise DemoCheckError(f"the NZB's file {entry.subject!r}: {exc}") from None
                articles += 1
            total += check_file(entry, parts)
    finally:
        reader.close()
    return len(entries), articles, total


def check_first_result(url: str, host: str, port: int, cafile: str | None = None) -> NZBCheck:
    """The newznab search at `url`, its first item's NZB fetched (t=get, the enclosure) and every
    article it names read from the news server at host:port and checked (check_nzb)."""
    title, enclosure = first_enclosure(_get(url, cafile), url)
    files, articles, size = check_nzb(_get(enclosure, cafile), host, port)
    return NZBCheck(title, files, articles, size)


# --- command line ---------------------------------------------------------------------------------


def _start(text: str) -> dt.datetime:
    moment = dt.datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=dt.timezone.utc)


def main(argv: Iterable[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m simnews.demo", description=__doc__.split("\n\n")[0])
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--port", type=int, help="post the demo to innd's feed port")
    action.add_argument("--list-groups", action="store_true", help="print the demo's groups, one line")
    action.add_argument("--check", metavar="URL", help="fetch a newznab search's first result whole")
    parser.add_argument("--host", default="127.0.0.1", help="INN's address (feed and reader)")
    parser.add_argument("--namespace", default="demo", help="makes the message-ids new (INN refuses repeats)")
    parser.add_argument("--date", type=_start, help="the first post's date (UTC, ISO format; default: --days ago)")
    parser.add_argument("--days", type=float, default=1.0, help="the posts' dates run over this many days")
    parser.add_argument("--truth", "--out", dest="truth", help="write what was posted here (JSON)")
    parser.add_argument("--reader-port", type=int, help="with --check: INN's reader port")
    parser.add_argument("--cafile", help="with --check: the API's CA file")
    args = parser.parse_args(None if argv is None else list(argv))
    if args.list_groups:
        print(" ".join(GROUPS))
        return 0
    if args.check:
        if args.reader_port is None:
            parser.error("--check needs --reader-port")
        try:
            checked = check_first_result(args.check, args.host, args.reader_port, args.cafile)
        except DemoCheckError as exc:
            print(f"{parser.prog}: {exc}", file=sys.stderr)
            return 1
        print(checked.line())
        return 0
    if args.days < 0:
        parser.error("--days must not be negative")
    start = args.date or dt.datetime.now(dt.timezone.utc) - dt.timedelta(days=args.days)
    try:
        record = post_demo(args.host, args.port, args.namespace, start, args.days)
    except (OSError, InjectError) as exc:
        print(f"{parser.prog}: cannot post to {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 1
    if args.truth:
        Path(args.truth).write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    summary = {key: record[key] for key in ("namespace", "posted", "accepted", "rejected")}
    print(
        json.dumps(summary | {"posts": len(record["posts"]), "real": [p["name"] for p in record["posts"] if p["real"]]})
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
