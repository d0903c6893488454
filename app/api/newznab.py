"""The newznab API at /api: what Sonarr, Radarr, Prowlarr, NZBHydra2 and LazyLibrarian speak
(docs/catalog.md has every function with examples).

    GET /api?t=caps                                   what the server offers (no key)
    GET /api?t=search&apikey=K[&q=][&cat=][&group=][&season=][&ep=][&minsize=][&maxsize=]
                              [&limit=][&offset=][&maxage=][&extended=1][&o=json]
    GET /api?t=tvsearch&apikey=K[&q=|&title=][&season=][&ep=]...   episodes, season packs, daily shows
    GET /api?t=movie&apikey=K[&q=][&year=]...
    GET /api?t=music&apikey=K[&q=][&artist=][&album=]...
    GET /api?t=book&apikey=K[&q=][&title=][&author=]...
    GET /api?t=details&apikey=K&id=POST
    GET /api?t=get&apikey=K&id=POST                   the post's NZB (application/x-nzb)

Categories are each post's own (app.services.postnames: what its name says, its group a hint);
a parent category asked for takes its subcategories. season, ep, year and the like filter on
what each post's name says. Answers are RSS 2.0 with newznab:attr elements, or the same as JSON
with o=json; each carries newznab:apilimits (the key's use today and its limits). Errors are
newznab error elements, with HTTP 200 as the specification has it (clients read the code): 100
incorrect credentials, 200 missing parameter, 201 incorrect parameter, 202 no such function,
203 function not available (a search by ids of a kind the catalog never keeps: rid, traktid),
300 no such item, 900 the server could not answer now; and 500/501 (the key's request or
download limit reached) with HTTP 429 and Retry-After, which Sonarr and Prowlarr back off on.
Nothing a client sends gives a 5xx or is written out unescaped. A request refused before it
reaches the API (a path under /api that is none, a method other than GET) is a newznab error
too, with its HTTP status (http_error).
"""

from __future__ import annotations

import functools
import json
import logging
import urllib.parse
from datetime import date, datetime, timedelta, timezone
from typing import NamedTuple
from xml.etree import ElementTree as ET

from flask import Blueprint, Response, request
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session
from werkzeug.exceptions import HTTPException

from app import metrics
from app.db import read_session_scope, session_scope
from app.services import apikeys, grabs, inspections, nzbexport, search
from edge.digest import categories
from app.services.attachments import nzb_disposition
from app.services.errors import NotFound
from app.services.nzbexport import xml_attribute, xml_text

log = logging.getLogger(__name__)

newznab = Blueprint("newznab", __name__)

