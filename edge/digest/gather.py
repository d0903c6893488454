"""One batch's digest: overview lines into files, files into releases, rules, the batch dict.

Speed comes from doing per-line work column by column in C (maps, zips, slices, dict look-ups
through ``map``) or in one plain loop of list operations, and everything else once per file,
itself column by column where it can:

- the segment counter ``(p/P)`` is cut from each subject at its last ``(``; the tail from there
  is looked up in a cache of tails already read, so no regex runs per line;
- the poster and the subject's text around the counter are the file's dict key; a
  ``defaultdict`` numbering new keys gives every line its file number inside ``map``; one loop
  adds each line to its file (articles, bytes, first and last Date);
- a file is read when it first comes (its objects are still in the processor's cache then): its
  subject is decoded and parsed (regexes) once per process, in a bounded cache, since floods
  repost the same names; a ``defaultdict`` numbering (poster, release identity) gives it its
  release number;
- without operator rules, the executable rule is set arithmetic over the files' columns; the
  rules' counts add up the files' articles and bytes;
- keys, dates and table rows are made only for the files kept; message-ids stay bytes until
  encoding.

Keys are stable: the same file or release gets the same signed 64-bit key on every node and in
every batch, so the coordinator merges what several batches, ranges or nodes saw of it.

    gatherer = Gatherer("alt.binaries.test", client.overview_layout(), rules)
    for first, last in chunks:
        gatherer.add_chunk(first, last, client.over(first, last))
    batch = gatherer.build()          # the dict of docs/batch-format.md
"""

from __future__ import annotations

import builtins
import gc
import threading
from collections import Counter, defaultdict, deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from hashlib import blake2b
from struct import Struct
from itertools import chain, compress, count, islice, repeat
from operator import itemgetter, lt, not_
from typing import TYPE_CHECKING, Any, NamedTuple, TypeVar, cast

from edge.digest.compiled import load
from edge.digest.overview import (
    DEFAULT_LAYOUT,
    OverviewColumns,
    OverviewLayout,
    clear_date_caches,
    decode_text,
    new_reject_counts,
    _zoned_day_start,
    parse_block_in_order,
    parse_date,
)
from edge.digest.namecolumns import read as read_name_columns
from edge.digest.namecolumns import release_names
from edge.digest.rules import EXECUTABLE_RULE, KEPT, RuleSet, bare_executable_releases, clear_rule_caches, file_kind
from edge.digest.subjects import ParsedSubject, clear_subject_caches, file_subject, find_segment_counter, parse_pieces

if TYPE_CHECKING:
    from edge.digest.batch import Batch, BatchTables, FilesTable, ReleaseChunksTable, ReleasesTable, RuleCounts

# edge/digest/_overview.c does Gatherer._numbered, the loop of Gatherer._add and _file_rows in C.
# Where it is not built, these names are None and the Python versions run.
_compiled = load("edge.digest._overview")
_add_to_files = _compiled.add_to_files if _compiled is not None else None
_compiled_file_rows = _compiled.file_rows if _compiled is not None else None
_number_lines = _compiled.number_lines if _compiled is not None else None

BATCH_FORMAT_VERSION = 1

# The per-process caches are bounded, so that a process's memory does not grow with the data it
# has seen: when one holds more than its bound at the start of a block, its oldest half (in the
# order entries were put in) is dropped (_trim). It then holds at most its bound plus what one
# block adds (at most one entry per line of the block: ~1,000 lines for the NNTP client's
# 256 KiB blocks). Entries are only ever read values, so dropping them changes no result.

# The text after a subject's last "(" -> (part, parts, text after the counter), or False when it
# does not start with a counter "p/P)". Tails repeat across batches (a batch of 200,000 lines has
# some 12,000). An entry takes about 230 bytes, so the cache takes about 12 MB when full.
_COUNTER_TAILS: dict[bytes, tuple[int, int, bytes] | bool] = {}
_COUNTER_TAILS_MAX = 50_000

