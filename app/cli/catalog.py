"""`flask seed releases search|show`: the catalog's posts searched and shown (app.services.search)."""

from __future__ import annotations

import dataclasses
from datetime import datetime, timezone

import click

from app.cli.output import json_option, print_json, print_table, service_call
from app.services import search as search_service
from app.services.errors import NotFound
from app.services.groups import get_group

# A name wider than this is cut in the table (--json gives it whole).
NAME_WIDTH = 72
# What a poster wrote (names, subjects, posters) goes to the operator's terminal: C0 and C1
# controls and DEL could move the cursor, retitle the window or hide text (ANSI escapes), and bidi
# controls reorder what is read ("txt.exe" shown as "exe.txt"). The text output shows them as
# escapes (\x1b, \u202e); --json escapes them anyway.
_BIDI = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u2028\u2029"
_ESCAPED = {code: f"\\x{code:02x}" for code in (*range(0x20), *range(0x7F, 0xA0))}
_ESCAPED.update({ord(c): f"\\u{ord(c):04x}" for c in _BIDI})


@click.group("releases")
def releases() -> None:
    """Search the catalog's releases (posts) and show one."""


@releases.command("search")
@click.argument("words", nargs=-1)
@click.option("--group", "groups", multiple=True, help="Only posts of this group (repeat for several).")
@click.option("--poster", help="Only posts whose poster contains this (any case).")
@click.option("--min-size", type=int, help="Only posts of at least this many bytes.")
@click.option("--max-size", type=int, help="Only posts of at most this many bytes.")
@click.option("--max-age", type=float, help="Only posts whose last article is at most this many days old.")
@click.option("--min-completion", type=float, help="Only posts at least this complete (percent).")
@click.option(
    "--limit",
    type=int,
    default=search_service.DEFAULT_LIMIT,
    show_default=True,
    help=f"Posts to show (at most {search_service.MAX_LIMIT:,}).",
)
@click.option("--offset", type=int, default=0, help="Posts to skip (newest first).")
@json_option
def search(
    words: tuple[str, ...],
    groups: tuple[str, ...],
    poster: str | None,
    min_size: int | None,
    max_size: int | None,
    max_age: float | None,
    min_completion: float | None,
    limit: int,
    offset: int,
    as_json: bool,
) -> None:
    """Posts whose names hold every word (no case, no punctuation; the last word may be the
    start of one), newest first. Without words: the newest posts."""
    with service_call() as session:
        page = search_service.search_posts(
            session,
            list(words),
            group=list(groups) or None,
            poster=poster,
            min_size=min_size,
            max_size=max_size,
            max_age_days=max_age,
            min_completion=min_completion,
            limit=limit,
            offset=offset,
        )
    if as_json:
        print_json(
            {
                "total": page.total,
                "total_exact": page.total_exact,
                "limit": page.limit,
                "offset": page.offset,
                "items": [dataclasses.asdict(item) for item in page.items],
            }
        )
        return
    if not page.items:
        click.echo(
            f"no posts found ({page.total:,} match, from offset {page.offset:,})" if page.total else "no posts found"
        )
        return
    print_table(
        ("key", "name", "group", "files", "size", "complete", "posted"),
        [
            (
                p.key,
                _cut(p.name),
                shown(p.group),
                p.files,
                human_size(p.bytes),
                f"{p.completion:.1f}%",
                utc(p.last_post),
            )
            for p in page.items
        ],
    )
    first = page.offset + 1
    of = f"{page.total:,}" if page.total_exact else f"at least {page.total:,}"
    click.echo(f"posts {first:,}-{first + len(page.items) - 1:,} of {of}")


def _post_key(key: str) -> int:
    """KEY as a number, refused as the search service refuses a key that is none; the service
    checks its range."""
    try:
        return int(key.strip())
    except ValueError:
        raise NotFound(f"post key must be a whole number, not {key!r}") from None