NEWZNAB_NS = "http://www.newznab.com/DTD/2010/feeds/attributes/"
ATOM_NS = "http://www.w3.org/2005/Atom"
ET.register_namespace("newznab", NEWZNAB_NS)
ET.register_namespace("atom", ATOM_NS)
DEFAULT_LIMIT = 100
MAX_LIMIT = 100  # caps says so; a bigger limit is served as this many
MAX_INSIDE = 200  # files inside a post that t=details lists
HUGE = 1_000_000  # a limit or offset past this is not a client's mistake to round off
ERRORS = {
    100: "Incorrect user credentials",
    200: "Missing parameter",
    201: "Incorrect parameter",
    202: "No such function",
    203: "Function not available",
    300: "No such item",
    500: "Request limit reached",
    501: "Download limit reached",
    900: "Unknown error",
}
# The search functions, and the catalog requests counted (app.metrics.CatalogCall) by function.
SEARCHES = ("search", "tvsearch", "movie", "music", "book")
COUNTED = {**dict.fromkeys(SEARCHES, "search"), "details": "details", "getnfo": "details", "get": "nzb"}
OUTCOMES = {
    100: "unauthorized",
    200: "bad_request",
    201: "bad_request",
    202: "bad_request",
    203: "bad_request",
    300: "not_found",
    500: "limited",
    501: "limited",
    900: "unavailable",
}
# Each search function's parameters beyond the common ones (caps' supportedParams): the words
# given in them are searched for along with q.
PARAMS = {
    "search": ("q",),
    "tvsearch": ("q", "title", "season", "ep"),
    "movie": ("q", "year"),
    "music": ("q", "artist", "album"),
    "book": ("q", "title", "author"),
}
# What caps announces of them: tv-search's title and movie-search's year are taken but not
# announced, as clients then send them instead of q (Sonarr sends a series' title unclean, with
# its apostrophes, in title=; in q= it sends the words its own names are searched by).
ANNOUNCED = {
    "search": "q",
    "tvsearch": "q,season,ep,tvdbid,tvmazeid",
    "movie": "q,imdbid",
    "music": "q,artist,album",
    "book": "q,title,author",
}
WORD_PARAMS = ("q", "title", "artist", "album", "author")
# Ids of other databases that clients search by (TheTVDB, TVmaze, TVRage, IMDb, TMDb, Trakt). The
# catalog knows those an inspection read in a post's NFO (KNOWN_IDS: the posts' columns). caps
# announces tvdbid and tvmazeid for tv-search and imdbid for movie-search (tmdbid is taken too, not
# announced: Radarr would send it instead of imdbid, and NFOs name IMDb far more often). A search by
# ids alone answers the posts that have any of them and those of the same title and year
# (search.search_posts), and where none has, an empty page: Sonarr, Radarr and Prowlarr then send
# their next tier of requests, by name, so a client is never left with nothing where the name
# would find the post. Ids of a kind never kept (rid, tvrageid, traktid) alone are "function not
# available" (203). With words as well, the words are searched.
ID_PARAMS = ("tvdbid", "tvmazeid", "rid", "tvrageid", "imdbid", "tmdbid", "traktid")
KNOWN_IDS = {"imdbid": "imdb", "tvdbid": "tvdb", "tvmazeid": "tvmaze", "tmdbid": "tmdb"}
# extended=1's resolution attr, as newznab writes it, by the height a name states.
RESOLUTIONS = {480: "720x480", 576: "720x576", 720: "1280x720", 1080: "1920x1080", 2160: "3840x2160"}


class NewznabError(Exception):
    def __init__(self, code: int, detail: str = "", retry_after: int | None = None):
        super().__init__(detail)
        self.code = code
        self.description = f"{ERRORS[code]}: {detail}" if detail else ERRORS[code]
        self.retry_after = retry_after


@newznab.get("/api")
def api():
    as_json = False
    call = metrics.CatalogCall("newznab")
    try:
        output = request.args.get("o", "xml").lower()
        if output not in ("xml", "json", "file") or (output == "file" and request.args.get("t") != "getnfo"):
            raise NewznabError(201, "o must be xml or json (or file, for t=getnfo)")
        as_json = output == "json"
        function = request.args.get("t")
        if not function:
            raise NewznabError(200, "t")
        if function == "caps":
            return _caps(as_json, _usage_if_key())
        if function not in COUNTED:
            raise NewznabError(202, function[:50])
        call.request = COUNTED[function]
        # The key and its counting are the primary's (they write); what is read of the catalog is
        # the replica's when there is one (DATABASE_READ_URL).
        with session_scope() as session, read_session_scope(session) as reads:
            key = _key(session)
            # The request is counted against the key's limits after its work, just before the
            # commit: counting takes the key's row of the day until the transaction ends, and a
            # client's parallel requests with one key must not wait on each other's searches.
            if function in SEARCHES:
                posts, total, offset = _search(reads, function)
            elif function == "details":
                posts, total, offset = _details(reads), 1, 0
                return _feed(
                    posts,
                    total,
                    offset,
                    _use(session, key, grab=False),
                    as_json,
                    inside=_inside(reads, posts[0]),
                )
            elif function == "getnfo":
                answer = _nfo(reads, as_json)
                _use(session, key, grab=False)
                return answer
            else:
                answer = _get(session, reads)
                _use(session, key, grab=True)
                return answer
            return _feed(posts, total, offset, _use(session, key, grab=False), as_json)
    except NewznabError as exc:
        call.outcome = OUTCOMES.get(exc.code, "error")
        return _error(exc, as_json)
    except OperationalError as exc:  # the database away: the client may try again later
        call.outcome = "unavailable"
        log.warning("newznab request not answered: %s", exc.__class__.__name__)
        return _error(NewznabError(900, "the catalog cannot be read now"), as_json)
    except BaseException:
        call.outcome = "error"
        raise
    finally:
        call.done()


