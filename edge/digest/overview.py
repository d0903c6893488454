"""Overview lines (OVER/XOVER) to records.

Fields are found by the server's overview format (LIST OVERVIEW.FMT; INN: Subject From Date
Message-ID References Bytes Lines Xref:full). Numbers are Python ints bounded to 64-bit signed
(PostgreSQL bigint). Malformed lines are counted by reason and skipped, never raised. Text stays
bytes here: decoding runs once per file, not per line (see edge/digest/gather.py).
"""

from __future__ import annotations

import calendar
import email.utils
from dataclasses import dataclass
from functools import lru_cache
from itertools import islice
from operator import lt
from typing import ClassVar, NamedTuple

from edge.digest.compiled import load

_compiled = load("edge.digest._overview")  # edge/digest/_overview.c: the clean blocks' fast path in C

MAX_INT64 = 2**63 - 1
# No article is 2 GiB; the catalog keeps sizes as 32-bit integers, so a larger :bytes is a bad
# number here, counted and skipped, rather than a batch the coordinator must refuse.
MAX_ARTICLE_BYTES = 2**31 - 1

# The longest subject and poster (From) a line may have, in bytes, and the longest message-id (RFC
# 5536's limit); a longer one is rejected with its reason (docs/batch-format.md, "Bounds"). Real
# subjects are well under 500 bytes. Every value the catalog keeps of an article then fits
# PostgreSQL's limits, even as UTF-8 read from Latin-1 (twice the bytes at most): a btree index
# row (about 2,700 bytes: message-id hosts), a tsvector (1 MB: the words of a release's name,
# which comes from a subject), and an edge node's lines stay small whatever a server sends.
MAX_TEXT_BYTES = 2048
MAX_MESSAGE_ID_BYTES = 250
# The NNTP client cuts an overview line longer than this to its first MAX_KEPT_LINE bytes (see
# edge.digest.nntp): such a line lacks the fields after the one that was too long, and is
# rejected as that field's being too long ("line_too_long" when it was none of those read).
MAX_KEPT_LINE = 16 * 1024

# Reasons a line is rejected, in the order they are checked.
REJECT_REASONS = (
    "nul_byte",
    "too_few_fields",
    "bad_number",
    "empty_message_id",
    "message_id_too_long",
    "subject_too_long",
    "poster_too_long",
    "line_too_long",
    "out_of_range",
    "repeated_number",
)


class OverviewColumns(NamedTuple):
    """Accepted lines of one block, column by column (the same index is the same line)."""

    numbers: list[int] | range  # a range when they are consecutive (parse_block_in_order only)
    subjects: list[bytes]
    posters: list[bytes]
    dates: list[bytes]
    message_ids: list[bytes]
    sizes: list[int]


def _field_name(entry: str) -> str:
    """'Subject:' -> 'subject', ':bytes' -> 'bytes', 'Xref:full' -> 'xref'."""
    return entry.strip().strip(":").split(":")[0].strip().lower()


@dataclass(frozen=True)
class OverviewLayout:
    """Positions of the fields the digest uses in a tab-split overview line (0 is the number)."""

    subject: int
    poster: int
    date: int
    message_id: int
    bytes: int

    RFC_DEFAULT_FORMAT: ClassVar[tuple[str, ...]] = (
        "Subject:",
        "From:",
        "Date:",
        "Message-ID:",
        "References:",
        ":bytes",
        ":lines",
    )

    @property
    def min_fields(self) -> int:
        return max(self.subject, self.poster, self.date, self.message_id, self.bytes) + 1

    @classmethod
    def from_format(cls, names: list[str] | tuple[str, ...]) -> OverviewLayout:
        positions: dict[str, int] = {}
        for index, entry in enumerate(names, start=1):
            positions.setdefault(_field_name(entry), index)
        wanted = {"subject": "subject", "poster": "from", "date": "date", "message_id": "message-id", "bytes": "bytes"}
        missing = [name for name in wanted.values() if name not in positions]
        if missing:
            raise ValueError(f"overview format lacks {', '.join(missing)}: {list(names)}")
        return cls(**{field: positions[name] for field, name in wanted.items()})


