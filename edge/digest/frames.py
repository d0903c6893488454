"""The framed stream of spooled overview chunks (GET /ranges/<id>/chunks).

Each frame: a 24-byte header, big-endian signed 64-bit `chunk_from` and `chunk_to`, unsigned
32-bit line count and body length, then the body: the chunk's raw overview lines, each ending
in CRLF, gzip-compressed. The data center writes frames, nodes read them; both import this. A frame's raw lines are
exactly the block edge.digest.gather.Gatherer.add_chunk takes.
"""

from __future__ import annotations

import gzip
import struct
import zlib
from typing import BinaryIO, Iterator, NamedTuple

CONTENT_TYPE = "application/x-seed-spool"
HEADER = struct.Struct(">qqII")
# A frame body is one compressed chunk; far above any real chunk, far below memory trouble.
MAX_FRAME_BODY = 256 * 1024 * 1024


class FrameError(ValueError):
    """The stream is cut short or malformed."""


class Frame(NamedTuple):
    chunk_from: int
    chunk_to: int
    lines: int
    body: bytes  # gzip of the raw lines

    def raw(self) -> bytes:
        """The chunk's overview lines, each ending in CRLF."""
        return gzip.decompress(self.body)


def compress_lines(raw: bytes) -> bytes:
    return gzip.compress(raw, compresslevel=5)


def encode_frame(chunk_from: int, chunk_to: int, compressed: bytes, line_count: int) -> bytes:
    """A frame from a chunk's compressed lines (compress_lines) and their count."""
    return HEADER.pack(chunk_from, chunk_to, line_count, len(compressed)) + compressed


def _read_exact(stream: BinaryIO, size: int) -> bytes:
    parts, left = [], size
    while left:
        data = stream.read(left)
        if not data:
            break
        parts.append(data)
        left -= len(data)
    return b"".join(parts)


def iter_frames(stream: BinaryIO) -> Iterator[Frame]:
    """Frames from a binary stream, one at a time (bounded memory); FrameError if cut short."""
    while True:
        header = _read_exact(stream, HEADER.size)
        if not header:
            return
        if len(header) < HEADER.size:
            raise FrameError("stream ends inside a frame header")
        chunk_from, chunk_to, lines, size = HEADER.unpack(header)
        if chunk_from > chunk_to or size > MAX_FRAME_BODY:
            raise FrameError(f"bad frame header: {chunk_from}-{chunk_to}, {size} bytes")
        body = _read_exact(stream, size)
        if len(body) < size:
            raise FrameError(f"stream ends inside the frame of chunk {chunk_from}-{chunk_to}")
        try:
            zlib.decompressobj(wbits=31).decompress(body[:64])
        except zlib.error as exc:
            raise FrameError(f"frame body of chunk {chunk_from}-{chunk_to} is not gzip: {exc}") from None
        yield Frame(chunk_from, chunk_to, lines, body)
