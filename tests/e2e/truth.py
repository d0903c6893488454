"""The ground truth of the end-to-end runs, and the one check every case ends with.

What was posted is known article by article (simnews' `Truth`, placed at the number the server
gave it), and so is what the provider hides (holes) and what a scripted server garbles. After a
run, `check_ground_truth` compares that with everything the data center stored:

- fragments: exactly the non-flood articles the provider showed, each once, at its own number;
  never a lost (never posted), hidden or garbled one;
- the executable rule's counts equal the flood articles shown; the kept counts equal the
  fragments stored, batch by batch;
- missing articles per range equal the numbers without an article (the holes), never more;
  rejected lines equal the garbage served;
- every range done and tiled by its batches end to end; every batch joined;
- releases whole: each release posted is one release row, whatever batches and ranges it was
  split over, with its parts, files and bytes summed over all of them, and one post of its own.

Problems are collected and reported together, so a failing case says everything that is wrong.
"""

from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from simnews.generator import Truth

EXECUTABLE = "executable"
# What must be there once (the tables' keys say so too; this says it whatever the schema does).
UNIQUE_KEYS = {
    "fragments": "group_id, article",
    "files": "group_id, key",
    "releases": "group_id, key",
    "release_chunks": "group_id, release_key, batch_from",
    "rule_counts": "range_id, batch_from, rule",
    "seed_batches": "range_id, batch_from",
}


@dataclass
class GroupTruth:
    """One group as the provider serves it."""

    name: str
    low: int
    high: int
    articles: dict[int, Truth]  # every article posted, by its number on the server
    lost: list[Truth] = field(default_factory=list)  # generated, never posted
    hidden: frozenset[int] = frozenset()  # numbers whose overview line the provider leaves out
    garbled: frozenset[int] = frozenset()  # numbers whose overview line is served broken
    junk_lines: int = 0  # garbage lines served that belong to no article

    @cached_property
    def seen(self) -> dict[int, Truth]:
        """The articles a node can read: posted, not hidden, not garbled."""
        return {
            n: t
            for n, t in self.articles.items()
            if n not in self.hidden and n not in self.garbled and self.low <= n <= self.high
        }

    @cached_property
    def kept(self) -> dict[int, Truth]:
        return {n: t for n, t in self.seen.items() if not t.is_flood}

    @cached_property
    def floods(self) -> dict[int, Truth]:
        return {n: t for n, t in self.seen.items() if t.is_flood}

    def missing_between(self, first: int, last: int) -> int:
        """Numbers in [first, last] with no readable article."""
        return (last - first + 1) - sum(1 for n in self.seen if first <= n <= last)

    @property
    def rejected(self) -> int:
        return len(self.garbled) + self.junk_lines

    def releases(self) -> dict[tuple, dict[int, Truth]]:
        """The kept articles by the release they were posted in, as far as anyone can tell:
        releases posted twice by the same poster under the same name and file count (the
        generator draws names from short lists) are one release to any indexer."""
        by_release: dict[tuple, dict[int, Truth]] = defaultdict(dict)
        for number, truth in self.kept.items():
            by_release[release_identity(truth)][number] = truth
        return by_release


def release_identity(truth: Truth) -> tuple:
    """What tells releases apart: the poster, the name (case-folded) and the file count."""
    intended = truth.intended
    return truth.poster, intended.release.casefold(), intended.file_count


@dataclass
class GroupReport:
    group: str
    fragments: int
    floods: int
    missing: int
    rejected: int
    ranges: int
    batches: int
    releases: int
    releases_over_batches: int  # releases whose articles came in more than one batch
    releases_over_ranges: int  # ... in more than one range


def _rows(conn, sql: str, **params):
    return conn.execute(text(sql), params).all()


