"""One batch's digest: overview lines into files, files into releases, rules, the batch dict.

Speed comes from doing per-line work column by column in C (maps, zips, slices, dict look-ups
through ``map``) and everything else once per distinct file:

- the segment counter ``(p/P)`` is cut from each subject at its last ``(``; the tail from there
  is looked up in a cache of tails already read, so no regex runs per line;
- the poster and the subject's text around the counter are the file's dict key; a
  ``defaultdict`` numbering new keys gives every line its file number inside ``map``;
- the full subject parse (regexes, decoding) and the rules run once per file, and keys and
  dates only for the files kept; message-ids stay bytes until encoding.

Keys are stable: the same file or release gets the same signed 64-bit key on every node and in
every batch, so the coordinator merges what several batches, ranges or nodes saw of it.

    gatherer = Gatherer("alt.binaries.test", client.overview_layout(), rules)
    for first, last in chunks:
        gatherer.add_chunk(first, last, client.over(first, last))
    batch = gatherer.build()          # the dict of docs/batch-format.md
"""
from __future__ import annotations

import gc
from collections import Counter, defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from hashlib import blake2b
from itertools import compress, count, islice
from operator import itemgetter, lt
from typing import NamedTuple

from edge.overview import (
    DEFAULT_LAYOUT, OverviewColumns, OverviewLayout, decode_text, new_reject_counts, parse_block, parse_date,
)
from edge.rules import KEPT, RuleSet
from edge.subjects import ParsedSubject, file_subject, find_segment_counter, parse_pieces

BATCH_FORMAT_VERSION = 1

# The text after a subject's last "(" -> (part, parts, text after the counter), or False when it
# does not start with a counter "p/P)". Tails repeat across batches: one cache per process,
# cleared when it grows past the bound.
_COUNTER_TAILS: dict[bytes, tuple[int, int, bytes] | bool] = {}
_COUNTER_TAILS_MAX = 500_000


def stable_key(*parts: bytes) -> int:
    """A signed 64-bit key (fits PostgreSQL bigint) of length-prefixed canonical bytes."""
    canonical = b"".join([len(part).to_bytes(4, "big") + part for part in parts])
    return int.from_bytes(blake2b(canonical, digest_size=8).digest(), "big", signed=True)


def release_key(poster: bytes, release: str, file_count: int | None) -> int:
    """From the raw From header, the release name (case-folded) and the file count [i/N]."""
    count_text = b"" if file_count is None else str(file_count).encode()
    return stable_key(b"release", poster, release.casefold().encode(), count_text)


def file_key(release: int, identity: str) -> int:
    """From the release key and the file's name (or ``#i`` series position, or subject)."""
    return stable_key(b"file", release.to_bytes(8, "big", signed=True), identity.encode())