def serves(path: str) -> bool:
    """Whether a path is the newznab API's: /api and anything under it, but for the node API
    under /api/v1/ (app/api/seed.py), which answers in JSON."""
    return path == "/api" or (path.startswith("/api/") and not path.startswith("/api/v1/") and path != "/api/v1")


def http_error(exc: HTTPException) -> Response:
    """A request Flask refused before the view ran (no such path under /api, a method other than
    GET, a URL too long) as a newznab error, which is what a newznab client reads, with the HTTP
    status kept (the request never reached the API, unlike the errors of api(), which the
    specification sends with 200) and the headers that go with it (Allow on a 405)."""
    status = exc.code or 500
    if status in (404, 405, 501):
        code, detail = 202, f"{request.method} {request.path[:50]}"
    elif status >= 500:
        code, detail = 900, ""
    else:
        code, detail = 201, (exc.name or "").lower()
    response = _error(NewznabError(code, detail), request.args.get("o", "").lower() == "json")
    response.status_code = status
    headers = dict(exc.get_headers())
    for header in ("Allow", "Retry-After"):
        if header in headers:
            response.headers[header] = headers[header]
    return response


def _key(session: Session) -> int:
    """The id of the request's key (error 100 for none); whether it was revoked since a process
    last saw it, _use tells."""
    key = apikeys.key_id(session, request.args.get("apikey", ""))
    if key is None:
        raise NewznabError(100)
    return key


def _use(session: Session, key: int, grab: bool) -> apikeys.Usage:
    """Count the request against the key's limits: past one, error 500 or 501 (HTTP 429); a key
    revoked (or gone), error 100, with nothing of the request's work committed."""
    try:
        return apikeys.use(session, key, grab)
    except apikeys.LimitReached as exc:
        raise NewznabError(501 if exc.kind == "grabs" else 500, retry_after=exc.retry_after) from None
    except NotFound:
        raise NewznabError(100) from None


def _integer(name: str, default: int | None, low: int, high: int) -> int | None:
    value = request.args.get(name)
    if value is None or value == "":
        return default
    try:
        number = int(value)
    except ValueError:
        raise NewznabError(201, f"{name} is not a number") from None
    if not low <= number <= high:
        raise NewznabError(201, f"{name} out of range")
    return number


def _post_id() -> int:
    value = request.args.get("id")
    if not value:
        raise NewznabError(200, "id")
    try:
        key = int(value)
    except ValueError:
        raise NewznabError(300) from None
    if not -(2**63) <= key < 2**63:
        raise NewznabError(300)
    return key


def _search(session: Session, function: str) -> tuple[list[search.PostSummary], int, int]:
    """The page a search function asks for: (posts, total, offset)."""
    limit = min(_integer("limit", DEFAULT_LIMIT, 1, HUGE) or DEFAULT_LIMIT, MAX_LIMIT)
    offset = _integer("offset", 0, 0, search.MAX_OFFSET) or 0
    max_age = _integer("maxage", None, 0, search.MAX_AGE_DAYS)
    words = " ".join(
        value
        for name in WORD_PARAMS
        if name in PARAMS[function] or name == "q"
        if (value := request.args.get(name, "").strip())
    )
    ids = None
    if not words and any(request.args.get(name) for name in ID_PARAMS):
        ids = _ids()
        if not ids:
            raise NewznabError(203, "this indexer knows no such ids: search by name (q)")
    season, episode, air_date = _episode()
    groups = [g for g in request.args.get("group", "").split(",") if g.strip()] or None
    try:
        page = search.search_posts(
            session,
            words,
            group=groups,
            max_age_days=max_age or None,
            categories=_categories(),
            season=season,
            episode=episode,
            air_date=air_date,
            ids=ids,
            year=_integer("year", None, 0, search.SMALLINT) if function == "movie" else None,
            min_size=_integer("minsize", None, 0, search.MAX_BIGINT),
            max_size=_integer("maxsize", None, 0, search.MAX_BIGINT),
            limit=limit,
            offset=offset,
        )
    except search.SearchTimeout:
        raise NewznabError(900, "the search took too long") from None
    except search.SearchError as exc:
        raise NewznabError(201, str(exc)[:200]) from None
    except NotFound:  # a group that is none: nothing in it
        return [], 0, offset
    return page.items, page.total, offset


