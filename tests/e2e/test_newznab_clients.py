"""The newznab API as its clients call it: Sonarr, Radarr, Prowlarr, NZBHydra2 and LazyLibrarian,
each request built as the client's own code builds it (the URLs, parameter order and encoding of
docs/clients.md, which cites the code), answered by the API through gunicorn over HTTPS, and
each answer read the way the client reads it.

The catalog is filled once for the module, end to end as in production (INN 2 -> an edge node ->
API -> workers -> PostgreSQL): posts of real name shapes (episodes in SD and HD, a multi-episode,
a WEB-DL season pack, a daily show, a special, a French episode, films in a film group and in a
TV group, lossless and MP3 albums, an ebook, an anime episode) and 101 older episodes of another
show, so that Sonarr's RSS sync needs a second page. Each post has its own date: results come
newest first, so the tests know the order.

The tests use the package's `datacenter` and `news` (tests/e2e/conftest.py) directly rather than
`dc`, which empties the catalog before each test."""

from __future__ import annotations

import email.utils
import hashlib
import json
import re
import ssl
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
import xml.etree.ElementTree as ET
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from email.message import Message
from typing import TYPE_CHECKING

import pytest

from simnews.nzbpost import NZBFile, NZBPost, NZBSegment, post_articles
from simnews.proxy import ProviderProxy

if TYPE_CHECKING:
    from tests.e2e.conftest import DataCenter, News

pytestmark = pytest.mark.services

NEWZNAB = "{http://www.newznab.com/DTD/2010/feeds/attributes/}"
NZB_TYPE = "application/x-nzb"
NAMESPACE = "clients"  # message-ids of this module's posts, apart from every other test's

TV = "alt.binaries.teevee"
MOVIES = "alt.binaries.moovee"
FLAC = "alt.binaries.sounds.flac"
MP3 = "alt.binaries.sounds.mp3"
EBOOKS = "alt.binaries.e-book"
ANIME_GROUP = "alt.binaries.anime"
GROUPS = (TV, MOVIES, FLAC, MP3, EBOOKS, ANIME_GROUP)

EP = "Show.Name.S01E02.720p.HDTV.x264-GRP"
EP_SD = "Show.Name.S01E02.HDTV.x264-LOL"
MULTI = "Show.Name.S01E03E04.720p.HDTV.x264-GRP"
PACK = "Show.Name.S02.1080p.WEB-DL.DD5.1.H.264-GRP"
EP2 = "Show.Name.S02E05.720p.HDTV.x264-GRP"
SPECIAL = "Show.Name.S00E01.Special.720p.HDTV.x264-GRP"
FRENCH = "Show.Name.S01E06.FRENCH.720p.HDTV.x264-GRP"
DAILY = "Talk.Show.2014.07.22.720p.HDTV.x264-GRP"
DAILY_NEXT = "Talk.Show.2014.07.23.720p.HDTV.x264-GRP"
FILM_IN_TV = "Another.Film.2018.1080p.BluRay.x264-GRP"
FILM = "Film.Title.2019.1080p.BluRay.x264-GRP"
FILM_OLD = "Film.Title.2017.1080p.BluRay.x264-GRP"
ALBUM = "Some_Artist-Great_Album-2020-FLAC-GRP"
MP3_ALBUM = "Other_Artist-Second_Album-2021-MP3-GRP"
EBOOK = "Author.Name.-.Book.Title.2020.EPUB-GRP"
ANIME = "[Grp] Show - 214 [1080p]"
APOSTROPHE = "Bobs.Burgers.S14E01.720p.HDTV.x264-GRP"  # the series is "Bob's Burgers"
# (name, group, the category `flask seed names parse --json --group GROUP` gives it), newest first.
NAMED = (
    (EP, TV, 5040),
    (EP_SD, TV, 5030),
    (MULTI, TV, 5040),
    (PACK, TV, 5010),
    (EP2, TV, 5040),
    (SPECIAL, TV, 5040),
    (FRENCH, TV, 5020),
    (DAILY, TV, 5040),
    (DAILY_NEXT, TV, 5040),
    (FILM_IN_TV, TV, 2040),
    (FILM, MOVIES, 2040),
    (FILM_OLD, MOVIES, 2040),
    (ALBUM, FLAC, 3040),
    (MP3_ALBUM, MP3, 3010),
    (EBOOK, EBOOKS, 7020),
    (ANIME, ANIME_GROUP, 5070),
    (APOSTROPHE, TV, 5040),
)
# Older than every named post, newest first: 101 HD episodes, so 7 + 101 posts are in 5030/5040.
FILLERS = tuple(f"Filler.Show.S{1 + n // 20:02d}E{1 + n % 20:02d}.720p.HDTV.x264-GRP" for n in range(101))
NEWEST = datetime(2025, 6, 20, 12, tzinfo=timezone.utc)
FILLERS_NEWEST = datetime(2025, 6, 10, 12, tzinfo=timezone.utc)

SONARR_CATS = "5030,5040"  # Sonarr's default Categories (NewznabSettings)
NZBFINDER_CATS = "5010,5030,5040,5045,5090"  # Sonarr's NZBFinder.ws definition
RADARR_CATS = "2000,2010,2020,2030,2035,2040,2045,2050,2060"  # Radarr's default Categories
PAGE = 100  # Sonarr's and Radarr's PageSize


def named(*categories: int) -> list[str]:
    """The named posts of these categories, newest first."""
    return [name for name, _, category in NAMED if category in categories]