# A file's subject around its segment counter -> _Subject: the raw bytes before the counter when
# nothing follows the counter (nearly always), else (before, after). Floods repost the same
# names batch after batch. An entry takes about 1,000 bytes, so the cache takes about 40 MB when
# full (a batch of 200,000 lines has some 12,000 distinct subjects; of the e-book group, some
# 30,000).
_SUBJECTS: dict[bytes | tuple[bytes, bytes], _Subject] = {}
_SUBJECTS_MAX = 40_000

# What a file's subject says, read once (the same for every file with that subject), as a plain
# tuple (cheaper to make than a named one):
# (ParsedSubject (its part and parts are None: they are the file's, not the subject's),
#  the release identity beside the poster (release name case-folded, file count),
#  edge.digest.rules.file_kind of the file name,
#  the subject's text before the segment counter and after it, decoded once: operator rules read it,
#  the file's subject as the kept files' rows show it (file_subject),
#  the file's identity in its key, as file_key hashes it after the release: its length, then its
#  UTF-8 bytes (the file name, else "#i" of its series position, else the subject)).
_Subject = tuple[ParsedSubject, tuple[str, int | None], int, str, str, str, bytes]
_RELEASE_IDENTITY, _KIND = 1, 2

# A kept file's row as the batch's files table has it, then the date of its last article:
# [key, release, name, subject, poster, date, index, count, parts, last date] (a list, its items of
# those types by position, as edge/digest/_overview.c's file_rows makes it too).
_FileRow = list[Any]

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


def clear_caches() -> None:
    """Forget the digest's per-process caches (counter tails, subjects, name suffixes, dates): a
    cold start, as in a new process."""
    _COUNTER_TAILS.clear()
    _SUBJECTS.clear()
    clear_subject_caches()
    clear_rule_caches()
    clear_date_caches()
    read_name_columns.cache_clear()


def stable_key(*parts: bytes) -> int:
    """A signed 64-bit key (fits PostgreSQL bigint) of length-prefixed canonical bytes."""
    canonical = b"".join([len(part).to_bytes(4, "big") + part for part in parts])
    return int.from_bytes(blake2b(canonical, digest_size=8).digest(), "big", signed=True)


def release_key(poster: bytes, release: str, file_count: int | None) -> int:
    """From the raw From header, the release name (case-folded) and the file count [i/N]."""
    return _release_key(poster, release.casefold(), file_count)


def _release_key(poster: bytes, folded_release: str, file_count: int | None) -> int:
    count_text = b"" if file_count is None else str(file_count).encode()
    return stable_key(b"release", poster, folded_release.encode(), count_text)


# A key's 8 digest bytes read as PostgreSQL's signed bigint.
_INT64 = Struct(">q").unpack
_FILE_KEY_PREFIX = len(b"file").to_bytes(4, "big") + b"file" + (8).to_bytes(4, "big")  # then the release key


def file_key(release: int, identity: str) -> int:
    """From the release key and the file's name (or ``#i`` series position, or subject)."""
    return stable_key(b"file", release.to_bytes(8, "big", signed=True), identity.encode())


