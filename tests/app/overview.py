"""Overview lines and batches built with the real digest library, for data-center tests."""

from __future__ import annotations

from edge.digest.batch import encode_batch
from edge.digest.gather import Gatherer

DATE = b"Sat, 01 Nov 2025 07:27:27 +0000"


def overview_lines(
    first: int,
    last: int,
    *,
    release: str = "Some.Release.2025",
    files: int = 3,
    parts: int = 5,
    poster: bytes = b"JBinUp <jbinup@example.net>",
    skip: set[int] = frozenset(),
):
    """Lines for articles first..last: releases of `files` rar files of `parts` segments each,
    one after another (numbered from the article number, so any span gives the same names)."""
    lines = []
    per_release = files * parts
    for number in range(first, last + 1):
        if number in skip:
            continue
        serial, index = divmod(number, per_release)
        file_no, part = divmod(index, parts)
        name = f"{release}.{serial}"
        subject = (
            f'{name} [{file_no + 1:02d}/{files:02d}] - "{name}.part{file_no + 1:02d}.rar" yEnc ({part + 1}/{parts})'
        ).encode()
        msgid = f"<{name}.{number}@example.net>".encode()
        lines.append(
            b"\t".join(
                [
                    str(number).encode(),
                    subject,
                    poster,
                    DATE,
                    msgid,
                    b"",
                    b"700000",
                    b"5400",
                    f"Xref: h alt.binaries.test:{number}".encode(),
                ]
            )
        )
    return lines


def raw(lines: list[bytes]) -> bytes:
    return b"".join(line + b"\r\n" for line in lines)


def make_batch(first: int, last: int, group: str = "alt.binaries.test", chunk_size: int = 100, **kwargs) -> dict:
    gatherer = Gatherer(group)
    for start in range(first, last + 1, chunk_size):
        end = min(start + chunk_size - 1, last)
        gatherer.add_chunk(start, end, [raw(overview_lines(start, end, **kwargs))])
    return gatherer.build()


def encoded(batch: dict, fmt: str = "msgpack", gzip: bool = True) -> tuple[bytes, dict]:
    body, content_type, content_encoding = encode_batch(batch, fmt=fmt, gzip=gzip)
    headers = {"Content-Type": content_type}
    if content_encoding:
        headers["Content-Encoding"] = content_encoding
    return body, headers
