"""The newznab API at /api: what NZBHydra2, Sonarr, Radarr and Prowlarr speak (docs/api.md).

    GET /api?t=caps                                   what the server offers (no key)
    GET /api?t=search&apikey=K[&q=][&cat=][&group=][&limit=][&offset=][&maxage=][&o=json]
    GET /api?t=details&apikey=K&id=POST
    GET /api?t=get&apikey=K&id=POST                   the post's NZB (application/x-nzb)

Answers are RSS 2.0 with newznab:attr elements, or the same as JSON with o=json. Errors are
newznab error elements, with HTTP 200 as the specification has it (clients read the code):
100 incorrect credentials, 200 missing parameter, 201 incorrect parameter, 202 no such
function, 300 no such item, 900 the server could not answer now. Nothing a client sends gives a
5xx or is written out unescaped. A request refused before it reaches the API (a path under /api
that is none, a method other than GET) is a newznab error too, with its HTTP status (http_error).
"""
from __future__ import annotations

import json
import logging
import urllib.parse
from datetime import datetime, timezone
from email.utils import format_datetime
from xml.etree import ElementTree as ET

from flask import Blueprint, Response, request
from sqlalchemy import select
from sqlalchemy.exc import OperationalError
from werkzeug.exceptions import HTTPException

from app import metrics
from app.db import session_scope
from app.models import Group
from app.services import apikeys, categories, grabs, nzbexport, search
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
HUGE = 1_000_000  # a limit or offset past this is not a client's mistake to round off
ERRORS = {100: "Incorrect user credentials", 200: "Missing parameter", 201: "Incorrect parameter",
          202: "No such function", 300: "No such item", 900: "Unknown error"}
# The catalog requests counted (app.metrics.CatalogCall), by function, and their outcomes by error code.
COUNTED = {"search": "search", "details": "details", "get": "nzb"}
OUTCOMES = {100: "unauthorized", 200: "bad_request", 201: "bad_request", 202: "bad_request", 300: "not_found",
            900: "unavailable"}


class NewznabError(Exception):
    def __init__(self, code: int, detail: str = ""):
        super().__init__(detail)
        self.code = code
        self.description = f"{ERRORS[code]}: {detail}" if detail else ERRORS[code]


@newznab.get("/api")
def api():
    as_json = False
    call = metrics.CatalogCall("newznab")
    try:
        output = request.args.get("o", "xml").lower()
        if output not in ("xml", "json"):
            raise NewznabError(201, "o must be xml or json")
        as_json = output == "json"
        function = request.args.get("t")
        if not function:
            raise NewznabError(200, "t")
        if function == "caps":
            return _caps(as_json)
        if function not in ("search", "details", "get"):
            raise NewznabError(202, function[:50])
        call.request = COUNTED[function]
        with session_scope() as session:
            key = _key(session)
            if function == "search":
                answer = _search(session, key, as_json)
            elif function == "details":
                answer = _details(session, key, as_json)
            else:
                return _get(session, key)
            apikeys.record_use(session, key, grab=False)
        return answer
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


def _key(session):
    presented = request.args.get("apikey", "")
    key = apikeys.holder(session, presented) if presented else None
    if key is None:
        raise NewznabError(100)
    return key


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
    if not -2**63 <= key < 2**63:
        raise NewznabError(300)
    return key


def _search(session, key, as_json: bool) -> Response:
    limit = min(_integer("limit", DEFAULT_LIMIT, 1, HUGE), MAX_LIMIT)
    offset = _integer("offset", 0, 0, search.MAX_OFFSET)
    max_age = _integer("maxage", None, 0, search.MAX_AGE_DAYS)
    groups = _groups(session)
    if groups == []:
        return _feed(session, [], 0, offset, as_json)
    try:
        page = search.search_posts(session, request.args.get("q", ""), group=groups, max_age_days=max_age or None,
                                   limit=limit, offset=offset)
    except search.SearchTimeout:
        raise NewznabError(900, "the search took too long") from None
    except search.SearchError as exc:
        raise NewznabError(201, str(exc)[:200]) from None
    except NotFound:
        return _feed(session, [], 0, offset, as_json)
    return _feed(session, page.items, page.total, offset, as_json)


def _groups(session) -> list[str] | None:
    """The groups a search is limited to (group= and cat=), None for all; [] when none fits."""
    names = [g for g in request.args.get("group", "").split(",") if g]
    wanted = request.args.get("cat", "")
    if not wanted:
        return names or None
    try:
        ids = {int(c) for c in wanted.split(",") if c}
    except ValueError:
        raise NewznabError(201, "cat is not a list of numbers") from None
    known = session.scalars(select(Group.name)).all()
    fitting = [g for g in known if categories.matches(categories.category_of(g), ids)]
    return [g for g in fitting if not names or g in names]


def _details(session, key, as_json: bool) -> Response:
    try:
        details = search.post_details(session, _post_id())
    except NotFound:
        raise NewznabError(300) from None
    return _feed(session, [details.post], 1, 0, as_json)


