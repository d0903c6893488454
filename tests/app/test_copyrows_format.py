"""app/services/_copyrows.c reads an integer column given as a buffer by its struct format: one type
code, maybe after a byte-order mark. A format that is only the mark (or empty) names no type and is
refused, without a read past its end (ops/sanitize runs this under AddressSanitizer, which reports
such a read).

No Python object exports such a format, so the test makes one: a memoryview's own Py_buffer is
found in the object (by its buf, len and itemsize fields) and its format pointer set, for the
call, to a string allocated with malloc at its exact size."""

from __future__ import annotations

import ctypes
import sys
from array import array
from contextlib import contextmanager

import pytest

from app.services import _copyrows  # built by ops/setup: this test is about the compiled part

_libc = ctypes.CDLL(None)
_libc.malloc.restype = ctypes.c_void_p
_libc.malloc.argtypes = [ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]
_WORD = ctypes.sizeof(ctypes.c_void_p)


@contextmanager
def _format_set(view: memoryview, values: array, format_text: bytes):
    """view (of values) exporting format_text as its format while inside."""
    address, length = values.buffer_info()
    words = (ctypes.c_ssize_t * 32).from_address(id(view))  # the object's first 32 words
    # Py_buffer starts with buf, obj, len, itemsize, then two ints, then format.
    found = [
        i
        for i in range(len(words) - 6)
        if words[i] == address and words[i + 2] == length * values.itemsize and words[i + 3] == values.itemsize
    ]
    assert sys.implementation.name == "cpython" and len(found) == 1, (
        "the memoryview's Py_buffer is not where this test looks for it"
    )
    at = found[0] + 4 + 8 // _WORD
    copy = _libc.malloc(len(format_text) + 1)
    ctypes.memmove(copy, format_text + b"\0", len(format_text) + 1)
    saved = words[at]
    words[at] = copy
    try:
        yield
    finally:
        words[at] = saved
        _libc.free(copy)


@pytest.mark.parametrize("format_text", [b"@", b"=", b""])
def test_a_format_without_a_type_code_is_refused(format_text):
    values = array("q", [1, 2, 3])
    view = memoryview(values)
    with _format_set(view, values, b"q"):  # the mechanism itself: the same format, taken
        assert _copyrows.pack_rows(["int8"], [view], False) == _copyrows.pack_rows(["int8"], [[1, 2, 3]], False)
    with _format_set(view, values, format_text):
        with pytest.raises(TypeError, match="'q' or 'i'"):
            _copyrows.pack_rows(["int8"], [view], False)
    assert view.format == "q"


@pytest.mark.parametrize("format_text", [b"@q", b"=q", b"q", b"@i"])
def test_a_format_with_a_type_code_is_read(format_text):
    values = array("q" if format_text.endswith(b"q") else "i", [1, -2, 2**31 - 1])
    view = memoryview(values)
    with _format_set(view, values, format_text):
        assert _copyrows.pack_rows(["int8"], [view], False) == _copyrows.pack_rows(["int8"], [list(values)], False)