def _trim(cache: dict[_K, _V], bound: int) -> None:
    """Drops the oldest entries of a cache holding more than bound, down to half of it."""
    if len(cache) > bound:
        # list(cache) makes the dict's iterator and runs it out within one C call, so no other
        # thread changes the dict meanwhile. list(islice(cache, n)) would not be safe: islice makes
        # the iterator in one call and list runs it in another, and the interpreter may switch
        # threads between the two, so another digest thread's insert would break the iteration.
        # Another thread may drop the same keys after this one, hence pop with a default.
        keys = list(cache)
        for key in keys[: len(keys) - bound // 2]:
            cache.pop(key, None)


# The cyclic garbage collector and the digest. The digest makes millions of small objects and no
# reference cycles; the collector, left on, would scan its big lists again and again (a sixth of
# the time). So each block is read, and each batch built, with the collector paused; when the
# last digest in the process leaves its pause, what was made meanwhile is moved to the oldest
# generation (gc.freeze then gc.unfreeze: no pass over the objects) instead of being scanned by
# the next young collections.
#
# Both are process-wide, which the rest of the process must be able to live with:
# - pauses never include waiting: blocks are pulled from the network outside them, so the
#   other threads (NNTP connections, coordinator calls) are only held off collecting for the
#   CPU time of one block (a few ms) or one build;
# - pauses of several threads nest: a counter under a lock, the first in pauses, the last out
#   resumes (and only if the collector was on when the first came in);
# - a program that froze objects itself (gc.freeze before forking) keeps them frozen: then the
#   young collections do the scan instead;
# - the move also takes the other threads' young objects to the oldest generation, where a cycle
#   among them waits for a full collection, and full collections are triggered by objects that
#   age through the young generations, which the moved ones skip: so once the digests have moved
#   objects for _FULL_COLLECTION_LINES lines (25 s of a node digesting 200,000 lines/s, longer
#   when the provider is slower), a full collection runs when the next batch starts (no batch in
#   memory then), as the collector would have on its own. That bounds how long garbage of other
#   threads can wait, for about 0.5% of the digest's time (a pass over the caches: 30-80 ms).
_pause_lock = threading.Lock()
_pauses = 0  # digests in a pause, all threads
_resume = False  # whether the collector is to run again when the last pause ends
_lines_moved = 0  # lines digested since the last full collection, while objects were moved
_FULL_COLLECTION_LINES = 5_000_000


@contextmanager
def _collector_paused() -> Iterator[None]:
    global _pauses, _resume
    paused = False
    try:
        with _pause_lock:
            if not _pauses:
                _resume = gc.isenabled()
                gc.disable()
            _pauses += 1
            paused = True
        yield
    finally:
        if paused:
            with _pause_lock:
                _pauses -= 1
                if not _pauses and _resume:
                    if not gc.get_freeze_count():
                        gc.freeze()
                        gc.unfreeze()
                    gc.enable()


def _collector_on() -> bool:
    """Whether the collector runs, but for the digests' pauses (with _pause_lock held): while
    another thread's digest is in a pause, gc.isenabled() says False."""
    return _resume if _pauses else gc.isenabled()


def _count_moved(lines: int) -> None:
    """Counts the lines of a batch built while objects were being moved (see above)."""
    global _lines_moved
    with _pause_lock:
        if _collector_on() and not gc.get_freeze_count():
            _lines_moved += lines


def _collect_if_due() -> None:
    """The full collection, once the digests have moved objects for enough lines."""
    global _lines_moved
    with _pause_lock:
        due = _lines_moved >= _FULL_COLLECTION_LINES and _collector_on()
        if due:
            _lines_moved = 0
    if due:
        gc.collect()  # also while another thread's digest has the collector paused


def _counter_after_paren(tail: bytes) -> tuple[int, int, bytes] | bool:
    part, _, rest = tail.partition(b"/")
    parts, closing, after = rest.partition(b")")
    if closing and 0 < len(part) <= 9 and 0 < len(parts) <= 9 and part.isdigit() and parts.isdigit():
        if b'"' in after:  # a counter in front of the quoted name counts files (find_segment_counter)
            return False
        return int(part), int(parts), after  # "p/P)...", what the counter's regex reads, without it
    tail = b"(" + tail
    found = find_segment_counter(tail)
    if found and found[0] == 0:
        return found[2], found[3], tail[found[1] :]
    return False


def _decoded(before_raw: bytes, after_raw: bytes = b"") -> tuple[str, str]:
    """The subject before its segment counter and after it, decoded."""
    if before_raw.isascii() and after_raw.isascii():  # nearly always: no decoding to try
        return before_raw.decode("ascii"), after_raw.decode("ascii")
    return _decode_pieces(before_raw, after_raw)


def _read_piece(piece: bytes | tuple[bytes, bytes]) -> _Subject:
    """What a _SUBJECTS key says (see _Subject)."""
    if isinstance(piece, tuple):
        before, after = _decoded(*piece)
    else:  # nothing after the counter (nearly always)
        before, after = piece.decode("ascii") if piece.isascii() else decode_text(piece), ""
    parsed = parse_pieces(before, after, None, None)
    subject = file_subject(before, after)
    identity = (parsed.filename or (f"#{parsed.file_index}" if parsed.file_index is not None else subject)).encode()
    return (
        parsed,
        (parsed.release.casefold(), parsed.file_count),
        file_kind(parsed.filename),
        before,
        after,
        subject,
        len(identity).to_bytes(4, "big") + identity,
    )


def _looked_up(cache: dict[_K, _V], keys: list[_K], read: Callable[[_K], _V]) -> list[_V]:
    """cache[key] for each key, all read into the cache just before. Should another thread have
    emptied the cache meanwhile, the missing ones are read again, through a dict of its own."""
    try:
        return list(map(cache.__getitem__, keys))
    except KeyError:
        known: dict[_K, _V] = {}
        for key in set(keys):
            try:
                known[key] = cache[key]
            except KeyError:
                known[key] = read(key)
        return list(map(known.__getitem__, keys))


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
    """What operator rules look at in a file (see edge.digest.rules.RuleFile), decoded when asked."""

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
    """Every file of the batch by file number, column by column, and their releases."""

    posters: list[bytes]  # the raw From header
    subjects: list[_Subject]
    release_of_file: list[int]  # release number: releases are numbered in order of their first file
    releases: int  # how many releases there are
    fragments: list[int]  # each file's lines (its articles)
    bytes: list[int]  # each file's bytes
    first_lines: list[int]  # the line each file first came in
    # (builtins.bytes: the field `bytes` above hides the type in the class body)
    first_dates: list[builtins.bytes]  # the raw Date of each file's first line
    last_dates: list[builtins.bytes]  # the raw Date of each file's last line


def _without_repeats(columns: OverviewColumns, seen: set[int], rejected: dict[str, int]) -> OverviewColumns:
    """The lines whose number has not come before in the chunk (``seen``, updated); each other
    one is counted as rejected ``repeated_number``."""
    keep = []
    for number in columns.numbers:
        keep.append(number not in seen)
        seen.add(number)
    repeats = keep.count(False)
    if not repeats:
        return columns
    rejected["repeated_number"] += repeats
    numbers, subjects, posters, dates, message_ids, sizes = columns
    return OverviewColumns(
        list(compress(numbers, keep)),
        list(compress(subjects, keep)),
        list(compress(posters, keep)),
        list(compress(dates, keep)),
        list(compress(message_ids, keep)),
        list(compress(sizes, keep)),
    )


class Gatherer:
    """Collects a batch's chunks (in order, contiguous), then builds the batch."""

    def __init__(self, group: str, layout: OverviewLayout = DEFAULT_LAYOUT, rules: RuleSet | None = None):
        _collect_if_due()  # before this batch's objects are made
        self.group = group
        self.layout = layout
        self.rules = rules if rules is not None else RuleSet()
        self.rejected = new_reject_counts()
        self.lines = 0
        self.chunks: list[list[int]] = []  # each chunk as [from, to, lines, rejected]
        self.missing: list[list[int]] = []  # each run of missing numbers as [from, to]
        # (poster, subject before the counter, subject after it) -> file number, in order seen
        self._file_numbers: defaultdict[tuple[bytes, bytes, bytes], int] = defaultdict(count().__next__)
        # (poster, release identity of the subject) -> release number, in order seen
        self._release_numbers: defaultdict[tuple[bytes, tuple[str, int | None]], int] = defaultdict(count().__next__)
        # every accepted line, column by column, in the order the lines came
        self._files: list[int] = []
        self._counters: list[tuple[int, int, bytes]] = []  # (part, parts, subject after the counter)
        # the article numbers, one list per block (a range when they are consecutive)
        self._articles: list[list[int] | range] = []
        self._accepted = 0  # lines accepted so far
        self._sizes: list[int] = []
        self._message_ids: list[bytes] = []
        # Whether every message-id is ASCII. It nearly always is, and then the build needs no UTF-8 check.
        self._ascii_ids = True
        # every file by file number, column by column, made as the lines come (their objects are
        # still in the processor's cache then)
        self._by_file = _Files([], [], [], 0, [], [], [], [], [])

    def add_chunk(self, first: int, last: int, blocks: Iterable[bytes]) -> int:
        """One OVER chunk ``first-last``: its CRLF-terminated lines, in blocks of any size (as
        NNTPClient.over yields them). Returns how many lines it had (accepted and rejected)."""
        if first > last:
            raise ValueError(f"empty chunk {first}-{last}")
        if self.chunks and first != self.chunks[-1][1] + 1:
            raise ValueError(f"chunk {first}-{last} does not follow {self.chunks[-1][0]}-{self.chunks[-1][1]}")
        rejected_before = sum(self.rejected.values())
        accepted_before, blocks_before = self._accepted, len(self._articles)
        # the next number expected while the blocks' numbers run on from the chunk's first (0 once
        # they do not)
        following = first
        highest = first - 1  # the highest number so far in the chunk
        seen: set[int] | None = None  # the chunk's numbers, once one may come twice
        # Blocks are pulled outside the collector's pause, because the next one may still be on its
        # way from the network.
        for block in blocks:
            with _collector_paused():
                columns, in_order = parse_block_in_order(block, self.layout, self.rejected, first, last)
                if self._ascii_ids and not block.isascii():  # a fast scan of the whole block
                    self._ascii_ids = all(map(bytes.isascii, columns.message_ids))
                numbers = columns.numbers
                if following and numbers:
                    following = numbers[-1] + 1 if in_order and numbers[0] == following else 0
                # A server that lists an article twice (a broken one): the line is kept once.
                # Numbers that rise from block to block, as OVER gives them, cannot repeat.
                if numbers and (
                    seen is not None
                    or numbers[0] <= highest
                    or not (in_order or all(map(lt, numbers, islice(numbers, 1, None))))
                ):
                    if seen is None:
                        seen = set(chain.from_iterable(self._articles[blocks_before:]))
                    columns = _without_repeats(columns, seen, self.rejected)
                    numbers = columns.numbers
                if numbers:
                    highest = max(highest, numbers[-1] if seen is None else max(numbers))
                self._add(columns)
                del columns  # freed inside the pause
        rejected = sum(self.rejected.values()) - rejected_before
        lines = self._accepted - accepted_before + rejected
        self.lines += lines
        self.chunks.append([first, last, lines, rejected])
        # Unless every number first..last came, in order, the missing runs are looked for.
        if following != last + 1:
            self.missing.extend(_missing_runs(first, last, list(chain.from_iterable(self._articles[blocks_before:]))))
        return lines

    def _add(self, columns: OverviewColumns) -> None:
        subjects = columns.subjects
        if not subjects:
            return
        if len(_COUNTER_TAILS) > _COUNTER_TAILS_MAX:
            _trim(_COUNTER_TAILS, _COUNTER_TAILS_MAX)
        found = None
        if _number_lines is not None and type(subjects) is list and type(columns.posters) is list:
            # The same numbering in C, without the pieces. It gives None when a line has no counter
            # after its last "("; the Python numbering then does the block.
            found = _number_lines(subjects, columns.posters, _COUNTER_TAILS, _counter_after_paren, self._file_numbers)
        numbers, counters = found if found is not None else self._numbered(columns)
        files = self._by_file
        new = len(self._file_numbers) - len(files.subjects)
        if new:
            self._add_files(new)
        offset = len(self._files)
        self._files.extend(numbers)
        self._counters.extend(counters)
        self._articles.append(columns.numbers)
        self._accepted += len(subjects)
        self._sizes.extend(columns.sizes)
        self._message_ids.extend(columns.message_ids)
        fragments, sizes, first_lines, first_dates, last_dates = files[4:]
        if (
            _add_to_files is None
            or _add_to_files(numbers, columns.sizes, columns.dates, fragments, sizes, last_dates) is None
        ):
            for file, size, date in zip(numbers, columns.sizes, columns.dates):
                fragments[file] += 1
                sizes[file] += size
                last_dates[file] = date
        if new:  # file numbers are given in order of first appearance: each new one comes later
            dates, line = columns.dates, -1
            for file in range(len(first_lines), len(first_lines) + new):
                line = numbers.index(file, line + 1)
                first_lines.append(offset + line)
                first_dates.append(dates[line])

    def _numbered(self, columns: OverviewColumns) -> tuple[list[int], list[tuple[int, int, bytes]]]:
        """Each line's file number and segment counter (part, parts, subject after it)."""
        subjects = columns.subjects
        pieces = list(map(bytes.rpartition, subjects, repeat(b"(")))
        befores = list(map(itemgetter(0), pieces))
        tails = list(map(itemgetter(2), pieces))
        counters: list[tuple[int, int, bytes] | bool]
        try:
            counters = list(map(_COUNTER_TAILS.__getitem__, tails))
        except KeyError:  # tails not read yet: few once the cache is warm
            for tail in set(tails).difference(_COUNTER_TAILS):
                _COUNTER_TAILS[tail] = _counter_after_paren(tail)
            counters = _looked_up(_COUNTER_TAILS, tails, _counter_after_paren)
        # False means no counter after the last "("; an empty text before the counter may also
        # mean that the subject has no "(" at all.
        if not all(counters) or not all(befores):
            for line, (_, paren, _) in enumerate(pieces):
                if counters[line] is False or not paren:
                    befores[line], counters[line] = _counter_anywhere(subjects[line])
        found = cast("list[tuple[int, int, bytes]]", counters)  # no False is left: each one was replaced just above
        numbers = list(map(self._file_numbers.__getitem__, zip(columns.posters, befores, map(itemgetter(2), found))))
        return numbers, found

    def _add_files(self, new: int) -> None:
        """The files first seen in the block just read: their subjects read (once per process)
        and each put in its release (same poster, release name case-folded and file count)."""
        keys = list(islice(reversed(self._file_numbers), new))
        keys.reverse()
        posters = list(map(itemgetter(0), keys))
        if any(map(itemgetter(2), keys)):
            pieces = [before if not after else (before, after) for _, before, after in keys]
        else:
            pieces = list(map(itemgetter(1), keys))
        if len(_SUBJECTS) > _SUBJECTS_MAX:
            _trim(_SUBJECTS, _SUBJECTS_MAX)
        for piece in set(pieces).difference(_SUBJECTS):
            _SUBJECTS[piece] = _read_piece(piece)
        subjects = _looked_up(_SUBJECTS, pieces, _read_piece)
        files = self._by_file
        files.posters.extend(posters)
        files.subjects.extend(subjects)
        files.release_of_file.extend(
            map(self._release_numbers.__getitem__, zip(posters, map(itemgetter(_RELEASE_IDENTITY), subjects)))
        )
        files.fragments.extend(repeat(0, new))
        files.bytes.extend(repeat(0, new))
        files.last_dates.extend(repeat(b"", new))

    def build(self) -> Batch:
        """The batch (docs/batch-format.md): kept files, fragments and releases, rule counts."""
        if not self.chunks:
            raise ValueError("a batch needs at least one chunk")
        with _collector_paused():
            batch = self._build()  # its temporaries are gone before the collector runs again
        _count_moved(self.lines)
        return batch

    def _build(self) -> Batch:
        files = self._by_file._replace(releases=len(self._release_numbers))
        counts: dict[str, RuleCounts] = {name: [0, 0, 0, 0] for name in self.rules.names()}
        if self.rules.inspects(self.group):
            rule_of_file, kept = self._decide(files, counts)
        else:
            rule_of_file, kept = self._decide_executable(files, counts)
        for rule, files_settled in Counter(rule_of_file).items():
            counts[rule][1] = files_settled
        counts[KEPT][2:] = len(self._files), sum(files.bytes)
        for rule, dropped in counts.items():
            if rule != KEPT and dropped[1]:  # what the rules dropped; the rest is kept
                settled = list(map(rule.__eq__, rule_of_file))
                dropped[2] = sum(compress(files.fragments, settled))
                dropped[3] = sum(compress(files.bytes, settled))
                counts[KEPT][2] -= dropped[2]
                counts[KEPT][3] -= dropped[3]
        file_kept = list(map(KEPT.__eq__, rule_of_file))
        tables, bad_dates = self._tables(files, kept, list(map(file_kept.__getitem__, self._files)))
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
            "release_names": release_names(tables["releases"]["name"], self.group),
        }

    def _decide_executable(self, files: _Files, counts: dict[str, list[int]]) -> tuple[list[str], list[list[int]]]:
        """No operator rule: the executable rule drops whole releases (RuleSet.decide, column by
        column). The rule of each file, and the kept releases as lists of file numbers."""
        bare = (
            bare_executable_releases(files.release_of_file, list(map(itemgetter(_KIND), files.subjects)))
            if self.rules.executable
            else set()
        )
        dropped = list(map(bare.__contains__, files.release_of_file))
        counts[KEPT][0] = files.releases - len(bare)
        if bare:
            counts[EXECUTABLE_RULE][0] = len(bare)
        kept: defaultdict[int, list[int]] = defaultdict(list)
        stays = list(map(not_, dropped))
        deque(
            map(
                list.append,
                map(kept.__getitem__, compress(files.release_of_file, stays)),
                compress(range(len(dropped)), stays),
            ),
            0,
        )
        return list(map((KEPT, EXECUTABLE_RULE).__getitem__, dropped)), list(kept.values())

    def _decide(self, files: _Files, counts: dict[str, list[int]]) -> tuple[list[str], list[list[int]]]:
        """Operator rules apply: RuleSet.decide on every release's files."""
        releases: list[list[int]] = [[] for _ in range(files.releases)]
        for number, release in enumerate(files.release_of_file):
            releases[release].append(number)
        views = [
            FileView(parsed, before, after, poster, self._message_ids[line])
            for (parsed, _, _, before, after, _, _), poster, line in zip(
                files.subjects, files.posters, files.first_lines
            )
        ]
        decisions = self.rules.decide(self.group, [list(map(views.__getitem__, numbers)) for numbers in releases])
        rule_of_file = [KEPT] * len(files.subjects)
        kept = []
        for numbers, verdicts in zip(releases, decisions):
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
        return rule_of_file, kept

    def _tables(self, files: _Files, releases: list[list[int]], kept: list[bool]) -> tuple[BatchTables, int]:
        """The kept releases (their kept file numbers), their files and fragments as the batch's
        column tables, and how many kept files had an unreadable date. Files with the same key
        (a file reposted under another subject) are one row."""
        file_keys: list[int | None] = [None] * len(files.subjects)
        subjects, posters = files.subjects, files.posters
        file_rows: list[_FileRow] = []
        release_rows: list[tuple[int, str, str, int | None]] = []
        chunk_rows: list[tuple[int, int, int, int, int | None, int | None]] = []
        bad_dates = 0
        columns = (subjects, files.first_dates, files.last_dates, self._counters, files.first_lines)
        for numbers in releases:
            first, (folded_release, _) = subjects[numbers[0]][:2]
            poster_raw = posters[numbers[0]]
            rkey = _release_key(poster_raw, folded_release, first.file_count)
            key_prefix = _FILE_KEY_PREFIX + rkey.to_bytes(8, "big", signed=True)  # file_key's bytes
            poster = decode_text(poster_raw)
            keys = _file_keys(numbers, subjects, key_prefix)
            found = None
            if _compiled_file_rows is not None:
                found = _compiled_file_rows(
                    numbers, keys, *columns, rkey, poster, file_keys, parse_date, _zoned_day_start
                )
            rows, earliest, latest, bad = found or _file_rows(numbers, keys, *columns, rkey, poster, file_keys)
            bad_dates += bad
            file_rows.extend(rows)
            release_rows.append((rkey, first.release, poster, first.file_count))
            chunk_rows.append(
                (
                    rkey,
                    len(rows),
                    sum(map(files.fragments.__getitem__, numbers)),
                    sum(map(files.bytes.__getitem__, numbers)),
                    earliest,
                    latest,
                )
            )
        # In key order: the data center stores new files and releases in that order (two workers
        # sharing some then wait on each other in one order), and needs only check it then.
        file_rows.sort(key=itemgetter(0))
        release_rows.sort(key=itemgetter(0))
        chunk_rows.sort(key=itemgetter(0))
        # The columns named are those of the tables' types (edge.digest.batch), in the rows' order.
        file_table = cast(
            "FilesTable",
            _column_table(
                ("key", "release", "name", "subject", "poster", "date", "index", "count", "parts"), file_rows
            ),
        )
        release_table = cast("ReleasesTable", _column_table(("key", "name", "poster", "file_count"), release_rows))
        chunk_table = cast(
            "ReleaseChunksTable",
            _column_table(("release", "files", "fragments", "bytes", "first_date", "last_date"), chunk_rows),
        )
        message_ids = list(compress(self._message_ids, kept))
        tables: BatchTables = {
            "files": file_table,
            "fragments": {
                # (every kept file's key was set by its release's file rows)
                "file": cast("list[int]", list(map(file_keys.__getitem__, compress(self._files, kept)))),
                "part": list(map(itemgetter(0), compress(self._counters, kept))),
                "article": list(compress(chain.from_iterable(self._articles), kept)),
                "bytes": list(compress(self._sizes, kept)),
                "message_id": message_ids if self._ascii_ids else _as_utf8(message_ids),
            },
            "releases": release_table,
            "release_chunks": chunk_table,
        }
        return tables, bad_dates