# ignore_unknown_options: a key may be negative, and '-42' would otherwise be read as an option.
@releases.command("show", context_settings={"ignore_unknown_options": True})
@click.argument("key")
@click.option("--group", help="The post's group, where its key is in several (crossposts); else the first.")
@json_option
def show(key: str, group: str | None, as_json: bool) -> None:
    """A post by its key: its releases and files, the segments seen of those expected."""
    with service_call() as session:
        group_id = get_group(session, group).id if group else None
        details = search_service.post_details(session, _post_key(key), group_id)
    if as_json:
        print_json(dataclasses.asdict(details))
        return
    post = details.post
    for label, value in (
        ("post", f"{post.key} in {shown(post.group)}"),
        ("name", shown(post.name)),
        ("poster", shown(post.poster)),
        ("posted", f"{utc(post.first_post)} to {utc(post.last_post)}"),
        ("files", f"{post.files:,} in {post.releases:,} release{'s' if post.releases != 1 else ''}"),
        ("segments", f"{post.parts_seen:,} seen of {post.parts_expected:,} expected ({post.completion:.1f}% complete)"),
        ("size", f"{human_size(post.bytes)} ({post.bytes:,} bytes)"),
    ):
        click.echo(f"{label:<9} {value}")
    found = details.inspection
    if found is not None:
        what = [found.state, f"queued as {found.reason}"]
        if found.password is not None:
            what.append({0: "no password", 1: "passworded", 2: "an archive inside"}.get(found.password, "?"))
        what += [f"flagged {flag}" for flag in found.flags]
        if found.dropped_by:
            what.append(f"dropped by the rule {shown(found.dropped_by)}")
        click.echo(f"{'inspected':<9} {', '.join(what)}")
        if found.inner_name:
            click.echo(f"{'told':<9} {shown(found.inner_name)}")
        ids = [
            f"{name} {value}"
            for name, value in (
                ("imdb", found.imdb),
                ("tvdb", found.tvdb),
                ("tvmaze", found.tvmaze),
                ("tmdb", found.tmdb),
            )
            if value
        ]
        if ids:
            click.echo(f"{'ids':<9} {', '.join(ids)}")
        if found.files:
            click.echo("\ninside (what the par2 set lists and the archive holds):")
            print_table(
                ("name", "size", "from"),
                [(_cut(f["name"]), human_size(f["size"]), f.get("source") or "-") for f in found.files],
            )
    click.echo("\nreleases:")
    print_table(
        ("key", "name", "poster", "files", "segments", "complete"),
        [
            (
                r.key,
                _cut(r.name),
                shown(r.poster),
                f"{r.files_seen}/{r.file_count if r.file_count is not None else '?'}",
                f"{r.parts_seen}/{r.parts_expected}",
                f"{r.completion:.1f}%",
            )
            for r in details.releases
        ],
    )
    click.echo("\nfiles:")
    print_table(
        ("#", "name", "posted", "segments", "size"),
        [
            (
                f"{f.file_index}/{f.file_count}" if f.file_index is not None else "-",
                _cut(f.name),
                utc(f.posted_at),
                f"{f.parts_seen}/{f.parts_expected if f.parts_expected is not None else '?'}",
                human_size(f.bytes),
            )
            for f in details.files
        ],
    )


def human_size(size: int) -> str:
    """Bytes in binary units: 512 B, 1.5 KiB, 700.0 MiB, 4.2 GiB."""
    value = float(size)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{size} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def utc(moment: datetime | None) -> str:
    return moment.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S UTC") if moment is not None else "-"


def shown(text: str) -> str:
    """Text from Usenet as the terminal may print it: control and bidi characters escaped."""
    return text.translate(_ESCAPED)


def _cut(name: str) -> str:
    name = shown(name)
    return name if len(name) <= NAME_WIDTH else name[: NAME_WIDTH - 3] + "..."