DEFAULT_LAYOUT = OverviewLayout.from_format(OverviewLayout.RFC_DEFAULT_FORMAT)


def new_reject_counts() -> dict[str, int]:
    return dict.fromkeys(REJECT_REASONS, 0)


def parse_block(
    data: bytes, layout: OverviewLayout, rejected: dict[str, int], lowest: int = 1, highest: int = MAX_INT64
) -> OverviewColumns:
    """The accepted lines of a block of CRLF-terminated overview lines, as columns. Each
    rejected line adds one to ``rejected[reason]``; a line numbered outside lowest..highest (the
    range asked for) is rejected as ``out_of_range``.

    A clean block (no NUL byte, every line with the same number of fields, every number valid),
    which is nearly every block, is cut into columns at C speed: a tab goes after each LF (a
    one-byte search, far faster than searching for CRLF), one split makes the fields, and slices
    make the columns. When the last field of every line ends with CRLF and the block has no other
    LF (the replacement added one byte per LF: the length tells how many), every line has the
    same width; a CR alone stays inside its field, as it does when lines are cut at CRLF. Any
    other block is read line by line to count its rejects exactly.
    """
    columns = parse_block_in_order(data, layout, rejected, lowest, highest)[0]
    return columns if type(columns.numbers) is list else columns._replace(numbers=list(columns.numbers))


def parse_block_in_order(
    data: bytes, layout: OverviewLayout, rejected: dict[str, int], lowest: int = 1, highest: int = MAX_INT64
) -> tuple[OverviewColumns, bool]:
    """parse_block, and whether the block was clean with consecutive article numbers in order
    (False tells nothing: the numbers were not looked at that way). Consecutive numbers are given
    as a range: no int is made for a line that is not kept."""
    lowest, highest = max(lowest, 1), min(highest, MAX_INT64)
    if not data:
        return OverviewColumns([], [], [], [], [], []), False
    if _compiled is not None and type(data) is bytes and lowest <= highest:
        # The same fast path in C, in one pass, making no object for the fields not read. It gives
        # None when the block is not clean.
        found = _compiled.clean_columns(
            data,
            layout.subject,
            layout.poster,
            layout.date,
            layout.message_id,
            layout.bytes,
            layout.min_fields,
            lowest,
            highest,
            MAX_ARTICLE_BYTES,
            MAX_TEXT_BYTES,
            MAX_MESSAGE_ID_BYTES,
        )
        if found is not None:
            return OverviewColumns(*found[:6]), found[6]
    width = data[: data.find(b"\r\n")].count(b"\t") + 1
    used = (layout.subject, layout.poster, layout.date, layout.message_id, layout.bytes)
    if width >= layout.min_fields and width - 1 not in used and b"\0" not in data:
        marked = data.replace(b"\n", b"\n\t")
        fields = marked.split(b"\t")
        line_count, trailer = divmod(len(fields), width)
        # A field holds at most one CRLF, at its end, since each LF is now followed by a tab. So
        # when the lines' last fields hold as many CRLFs as there are lines, each ends with one.
        if (
            trailer == 1
            and not fields[-1]
            and len(marked) - len(data) == line_count
            and b"\t".join(fields[width - 1 :: width]).count(b"\r\n") == line_count
        ):
            end = line_count * width
            number_digits = fields[0:end:width]
            size_digits = fields[layout.bytes : end : width]
            message_ids = fields[layout.message_id : end : width]
            subjects, posters = fields[layout.subject : end : width], fields[layout.poster : end : width]
            if (
                all(map(bytes.isdigit, number_digits))
                and all(map(bytes.isdigit, size_digits))
                and all(message_ids)
                and max(map(len, message_ids)) <= MAX_MESSAGE_ID_BYTES
                and max(map(len, subjects)) <= MAX_TEXT_BYTES
                and max(map(len, posters)) <= MAX_TEXT_BYTES
            ):
                numbers, consecutive = _article_numbers(number_digits)
                sizes = _sizes(size_digits)
                low, high = (numbers[0], numbers[-1]) if consecutive else (min(numbers), max(numbers))
                if lowest <= low and high <= highest and max(sizes) <= MAX_ARTICLE_BYTES:
                    return OverviewColumns(
                        numbers, subjects, posters, fields[layout.date : end : width], message_ids, sizes
                    ), consecutive
    lines = data.split(b"\r\n")
    if not lines[-1]:
        lines.pop()
    return _parse_lines(lines, layout, rejected, lowest, highest), False


