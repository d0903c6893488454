# Stubs of edge/digest/_overview.c (what its functions take and give: the C file's comments).
from collections.abc import Callable
from typing import Any

VERSION: int

def clean_columns(
    data: bytes,
    subject: int,
    poster: int,
    date: int,
    message_id: int,
    size: int,
    min_fields: int,
    lowest: int,
    highest: int,
    max_size: int,
    max_text: int,
    max_message_id: int,
) -> tuple[range | list[int], list[bytes], list[bytes], list[bytes], list[bytes], list[int], bool] | None: ...
def number_lines(
    subjects: list[bytes],
    posters: list[bytes],
    tails: dict[bytes, Any],
    read_tail: Callable[[bytes], Any],
    file_numbers: Any,
) -> tuple[list[int], list[Any]] | None: ...
def dot_line(data: bytes, /) -> int: ...
def long_line(data: bytes, longest: int, /) -> int: ...
def add_to_files(
    numbers: list[int],
    sizes: list[int],
    dates: list[bytes],
    fragments: list[int],
    bytes: list[int],
    last_dates: list[bytes],
) -> bool | None: ...
def file_rows(
    numbers: list[int],
    keys: list[Any],
    subjects: list[Any],
    first_dates: list[Any],
    last_dates: list[Any],
    counters: list[Any],
    first_lines: list[Any],
    rkey: Any,
    poster: Any,
    file_keys: list[Any],
    parse_date: Callable[..., Any],
    zoned_day_start: Any,
) -> tuple[Any, int | None, int | None, int] | None: ...
def usual_subject(
    text: str, cut_suffixes: dict[str, Any], cuts: Any, /
) -> tuple[str, int | None, int | None, str] | bool | None: ...