def _ids() -> dict[str, int]:
    """The ids given that the catalog keeps ({"imdb": 133093}); IMDb's may come as tt0133093."""
    found = {}
    for name, column in KNOWN_IDS.items():
        value = request.args.get(name, "").strip()
        if not value:
            continue
        digits = value[2:] if name == "imdbid" and value[:2].lower() == "tt" else value
        if not (digits.isascii() and digits.isdigit()) or len(digits) > 10 or not 0 < int(digits) < 2**31:
            raise NewznabError(201, f"{name} is not an id")
        found[column] = int(digits)
    return found


def _categories() -> list[int] | None:
    """cat= as category ids (None: every category)."""
    wanted = request.args.get("cat", "")
    if not wanted:
        return None
    try:
        ids = [int(c) for c in wanted.split(",") if c.strip()]
    except ValueError:
        raise NewznabError(201, "cat is not a list of numbers") from None
    if any(not 0 <= c <= 9999 for c in ids):
        raise NewznabError(201, "cat out of range")
    return ids or None


def _episode() -> tuple[int | None, int | None, date | None]:
    """season and ep as (season, episode, air date): a daily show's episode is its air date,
    sent as season=YYYY&ep=MM/DD (Sonarr); season 0 may come as "00"; a season may come as
    "S01" and an episode as "E02"."""
    season_text = request.args.get("season", "").strip()
    episode_text = request.args.get("ep", "").strip()
    if "/" in episode_text:
        try:
            month, day = (int(part) for part in episode_text.split("/"))
            return None, None, date(int(season_text), month, day)
        except ValueError:
            raise NewznabError(201, "a daily episode is season=YYYY&ep=MM/DD") from None
    season = _number("season", season_text.upper().removeprefix("S"))
    episode = _number("ep", episode_text.upper().removeprefix("E"))
    return season, episode, None


def _number(name: str, value: str) -> int | None:
    if not value:
        return None
    if not (value.isascii() and value.isdigit()) or len(value) > 5 or int(value) > search.SMALLINT:
        raise NewznabError(201, f"{name} is not a number")
    return int(value)


def _details(session: Session) -> list[search.PostSummary]:
    try:
        details = search.post_details(session, _post_id())
    except NotFound:
        raise NewznabError(300) from None
    return [details.post]


def _inside(session: Session, post: search.PostSummary) -> Inside:
    """What an inspection found in the post, for t=details: whether it has an NFO, and the files
    its par2 set and archives list (the first MAX_INSIDE)."""
    found = inspections.found_of(session, post.group_id, post.key)
    if found is None or found.state != "done":
        return Inside(None, [])
    files = [(f["name"], f.get("size")) for f in found.files or []][:MAX_INSIDE]
    return Inside(found.nfo is not None, files)


def _nfo(session: Session, as_json: bool) -> Response:
    """t=getnfo: the NFO an inspection read of the post, in an item's description (or the text
    itself with o=file); 300 when there is none."""
    try:
        post = search.find_post(session, _post_id())
    except NotFound:
        raise NewznabError(300) from None
    text = inspections.nfo_of(session, post.group_id, post.key)
    if text is None:
        raise NewznabError(300, "no NFO of this post")
    if request.args.get("o", "").lower() == "file":
        return Response(
            text.encode("utf-8"),
            mimetype="text/plain",
            headers={"Content-Disposition": nzb_disposition(post.name, post.key, ".nfo")},
        )
    body = (
        f'<?xml version="1.0" encoding="UTF-8"?>\n<rss xmlns:newznab="{NEWZNAB_NS}" version="2.0"><channel>'
        f"<title>usenet-seed</title><item><title>{xml_text(post.name)}</title>"
        f"<description>{xml_text(_clean(text))}</description></item></channel></rss>"
    )
    if as_json:
        return _json(_as_dict(ET.fromstring(body)))
    return Response(body.encode("utf-8"), mimetype="application/rss+xml")


