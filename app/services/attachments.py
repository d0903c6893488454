"""The Content-Disposition of a post's NZB download, shared by the web page (/nzb/KEY) and the
newznab API (t=get), so that both name the file alike.

A post's name is whatever a poster wrote on Usenet: any script, control characters, bidi
overrides, slashes. HTTP header values are ASCII in practice (WSGI servers write them as
Latin-1 and refuse anything past it), so the header carries two names (RFC 6266): an ASCII
``filename=`` for old clients, and the real name as ``filename*=UTF-8''...`` (RFC 5987, percent
encoded) for every browser and newznab client of today.
"""

from __future__ import annotations

import unicodedata
import urllib.parse

# A name longer than this is cut: a file name past 255 bytes cannot be saved on most systems,
# and 200 characters leave room for the extension.
MAX_NAME = 200
EXTENSION = ".nzb"
# Characters that are no part of a file name anyone can save or read: controls (C0, DEL, C1),
# format characters (bidi overrides and isolates, marks that make "exe.txt" look like "txt.exe"),
# lone surrogates (which UTF-8 cannot encode), line and paragraph separators.
_UNSHOWN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})
# Path separators: a saved name must stay one name in the download folder.
_SEPARATORS = frozenset("/\\")


def nzb_disposition(name: str, key: int, extension: str = EXTENSION) -> str:
    """``attachment`` with the post's name as an ASCII fallback and as UTF-8 (RFC 6266/5987).
    The value is ASCII whatever the name holds, with no control character and no quote but the
    two that enclose the fallback; a name with nothing usable left is called by its key."""
    # No leading dot: a name saved as ".something" is a hidden file.
    real = _saveable(name)[:MAX_NAME].strip().lstrip(".").strip() or str(key)
    plain = "".join(c if c.isascii() and (c.isalnum() or c in "._-") else "_" for c in real)
    if not plain.strip("_"):
        plain = str(key)
    # quote() with safe="" leaves only letters, digits and "_.-~" as they are: all of them
    # RFC 5987 attr-chars, so the encoded name needs no quoting of its own.
    encoded = urllib.parse.quote(real + extension, safe="", encoding="utf-8")
    return f"attachment; filename=\"{plain}{extension}\"; filename*=UTF-8''{encoded}"


def _saveable(name: str) -> str:
    return "".join("_" if c in _SEPARATORS or unicodedata.category(c) in _UNSHOWN else c for c in name)