# -- the catalog -------------------------------------------------------------------------------


def nzb_post(name: str, group: str, posted: datetime, rar_segments: int) -> NZBPost:
    """A post as a posting tool makes it: two rar volumes of `rar_segments` segments and a par2,
    subjects `[i/3] - "file" yEnc (p/P)`."""
    slug = hashlib.sha1(name.encode()).hexdigest()[:16]
    files = []
    for index, file_name in enumerate((f"{name}.part1.rar", f"{name}.part2.rar", f"{name}.par2"), 1):
        count = rar_segments if file_name.endswith(".rar") else 1
        segments = [
            NZBSegment(number, 716_800, f"{slug}.{index}.{number}@clients.invalid") for number in range(1, count + 1)
        ]
        files.append(
            NZBFile(
                poster="Poster <poster@example.net>",
                date=int(posted.timestamp()),
                subject=f'[{index}/3] - "{file_name}" yEnc (1/{count})',
                groups=(group,),
                segments=segments,
            )
        )
    return NZBPost(name, f"{slug}.nzb", files)


def catalog_posts() -> list[NZBPost]:
    posts = [nzb_post(name, group, NEWEST - timedelta(hours=i), 2 + i % 4) for i, (name, group, _) in enumerate(NAMED)]
    posts += [nzb_post(name, TV, FILLERS_NEWEST - timedelta(minutes=i), 1) for i, name in enumerate(FILLERS)]
    return posts


@dataclass(frozen=True)
class Indexer:
    """The API as a client reaches it, with the key the user gave the client."""

    url: str
    cafile: str
    key: str
    datacenter: DataCenter


@pytest.fixture(scope="module")
def indexer(datacenter: DataCenter, news: News) -> Iterator[Indexer]:
    """The catalog filled once for the module, and an unlimited API key."""
    datacenter.ensure_running()
    datacenter.reset()
    for group in GROUPS:
        news.inn.add_group(group)
    articles = [article for post in catalog_posts() for article in post_articles(post, namespace=NAMESPACE)]
    assert news.inn.post(articles) == len(articles)
    datacenter.add_groups(*GROUPS)
    try:
        with ProviderProxy(news.inn.host, news.inn.reader_port) as proxy:
            datacenter.plan(proxy, *GROUPS, range_size=2_000)
            token = datacenter.create_node("edge-clients")
            node = datacenter.edge("edge-clients", datacenter.node_env(token, proxy.port), "--exit-when-idle")
            assert node.wait(120) == 0, node.log()
        datacenter.wait_finished()
        key = json.loads(datacenter.flask("apikeys", "create", "clients", "--json"))["key"]
        yield Indexer(datacenter.api.url, datacenter.api.cafile, key, datacenter)
    finally:
        datacenter.kill_edges()


# -- HTTP as the clients speak it --------------------------------------------------------------


@dataclass(frozen=True)
class Answer:
    status: int
    headers: Message
    body: bytes

    def root(self) -> ET.Element:
        return ET.fromstring(self.body)


def get(indexer: Indexer, path_and_query: str) -> Answer:
    """GET a URL as a client built it (already escaped as the client escapes it); an HTTP error
    status is an answer too (429 is one the clients read)."""
    context = ssl.create_default_context(cafile=indexer.cafile)
    request = urllib.request.Request(indexer.url + path_and_query, headers={"User-Agent": "clients-test"})
    try:
        with urllib.request.urlopen(request, context=context, timeout=30) as response:
            return Answer(response.status, response.headers, response.read())
    except urllib.error.HTTPError as exc:
        return Answer(exc.code, exc.headers, exc.read())


@dataclass(frozen=True)
class Release:
    """An item as the strictest of the clients reads it."""

    title: str
    url: str
    size: int
    published: datetime
    categories: tuple[int, ...]
    attrs: dict[str, list[str]]


@dataclass(frozen=True)
class Feed:
    releases: list[Release]
    offset: int
    total: int
    apilimits: dict[str, str]

    @property
    def titles(self) -> list[str]:
        return [release.title for release in self.releases]


@dataclass
class Caps:
    """t=caps as Sonarr's, Prowlarr's and NZBHydra2's providers read it."""

    default: int
    max: int
    searching: dict[str, tuple[bool, list[str]]] = field(default_factory=dict)  # element: (available, params)
    categories: dict[int, str] = field(default_factory=dict)  # parents and subcats, by id
    parents: dict[int, list[int]] = field(default_factory=dict)

    def params(self, element: str) -> list[str]:
        available, params = self.searching.get(element, (False, []))
        return params if available else []


def read_caps(answer: Answer) -> Caps:
    assert answer.status == 200, answer
    root = answer.root()
    assert root.tag == "caps", answer.body[:300]
    limits = root.find("limits")
    caps = Caps(default=int(limits.get("default")), max=int(limits.get("max")))  # both int.Parse'd
    for element in root.find("searching"):
        params = element.get("supportedParams")
        caps.searching[element.tag] = (element.get("available") == "yes", params.split(",") if params else [])
    for category in root.find("categories").findall("category"):
        parent = int(category.get("id"))
        caps.categories[parent] = category.get("name")
        caps.parents[parent] = []
        for subcat in category.findall("subcat"):
            caps.categories[int(subcat.get("id"))] = subcat.get("name")
            caps.parents[parent].append(int(subcat.get("id")))
    return caps