def _get(session: Session, reads: Session) -> Response:
    try:
        post = nzbexport.find_post(reads, _post_id())
    except NotFound:
        raise NewznabError(300) from None
    grabs.record(session, post.group_id, post.key)
    body = b"".join(nzbexport.nzb_chunks(reads, post))
    return Response(
        body, mimetype="application/x-nzb", headers={"Content-Disposition": nzb_disposition(post.name, post.key)}
    )


def _usage_if_key() -> apikeys.Usage | None:
    """The use today of the key given to caps, if one is and it is a key (caps needs none, so
    a wrong one is no error there); caps is not counted."""
    presented = request.args.get("apikey", "")
    if not presented:
        return None
    with session_scope() as session:
        key = apikeys.holder(session, presented)
        if key is None:
            return None
        return apikeys.list_usage(session, key.name)[0][1]


def _caps(as_json: bool, usage: apikeys.Usage | None) -> Response:
    caps = ET.Element("caps")
    ET.SubElement(
        caps, "server", version="1.0", title="usenet-seed", strapline="Usenet header indexer", url=request.host_url
    )
    ET.SubElement(caps, "limits", max=str(MAX_LIMIT), default=str(DEFAULT_LIMIT))
    ET.SubElement(caps, "registration", available="no", open="no")
    if usage is not None:
        ET.SubElement(caps, f"{{{NEWZNAB_NS}}}apilimits", {k: str(v) for k, v in _limit_values(usage).items()})
    searching = ET.SubElement(caps, "searching")
    for function, kind in (
        ("search", "search"),
        ("tvsearch", "tv-search"),
        ("movie", "movie-search"),
        ("music", "audio-search"),
        ("book", "book-search"),
    ):
        ET.SubElement(searching, kind, available="yes", supportedParams=ANNOUNCED[function])
    cats = ET.SubElement(caps, "categories")
    for parent, name in categories.PARENTS.items():
        category = ET.SubElement(cats, "category", id=str(parent), name=name)
        for sub, sub_name in categories.SUBCATEGORIES.items():
            if sub // 1000 * 1000 == parent:
                ET.SubElement(category, "subcat", id=str(sub), name=sub_name)
    if as_json:
        return _json(_as_dict(caps))
    return _xml(caps)


class Inside(NamedTuple):
    """t=details' extra: nfo is None when the post was not inspected."""

    nfo: bool | None
    files: list[tuple[str, int | None]]


