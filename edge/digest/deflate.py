"""gzip for batch bodies: Intel's ISA-L (the `isal` package) when it is installed, else zlib.

Both write and read the same format (RFC 1952), so a node with either talks to a data center with
either. At level 1 ISA-L writes a batch about six times as fast as zlib and reads it twice as
fast, for 4-6% more bytes (`bench/digest.py` times both): the node installs it with its `fast`
extra (the container does), the data center always. The edge's own dependencies stay msgpack
alone.
"""

from __future__ import annotations

import zlib

try:
    from isal import isal_zlib as _engine

    ENGINE = "isal"
    ERRORS: tuple[type[Exception], ...] = (zlib.error, _engine.error)
except ImportError:  # the bare install
    _engine = zlib
    ENGINE = "zlib"
    ERRORS = (zlib.error,)

GZIP_WBITS = 16 + zlib.MAX_WBITS  # a gzip header and trailer around the deflate stream


def gzip(data, level: int = 1) -> bytes:
    """data as one gzip member (level: 0-3 with ISA-L, 0-9 with zlib; 1 is fast for both)."""
    packer = _engine.compressobj(level, zlib.DEFLATED, GZIP_WBITS)
    return packer.compress(data) + packer.flush()


def gunzipper():
    """A decompressobj for one gzip member: decompress(data, max_length), unconsumed_tail, eof,
    unused_data as zlib's; its errors are ERRORS."""
    return _engine.decompressobj(GZIP_WBITS)