def read_feed(answer: Answer, caps: Caps) -> Feed:
    """An RSS answer, every item checked for what the clients need of it: an enclosure of type
    application/x-nzb (Sonarr, Prowlarr and NZBHydra2 drop an item without one) whose URL is the
    item's link too (LazyLibrarian reads <link>); size, files, poster, group, usenetdate, grabs
    and completion once each, size equal to the enclosure's length and files and grabs integers
    (NZBHydra2 parses them); category attributes that are integers caps lists, each once
    (Prowlarr maps them through caps); a guid; a pubDate in the format LazyLibrarian parses and a
    usenetdate NZBHydra2's RFC 1123 parser takes. The channel holds newznab:response and
    newznab:apilimits."""
    assert answer.status == 200, (answer.status, answer.body[:300])
    root = answer.root()
    assert root.tag == "rss", answer.body[:300]
    channel = root.find("channel")
    response = channel.find(f"{NEWZNAB}response")
    limits = channel.find(f"{NEWZNAB}apilimits")
    assert response is not None and limits is not None, answer.body[:600]
    releases = []
    for item in channel.findall("item"):
        title = item.findtext("title")
        assert title and item.findtext("guid"), ET.tostring(item)[:300]
        enclosures = [e for e in item.findall("enclosure") if e.get("type") == NZB_TYPE]
        assert len(enclosures) == 1, title
        url = enclosures[0].get("url")
        assert url.startswith("https://") and item.findtext("link") == url, title
        attrs: dict[str, list[str]] = defaultdict(list)
        for attr in item.findall(f"{NEWZNAB}attr"):
            attrs[attr.get("name")].append(attr.get("value"))
        for name in ("size", "files", "poster", "group", "usenetdate", "grabs", "completion"):
            assert len(attrs[name]) == 1, (title, name, attrs[name])
        size = int(attrs["size"][0])
        assert size > 0 and int(enclosures[0].get("length")) == size, title
        int(attrs["files"][0]), int(attrs["grabs"][0])
        categories = tuple(int(value) for value in attrs["category"])
        assert categories and len(set(categories)) == len(categories), (title, categories)
        assert set(categories) <= set(caps.categories), (title, categories)
        published = email.utils.parsedate_to_datetime(attrs["usenetdate"][0])
        datetime.strptime(" ".join(item.findtext("pubDate").split(" ")[:5]), "%a, %d %b %Y %H:%M:%S")
        releases.append(Release(title, url, size, published, categories, dict(attrs)))
    return Feed(releases, int(response.get("offset")), int(response.get("total")), dict(limits.attrib))


def read_error(answer: Answer) -> tuple[str, str]:
    """(code, description) of an error answer."""
    root = answer.root()
    assert root.tag == "error", answer.body[:300]
    return root.get("code"), root.get("description")


