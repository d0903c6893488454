"""The web page's routes: status (operators), release search and NZB downloads (operators and
API-key users), login and logout. Server-rendered from app/web/templates; no JavaScript.

    GET  /                                  the seed's status (an operator's login)
    GET  /search?q=WORDS&group=G&page=N     posts, newest first, PAGE_SIZE a page
    GET  /nzb/KEY[?group_id=ID]             a post's NZB, as an attachment
    GET  /login, POST /login                the form: an operator key (seedop_...) or an API key (seedapi_...)
    GET  /logout, POST /logout              the Log out button (a POST with the session's CSRF token)

/search and /nzb also take ``?apikey=`` (an API key given with the request, kept in no session;
the page's links then carry it on, as newznab clients' links do). Operator keys are taken by the
login form only: a key in a URL ends up in logs and histories. Bad parameters give a 400 page,
never a 500; every page is sent with a policy that allows no script, no frame and no referrer.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import urlsplit

from flask import Blueprint, Response, redirect, render_template, request, url_for
from psycopg import OperationalError as RawOperationalError
from sqlalchemy import select
from sqlalchemy.exc import DBAPIError, OperationalError
from sqlalchemy.exc import TimeoutError as PoolTimeout
from werkzeug.exceptions import HTTPException

from app import metrics
from app.db import read_session_scope, session_scope
from app.models import Group
from app.services import apikeys, grabs, nzbexport, search
from edge.digest import categories
from app.services.attachments import nzb_disposition
from app.services.errors import NotFound, ServiceError
from app.web import auth
from app.formatting import FORMATS
from app.web.figures import status_page

log = logging.getLogger(__name__)

web = Blueprint("web", __name__, template_folder="templates")

PAGE_SIZE = 50
LAST_PAGE = search.MAX_OFFSET // PAGE_SIZE + 1
# What a page asks the browser: no script, frame, plugin or outside resource at all; styles only
# inline; forms only to this server; no Referer (a URL with ?apikey= must not travel on).
SECURITY_HEADERS = {
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src 'self';"
    " form-action 'self'; frame-ancestors 'none'; base-uri 'none'",
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
}


class PageError(Exception):
    """A request the page refuses: shown as an error page with this status."""

    def __init__(self, status: int, title: str, message: str):
        super().__init__(message)
        self.status, self.title, self.message = status, title, message


@web.record_once
def _setup(state) -> None:
    auth.install_sessions(state.app)


@web.context_processor
def _formats() -> dict:
    return dict(FORMATS)


@web.context_processor
def _csrf() -> dict:
    # A function, not a value: only pages that show a form with it (the Log out button) make a
    # token, so a page seen without a login sets no session cookie.
    return {"csrf_token": auth.csrf_token}


@web.after_request
def _security_headers(response: Response) -> Response:
    for name, value in SECURITY_HEADERS.items():
        response.headers.setdefault(name, value)
    return response


@web.get("/")
def status():
    with session_scope() as db:
        visitor = auth.session_visitor(db)
        if visitor is None:
            return _to_login()
        if not visitor.operator:
            raise PageError(
                403, "Operators only", "The seed's status is shown to operators. An API key can search the catalog."
            )
        page = status_page(db)
    return render_template(
        "status.html", visitor=visitor, s=page.status, chart=page.chart, rate_minutes=page.rate_minutes
    )


@web.get("/search")
def search_page():
    words = request.args.get("q", "")
    group = request.args.get("group", "").strip()
    category = _category()
    page = _page_number()
    asked = "q" in request.args or bool(group) or category is not None
    with session_scope() as db:
        visitor = _visitor(db)
        if visitor is None:
            return _to_login()
        groups = db.scalars(select(Group.name).order_by(Group.name)).all()
        found, error, status_code = None, None, 200
        if asked:
            call = metrics.CatalogCall("web", "search")
            try:
                with read_session_scope(db) as reads:  # the replica's, when there is one
                    found = search.search_posts(
                        reads,
                        words,
                        group=group or None,
                        categories=None if category is None else [category],
                        limit=PAGE_SIZE,
                        offset=(page - 1) * PAGE_SIZE,
                    )
            except search.SearchTimeout as exc:
                error, status_code = exc.message, 503
            except search.SearchError as exc:
                error, status_code = exc.message, 400
            except NotFound as exc:
                error, status_code = exc.message, 404
            except BaseException as exc:
                status_code = _status_of(exc)
                raise
            finally:
                call.done(status_code)
        if visitor.api_key is not None:
            apikeys.record_use(db, visitor.api_key, grab=False)
    pages = None
    if found is not None:
        pages = max(1, min(LAST_PAGE, -(-found.total // PAGE_SIZE)))
    body = render_template(
        "search.html",
        visitor=visitor,
        q=words,
        group=group,
        groups=groups,
        page=page,
        pages=pages,
        found=found,
        error=error,
        link=_search_link(visitor, words, group, category),
        nzb_link=_nzb_link(visitor),
        category=category,
        categories=_CATEGORY_CHOICES,
        category_name=lambda c: categories.category_named(c).name,
        episode=_episode_text,
    )
    return body, status_code


# The category filter's choices: each parent, then its subcategories.
_CATEGORY_CHOICES = [
    choice
    for parent, name in categories.PARENTS.items()
    for choice in [(parent, name, False)]
    + [
        (sub, f"{name} > {sub_name}", True)
        for sub, sub_name in categories.SUBCATEGORIES.items()
        if sub // 1000 * 1000 == parent
    ]
]


def _category() -> int | None:
    """The category asked for (cat=), None for every one; one that is none is a 400."""
    value = request.args.get("cat", "").strip()
    if not value:
        return None
    if not (value.isascii() and value.isdigit() and len(value) <= 5) or (
        int(value) not in categories.PARENTS and int(value) not in categories.SUBCATEGORIES
    ):
        raise PageError(400, "No such category", "Choose a category from the list.")
    return int(value)


def _episode_text(post: search.PostSummary) -> str:
    """S01E02, S01E02-E03, S02 (a season pack) or the air date, as the post's name says."""
    if post.air_date is not None:
        return post.air_date.isoformat()
    if post.season is None:
        return f"E{post.episode:02d}" if post.episode is not None else ""
    text = f"S{post.season:02d}"
    if post.episode is not None:
        text += f"E{post.episode:02d}"
        if post.episode_last is not None and post.episode_last != post.episode:
            text += f"-E{post.episode_last:02d}"
    return text


