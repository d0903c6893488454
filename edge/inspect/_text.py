"""Names and texts read out of binary headers."""

from __future__ import annotations


def decode_name(raw: bytes, fallback: str = "latin-1") -> str:
    """UTF-8 when the bytes are UTF-8 (a sequence cut at the end, as a name cut to its bound
    leaves it, is dropped), else the fallback 8-bit code page (which decodes any bytes)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as error:
        if error.reason == "unexpected end of data" and error.start >= len(raw) - 3:
            try:
                return raw[: error.start].decode("utf-8")
            except UnicodeDecodeError:
                pass
        return raw.decode(fallback)