@contextmanager
def _collector_paused() -> Iterator[None]:
    """The digest makes millions of small objects and no reference cycles; the cyclic garbage
    collector's passes over them would cost a third of the time."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _counter_after_paren(tail: bytes) -> tuple[int, int, bytes] | bool:
    tail = b"(" + tail
    found = find_segment_counter(tail)
    if found and found[0] == 0:
        return found[2], found[3], tail[found[1]:]
    return False


def _counter_anywhere(subject: bytes) -> tuple[bytes, tuple[int, int, bytes]]:
    """(text before the counter, (part, parts, text after it)) when the last "(" of the subject
    does not start a counter; a subject without any counter is a one-article file."""
    found = find_segment_counter(subject)
    if found is None:
        return subject, (1, 1, b"")
    start, end, part, parts = found
    return subject[:start], (part, parts, subject[end:])


def _decode_pieces(before: bytes, after: bytes) -> tuple[str, str]:
    """Decoded like the whole subject would be (the counter between them is ASCII)."""
    if not after:
        return decode_text(before), ""
    try:
        return before.decode("utf-8"), after.decode("utf-8")
    except UnicodeDecodeError:
        return before.decode("latin-1"), after.decode("latin-1")


class FileView:
    """What operator rules look at in a file (see edge.rules.RuleFile), decoded when asked."""

    __slots__ = ("parsed", "before", "after", "poster_raw", "message_id_raw")

    def __init__(self, parsed: ParsedSubject, before: str, after: str, poster_raw: bytes, message_id_raw: bytes):
        self.parsed = parsed
        self.before, self.after = before, after  # the subject around its segment counter
        self.poster_raw = poster_raw
        self.message_id_raw = message_id_raw  # the first fragment's

    @property
    def filename(self) -> str | None:
        return self.parsed.filename

    @property
    def subject(self) -> str:
        return file_subject(self.before, self.after)

    @property
    def poster(self) -> str:
        return decode_text(self.poster_raw)

    @property
    def message_id(self) -> str:
        return decode_text(self.message_id_raw)


class _Files(NamedTuple):
    """Every file of the batch by file number, and the releases as lists of file numbers."""

    first_lines: list[int]
    parsed: list[ParsedSubject]
    pieces: list[tuple[str, str]]  # the subject before and after its segment counter, decoded
    releases: list[list[int]]


class Gatherer:
    """Collects a batch's chunks (in order, contiguous), then builds the batch."""

    def __init__(self, group: str, layout: OverviewLayout = DEFAULT_LAYOUT, rules: RuleSet | None = None):
        self.group = group
        self.layout = layout
        self.rules = rules if rules is not None else RuleSet()
        self.rejected = new_reject_counts()
        self.lines = 0
        self.chunks: list[list[int]] = []  # [from, to, lines, rejected]
        self.missing: list[list[int]] = []  # [from, to]
        # (poster, subject before the counter, subject after it) -> file number, in order seen
        self._file_numbers: defaultdict[tuple[bytes, bytes, bytes], int] = defaultdict(count().__next__)
        # every accepted line, column by column, in the order the lines came
        self._files: list[int] = []
        self._counters: list[tuple[int, int, bytes]] = []  # (part, parts, subject after the counter)
        self._befores: list[bytes] = []  # subject before the counter
        self._posters: list[bytes] = []
        self._dates: list[bytes] = []
        self._articles: list[int] = []
        self._sizes: list[int] = []
        self._message_ids: list[bytes] = []

    def add_chunk(self, first: int, last: int, blocks: Iterable[bytes]) -> None:
        """One OVER chunk ``first-last``: its CRLF-terminated lines, in blocks of any size (as
        NNTPClient.over yields them)."""
        if first > last:
            raise ValueError(f"empty chunk {first}-{last}")
        if self.chunks and first != self.chunks[-1][1] + 1:
            raise ValueError(f"chunk {first}-{last} does not follow {self.chunks[-1][0]}-{self.chunks[-1][1]}")
        if len(_COUNTER_TAILS) > _COUNTER_TAILS_MAX:
            _COUNTER_TAILS.clear()
        rejected_before = sum(self.rejected.values())
        accepted_before = len(self._articles)
        with _collector_paused():
            for block in blocks:
                self._add(parse_block(block, self.layout, self.rejected, first, last))
        rejected = sum(self.rejected.values()) - rejected_before
        lines = len(self._articles) - accepted_before + rejected
        self.lines += lines
        self.chunks.append([first, last, lines, rejected])
        self.missing.extend(_missing_runs(first, last, self._articles[accepted_before:]))

    def _add(self, columns: OverviewColumns) -> None:
        subjects = columns.subjects
        if not subjects:
            return
        pieces = [subject.rpartition(b"(") for subject in subjects]
        befores = list(map(itemgetter(0), pieces))
        tails = list(map(itemgetter(2), pieces))
        for tail in [tail for tail in set(tails) if tail not in _COUNTER_TAILS]:
            _COUNTER_TAILS[tail] = _counter_after_paren(tail)
        counters = list(map(_COUNTER_TAILS.__getitem__, tails))
        if False in counters or b"" in befores:  # no counter after the last "(", or no "(" at all
            for line, (before, paren, _) in enumerate(pieces):
                if counters[line] is False or not paren:
                    befores[line], counters[line] = _counter_anywhere(subjects[line])
        self._files.extend(map(self._file_numbers.__getitem__, zip(columns.posters, befores,
                                                                     map(itemgetter(2), counters))))
        self._counters.extend(counters)
        self._befores.extend(befores)
        self._posters.extend(columns.posters)
        self._dates.extend(columns.dates)
        self._articles.extend(columns.numbers)
        self._sizes.extend(columns.sizes)
        self._message_ids.extend(columns.message_ids)

    def build(self) -> dict:
        """The batch (docs/batch-format.md): kept files, fragments and releases, rule counts."""
        if not self.chunks:
            raise ValueError("a batch needs at least one chunk")
        with _collector_paused():
            files = self._gather()
            if self.rules.inspects(self.group):
                views = [FileView(parsed, before, after, self._posters[line], self._message_ids[line])
                         for parsed, (before, after), line in zip(files.parsed, files.pieces, files.first_lines)]
            else:  # only the executable rule: it needs nothing but the file names
                views = files.parsed
            decisions = self.rules.decide(self.group, [list(map(views.__getitem__, numbers))
                                                       for numbers in files.releases])
            counts = {name: [0, 0, 0, 0] for name in self.rules.names()}
            rule_of_file = [KEPT] * len(files.parsed)
            kept = []
            for numbers, verdicts in zip(files.releases, decisions):
                if len(verdicts) == 1:  # most releases: one file
                    counts[verdicts[0]][0] += 1
                    rule_of_file[numbers[0]] = verdicts[0]
                    if verdicts[0] == KEPT:
                        kept.append(numbers)
                    continue
                for rule in set(verdicts):
                    counts[rule][0] += 1
                for number, rule in zip(numbers, verdicts):
                    rule_of_file[number] = rule
                if KEPT in verdicts:
                    kept.append([number for number, rule in zip(numbers, verdicts) if rule == KEPT])
            for rule, files_settled in Counter(rule_of_file).items():
                counts[rule][1] = files_settled
            fragment_rules = list(map(rule_of_file.__getitem__, self._files))
            counts[KEPT][2:] = len(fragment_rules), sum(self._sizes)
            for rule, dropped in counts.items():
                if rule != KEPT and dropped[1]:  # what the rules dropped; the rest is kept
                    dropped[2] = fragment_rules.count(rule)
                    dropped[3] = sum(compress(self._sizes, map(rule.__eq__, fragment_rules)))
                    counts[KEPT][2] -= dropped[2]
                    counts[KEPT][3] -= dropped[3]
            tables, bad_dates = self._tables(files, kept, list(map(KEPT.__eq__, fragment_rules)))
            return {
                "version": BATCH_FORMAT_VERSION,
                "group": self.group,
                "first": self.chunks[0][0],
                "last": self.chunks[-1][1],
                "chunks": self.chunks,
                "missing": self.missing,
                **tables,
                "rules": counts,
                "stats": {"lines": self.lines, "rejected": dict(self.rejected), "bad_dates": bad_dates},
            }

    def _gather(self) -> _Files:
        """Every file parsed once, and put in its release (same poster, release name and file
        count); releases in order of first appearance."""
        first_of = dict(zip(reversed(self._files), range(len(self._files) - 1, -1, -1)))
        first_lines = list(map(first_of.__getitem__, range(len(self._file_numbers))))
        parsed_files, pieces = [], []
        releases: dict[tuple[bytes, str, int | None], list[int]] = {}
        for number, line in enumerate(first_lines):
            _, parts, after_raw = self._counters[line]
            before, after = _decode_pieces(self._befores[line], after_raw)
            parsed = parse_pieces(before, after, parts, parts)
            parsed_files.append(parsed)
            pieces.append((before, after))
            identity = (self._posters[line], parsed.release.casefold(), parsed.file_count)
            numbers = releases.get(identity)
            if numbers is None:
                releases[identity] = [number]
            else:
                numbers.append(number)
        return _Files(first_lines, parsed_files, pieces, list(releases.values()))

    def _tables(self, files: _Files, releases: list[list[int]], kept: list[bool]) -> tuple[dict, int]:
        """The kept releases (their kept file numbers), their files and fragments as the batch's
        column tables, and how many kept files had an unreadable date. Files with the same key
        (a file reposted under another subject) are one row."""
        file_keys: list[int | None] = [None] * len(files.parsed)
        release_keys: list[int | None] = [None] * len(files.parsed)
        last_lines = dict(zip(self._files, range(len(self._files))))
        file_table = {name: [] for name in ("key", "release", "name", "subject", "poster", "date", "index",
                                            "count", "parts")}
        release_table = {name: [] for name in ("key", "name", "poster", "file_count")}
        chunk_table = {name: [] for name in ("release", "files", "first_date", "last_date")}
        bad_dates = 0
        for numbers in releases:
            first = files.parsed[numbers[0]]
            poster_raw = self._posters[files.first_lines[numbers[0]]]
            rkey = release_key(poster_raw, first.release, first.file_count)
            poster = decode_text(poster_raw)
            rows: dict[int, list] = {}
            for number in numbers:
                parsed, line = files.parsed[number], files.first_lines[number]
                subject = file_subject(*files.pieces[number])
                identity = parsed.filename or (f"#{parsed.file_index}" if parsed.file_index is not None else subject)
                key = file_keys[number] = file_key(rkey, identity)
                release_keys[number] = rkey
                first_raw, last_raw = self._dates[line], self._dates[last_lines[number]]
                date = parse_date(first_raw)
                last_date = date if last_raw == first_raw else parse_date(last_raw)
                bad_dates += date is None
                row = rows.get(key)
                if row is None:
                    rows[key] = [key, rkey, parsed.filename, subject, poster, date, parsed.file_index,
                                 parsed.file_count, self._counters[line][1], last_date]
                else:
                    row[5], row[9] = _earliest(row[5], date), _latest(row[9], last_date)
            for row in rows.values():
                for column, value in zip(file_table.values(), row):
                    column.append(value)
            for column, value in zip(release_table.values(), (rkey, first.release, poster, first.file_count)):
                column.append(value)
            for column, value in zip(chunk_table.values(), (
                rkey, len(rows), _earliest_of(row[5] for row in rows.values()),
                _latest_of(row[9] for row in rows.values()),
            )):
                column.append(value)
        sizes = list(compress(self._sizes, kept))
        fragment_releases = list(compress(map(release_keys.__getitem__, self._files), kept))
        release_fragments = Counter(fragment_releases)
        release_bytes = dict.fromkeys(release_fragments, 0)
        for rkey, size in zip(fragment_releases, sizes):
            release_bytes[rkey] += size
        tables = {
            "files": file_table,
            "fragments": {
                "file": list(compress(map(file_keys.__getitem__, self._files), kept)),
                "part": list(compress(map(itemgetter(0), self._counters), kept)),
                "article": list(compress(self._articles, kept)),
                "bytes": sizes,
                "message_id": _as_utf8(list(compress(self._message_ids, kept))),
            },
            "releases": release_table,
            "release_chunks": {
                "release": chunk_table["release"],
                "files": chunk_table["files"],
                "fragments": list(map(release_fragments.__getitem__, chunk_table["release"])),
                "bytes": list(map(release_bytes.__getitem__, chunk_table["release"])),
                "first_date": chunk_table["first_date"],
                "last_date": chunk_table["last_date"],
            },
        }
        return tables, bad_dates


def _earliest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _latest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _earliest_of(dates: Iterable[int | None]) -> int | None:
    return min((date for date in dates if date is not None), default=None)


def _latest_of(dates: Iterable[int | None]) -> int | None:
    return max((date for date in dates if date is not None), default=None)


def _missing_runs(first: int, last: int, numbers: list[int]) -> list[list[int]]:
    """Runs [from, to] of the numbers in first..last that no accepted line had."""
    if (len(numbers) == last - first + 1 and numbers[0] == first and numbers[-1] == last
            and all(map(lt, numbers, islice(numbers, 1, None)))):
        return []  # the usual complete chunk, in order
    runs = []
    expected = first
    for number in sorted(set(numbers)):
        if number > expected:
            runs.append([expected, number - 1])
        expected = number + 1
    if expected <= last:
        runs.append([expected, last])
    return runs


def _as_utf8(values: list[bytes]) -> list[bytes]:
    """Message-ids stay bytes until encoding (edge.batch writes them as strings); the rare one
    that is not ASCII is made valid UTF-8 the way decode_text reads it."""
    if all(map(bytes.isascii, values)):
        return values
    return [value if value.isascii() else decode_text(value).encode() for value in values]
