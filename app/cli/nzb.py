"""`flask seed nzb POST_KEY [-o FILE] [--group NAME]`: a post exported as an NZB file."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable

import click

from app.cli.output import service_call
from app.services import nzbexport
from app.services.groups import get_group


class PostKey(click.ParamType):
    """A post key: a signed 64-bit integer, written in decimal."""

    name = "post key"

    def convert(self, value, param, ctx) -> int:
        if isinstance(value, int):
            return value
        try:
            key = int(value, 10)
        except ValueError:
            key = None
        if key is None or not nzbexport.MIN_KEY <= key <= nzbexport.MAX_KEY:
            self.fail(f"{value!r} is not a post key (a signed 64-bit decimal integer)", param, ctx)
        return key


# Unknown options are taken as the argument, so that a negative key needs no `--` before it
# (anything else that starts with a dash is then refused as no post key).
@click.command("nzb", context_settings={"ignore_unknown_options": True})
@click.argument("post_key", metavar="POST_KEY", type=PostKey())
@click.option(
    "-o",
    "--output",
    metavar="FILE",
    type=click.Path(dir_okay=False),
    help="Write the NZB to FILE (default: standard output).",
)
@click.option(
    "--group",
    "group_name",
    metavar="NAME",
    help="Take the post from this group (default: the group of least id that holds it).",
)
def nzb(post_key: int, output: str | None, group_name: str | None) -> None:
    """Write the NZB of the post POST_KEY (the post's key, a signed 64-bit integer)."""
    with service_call() as session:
        nzbexport.one_snapshot(session)
        group_id = get_group(session, group_name).id if group_name is not None else None
        post = nzbexport.find_post(session, post_key, group_id)
        chunks = nzbexport.nzb_chunks(session, post)
        if output is None or output == "-":
            for chunk in chunks:
                click.echo(chunk, nl=False)  # bytes go to stdout's binary buffer, as they are
            return
        size = _write_whole(output, chunks)
    click.echo(f"wrote the NZB of post {post_key} ({post.name}, group {post.group}): {size} bytes to {output}")


def _write_whole(path: str, chunks: Iterable[bytes]) -> int:
    """The chunks written to a new file beside `path`, then renamed to it, so that a failed
    export leaves no partial NZB behind; the file gets the usual mode (0666 less the umask).
    Returns the bytes written."""
    directory = os.path.dirname(os.path.abspath(path))
    try:
        handle, temporary = tempfile.mkstemp(prefix=".nzb-", suffix=".part", dir=directory)
    except OSError as exc:
        raise click.ClickException(f"cannot write {path}: {exc.strerror or exc}") from None
    size = 0
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(handle, 0o666 & ~umask)
        with os.fdopen(handle, "wb") as out:
            for chunk in chunks:
                out.write(chunk)
                size += len(chunk)
        os.replace(temporary, path)
    except BaseException as exc:
        os.unlink(temporary)
        if isinstance(exc, OSError):
            raise click.ClickException(f"cannot write {path}: {exc.strerror or exc}") from None
        raise
    return size