def check_ground_truth(db: Engine | Connection, truths: Iterable[GroupTruth]) -> dict[str, GroupReport]:
    """Asserts that the catalog equals the ground truth; returns what it saw per group."""
    if isinstance(db, Engine):
        with db.connect() as conn:
            return check_ground_truth(conn, truths)
    truths = list(truths)
    problems: list[str] = []
    reports = {}
    conn = db
    states = dict(_rows(conn, "SELECT state, count(*) FROM seed_batches GROUP BY state"))
    if set(states) - {"joined"}:
        problems.append(f"batches not all joined: {states}")
    for table, key in UNIQUE_KEYS.items():
        twice = conn.execute(text(f"SELECT count(*) - count(DISTINCT ({key})) FROM {table}")).scalar_one()
        if twice:
            problems.append(f"{table}: {twice} rows repeat a ({key})")
    groups = dict(_rows(conn, "SELECT name, id FROM groups"))
    for truth in truths:
        if truth.name not in groups:
            problems.append(f"{truth.name}: the group is not in the catalog")
            continue
        report = _check_group(conn, truth, groups[truth.name], problems)
        if report is not None:
            reports[truth.name] = report
    assert not problems, f"{len(problems)} differences from the ground truth:\n" + "\n".join(problems[:60])
    return reports