@web.get("/nzb/<int(signed=True):key>")
def nzb(key: int):
    group_id = _optional_int("group_id", -(2**31), 2**31 - 1)
    with session_scope() as db:
        visitor = _visitor(db)
    if visitor is None:
        return _to_login()
    # A session of its own for the export (the replica's, when there is one): nzbexport.find_post
    # reads the post in one snapshot only in a session that has not begun a transaction yet.
    call, status_code = metrics.CatalogCall("web", "nzb"), 200
    try:
        with session_scope() as db, read_session_scope(db) as reads:
            try:
                post = nzbexport.find_post(reads, key, group_id)
            except nzbexport.PostNotFound:
                raise PageError(404, "No such post", f"No post has the key {key}.") from None
            body = b"".join(nzbexport.nzb_chunks(reads, post))
            if visitor.api_key is not None:
                apikeys.record_use(db, visitor.api_key, grab=True)
            grabs.record(db, post.group_id, post.key)
    except BaseException as exc:
        status_code = _status_of(exc)
        raise
    finally:
        call.done(status_code)
    return Response(
        body, mimetype="application/x-nzb", headers={"Content-Disposition": nzb_disposition(post.name, post.key)}
    )


@web.route("/login", methods=["GET", "POST"])
def login():
    target = _local_target(request.values.get("next"))
    if request.method == "GET":
        with session_scope() as db:
            visitor = auth.session_visitor(db)
        return render_template("login.html", visitor=visitor, next=target, csrf=auth.csrf_token(), error=None)
    if not auth.csrf_matches(request.form.get("csrf")):
        # The form was not this session's (another site posting it, or a session that ended):
        # a fresh form, with a fresh token.
        return render_template(
            "login.html",
            visitor=None,
            next=target,
            csrf=auth.csrf_token(),
            error="The form expired or did not come from this page: log in again.",
        ), 400
    with session_scope() as db:
        visitor = auth.log_in(db, request.form.get("key", ""))
    if visitor is None:
        return render_template(
            "login.html",
            visitor=None,
            next=target,
            csrf=auth.csrf_token(),
            error="That key is not an operator key or an active API key.",
        ), 401
    if target is None or (target == url_for("web.status") and not visitor.operator):
        target = url_for("web.status") if visitor.operator else url_for("web.search_page")
    return redirect(target, code=303)


@web.route("/logout", methods=["GET", "POST"])
def logout():
    # Logging out changes the session, so it takes a POST with the session's CSRF token: a link or
    # an image on another site must not end a login. A GET (an old bookmark) shows the button.
    if request.method == "GET":
        with session_scope() as db:
            visitor = auth.session_visitor(db)
        if visitor is None:
            return redirect(url_for("web.login"), code=303)
        return render_template("logout.html", visitor=visitor)
    if not auth.csrf_matches(request.form.get("csrf")):
        raise PageError(
            400, "Not logged out", "The form expired or did not come from this page: use the Log out button again."
        )
    auth.log_out()
    return redirect(url_for("web.login"), code=303)