# An article's :bytes as written -> its value: sizes repeat (a poster's segments differ by a few
# bytes), and a look-up is cheaper than reading digits. One cache per process, bounded.
# It is cleared when it holds more than _SIZES_MAX at a miss, so it holds at most that plus one
# block's sizes. An entry takes about 100 bytes, so the cache takes about 2 MB when full.
_SIZES: dict[bytes, int] = {}
_SIZES_MAX = 20_000


def _sizes(digits: list[bytes]) -> list[int]:
    """int() of each (ASCII digits), through the cache."""
    try:
        return list(map(_SIZES.__getitem__, digits))
    except KeyError:  # sizes not seen yet: the block's are read through a dict of its own
        if len(_SIZES) > _SIZES_MAX:
            _SIZES.clear()
        known = {raw: int(raw) for raw in set(digits)}
        _SIZES.update(known)
        return list(map(known.__getitem__, digits))


def _article_numbers(digits: list[bytes]) -> tuple[list[int] | range, bool]:
    """The numbers of a block's lines (ASCII digits each), and whether they are consecutive. They
    nearly always are, which is proven without reading every one: digit strings of one length in
    strictly increasing order are increasing numbers, and as many as from the first to the last
    are all of those."""
    first, last = int(digits[0]), int(digits[-1])
    if (
        last - first == len(digits) - 1
        and len(set(map(len, digits))) == 1
        and all(map(lt, digits, islice(digits, 1, None)))
    ):
        return range(first, last + 1), True
    return list(map(int, digits)), False


def _parse_lines(
    lines: list[bytes], layout: OverviewLayout, rejected: dict[str, int], lowest: int, highest: int
) -> OverviewColumns:
    numbers: list[int] = []
    subjects: list[bytes] = []
    posters: list[bytes] = []
    dates: list[bytes] = []
    message_ids: list[bytes] = []
    sizes: list[int] = []
    columns = OverviewColumns(numbers, subjects, posters, dates, message_ids, sizes)
    for line in lines:
        fields = line.split(b"\t")
        if len(fields) >= layout.min_fields:
            number_digits, size_digits, message_id = fields[0], fields[layout.bytes], fields[layout.message_id]
            if (
                number_digits.isdigit()
                and size_digits.isdigit()
                and message_id
                and b"\0" not in line
                and len(message_id) <= MAX_MESSAGE_ID_BYTES
                and len(fields[layout.subject]) <= MAX_TEXT_BYTES
                and len(fields[layout.poster]) <= MAX_TEXT_BYTES
            ):
                number, size = int(number_digits), int(size_digits)
                if 0 < number <= MAX_INT64 and size <= MAX_ARTICLE_BYTES:
                    if not lowest <= number <= highest:
                        rejected["out_of_range"] += 1
                        continue
                    numbers.append(number)
                    subjects.append(fields[layout.subject])
                    posters.append(fields[layout.poster])
                    dates.append(fields[layout.date])
                    message_ids.append(message_id)
                    sizes.append(size)
                    continue
        rejected[_reject_reason(line, fields, layout)] += 1
    return columns