def _check_group(conn, truth: GroupTruth, group_id: int, problems: list[str]) -> GroupReport | None:
    name = truth.name

    def problem(message: str) -> None:
        problems.append(f"{name}: {message}")

    # -- ranges: every one done, together tiling the group's articles, their counts right ----
    ranges = _rows(
        conn,
        "SELECT id, first_id, last_id, next_id, status, batches, articles, missing, rejected,"
        " dropped FROM seed_ranges WHERE group_id = :g ORDER BY first_id",
        g=group_id,
    )
    if not ranges:
        problem("no ranges")
        return None
    not_done = [
        (r.id, r.status, r.next_id, r.last_id) for r in ranges if r.status != "done" or r.next_id != r.last_id + 1
    ]
    if not_done:
        problem(f"ranges not done to their end (id, status, next_id, last_id): {not_done}")
    spans = [(r.first_id, r.last_id) for r in ranges]
    if (
        spans[0][0] != truth.low
        or spans[-1][1] != truth.high
        or any(a[1] + 1 != b[0] for a, b in zip(spans, spans[1:]))
    ):
        problem(f"the ranges do not tile {truth.low}-{truth.high}: {spans}")
    for r in ranges:
        expected_missing = truth.missing_between(r.first_id, r.last_id)
        if r.missing != expected_missing:
            problem(
                f"range {r.id} ({r.first_id}-{r.last_id}) reports {r.missing} missing articles, "
                f"the provider lacks {expected_missing}"
            )
        seen = sum(1 for n in truth.seen if r.first_id <= n <= r.last_id)
        if r.articles != seen:
            problem(f"range {r.id} counts {r.articles} articles, the provider showed {seen}")
        floods = sum(1 for n in truth.floods if r.first_id <= n <= r.last_id)
        if r.dropped != floods:
            problem(f"range {r.id} counts {r.dropped} dropped articles, {floods} were floods")
    rejected = sum(r.rejected for r in ranges)
    if rejected != truth.rejected:
        problem(f"{rejected} lines rejected, {truth.rejected} were garbage")

    # -- batches: each range tiled by its batches, end to end, once ----------------------------
    batches = _rows(
        conn,
        "SELECT b.range_id, b.batch_from, b.batch_to, b.state FROM seed_batches b"
        " JOIN seed_ranges r ON r.id = b.range_id WHERE r.group_id = :g"
        " ORDER BY b.range_id, b.batch_from",
        g=group_id,
    )
    by_range = defaultdict(list)
    for b in batches:
        by_range[b.range_id].append((b.batch_from, b.batch_to))
    for r in ranges:
        tiles = by_range.get(r.id, [])
        if (
            not tiles
            or tiles[0][0] != r.first_id
            or tiles[-1][1] != r.last_id
            or any(a[1] + 1 != b[0] for a, b in zip(tiles, tiles[1:]))
        ):
            problem(f"range {r.id} ({r.first_id}-{r.last_id}) is not tiled by its batches: {tiles}")
        if len(tiles) != r.batches:
            problem(f"range {r.id} counts {r.batches} batches, {len(tiles)} are stored")

    # -- fragments: the kept articles, each once, at its number --------------------------------
    fragments = _rows(
        conn,
        "SELECT f.article, f.message_id, f.part, f.bytes, f.file_key, fi.release_key"
        " FROM fragments_with_ids f LEFT JOIN files fi ON fi.group_id = f.group_id AND fi.key = f.file_key"
        " WHERE f.group_id = :g",
        g=group_id,
    )
    ids = Counter(f.message_id for f in fragments)
    twice = [m for m, n in ids.items() if n > 1]
    if twice:
        problem(f"{len(twice)} articles stored more than once, e.g. {twice[:5]}")
    expected = {t.message_id: n for n, t in truth.kept.items()}
    stored = set(ids)
    lost = stored & {t.message_id for t in truth.lost}
    if lost:
        problem(f"{len(lost)} articles that were never posted are stored (invented), e.g. {sorted(lost)[:5]}")
    unexpected = stored - set(expected)
    if unexpected:
        problem(
            f"{len(unexpected)} stored articles should not be (floods, hidden or garbled), "
            f"e.g. {sorted(unexpected)[:5]}"
        )
    absent = set(expected) - stored
    if absent:
        problem(
            f"{len(absent)} articles lost, e.g. {sorted(absent, key=expected.get)[:5]} at "
            f"{sorted(expected[m] for m in absent)[:5]}"
        )
    misplaced = [
        (f.article, f.message_id)
        for f in fragments
        if f.message_id in expected and (expected[f.message_id] != f.article or truth.kept[f.article].part != f.part)
    ]
    if misplaced:
        problem(f"{len(misplaced)} fragments at the wrong number or part, e.g. {misplaced[:5]}")
    orphans = [f.article for f in fragments if f.release_key is None]
    if orphans:
        problem(f"{len(orphans)} fragments without their file, e.g. {orphans[:5]}")

    # -- rule counts: per batch, the kept ones equal the fragments, the executable the floods --
    counts = _rows(
        conn,
        "SELECT c.range_id, c.batch_from, c.rule, c.fragments FROM rule_counts c WHERE c.group_id = :g",
        g=group_id,
    )
    per_batch: dict[tuple[int, int], dict[str, int]] = defaultdict(dict)
    for c in counts:
        per_batch[(c.range_id, c.batch_from)][c.rule] = c.fragments
    batch_keys = {(b.range_id, b.batch_from) for b in batches}
    if set(per_batch) != batch_keys or any(set(v) != {"", EXECUTABLE} for v in per_batch.values()):
        problem(
            f"rule counts are not one '' and one {EXECUTABLE!r} row per batch: "
            f"{len(per_batch)} batches counted, {len(batch_keys)} stored"
        )
    executable = sum(v.get(EXECUTABLE, 0) for v in per_batch.values())
    if executable != len(truth.floods):
        problem(f"the executable rule counts {executable} articles, {len(truth.floods)} floods were served")
    articles = sorted(f.article for f in fragments)
    for b in batches:
        inside = bisect.bisect_right(articles, b.batch_to) - bisect.bisect_left(articles, b.batch_from)
        kept = per_batch.get((b.range_id, b.batch_from), {}).get("")
        if kept != inside:
            problem(
                f"batch {b.batch_from}-{b.batch_to} of range {b.range_id} counts {kept} kept articles, "
                f"{inside} are stored"
            )

    # -- releases: each posted release is one row, whole across batches and ranges ------------
    releases = {
        r.key: r
        for r in _rows(
            conn,
            "SELECT key, files_seen, parts_expected, parts_seen, bytes FROM releases WHERE group_id = :g",
            g=group_id,
        )
    }
    chunks = _rows(conn, "SELECT release_key, batch_from, range_id FROM release_chunks WHERE group_id = :g", g=group_id)
    files = {
        f.key: f
        for f in _rows(
            conn,
            "SELECT key, release_key, name, parts, file_index, file_count FROM files WHERE group_id = :g",
            g=group_id,
        )
    }
    parts_of = {key: f.parts for key, f in files.items()}

    # -- files: each posted file once, its details as posted ------------------------------------
    posted_of_file: dict[int, set[tuple]] = defaultdict(set)
    file_of_posted: dict[tuple, set[int]] = defaultdict(set)
    details: dict[int, set[tuple]] = defaultdict(set)
    for f in fragments:
        if f.message_id in expected:
            t = truth.kept[expected[f.message_id]]
            # A file is its release and its name; the same name posted twice in a release (the
            # generator's short lists) is one file, with the details of one of the postings.
            posted_of_file[f.file_key].add((release_identity(t), t.intended.filename))
            file_of_posted[(release_identity(t), t.intended.filename)].add(f.file_key)
            details[f.file_key].add((t.intended.filename, t.parts, t.intended.file_index, t.intended.file_count))
    split = [p for p, keys in file_of_posted.items() if len(keys) > 1]
    if split:
        problem(f"{len(split)} posted files came out as several files, e.g. {split[:3]}")
    wrong = []
    for key, posted in posted_of_file.items():
        row = files.get(key)
        stored = row and (row.name, row.parts, row.file_index, row.file_count)
        if len(posted) != 1 or stored not in details[key]:
            wrong.append((key, stored, posted, details[key]))
    if wrong:
        problem(f"{len(wrong)} files differ from what was posted, e.g. {wrong[:3]}")
    if set(files) != set(posted_of_file):
        problem(f"{len(set(files) - set(posted_of_file))} files stored without fragments")
    db_of_truth: dict[tuple, set[int]] = defaultdict(set)
    truth_of_db: dict[int, set[tuple]] = defaultdict(set)
    fragments_of_db: Counter = Counter()
    bytes_of_db: Counter = Counter()
    files_of_db: dict[int, set[int]] = defaultdict(set)
    for f in fragments:
        if f.message_id not in expected or f.release_key is None:
            continue
        identity = release_identity(truth.kept[expected[f.message_id]])
        db_of_truth[identity].add(f.release_key)
        truth_of_db[f.release_key].add(identity)
        fragments_of_db[f.release_key] += 1
        bytes_of_db[f.release_key] += f.bytes
        files_of_db[f.release_key].add(f.file_key)
    split = {k: v for k, v in db_of_truth.items() if len(v) > 1}
    if split:
        problem(f"{len(split)} posted releases came out as several releases, e.g. {list(split.items())[:3]}")
    merged = {k: v for k, v in truth_of_db.items() if len(v) > 1}
    if merged:
        problem(f"{len(merged)} releases mix articles of several posted releases, e.g. {list(merged.items())[:3]}")
    if set(releases) != set(fragments_of_db):
        problem(f"{len(set(releases) ^ set(fragments_of_db))} releases stored without fragments or missing")
    # Posts (releases joined by app.services.ingest.posts): each posted release one post, each
    # post one posted release (a false join of two posts is as wrong as a split).
    post_of = dict(
        _rows(
            conn,
            "SELECT r.key, coalesce(p.post_key, r.key) FROM releases r LEFT JOIN release_posts p"
            " ON p.group_id = r.group_id AND p.key = r.key WHERE r.group_id = :g",
            g=group_id,
        )
    )
    posts_of_truth: dict[tuple, set[int]] = defaultdict(set)
    truth_of_post: dict[int, set[tuple]] = defaultdict(set)
    for key, identities in truth_of_db.items():
        for identity in identities:
            posts_of_truth[identity].add(post_of.get(key))
            truth_of_post[post_of.get(key)].add(identity)
    split = {k: v for k, v in posts_of_truth.items() if len(v) > 1}
    if split:
        problem(f"{len(split)} posted releases came out as several posts, e.g. {list(split.items())[:3]}")
    merged = {k: v for k, v in truth_of_post.items() if len(v) > 1}
    if merged:
        problem(f"{len(merged)} posts join several posted releases, e.g. {list(merged.items())[:3]}")
        for post in list(merged)[:3]:
            problem(_how_joined(conn, group_id, post, [k for k, p in post_of.items() if p == post]))
    posted_releases = truth.releases()
    for key, row in releases.items():
        if key not in fragments_of_db:
            continue
        whole = [posted_releases[t] for t in truth_of_db[key]]
        posted_parts = sum(len(articles) for articles in whole)
        expected_parts = sum(parts_of.get(k) or 0 for k in files_of_db[key])
        if (row.parts_seen, row.files_seen, row.bytes, row.parts_expected) != (
            fragments_of_db[key],
            len(files_of_db[key]),
            bytes_of_db[key],
            expected_parts,
        ) or row.parts_seen != posted_parts:
            problem(
                f"release {key}: parts_seen {row.parts_seen} files_seen {row.files_seen} bytes {row.bytes} "
                f"parts_expected {row.parts_expected}; its fragments: {fragments_of_db[key]} in "
                f"{len(files_of_db[key])} files, {bytes_of_db[key]} bytes, {expected_parts} parts expected; "
                f"posted and shown: {posted_parts}"
            )
    over_batches = Counter(c.release_key for c in chunks)
    over_ranges = defaultdict(set)
    for c in chunks:
        over_ranges[c.release_key].add(c.range_id)
    return GroupReport(
        group=name,
        fragments=len(fragments),
        floods=executable,
        missing=sum(r.missing for r in ranges),
        rejected=rejected,
        ranges=len(ranges),
        batches=len(batches),
        releases=len(releases),
        releases_over_batches=sum(1 for n in over_batches.values() if n > 1),
        releases_over_ranges=sum(1 for v in over_ranges.values() if len(v) > 1),
    )


