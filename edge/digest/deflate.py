"""gzip for batch bodies: Intel's ISA-L (the `isal` package) when it is installed, else zlib.

Both write and read the same format (RFC 1952), so a node with either talks to a data center with
either. At level 1 ISA-L writes a batch about six times as fast as zlib and reads it twice as
fast, for 4-6% more bytes (`bench/digest.py` times both): the node installs it with its `fast`
extra (the container does), the data center always. The edge's own dependencies stay msgpack
alone.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from _typeshed import ReadableBuffer


class Deflater(Protocol):
    """A compressobj, zlib's or ISA-L's (as gzip uses it)."""

    def compress(self, data: ReadableBuffer, /) -> bytes: ...
    def flush(self) -> bytes: ...


class Inflater(Protocol):
    """A decompressobj, zlib's or ISA-L's (what gunzipper gives)."""

    @property
    def unused_data(self) -> bytes: ...
    @property
    def unconsumed_tail(self) -> bytes: ...
    @property
    def eof(self) -> bool: ...
    def decompress(self, data: ReadableBuffer, max_length: int = 0, /) -> bytes: ...


_compressobj: Callable[[int, int, int], Deflater]
_decompressobj: Callable[[int], Inflater]
try:
    from isal import isal_zlib

    ENGINE = "isal"
    ERRORS: tuple[type[Exception], ...] = (zlib.error, isal_zlib.error)  # type: ignore[assignment]  # isal's stub declares error an Exception instance; it is the class
    _compressobj, _decompressobj = isal_zlib.compressobj, isal_zlib.decompressobj
except ImportError:  # the bare install
    ENGINE = "zlib"
    ERRORS = (zlib.error,)
    _compressobj, _decompressobj = zlib.compressobj, zlib.decompressobj

GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around the deflate stream


def gzip(data: ReadableBuffer, level: int = 1) -> bytes:
    """data as one gzip member (level: 0-3 with ISA-L, 0-9 with zlib; 1 is fast for both)."""
    packer = _compressobj(level, zlib.DEFLATED, GZIP_WBITS)
    return packer.compress(data) + packer.flush()


def gunzipper() -> Inflater:
    """A decompressobj for one gzip member: decompress(data, max_length), unconsumed_tail, eof,
    unused_data as zlib's; its errors are ERRORS."""
    return _decompressobj(GZIP_WBITS)