def _get(session, key) -> Response:
    try:
        post = nzbexport.find_post(session, _post_id())
    except NotFound:
        raise NewznabError(300) from None
    apikeys.record_use(session, key, grab=True)
    grabs.record(session, post.group_id, post.key)
    body = b"".join(nzbexport.nzb_chunks(session, post))
    return Response(body, mimetype="application/x-nzb",
                    headers={"Content-Disposition": nzb_disposition(post.name, post.key)})


def _caps(as_json: bool) -> Response:
    caps = ET.Element("caps")
    ET.SubElement(caps, "server", version="1.0", title="usenet-seed", strapline="Usenet header indexer",
                  url=request.host_url)
    ET.SubElement(caps, "limits", max=str(MAX_LIMIT), default=str(DEFAULT_LIMIT))
    ET.SubElement(caps, "registration", available="no", open="no")
    searching = ET.SubElement(caps, "searching")
    ET.SubElement(searching, "search", available="yes", supportedParams="q,group")
    for kind in ("tv-search", "movie-search", "audio-search", "book-search"):
        ET.SubElement(searching, kind, available="no", supportedParams="")
    cats = ET.SubElement(caps, "categories")
    for parent, name in categories.PARENTS.items():
        category = ET.SubElement(cats, "category", id=str(parent), name=name)
        for sub, sub_name in categories.SUBCATEGORIES.items():
            if sub // 1000 * 1000 == parent:
                ET.SubElement(category, "subcat", id=str(sub), name=sub_name)
    if as_json:
        return _json(_as_dict(caps))
    return _xml(caps)


def _feed(session, posts, total: int, offset: int, as_json: bool) -> Response:
    """A page of results as RSS 2.0 with newznab attributes, or its newznab JSON (the same document
    read back as _as_dict reads any). Written as text: a page is up to 1,700 elements, which
    ElementTree would take several times longer to build and write."""
    api_url = request.host_url.rstrip("/") + "/api"
    key = urllib.parse.quote(request.args.get("apikey", ""), safe="")
    grabbed = grabs.counts(session, [(post.group_id, post.key) for post in posts])
    parts = [
        f'<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<rss xmlns:atom="{ATOM_NS}" xmlns:newznab="{NEWZNAB_NS}" version="2.0"><channel>'
        f'<atom:link href="{xml_attribute(request.url)}" rel="self" type="application/rss+xml" />'
        f"<title>usenet-seed</title><description>usenet-seed API results</description>"
        f"<link>{xml_text(request.host_url)}</link>"
        f'<newznab:response offset="{offset}" total="{total}" />'
    ]
    for post in posts:
        category = categories.category_of(post.group)
        get_url = xml_attribute(f"{api_url}?t=get&id={post.key}&apikey={key}")
        name = xml_text(post.name)
        attributes = (("category", category.parent), ("category", category.id), ("size", post.bytes),
                      ("files", post.files), ("poster", xml_attribute(post.poster)), ("group", post.group),
                      ("usenetdate", _rfc822(post.first_post)),
                      ("grabs", grabbed.get((post.group_id, post.key), 0)),
                      ("completion", round(post.completion)))
        parts.append(
            f"<item><title>{name}</title>"
            f'<guid isPermaLink="true">{xml_text(api_url)}?t=details&amp;id={post.key}</guid>'
            f"<link>{get_url}</link><pubDate>{_rfc822(post.last_post)}</pubDate>"
            f"<category>{xml_text(category.name)}</category><description>{name}</description>"
            f'<enclosure url="{get_url}" length="{post.bytes}" type="application/x-nzb" />'
            + "".join(f'<newznab:attr name="{n}" value="{v}" />' for n, v in attributes)
            + "</item>")
    parts.append("</channel></rss>")
    body = "".join(parts)
    if as_json:
        return _json(_as_dict(ET.fromstring(body)))
    return Response(body.encode("utf-8"), mimetype="application/rss+xml")


def _error(exc: NewznabError, as_json: bool) -> Response:
    body, mimetype = error_document(exc, as_json)
    return Response(body, mimetype=mimetype)


def error_document(exc: NewznabError, as_json: bool) -> tuple[bytes, str]:
    """A newznab error's body and media type, outside a request too (gunicorn's own refusals of
    a request line under /api, ops/gunicorn.conf.py)."""
    if as_json:
        return json.dumps({"error": {"@attributes": {"code": str(exc.code), "description": exc.description}}},
                          ensure_ascii=False).encode(), "application/json"
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


def _rfc822(moment: datetime | None) -> str:
    moment = (moment or datetime.fromtimestamp(0, timezone.utc)).astimezone(timezone.utc)
    return format_datetime(moment, usegmt=True)


def _clean(text: str | None) -> str:
    """Text an XML 1.0 document can hold (control characters dropped)."""
    if not text:
        return ""
    return "".join(c for c in text if c >= " " or c in "\t\n\r").replace("\ufffe", "").replace("\uffff", "")