# What _how_joined shows, each row on a line after its label: the columns the join reads of each
# release, its row in release_posts and the pin an inspection left; the inspections of the post
# and its releases; the par2 hashes they listed or read.
_HOW_JOINED = (
    (
        "",
        "SELECT r.key, r.name, r.poster, r.file_count, r.files_seen, r.metadata_only, r.name_hash, r.first_post,"
        " r.last_post, p.post_key, j.anchor FROM releases r"
        " LEFT JOIN release_posts p ON p.group_id = r.group_id AND p.key = r.key"
        " LEFT JOIN inspection_joins j ON j.group_id = r.group_id AND j.release_key = r.key"
        " WHERE r.group_id = :g AND r.key = ANY(:keys) ORDER BY r.key",
    ),
    (
        "inspection ",
        "SELECT post_key, reason, state, rounds, files_seen FROM post_inspections"
        " WHERE group_id = :g AND post_key = ANY(:keys) ORDER BY post_key",
    ),
    (
        "par2 hash ",
        "SELECT post_key, listed, encode(hash16k, 'hex'), size FROM post_file_hashes"
        " WHERE group_id = :g AND post_key = ANY(:keys) ORDER BY post_key, listed",
    ),
)


def _how_joined(conn, group_id: int, post: int, keys: list[int]) -> str:
    """What tells why releases share a post (a false join), for the post and its releases."""
    lines = [f"post {post}, its releases:"]
    for label, sql in _HOW_JOINED:
        for row in _rows(conn, sql, g=group_id, keys=sorted({post, *keys})):
            lines.append(f"  {label}" + " | ".join(map(str, row)))
    return "\n".join(lines)