def _reject_reason(line: bytes, fields: list[bytes], layout: OverviewLayout) -> str:
    if b"\0" in line:
        return "nul_byte"
    if len(fields) < layout.min_fields:
        if len(line) >= MAX_KEPT_LINE:  # cut by the client: its last field is where it was cut
            cut = len(fields) - 1
            return {
                layout.subject: "subject_too_long",
                layout.poster: "poster_too_long",
                layout.message_id: "message_id_too_long",
            }.get(cut, "line_too_long")
        return "too_few_fields"
    if not fields[layout.message_id]:
        return "empty_message_id"
    number, size = fields[0], fields[layout.bytes]
    # (Digits only up to 19 and 10 of them: the largest number and size there are; int() of a
    # longer string would be refused or slow.)
    if (
        number.isdigit()
        and size.isdigit()
        and len(number) <= 19
        and len(size) <= 10
        and 0 < int(number) <= MAX_INT64
        and int(size) <= MAX_ARTICLE_BYTES
    ):
        if len(fields[layout.message_id]) > MAX_MESSAGE_ID_BYTES:
            return "message_id_too_long"
        if len(fields[layout.subject]) > MAX_TEXT_BYTES:
            return "subject_too_long"
        if len(fields[layout.poster]) > MAX_TEXT_BYTES:
            return "poster_too_long"
    return "bad_number"


def decode_text(raw: bytes) -> str:
    """Header bytes as text the way newsreaders show them: UTF-8, else Latin-1 (lossless)."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def parse_date(raw: bytes) -> int | None:
    """An RFC 5322 date (obsolete forms too) as unix seconds, or None when unreadable.
    A date without a zone is taken as UTC.

    Dates ending in `` HH:MM:SS +ZZZZ`` (nearly all) are read by hand: the time looked up in two
    tables, the day with its zone parsed once per distinct pair; anything else goes through the
    standard library's parser.
    """
    if len(raw) > 15:
        clock = raw[-15:]
        hours_minutes, seconds = _HOURS_MINUTES.get(clock[:7]), _SECONDS.get(clock[7:9])
        if hours_minutes is not None and seconds is not None and clock[9] == 32 and clock[10] in (43, 45):
            day = _zoned_day_start(raw[:-15], clock[10:])
            if day is not None:
                seconds += day + hours_minutes
                return seconds if 0 <= seconds <= MAX_INT64 else None
    return _parse_any_date(raw)


# b" HH:MM:" -> its seconds, b"SS" -> its value: any two digits, as the clock is read without
# checking its ranges (10,100 entries, about 1 MB)
_HOURS_MINUTES = {
    b" %02d:%02d:" % (hours, minutes): hours * 3600 + minutes * 60 for hours in range(100) for minutes in range(100)
}
_SECONDS = {b"%02d" % seconds: seconds for seconds in range(100)}


@lru_cache(maxsize=4096)
def _zoned_day_start(day: bytes, zone: bytes) -> int | None:
    """The unix seconds of the day's 00:00:00 in the zone (+ZZZZ or -ZZZZ), or None."""
    start = _day_start(day) if zone[1:].isdigit() else None
    if start is None:
        return None
    offset = int(zone[1:3]) * 3600 + int(zone[3:]) * 60
    return start - offset if zone[0] == 43 else start + offset


@lru_cache(maxsize=4096)
def _day_start(day: bytes) -> int | None:
    return _parse_any_date(day + b" 00:00:00 +0000")


@lru_cache(maxsize=4096)
def _parse_any_date(raw: bytes) -> int | None:
    try:
        parsed = email.utils.parsedate_tz(decode_text(raw))
        if parsed is None:
            return None
        seconds = calendar.timegm(parsed[:9]) - (parsed[9] or 0)
    except (IndexError, OverflowError, TypeError, ValueError):  # the stdlib parser is not total
        return None
    return seconds if 0 <= seconds <= MAX_INT64 else None


def clear_date_caches() -> None:
    """Forget the dates and sizes read so far (see edge.digest.gather.clear_caches)."""
    _zoned_day_start.cache_clear()
    _day_start.cache_clear()
    _parse_any_date.cache_clear()
    _SIZES.clear()
