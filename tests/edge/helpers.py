"""Overview lines and batches for the edge tests."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager

from edge.digest import gather, nntp, overview, subjects
from edge.digest.batch import decode_batch, encode_batch


@contextmanager
def python_twins() -> Iterator[None]:
    """The digest's Python code in place of its compiled part (edge/digest/_overview.c), as an install
    without a C compiler runs it. Not a fixture: property tests switch inside an example."""
    saved = (
        overview._compiled,
        nntp._dot_line,
        nntp._long_line,
        gather._number_lines,
        gather._add_to_files,
        gather._compiled_file_rows,
        subjects._usual_subject,
    )
    (
        overview._compiled,
        nntp._dot_line,
        nntp._long_line,
        gather._number_lines,
        gather._add_to_files,
        gather._compiled_file_rows,
        subjects._usual_subject,
    ) = (None, nntp._dot_line_python, nntp._long_line_python, None, None, None, None)
    try:
        yield
    finally:
        (
            overview._compiled,
            nntp._dot_line,
            nntp._long_line,
            gather._number_lines,
            gather._add_to_files,
            gather._compiled_file_rows,
            subjects._usual_subject,
        ) = saved


def block(lines: Iterable[bytes]) -> bytes:
    """Overview lines as the NNTP client yields them: CRLF-terminated, in one block."""
    return b"".join(line + b"\r\n" for line in lines)


def overview_line(
    number: int,
    subject: bytes | str = b'"file.rar" yEnc (1/1)',
    *,
    poster: bytes = b"Poster <p@example.net>",
    date: bytes = b"Sat, 01 Nov 2025 07:27:27 +0000",
    message_id: bytes | None = None,
    size: int = 716800,
) -> bytes:
    """One INN-style overview line (Subject From Date Message-ID References Bytes Lines Xref)."""
    if isinstance(subject, str):
        subject = subject.encode()
    message_id = message_id if message_id is not None else b"<%d@example.net>" % number
    return b"\t".join(
        (
            b"%d" % number,
            subject,
            poster,
            date,
            message_id,
            b"",
            b"%d" % size,
            b"4",
            b"Xref: test.invalid alt.binaries.test:%d" % number,
        )
    )


def as_received(batch: dict) -> dict:
    """The batch as the coordinator decodes it (message-ids as str, structure checked)."""
    body, content_type, encoding = encode_batch(batch, gzip=False)
    return decode_batch(body, content_type, encoding)