def _feed(
    posts: list[search.PostSummary],
    total: int,
    offset: int,
    usage: apikeys.Usage,
    as_json: bool,
    inside: Inside | None = None,
) -> Response:
    """A page of results as RSS 2.0 with newznab attributes, or its newznab JSON (the same document
    read back as _as_dict reads any). Written as text: a page is up to 1,700 elements, which
    ElementTree would take several times longer to build and write."""
    api_url = request.host_url.rstrip("/") + "/api"
    key = urllib.parse.quote(request.args.get("apikey", ""), safe="")
    extended = request.args.get("extended", "") == "1"
    # Each item's NZB link, escaped once a page: all but the post's key (digits) is the same.
    get_before, get_after = xml_attribute(f"{api_url}?t=get&id="), xml_attribute(f"&apikey={key}")
    details = xml_text(api_url) + "?t=details&amp;id="
    parts = [
        f'<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<rss xmlns:atom="{ATOM_NS}" xmlns:newznab="{NEWZNAB_NS}" version="2.0"><channel>'
        f'<atom:link href="{xml_attribute(request.url)}" rel="self" type="application/rss+xml" />'
        f"<title>usenet-seed</title><description>usenet-seed API results</description>"
        f"<link>{xml_text(request.host_url)}</link><generator>usenet-seed</generator>"
        f'<newznab:response offset="{offset}" total="{total}" />{_limits(usage)}'
    ]
    # What repeats from post to post is escaped once a page: a category's text and attributes, a
    # poster's name.
    written_categories: dict[int, tuple[str, str]] = {}
    written_posters: dict[str, str] = {}
    for post in posts:
        written = written_categories.get(post.category)
        if written is None:
            category = categories.category_named(post.category)
            ids = [category.parent] + ([category.id] if category.id != category.parent else [])
            written = written_categories[post.category] = (
                xml_text(category.name),
                "".join(f'<newznab:attr name="category" value="{i}" />' for i in ids),
            )
        category_text, category_attributes = written
        poster = written_posters.get(post.poster)
        if poster is None:
            poster = written_posters[post.poster] = xml_attribute(post.poster)
        get_url = f"{get_before}{post.key}{get_after}"
        name = xml_text(post.name)
        attributes: list[tuple[str, object]] = []
        if post.password is not None:
            attributes.append(("password", post.password))
        if extended:
            attributes += _extended(post)
        description = name
        if inside is not None:
            # t=details: whether an NFO was read (t=getnfo gives it), and the files inside, listed
            # in the description and as newznab's file attrs (name, then size, as nZEDb has them).
            if inside.nfo is not None:
                attributes.append(("nfo", int(inside.nfo)))
            for file_name, _size in inside.files:
                attributes.append(("file", xml_attribute(file_name)))
            if inside.files:
                description += xml_text(
                    "\n"
                    + "\n".join(
                        f"{file_name} ({size:,} bytes)" if size is not None else file_name
                        for file_name, size in inside.files
                    )
                )
        parts.append(
            f"<item><title>{name}</title>"
            f'<guid isPermaLink="true">{details}{post.key}</guid>'
            f"<link>{get_url}</link><pubDate>{_rfc822(post.last_post)}</pubDate>"
            f"<category>{category_text}</category><description>{description}</description>"
            f'<enclosure url="{get_url}" length="{post.bytes}" type="application/x-nzb" />'
            f"{category_attributes}"
            f'<newznab:attr name="size" value="{post.bytes}" />'
            f'<newznab:attr name="files" value="{post.files}" />'
            f'<newznab:attr name="poster" value="{poster}" />'
            f'<newznab:attr name="group" value="{post.group}" />'
            f'<newznab:attr name="usenetdate" value="{_rfc822(post.first_post)}" />'
            f'<newznab:attr name="grabs" value="{post.grabs}" />'
            f'<newznab:attr name="completion" value="{round(post.completion)}" />'
            + "".join(f'<newznab:attr name="{n}" value="{v}" />' for n, v in attributes)
            + "</item>"
        )
    parts.append("</channel></rss>")
    body = "".join(parts)
    if as_json:
        return _json(_as_dict(ET.fromstring(body)))
    return Response(body.encode("utf-8"), mimetype="application/rss+xml")


def _limits(usage: apikeys.Usage) -> str:
    """newznab:apilimits: the key's requests and downloads today, its limits and when the oldest
    counted one was (where there are limits and counts)."""
    return "<newznab:apilimits " + " ".join(f'{k}="{v}"' for k, v in _limit_values(usage).items()) + " />"


def _limit_values(usage: apikeys.Usage) -> dict[str, object]:
    values = {
        "apicurrent": usage.requests,
        "apimax": usage.requests_max,
        "grabcurrent": usage.grabs,
        "grabmax": usage.grabs_max,
        "apioldesttime": _rfc822(usage.requests_oldest) if usage.requests_oldest else None,
        "graboldesttime": _rfc822(usage.grabs_oldest) if usage.grabs_oldest else None,
    }
    return {k: v for k, v in values.items() if v is not None}


def _extended(post: search.PostSummary) -> list[tuple[str, object]]:
    """extended=1's attributes: what the post's name says (where it says it)."""
    found: list[tuple[str, object]] = []
    if post.season is not None:
        found.append(("season", f"S{post.season:02d}"))
    if post.episode is not None:
        found.append(("episode", f"E{post.episode:02d}"))
    if post.air_date is not None:
        found.append(
            (
                "tvairdate",
                _rfc822(datetime(post.air_date.year, post.air_date.month, post.air_date.day, tzinfo=timezone.utc)),
            )
        )
    if post.title and post.category // 1000 == 5:
        found.append(("tvtitle", xml_attribute(post.title)))
    if post.year is not None:
        found.append(("year", post.year))
    if post.resolution is not None:
        found.append(("resolution", RESOLUTIONS.get(post.resolution, f"{post.resolution}p")))
    if post.video:
        found.append(("video", xml_attribute(post.video)))
    if post.languages:
        found.append(("language", xml_attribute(post.languages.replace(",", ", "))))
    if post.imdb is not None:
        found.append(("imdb", f"{post.imdb:07d}"))
    for name, value in (("tvdbid", post.tvdb), ("tvmazeid", post.tvmaze), ("tmdbid", post.tmdb)):
        if value is not None:
            found.append((name, value))
    return found


