"""`flask seed names parse`: release names read as edge.digest.names reads them (no database);
`flask seed names refresh`: every post's category and parsed fields computed afresh."""

from __future__ import annotations

from typing import Any, BinaryIO

import click

from app.cli.catalog import shown
from app.cli.output import json_option, print_json, service_call
from edge.digest import names as names_service
from app.services import postnames


@click.group("names")
def names() -> None:
    """Release names: what a post's name says it is (docs/names.md)."""


@names.command("parse")
@click.argument("source", type=click.File("rb"), default="-", metavar="[FILE]")
@click.option(
    "--group",
    "group",
    metavar="GROUP",
    help="The newsgroup the names were posted to: a hint where a name does not tell (an obfuscated "
    "name in an e-book group is a book).",
)
@json_option
def parse(source: BinaryIO, group: str | None, as_json: bool) -> None:
    """Read release names on standard input (or FILE), one a line, and print what each says, one line each
    and in order (an empty line gives a parse of nothing). With --json, one JSON object a line:
    kind, title, year, season, episodes, absolute, air_date, resolution, source, category and the
    other fields (null where the name does not tell). A line that is not UTF-8 is read as
    Latin-1, as the digest reads subjects."""
    for raw in source:
        name = _decoded(raw.rstrip(b"\r\n"))
        record = names_service.record(name, group)
        if as_json:
            print_json(record)
        else:
            click.echo(_line(record))


@names.command("refresh")
@json_option
def refresh(as_json: bool) -> None:
    """Compute every post's category and parsed fields afresh from its name, as the join does for
    the posts it writes (after an upgrade of the parser). Posts that come out the same are not
    written."""

    def progress(read: int) -> None:
        if not as_json:
            click.echo(f"{read:,} posts read", err=True)

    with service_call() as session:
        changed = postnames.refill(session, progress=progress)
    if as_json:
        print_json({"changed": changed})
    else:
        click.echo(f"{changed:,} posts changed")


def _decoded(raw: bytes) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _line(record: dict[str, Any]) -> str:
    """One parse for people: kind, category, title, then what else the name says."""
    parts = [f"{record['kind']:<8}", f"{record['category']:<5}", shown(record["title"] or "-")]
    if record["artist"]:
        parts[2] = f"{shown(record['artist'])} - {parts[2]}"
    if record["author"]:
        parts[2] = f"{shown(record['author'])} - {parts[2]}"
    if record["year"]:
        parts.append(f"({record['year']})")
    episodes = record["episodes"]
    if record["season"] is not None:
        parts.append(
            f"S{record['season']:02d}"
            + "".join(f"E{e:02d}" for e in (episodes or []))
            + (" (season pack)" if episodes == [] else "")
        )
    elif episodes:
        parts.append("E" + "-".join(f"{e:02d}" for e in episodes))
    if record["absolute"]:
        parts.append("#" + "-".join(str(a) for a in record["absolute"]))
    if record["air_date"]:
        parts.append(record["air_date"])
    parts.extend(str(record[f]) for f in ("resolution", "source", "codec", "format", "platform") if record[f])
    if record["languages"]:
        parts.append("+".join(record["languages"]))
    if record["release_group"]:
        parts.append(f"[{shown(record['release_group'])}]")
    return "  ".join(parts)
