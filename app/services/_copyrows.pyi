# Stubs of app/services/_copyrows.c (its first comment says what pack_rows takes and gives).
from collections.abc import Sequence
from typing import Any

VERSION: int

def pack_rows(kinds: Sequence[str], columns: Sequence[Sequence[Any]], scan: bool, /) -> bytes: ...