def _error(exc: NewznabError, as_json: bool) -> Response:
    body, mimetype = error_document(exc, as_json)
    response = Response(body, mimetype=mimetype)
    if exc.retry_after is not None:  # a limit reached: HTTP 429, as clients back off on
        response.status_code = 429
        response.headers["Retry-After"] = str(exc.retry_after)
    return response


def error_document(exc: NewznabError, as_json: bool) -> tuple[bytes, str]:
    """A newznab error's body and media type, outside a request too (gunicorn's own refusals of
    a request line under /api, ops/gunicorn.conf.py)."""
    if as_json:
        return json.dumps(
            {"error": {"@attributes": {"code": str(exc.code), "description": exc.description}}}, ensure_ascii=False
        ).encode(), "application/json"
    element = ET.Element("error", code=str(exc.code), description=_clean(exc.description))
    return b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(element, encoding="utf-8"), "application/xml"


def _xml(element: ET.Element) -> Response:
    body = b'<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(element, encoding="utf-8", xml_declaration=False)
    return Response(body, mimetype="application/rss+xml" if element.tag == "rss" else "application/xml")


def _json(value: dict) -> Response:
    return Response(json.dumps(value, ensure_ascii=False), mimetype="application/json")


def _as_dict(element: ET.Element) -> dict:
    """The newznab JSON shape: attributes under "@attributes", children by their local name
    (repeated ones as lists), text as the value."""

    def local(tag: str) -> str:
        return tag.rsplit("}", 1)[-1]

    def convert(node: ET.Element):
        children: dict[str, list] = {}
        for child in node:
            children.setdefault(local(child.tag), []).append(convert(child))
        value: dict = {}
        if node.attrib:
            value["@attributes"] = {local(k): v for k, v in node.attrib.items()}
        for name, items in children.items():
            value[name] = items if len(items) > 1 or name in ("item", "attr") else items[0]
        if not children and node.text:
            return node.text if not node.attrib else {**value, "#text": node.text}
        return value

    return {local(element.tag): convert(element)}


# RFC 822's names of days and months, whatever the locale (a page writes two dates an item).
_DAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
_MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
_EPOCH = datetime.fromtimestamp(0, timezone.utc)
_UTC_OFFSET = timedelta(0)
# Each minute of a day and each second of a minute, written once.
_CLOCK = tuple(f"{hour:02d}:{minute:02d}:" for hour in range(24) for minute in range(60))
_SECONDS = tuple(f"{second:02d} GMT" for second in range(60))


@functools.lru_cache(maxsize=4096)
def _rfc822_day(ordinal: int) -> str:
    day = date.fromordinal(ordinal)
    return f"{_DAYS[day.weekday()]}, {day.day:02d} {_MONTHS[day.month - 1]} {day.year:04d} "


def _rfc822(moment: datetime | None) -> str:
    """The moment in UTC as RFC 822 has it (email.utils.format_datetime's usegmt form). A page of
    100 posts writes 200 of them: converted (PostgreSQL's moments come in the session's zone, a
    ZoneInfo) and formatted field by field, they took 0.84 ms of the page's 1.3 (4.2 µs each);
    from the day's text, made once, and the clock's, 0.8 µs (timeit, one-off)."""
    m = moment or _EPOCH
    if m.utcoffset() != _UTC_OFFSET:
        m = m.astimezone(timezone.utc)
    return _rfc822_day(m.toordinal()) + _CLOCK[m.hour * 60 + m.minute] + _SECONDS[m.second]


def _clean(text: str | None) -> str:
    """Text an XML 1.0 document can hold (control characters dropped)."""
    if not text:
        return ""
    return "".join(c for c in text if c >= " " or c in "\t\n\r").replace("\ufffe", "").replace("\uffff", "")