def _file_keys(numbers: list[int], subjects: list[_Subject], key_prefix: bytes) -> list[int]:
    """The keys of one kept release's files (file_key's: the release's key prefix, then each
    file's identity, hashed)."""
    if len(numbers) == 1:
        return [_INT64(blake2b(key_prefix + subjects[numbers[0]][6], digest_size=8).digest())[0]]
    # The prefix is hashed once and the hash's state copied for each file: the same digests as
    # hashing prefix + identity anew, at about half the cost, which counts where a new file
    # starts every few lines (e-book groups).
    copy = blake2b(key_prefix, digest_size=8).copy
    keys = []
    for number in numbers:
        hashed = copy()
        hashed.update(subjects[number][6])
        keys.append(_INT64(hashed.digest())[0])
    return keys


def _file_rows(
    numbers: list[int],
    keys: list[int],
    subjects: list[_Subject],
    first_dates: list[bytes],
    last_dates: list[bytes],
    counters: list[tuple[int, int, bytes]],
    first_lines: list[int],
    rkey: int,
    poster: str,
    file_keys: list[int | None],
) -> tuple[list[_FileRow], int | None, int | None, int]:
    """One kept release's file rows (files with the same key, a file reposted under another
    subject, are one row), its earliest and latest dates (those of its rows are among them), and
    how many of its files had an unreadable date; each file's key (keys, in the order of numbers)
    goes in file_keys. In C where it is built (edge/digest/_overview.c file_rows: the same, given
    parse_date and its day look-up)."""
    rows: dict[int, _FileRow] = {}
    earliest = latest = None
    bad_dates = 0
    for number, key in zip(numbers, keys):
        parsed, _, _, _, _, subject, _ = subjects[number]
        file_keys[number] = key
        first_raw, last_raw = first_dates[number], last_dates[number]
        date = parse_date(first_raw)
        last_date = date if last_raw == first_raw else parse_date(last_raw)
        if date is None:
            bad_dates += 1
        elif earliest is None or date < earliest:
            earliest = date
        if last_date is not None and (latest is None or last_date > latest):
            latest = last_date
        row = rows.get(key)
        if row is None:
            rows[key] = [
                key,
                rkey,
                parsed.filename,
                subject,
                poster,
                date,
                parsed.file_index,
                parsed.file_count,
                counters[first_lines[number]][1],
                last_date,
            ]
        else:
            row[5], row[9] = _earliest(row[5], date), _latest(row[9], last_date)
    return list(rows.values()), earliest, latest, bad_dates


def _column_table(names: tuple[str, ...], rows: Sequence[Sequence[object]]) -> dict[str, list[object]]:
    """Rows (sequences, maybe longer than names) as a column table: the first len(names) items."""
    columns = list(zip(*rows)) if rows else [()] * len(names)
    return {name: list(column) for name, column in zip(names, columns)}


def _earliest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _latest(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)


def _missing_runs(first: int, last: int, numbers: list[int]) -> list[list[int]]:
    """Runs [from, to] of the numbers in first..last that no accepted line had."""
    if (
        len(numbers) == last - first + 1
        and numbers[0] == first
        and numbers[-1] == last
        and all(map(lt, numbers, islice(numbers, 1, None)))
    ):
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
    """Message-ids stay bytes until encoding (edge.digest.batch writes them as strings); the rare one
    that is not ASCII is made valid UTF-8 the way decode_text reads it."""
    if all(map(bytes.isascii, values)):
        return values
    return [value if value.isascii() else decode_text(value).encode() for value in values]