@web.errorhandler(PageError)
def _page_error(exc: PageError):
    return _error_page(exc.status, exc.title, exc.message)


@web.errorhandler(HTTPException)
def _http_error(exc: HTTPException):
    return _error_page(exc.code or 500, exc.name or "Error", exc.description or "")


@web.errorhandler(ServiceError)
def _service_error(exc: ServiceError):
    return _error_page(exc.status, "Refused", exc.message)


# A database that does not answer is the data center's passing trouble (503), as for the API.
@web.errorhandler(OperationalError)
@web.errorhandler(RawOperationalError)
@web.errorhandler(PoolTimeout)
def _database_away(exc: Exception):
    log.warning("web page not served, the database is unavailable: %s", exc.__class__.__name__)
    return _error_page(503, "Unavailable", "The database cannot be reached now: try again in a moment.")


@web.errorhandler(DBAPIError)
@web.errorhandler(Exception)
def _unexpected(exc: Exception):
    log.exception("web page failed")
    return _error_page(500, "Internal error", "The page could not be made; the error is in the server's log.")


def _error_page(status_code: int, title: str, message: str):
    try:
        with session_scope() as db:
            visitor = auth.session_visitor(db)
    except Exception:  # noqa: BLE001 - an error page must not fail for want of the database
        visitor = None
    return render_template("error.html", visitor=visitor, status=status_code, title=title, message=message), status_code


def _visitor(db) -> auth.Visitor | None:
    """The visitor of ``?apikey=`` when the request has one (a wrong one is refused, not taken
    as no key), else of the session's login."""
    if "apikey" in request.args:
        visitor = auth.url_key_visitor(db, request.args["apikey"])
        if visitor is None:
            raise PageError(401, "Unknown API key", "That API key is not an active one.")
        return visitor
    return auth.session_visitor(db)


def _status_of(exc: BaseException) -> int:
    """The status the page's error handlers answer an exception with (for the metrics)."""
    if isinstance(exc, PageError):
        return exc.status
    if isinstance(exc, (OperationalError, RawOperationalError, PoolTimeout)):
        return 503
    if isinstance(exc, ServiceError):
        return exc.status
    if isinstance(exc, HTTPException):
        return exc.code or 500
    return 500


def _to_login():
    return redirect(url_for("web.login", next=request.full_path.rstrip("?")), code=303)


def _local_target(value: str | None) -> str | None:
    """A path on this server to go to after the login; None for anything else (another site's
    URL, a scheme-relative //host, backslashes that browsers read as slashes)."""
    if not value or len(value) > 2000 or not value.startswith("/") or value.startswith("//") or "\\" in value:
        return None
    parts = urlsplit(value)
    if parts.scheme or parts.netloc or any(ord(c) < 32 for c in value):
        return None
    return value


def _page_number() -> int:
    value = request.args.get("page", "").strip()
    if not value:
        return 1
    if not value.isdigit() or len(value) > 9 or not 1 <= int(value) <= LAST_PAGE:
        raise PageError(
            400,
            "Bad page number",
            f"The page must be a whole number from 1 to {LAST_PAGE:,} (at most {search.MAX_OFFSET:,}"
            " results are paged through: give more words or a group).",
        )
    return int(value)


def _optional_int(name: str, low: int, high: int) -> int | None:
    value = request.args.get(name, "").strip()
    if not value:
        return None
    try:
        number = int(value)
    except ValueError:
        raise PageError(400, f"Bad {name}", f"{name} must be a whole number.") from None
    if not low <= number <= high:
        raise PageError(400, f"Bad {name}", f"{name} is out of range.")
    return number


def _search_link(visitor: auth.Visitor, words: str, group: str, category: int | None):
    """The URL of another page of this search (the API key carried on when it came in the URL)."""

    def link(page: int) -> str:
        # url_for's **values, as it types them (a narrower type would meet its _anchor, _external...)
        params: dict[str, Any] = {"q": words, "page": page}
        if group:
            params["group"] = group
        if category is not None:
            params["cat"] = category
        if visitor.from_url:
            params["apikey"] = request.args["apikey"]
        return url_for("web.search_page", **params)

    return link


def _nzb_link(visitor: auth.Visitor):
    def link(post) -> str:
        params = {"group_id": post.group_id}
        if visitor.from_url:
            params["apikey"] = request.args["apikey"]
        return url_for("web.nzb", key=post.key, **params)

    return link