def in_categories(release: Release, wanted: str) -> bool:
    """Whether a release answers cat=wanted: one of its categories asked for, or its parent."""
    ids = {int(c) for c in wanted.split(",")}
    return any(c in ids or c // 1000 * 1000 in ids for c in release.categories)


def assert_newest_first(feed: Feed) -> None:
    dates = [release.published for release in feed.releases]
    assert dates == sorted(dates, reverse=True), feed.titles


def retry_after(headers: Message) -> timedelta:
    """Retry-After as Sonarr's TooManyRequestsException reads it: seconds, or an HTTP date."""
    value = headers.get("Retry-After")
    assert value, "a 429 without Retry-After: Sonarr and Prowlarr then back off a whole hour"
    if value.strip().isdigit():
        return timedelta(seconds=int(value))
    return email.utils.parsedate_to_datetime(value) - datetime.now(timezone.utc)


@pytest.fixture(scope="module")
def caps(indexer: Indexer) -> Caps:
    return read_caps(get(indexer, f"/api?t=caps&apikey={indexer.key}"))


def sonarr(indexer: Indexer, caps: Caps, t: str, cats: str, parameters: str = "", offset: int = 0) -> Feed:
    """One page of Sonarr's GetPagedRequests: {BaseUrl}{ApiPath}?t=..&cat=..&extended=1&apikey=K
    &offset=..&limit=100 and the search's own parameters after them (Radarr's is the same)."""
    answer = get(
        indexer, f"/api?t={t}&cat={cats}&extended=1&apikey={indexer.key}&offset={offset}&limit={PAGE}{parameters}"
    )
    feed = read_feed(answer, caps)
    assert feed.offset == offset and all(in_categories(r, cats) for r in feed.releases), feed.titles
    assert_newest_first(feed)
    return feed


def clean_scene_title(title: str) -> str:
    """Sonarr's SearchCriteriaBase.GetCleanSceneTitle."""
    clean = re.sub(r"^the\s", "", title, flags=re.IGNORECASE).replace("&", "and")
    clean = re.sub(r"[`'.]", "", clean)
    clean = re.sub(r"\W", "+", clean)
    clean = re.sub(r"\+{2,}", "+", clean)
    return unicodedata.normalize("NFKD", clean).encode("ascii", "ignore").decode().strip("+ ")


def sonarr_title(caps: Caps, scene_title: str, parameters: str) -> str:
    """Sonarr v4's AddTitlePageableRequests: title={EscapeDataString(scene title)} when caps'
    tv-search announces title, else q={the clean scene title, '+' as spaces, escaped}."""
    if "title" in caps.params("tv-search"):
        return f"&title={urllib.parse.quote(scene_title, safe='')}{parameters}"
    return f"&q={urllib.parse.quote(clean_scene_title(scene_title).replace('+', ' '), safe='')}{parameters}"


def sonarr_pages(indexer: Indexer, caps: Caps, t: str, cats: str, parameters: str = "") -> list[Feed]:
    """Pages as HttpIndexerBase fetches them: the next one only while the page was full."""
    pages = [sonarr(indexer, caps, t, cats, parameters)]
    while len(pages[-1].releases) >= PAGE:
        pages.append(sonarr(indexer, caps, t, cats, parameters, offset=len(pages) * PAGE))
    return pages


# -- caps --------------------------------------------------------------------------------------


def test_caps_announce_the_searches_of_the_contract(indexer: Indexer, caps: Caps) -> None:
    root = get(indexer, f"/api?t=caps&apikey={indexer.key}").root()
    assert root.find("server").get("title") == "usenet-seed"
    assert (caps.default, caps.max) == (100, 100)
    # Sonarr: PageSize = min(100, max(default, max)); Prowlarr: the default.
    assert min(100, max(caps.default, caps.max)) == PAGE
    # Sonarr's TestCapabilities and its episode/season/daily searches need q, season and ep; the
    # ids an NFO may give are announced (Sonarr's and Radarr's first tier of requests then asks by
    # id, and an empty page sends them to their title tier). An announced `title` would make Sonarr
    # send title={raw scene title} instead of q={clean title} (the Bob's Burgers search below).
    assert {element: caps.params(element) for element in caps.searching} == {
        "search": ["q"],
        "tv-search": ["q", "season", "ep", "tvdbid", "tvmazeid"],
        "movie-search": ["q", "imdbid"],
        "audio-search": ["q", "artist", "album"],
        "book-search": ["q", "title", "author"],
    }


def test_caps_list_parents_with_their_subcategories(caps: Caps) -> None:
    # The standard ids the clients' category settings use, under their parents.
    for parent, subcats in {
        5000: (5010, 5020, 5030, 5040, 5070),
        2000: (2040,),
        3000: (3010, 3030, 3040),
        7000: (7010, 7020, 7030),
    }.items():
        assert set(subcats) <= set(caps.parents[parent]), (parent, caps.parents[parent])
    assert all(sub // 1000 * 1000 == parent for parent, subs in caps.parents.items() for sub in subs)


def test_caps_with_a_key_carry_its_limits(indexer: Indexer) -> None:
    created = json.loads(
        indexer.datacenter.flask(
            "apikeys", "create", "capped", "--requests-per-day", "1000", "--grabs-per-day", "50", "--json"
        )
    )
    root = get(indexer, f"/api?t=caps&apikey={created['key']}").root()
    limits = [e for e in root.iter() if e.tag.rsplit("}", 1)[-1] == "apilimits"]
    assert [(e.get("apimax"), e.get("grabmax")) for e in limits] == [("1000", "50")], ET.tostring(root)[:400]


# -- Sonarr ------------------------------------------------------------------------------------


def test_sonarr_adds_the_indexer_then_syncs_rss_page_by_page(indexer: Indexer, caps: Caps) -> None:
    # Add: caps (above), then the first request of the RSS chain must hold releases.
    first = sonarr(indexer, caps, "tvsearch", SONARR_CATS)
    assert first.releases, "Sonarr: no results in the configured categories; the indexer is not saved"

    # RSS sync: t=tvsearch with the categories and nothing else, 100 a page while pages are full.
    pages = sonarr_pages(indexer, caps, "tvsearch", SONARR_CATS)
    titles = [title for page in pages for title in page.titles]
    expected = named(5030, 5040) + list(FILLERS)
    assert [len(page.releases) for page in pages] == [100, len(expected) - 100]
    assert titles == expected  # newest first, no post twice, none missing across the pages
    assert {page.total for page in pages} == {len(expected)}
    # Not asked for: the WEB-DL pack (5010), the French episode (5020), the film posted in a TV
    # group (2040) and the anime (5070).
    assert not {PACK, FRENCH, FILM_IN_TV, ANIME} & set(titles)

    # Anime categories configured: RSS asks for Categories and AnimeCategories together.
    with_anime = sonarr(indexer, caps, "tvsearch", SONARR_CATS + ",5070")
    newest = named(5030, 5040, 5070)
    assert with_anime.titles[: len(newest)] == newest


def test_sonarr_searches_episodes_seasons_daily_shows_specials_and_anime(indexer: Indexer, caps: Caps) -> None:
    def tv(cats: str, title: str, parameters: str) -> list[str]:
        return sonarr(indexer, caps, "tvsearch", cats, sonarr_title(caps, title, parameters)).titles

    # tvdbid announced (with season and ep): Sonarr's first tier asks by the series' TheTVDB id
    # (AddTvIdPageableRequests). No NFO named it here: an empty page, so Sonarr goes on to its
    # title tier (q=Show%20Name, or title= if caps announce it).
    assert "tvdbid" in caps.params("tv-search")
    for ids in ("&season=1&ep=2", "&season=2", "&season=2014&ep=07/22"):
        by_id = sonarr(indexer, caps, "tvsearch", SONARR_CATS, f"&tvdbid=121361{ids}")
        assert (by_id.titles, by_id.total) == ([], 0), ids
    episode = sonarr(indexer, caps, "tvsearch", SONARR_CATS, sonarr_title(caps, "Show Name", "&season=1&ep=2"))
    assert episode.titles == [EP, EP_SD] and episode.total == 2
    assert tv(SONARR_CATS, "Show Name", "&season=1&ep=4") == [MULTI]
    assert tv(SONARR_CATS, "Show Name", "&season=1&ep=3") == [MULTI]
    nothing = sonarr(indexer, caps, "tvsearch", SONARR_CATS, sonarr_title(caps, "Show Name", "&season=1&ep=9"))
    assert (nothing.titles, nothing.total) == ([], 0)  # an empty page, so Sonarr tries its next tier

    # Season search: the season's pack and every episode of it, in the categories asked.
    assert tv(SONARR_CATS, "Show Name", "&season=2") == [EP2]
    assert tv(NZBFINDER_CATS, "Show Name", "&season=2") == [PACK, EP2]
    assert tv("5000", "Show Name", "&season=1") == [EP, EP_SD, MULTI, FRENCH]

    # Daily show: season=YYYY&ep=MM/DD, the slash unescaped, matches the air date alone.
    assert tv(SONARR_CATS, "Talk Show", "&season=2014&ep=07/22") == [DAILY]
    assert tv(SONARR_CATS, "Talk Show", "&season=2014&ep=07/23") == [DAILY_NEXT]

    # Specials: season 0 comes as "00" (NewznabifySeasonNumber).
    assert tv(SONARR_CATS, "Show Name", "&season=00&ep=1") == [SPECIAL]
    assert tv(SONARR_CATS, "Show Name", "&season=00") == [SPECIAL]

    # Anime: t=search on the anime categories, q={title}+{absolute:00} with a literal '+'.
    assert sonarr(indexer, caps, "search", "5070", "&q=Show+214").titles == [ANIME]


def test_sonarr_finds_a_series_whose_title_has_an_apostrophe(indexer: Indexer, caps: Caps) -> None:
    # Releases drop the apostrophe (Bobs.Burgers). Sonarr's q is the clean title ("Bobs Burgers");
    # had caps announced `title`, it would send the raw "Bob's Burgers", whose word "bob" no
    # release name has.
    parameters = sonarr_title(caps, "Bob's Burgers", "&season=14&ep=1")
    assert sonarr(indexer, caps, "tvsearch", SONARR_CATS, parameters).titles == [APOSTROPHE], parameters


# -- Radarr ------------------------------------------------------------------------------------


def test_radarr_syncs_rss_and_searches_a_movie_by_title_and_year(indexer: Indexer, caps: Caps) -> None:
    # movie-search is available: RSS (and the add-time test) is t=movie on the movie categories.
    rss = sonarr(indexer, caps, "movie", RADARR_CATS)
    assert rss.titles == [FILM_IN_TV, FILM, FILM_OLD]  # the film posted in a TV group is a film
    # imdbid announced (tmdbid not: Radarr would send it instead): the id tier is
    # t=movie&imdbid={the id without tt}; no NFO named it here, so an empty page, and Radarr goes on
    # to its title tier, t=search&q={title year}.
    by_id = sonarr(indexer, caps, "movie", RADARR_CATS, "&imdbid=0848228")
    assert (by_id.titles, by_id.total) == ([], 0)
    assert sonarr(indexer, caps, "search", RADARR_CATS, "&q=Film%20Title%202019").titles == [FILM]
    assert sonarr(indexer, caps, "search", RADARR_CATS, "&q=Film%20Title").titles == [FILM, FILM_OLD]


# -- Prowlarr ----------------------------------------------------------------------------------


def prowlarr(indexer: Indexer, caps: Caps, t: str, cats: str | None, **parameters: str | int) -> Feed:
    """Prowlarr's GetPagedRequests: ?t=..&extended=1[&cat=..]&apikey=K&{parameters, URL-encoded}."""
    url = f"/api?t={t}&extended=1" + (f"&cat={cats}" if cats else "") + f"&apikey={indexer.key}"
    if parameters:
        url += "&" + urllib.parse.urlencode(parameters, quote_via=urllib.parse.quote, safe="")
    feed = read_feed(get(indexer, url), caps)
    assert feed.offset == int(parameters.get("offset", 0))
    if cats:
        assert all(in_categories(r, cats) for r in feed.releases), feed.titles
    assert_newest_first(feed)
    return feed


def test_prowlarr_tests_the_indexer_then_searches_and_pages(indexer: Indexer, caps: Caps) -> None:
    # Add/Test: BasicSearchCriteria { SearchType = "search" }, no term, no category.
    assert prowlarr(indexer, caps, "search", None).releases, "Prowlarr: query successful, but no results"

    # Paging as Prowlarr passes it on: limit and offset, the total of newznab:response.
    pages = [
        prowlarr(indexer, caps, "search", None, q="Filler Show", limit=40, offset=offset) for offset in (0, 40, 80)
    ]
    assert [len(page.releases) for page in pages] == [40, 40, 21]
    assert [title for page in pages for title in page.titles] == list(FILLERS)
    assert {page.total for page in pages} == {len(FILLERS)}

    # TV from Sonarr through Prowlarr: season and ep announced, so t=tvsearch with them and q.
    tv = prowlarr(indexer, caps, "tvsearch", SONARR_CATS, season=1, ep=2, q="Show Name", limit=100, offset=0)
    assert tv.titles == [EP, EP_SD]
    daily = prowlarr(indexer, caps, "tvsearch", SONARR_CATS, season=2014, ep="07/22", q="Talk Show")  # ep=07%2F22
    assert daily.titles == [DAILY]
    assert prowlarr(indexer, caps, "tvsearch", SONARR_CATS, season="00", ep=1, q="Show Name").titles == [SPECIAL]
    # Movies: Radarr's id tier through Prowlarr is t=movie&imdbid=tt... (imdbid announced): empty
    # here; its title tier has no id, so Prowlarr sends t=search with q.
    assert prowlarr(indexer, caps, "movie", "2000", imdbid="tt0848228").titles == []
    assert prowlarr(indexer, caps, "search", "2000", q="Film Title 2019").titles == [FILM]
    # Music and books: artist/album and author/title announced, so t=music and t=book with them.
    assert prowlarr(indexer, caps, "music", "3000", artist="Some Artist", album="Great Album").titles == [ALBUM]
    assert prowlarr(indexer, caps, "music", "3000", artist="Other Artist").titles == [MP3_ALBUM]
    assert prowlarr(indexer, caps, "book", "7000", author="Author Name", title="Book Title").titles == [EBOOK]
    # The contract's t=movie: q and year.
    assert prowlarr(indexer, caps, "movie", "2000", q="Film Title", year=2019).titles == [FILM]
    assert prowlarr(indexer, caps, "movie", "2000", q="Film Title", year=2017).titles == [FILM_OLD]


# -- NZBHydra2 ---------------------------------------------------------------------------------

# IndexerChecker.checkCaps: (t, id parameter, value), each sent alone, with no q.
HYDRA_ID_PROBES = (
    ("tvsearch", "tvdbid", "121361"),
    ("tvsearch", "rid", "24493"),
    ("tvsearch", "tvmazeid", "82"),
    ("tvsearch", "traktid", "1390"),
    ("tvsearch", "imdbid", "0944947"),
    ("movie", "tmdbid", "24428"),
    ("movie", "imdbid", "0848228"),
)


# The ids the catalog keeps (an NFO's), searched; the others are "function not available".
KEPT_IDS = ("tvdbid", "tvmazeid", "imdbid", "tmdbid")


def hydra(indexer: Indexer, caps: Caps, **parameters: str | int) -> Feed:
    """NZBHydra2's URLs: UriComponentsBuilder, apikey first, then its parameters in order."""
    query = urllib.parse.urlencode({"apikey": indexer.key, **parameters}, quote_via=urllib.parse.quote, safe=",")
    return read_feed(get(indexer, f"/api?{query}"), caps)


def test_nzbhydra_checks_the_connection_and_caps_then_searches_and_pages(indexer: Indexer, caps: Caps) -> None:
    # checkConnection: t=search&q=mp3 must hold items, and newznab ones (x-nzb enclosures).
    connection = hydra(indexer, caps, t="search", q="mp3")
    assert connection.titles == [MP3_ALBUM]

    # checkCaps: an id probe answered with no items is "probably doesn't support" (the ids the
    # catalog keeps, which no NFO named here), one answered "function not available" is not
    # supported (those it never keeps); any other error marks the caps check incomplete.
    for t, name, value in HYDRA_ID_PROBES:
        answer = get(indexer, f"/api?apikey={indexer.key}&t={t}&{name}={value}")
        assert answer.status == 200, (name, answer.status)
        if name in KEPT_IDS:
            assert read_feed(answer, caps).releases == [], name
        else:
            code, description = read_error(answer)
            assert code == "203" and "function not available" in description.lower(), (name, code, description)

    # Then t=caps: a <caps> root, audio and book search available, categories found by name.
    hydra_caps = read_caps(get(indexer, f"/api?apikey={indexer.key}&t=caps"))
    assert hydra_caps.searching["audio-search"][0] and hydra_caps.searching["book-search"][0]
    # Its list: the parents, then every parent's subcategories; anime not under XXX (6xxx).
    listed = [*hydra_caps.parents, *(sub for subs in hydra_caps.parents.values() for sub in subs)]

    def first(*words: str, not_xxx: bool = False) -> int:
        return next(
            i
            for i in listed
            if any(w in hydra_caps.categories[i].lower() for w in words) and not (not_xxx and i // 1000 == 6)
        )

    assert (
        first("anime", not_xxx=True),
        first("audiobook"),
        first("comic"),
        first("ebook", "e-book"),
        first("magazine", "mags"),
    ) == (5070, 3030, 7030, 7020, 7010)

    # A TV search for an indexer with no id support: t=search, q generated as "title s01e02".
    episode = hydra(
        indexer, caps, t="search", extended=1, q="Show Name s01e02", password=0, cat=SONARR_CATS, limit=100, offset=0
    )
    assert episode.titles == [EP, EP_SD]
    season = hydra(indexer, caps, t="search", extended=1, q="Show Name s02", cat="5000", limit=100, offset=0)
    assert season.titles == [PACK, EP2]

    # Paging: more results while total > offset + items.
    first_page = hydra(indexer, caps, t="search", extended=1, q="Filler Show", cat="5000", limit=100, offset=0)
    assert (len(first_page.releases), first_page.offset, first_page.total) == (100, 0, len(FILLERS))
    assert first_page.total > first_page.offset + len(first_page.releases)
    last_page = hydra(indexer, caps, t="search", extended=1, q="Filler Show", cat="5000", limit=100, offset=100)
    assert last_page.titles == [FILLERS[-1]] and last_page.total == last_page.offset + len(last_page.releases)
    # Items: the most specific category is the largest id (NZBHydra2's computeCategory).
    assert {max(r.categories) for r in episode.releases} == {5040, 5030}


# -- LazyLibrarian -----------------------------------------------------------------------------


def lazylibrarian_caps(root: ET.Element) -> dict[str, str]:
    """get_capabilities' reading of t=caps (providers.py)."""
    provider = {
        "GENERALSEARCH": "search",
        "EXTENDED": "1",
        "BOOKCAT": "",
        "MAGCAT": "",
        "AUDIOCAT": "",
        "COMICCAT": "",
        "BOOKSEARCH": "",
    }
    for cat in root.iter("category"):
        name = cat.get("name", "").lower()
        if name == "audio":
            provider["AUDIOCAT"] = cat.get("id")
            for subcat in cat.iter("subcat"):
                if "audiobook" in subcat.get("name").lower():
                    provider["AUDIOCAT"] = subcat.get("id")
        elif name == "books":
            provider["BOOKCAT"] = provider["MAGCAT"] = provider["COMICCAT"] = cat.get("id")
            provider["BOOKSEARCH"] = "book" if provider["BOOKCAT"] == "7000" else ""
            search = root.find("searching/book-search")
            if search is not None and len(search):  # LazyLibrarian's `if search:`: false without children
                provider["BOOKSEARCH"] = "book" if search.get("available") == "yes" else ""
            subs: dict[str, list[str]] = defaultdict(list)
            for subcat in cat.iter("subcat"):
                sub = subcat.get("name").lower()
                for key, words in (
                    ("BOOKCAT", ("ebook",)),
                    ("MAGCAT", ("magazines", "mags")),
                    ("COMICCAT", ("comic",)),
                ):
                    if any(w in sub for w in words):
                        subs[key].append(subcat.get("id"))
            provider.update({key: ",".join(ids) for key, ids in subs.items()})
    return provider


def lazylibrarian_results(answer: Answer) -> list[dict[str, str]]:
    """NewzNabPlus' reading of a result: title, link, pubDate and the size attribute."""
    assert answer.status == 200
    root = answer.root()
    assert root.tag != "error", answer.body[:300]
    results = []
    for item in root.iter("item"):
        fields = {}
        for child in item:
            tag = str(child.tag).lower()
            if tag in ("title", "link", "pubdate"):
                fields[tag] = child.text
            elif child.get("name") == "size":
                fields["size"] = child.get("value")
        results.append(fields)
    return results


def test_lazylibrarian_reads_caps_without_key_tests_and_searches_books(indexer: Indexer) -> None:
    # Caps without the key first (retried with it only after an error).
    answer = get(indexer, "/api?t=caps")
    assert answer.status == 200 and answer.root().tag == "caps", answer.body[:300]
    provider = lazylibrarian_caps(answer.root())
    assert {k: provider[k] for k in ("BOOKSEARCH", "BOOKCAT", "MAGCAT", "COMICCAT", "AUDIOCAT")} == {
        "BOOKSEARCH": "book",
        "BOOKCAT": "7020",
        "MAGCAT": "7010",
        "COMICCAT": "7030",
        "AUDIOCAT": "3030",
    }

    def search(params: dict[str, str]) -> Answer:
        return get(indexer, "/api?" + urllib.parse.urlencode(params))  # spaces as '+'

    # The provider test: a book search for Agatha Christie's Poirot must not be an error element.
    test = search(
        {"t": "book", "apikey": indexer.key, "title": "Poirot", "author": "Agatha Christie", "cat": provider["BOOKCAT"]}
    )
    body = test.body.decode().strip()
    assert test.status == 200 and not (body.startswith("<") and body.endswith("/>") and "error code" in body), body[
        :300
    ]

    # A book search, and the general search it falls back to.
    book = lazylibrarian_results(
        search(
            {
                "t": "book",
                "apikey": indexer.key,
                "title": "Book Title",
                "author": "Author Name",
                "cat": provider["BOOKCAT"],
            }
        )
    )
    general = lazylibrarian_results(
        search({"t": "search", "apikey": indexer.key, "q": "Author Name Book Title", "cat": provider["BOOKCAT"]})
    )
    for results in (book, general):
        assert [r["title"] for r in results] == [EBOOK]
        (result,) = results
        assert result["link"].startswith("https://") and int(result["size"]) > 0
        datetime.strptime(" ".join(result["pubdate"].split(" ")[:5]), "%a, %d %b %Y %H:%M:%S")
    # The general search of other kinds: t=search&q=..&extended=1.
    assert [
        r["title"]
        for r in lazylibrarian_results(
            search({"t": "search", "apikey": indexer.key, "q": "Great Album", "extended": "1"})
        )
    ] == [ALBUM]


# -- the contract's details --------------------------------------------------------------------


def test_extended_attributes_tell_what_the_name_says(indexer: Indexer, caps: Caps) -> None:
    (french,) = sonarr(indexer, caps, "tvsearch", "5000", "&q=Show%20Name&season=1&ep=6").releases
    attrs = french.attrs
    assert sorted(french.categories) == [5000, 5020]
    assert int(attrs["season"][0].lstrip("Ss")) == 1 and int(attrs["episode"][0].lstrip("Ee")) == 6
    assert attrs["tvtitle"] == ["Show Name"]
    assert "720" in attrs["resolution"][0]
    assert "french" in attrs["language"][0].lower()
    assert attrs["group"] == [TV]
    (film,) = sonarr(indexer, caps, "movie", "2000", "&q=Film%20Title&year=2019").releases
    assert film.attrs["year"] == ["2019"] and "1080" in film.attrs["resolution"][0]
    assert sorted(film.categories) == [2000, 2040]


def test_size_filters_on_every_search_function(indexer: Indexer, caps: Caps) -> None:
    # (function, parameters) finding one post each.
    for t, parameters, title in (
        ("search", "&q=Film%20Title%202019", FILM),
        ("tvsearch", "&q=Show%20Name&season=1&ep=4", MULTI),
        ("movie", "&q=Film%20Title&year=2017", FILM_OLD),
        ("music", "&artist=Other%20Artist", MP3_ALBUM),
        ("book", "&author=Author%20Name", EBOOK),
    ):
        base = f"/api?t={t}&extended=1&apikey={indexer.key}{parameters}"
        (release,) = read_feed(get(indexer, base), caps).releases
        assert release.title == title
        size = release.size
        for bounds, found in (
            (f"&minsize={size}", [title]),
            (f"&minsize={size + 1}", []),
            (f"&maxsize={size}", [title]),
            (f"&maxsize={size - 1}", []),
            (f"&minsize={size}&maxsize={size}", [title]),
        ):
            assert read_feed(get(indexer, base + bounds), caps).titles == found, (t, bounds)


def test_search_function_honours_season_and_ep_and_title_is_a_query(indexer: Indexer, caps: Caps) -> None:
    key = indexer.key
    assert read_feed(get(indexer, f"/api?t=search&apikey={key}&q=Show%20Name&season=1&ep=2"), caps).titles == [
        EP,
        EP_SD,
    ]
    # title= stands for q (Sonarr's title tier when an indexer announces it).
    assert read_feed(
        get(indexer, f"/api?t=tvsearch&apikey={key}&cat={SONARR_CATS}&title=Show%20Name&season=1&ep=2"), caps
    ).titles == [EP, EP_SD]


def test_ids_no_post_has_find_nothing_and_other_errors(indexer: Indexer, caps: Caps) -> None:
    key = indexer.key
    for t, name, value in (*HYDRA_ID_PROBES, ("tvsearch", "tvmazeid", "82"), ("movie", "traktid", "1390")):
        answer = get(indexer, f"/api?t={t}&{name}={value}&apikey={key}&cat=5000,2000")
        if name in KEPT_IDS:  # no NFO named them here: nothing
            assert read_feed(answer, caps).total == 0, name
        else:  # never kept
            code, description = read_error(answer)
            assert (code, description.split(":")[0]) == ("203", "Function not available"), (name, description)
    # Ids with words: the words are searched, the ids ignored (Sonarr's aggregated id + title).
    both = read_feed(
        get(
            indexer,
            f"/api?t=tvsearch&cat={SONARR_CATS}&apikey={key}&tvdbid=121361&rid=24493&q=Show%20Name&season=1&ep=2",
        ),
        caps,
    )
    assert both.titles == [EP, EP_SD]
    assert read_feed(get(indexer, f"/api?t=movie&apikey={key}&imdbid=0848228&q=Film%20Title%202019"), caps).titles == [
        FILM
    ]
    assert read_error(get(indexer, f"/api?t=nope&apikey={key}"))[0] == "202"
    # A wrong key: 100-199 is "invalid API key" to Sonarr, Radarr, Prowlarr and NZBHydra2.
    assert read_error(get(indexer, f"/api?t=tvsearch&cat={SONARR_CATS}&apikey=seedapi_wrong"))[0] == "100"


def test_per_key_limits_answer_429_with_retry_after(indexer: Indexer, caps: Caps) -> None:
    created = json.loads(
        indexer.datacenter.flask(
            "apikeys", "create", "limited", "--requests-per-day", "4", "--grabs-per-day", "1", "--json"
        )
    )
    key = created["key"]
    search = f"/api?t=search&cat=2000&extended=1&apikey={key}&q=Film%20Title%202019&offset=0&limit=100"

    feed = read_feed(get(indexer, search), caps)
    assert feed.titles == [FILM]
    # NZBHydra2 takes apimax and grabmax as the indexer's limits.
    assert (feed.apilimits.get("apimax"), feed.apilimits.get("grabmax"), feed.apilimits.get("grabcurrent")) == (
        "4",
        "1",
        "0",
    )
    used = int(feed.apilimits["apicurrent"])
    assert used == 1

    # Downloads: the first NZB, then 501 with 429 and Retry-After (Sonarr: "API Grab Limit reached").
    nzb_url = feed.releases[0].url.removeprefix(indexer.url)
    grabbed = get(indexer, nzb_url)
    assert (grabbed.status, grabbed.headers.get_content_type()) == (200, NZB_TYPE)
    refused = get(indexer, nzb_url)
    assert refused.status == 429 and read_error(refused) == ("501", "Download limit reached")
    assert timedelta(0) < retry_after(refused.headers) <= timedelta(days=1, minutes=1)

    # Requests: until the limit, then 500 "Request limit reached" (the exact text Sonarr, Radarr
    # and Prowlarr compare) with 429 and Retry-After, which they back off for.
    answers = [get(indexer, search) for _ in range(5)]
    statuses = [answer.status for answer in answers]
    assert 429 in statuses and statuses == sorted(statuses), statuses  # the 200s, then only 429s
    for answer in answers:
        if answer.status == 200:
            current = int(read_feed(answer, caps).apilimits["apicurrent"])
            assert used < current <= 4
            used = current
        else:
            assert read_error(answer) == ("500", "Request limit reached")
            assert answer.headers.get_content_type().endswith("xml")
            assert timedelta(0) < retry_after(answer.headers) <= timedelta(days=1, minutes=1)
    # The limit is the key's: the unlimited key still searches.
    assert read_feed(get(indexer, search.replace(key, indexer.key)), caps).titles == [FILM]
