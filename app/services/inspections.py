"""Inspections: the posts whose small files an edge node reads to tell what headers cannot (the
files a par2 set lists, what an archive holds and whether it is encrypted, what an .nfo names).

The data center reads no article bodies: it picks the posts worth inspecting as the join writes
them (queue: a name that says nothing, a hash or no category, several posters, one file, or small
files that tell more), newest first, queues one again when it has grown since it was read, and
leases them, once the join has left them unchanged for a while, to nodes that ask (lease), each
with the message-ids to read: the first article of
at most MAX_FILES of its files (the .nfo, the par2 index, the first archive volume, small ones
first: edge.inspect.result.wanted_files, which the node's readers go with), MAX_BYTES in all. A lease held past its timeout goes back to
the queue, as a range's does; a node gives back what it holds on SIGTERM (give_back). The result
a node posts (record) is stored once: a second post of the same result, by the node that holds
it or held it last, is answered as stored. docs/api.md has the contract.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast

from sqlalchemy import CursorResult, TextClause, func, select, text, update
from sqlalchemy.orm import Session

from app.db import array_literal, partition_name
from app.models import InspectionState, PostInspection, SeedNode
from app.services import postnames, rules
from app.services.errors import Conflict, NotFound, ServiceError
from app.services.fragments import file_articles
from edge.inspect.result import MAX_WANTED, named_files, wanted_files

# At most this many files are read of a post, and this many bytes in all (what the node is told).
MAX_FILES = 4
MAX_BYTES = 2 * 1024 * 1024
# A post whose lease expired this many times is given up (a node dies on it, or it cannot be read).
MAX_ATTEMPTS = 3
MAX_LEASE = 100
# Bounds of a result (a node's post is outside input: docs/api.md).
MAX_RESULT_FILES = 10_000
MAX_READ = 16  # files read from their start: at most a few a post
MAX_NAME = 1_024
MAX_NFO = 64 * 1024
MAX_FLAGS = ("executable", "password_url", "encrypted_headers")  # the flags a node may send
MAX_ID = 2**31 - 1
# What a file name ends with past its release's name: volumes, recovery sets, one extension.
_EXTENSIONS = re.compile(r"(\.(part|vol)\d+(\+\d+)?)?(\.(7z|zip|tar))?\.(\w{1,4}|\d{3})$", re.IGNORECASE)
MISC = 8010
# A 7-Zip archive or one of its volumes (name.7z, name.7z.001...): its stem and volume number.
_7Z = re.compile(r"^(.*\.7z)(?:\.(\d{1,3}))?$", re.IGNORECASE)

# Why a post is worth inspecting, tested in this order (the first that holds is its reason): a
# name that says nothing (a hash, or no category), files of several posters or one file alone
# (an obfuscated post comes out as a post a file), or small files that tell what headers cannot
# (an .nfo, a par2 index, an archive's first volume: what is inside, and whether it is locked).
CONTENTS = r"\.(nfo|par2|rar|r00|zip|7z|7z\.0*1)$"
REASONS = (
    ("hashed", "p.category = 8020"),
    ("misc", "p.category = 8010"),
    ("posters", "strpos(p.posters, E'\\n') > 0"),
    ("one_file", "p.files_seen = 1"),
    # A probe of the post's files in its group's partition ({files}, named, so that the group needs
    # no condition), post by post by their index on the release. As EXISTS over `files`, PostgreSQL
    # may test every file of the group once and hash the posts that have one, and with a group's
    # condition it may add a scan of the partition's key to each probe; it prices both too low
    # while the partition's statistics are young. In bench/e2e.py, that was a partition read whole
    # for each batch's join: 225 ms of the 287 of a join of 2,000 posts, against 27 ms of probes.
    (
        "contents",
        f"(SELECT true FROM {{files}} f WHERE f.release_key = p.key AND f.name ~* '{CONTENTS}' LIMIT 1)",
    ),
)
# A post's inspection that the join's writing it changes (queued again, or told it changed): one
# still queued, or one done or given up that the post has outgrown (more files than it had when
# read), fewer than MAX_ROUNDS times. Not one leased: its node is reading it.
MAX_ROUNDS = 3
REQUEUED = (
    f"(i.state = 'queued' OR (i.state IN ('done', 'failed') AND i.rounds < {MAX_ROUNDS}"
    " AND coalesce(i.files_seen, 0) < p.files_seen))"
)
# The rows go in sorted, so that every post's test has run before the first of them is written:
# else a test by the group alone (the plan for a group new to the statistics, which a join of its
# first batch gets: app.services.ingest.groupstats) walks the entries the statement has written
# so far, once for each post (0.45 s for the first 3,600 posts of a group, against 0.07). The sort
# is what makes PostgreSQL 15 read the whole CTE first; tests/app/test_groupstats.py checks it.
_QUEUE = f"""
    WITH worth AS MATERIALIZED (  -- materialised: each test runs once a post, not again in WHERE
        SELECT p.group_id, p.key, p.last_post, p.files_seen,
               CASE {" ".join(f"WHEN {test} THEN '{name}'" for name, test in REASONS)} END AS reason
          FROM posts p
         WHERE p.group_id = :g AND p.key = ANY(CAST(:keys AS bigint[]))
           AND NOT EXISTS (SELECT FROM post_inspections i WHERE i.group_id = :g AND i.post_key = p.key
                            AND NOT {REQUEUED})
    )
    INSERT INTO post_inspections AS i (group_id, post_key, reason, priority, files_seen)
    SELECT group_id, key, reason, last_post, files_seen FROM worth WHERE reason IS NOT NULL ORDER BY key
    ON CONFLICT (group_id, post_key) DO UPDATE
       SET changed_at = now(), reason = EXCLUDED.reason, priority = EXCLUDED.priority,
           files_seen = EXCLUDED.files_seen, state = 'queued', node_id = NULL, expires_at = NULL, error = NULL,
           attempts = CASE WHEN i.state = 'queued' THEN i.attempts ELSE 0 END,
           rounds = i.rounds + CASE WHEN i.state = 'queued' THEN 0 ELSE 1 END
     WHERE {REQUEUED.replace("p.files_seen", "EXCLUDED.files_seen")}
"""


@lru_cache(maxsize=1024)
def queue_statement(group_id: int) -> TextClause:
    """The join's queue of inspections (_QUEUE) for one group: its files' partition named."""
    return text(_QUEUE.format(files=f'"{partition_name("files", group_id)}"'))


# The next inspections, with their posts: leases past their time (taken back), then queued ones
# whose post has not changed for the settle time, newest post first (each by its own index).
_NEXT = """
    SELECT i.id, i.group_id, i.post_key, i.attempts, p.name, p.files_seen, g.name AS group_name
      FROM post_inspections i
      LEFT JOIN posts p ON p.group_id = i.group_id AND p.key = i.post_key
      LEFT JOIN groups g ON g.id = i.group_id
     WHERE {which}
     ORDER BY i.priority DESC NULLS LAST, i.id
     LIMIT :count
       FOR UPDATE OF i SKIP LOCKED
"""
NEXT_EXPIRED = text(_NEXT.format(which="i.state = 'leased' AND i.expires_at < now()"))
NEXT_QUEUED = text(_NEXT.format(which="i.state = 'queued' AND i.changed_at <= now() - make_interval(secs => :settle)"))
# The files of a group's posts, by name (at most MAX_POST_FILES a post): each post's own
# release's and those joined into it.
MAX_POST_FILES = 10_000
POST_FILES = text(f"""
    WITH members AS (
        SELECT w.key AS post, w.key FROM unnest(CAST(:keys AS bigint[])) AS w(key)
         WHERE NOT EXISTS (SELECT FROM release_posts x WHERE x.group_id = :g AND x.key = w.key)
        UNION ALL
        SELECT x.post_key, x.key FROM release_posts x WHERE x.group_id = :g AND x.post_key = ANY(CAST(:keys AS bigint[]))
    ), listed AS (
        SELECT m.post, f.key, f.name, row_number() OVER (PARTITION BY m.post ORDER BY f.name) AS n
          FROM members m JOIN files f ON f.group_id = :g AND f.release_key = m.key
    )
    SELECT post, key, name FROM listed WHERE n <= {MAX_POST_FILES} ORDER BY post, name
""")
# The first article of these files (by part), and the last of those asked for (last true). Each
# end costs a read of the packs that hold its file, so only the files a lease may hand out are
# read: those their names tell of, else every file of a post whose names tell nothing (the
# smallest is read), and the last volume of a 7-Zip archive.
FILE_ENDS = text(f"""
    SELECT w.key, f.bytes, f.message_local || h.host AS message_id,
           z.bytes AS last_bytes, z.message_local || hz.host AS last_message_id
      FROM unnest(CAST(:keys AS bigint[]), CAST(:last AS boolean[])) AS w(key, last)
      JOIN LATERAL (SELECT bytes, message_local, host_id FROM ({file_articles(":g", "w.key")}) a
                     ORDER BY part, article LIMIT 1) f ON true
      JOIN message_hosts h ON h.id = f.host_id
      LEFT JOIN LATERAL (SELECT bytes, message_local, host_id FROM ({file_articles(":g", "w.key")}) a
                          WHERE w.last ORDER BY part DESC, article DESC LIMIT 1) z ON true
      LEFT JOIN message_hosts hz ON hz.id = z.host_id
""")
LEASED = text("""
    UPDATE post_inspections i
       SET state = 'leased', node_id = :node, attempts = i.attempts + 1, error = NULL,
           expires_at = now() + make_interval(secs => :timeout), files_seen = u.files_seen
      FROM unnest(CAST(:ids AS bigint[]), CAST(:files_seen AS integer[])) AS u(id, files_seen)
     WHERE i.id = u.id
""")
GIVEN_UP = text("""
    UPDATE post_inspections i
       SET state = 'failed', error = u.error, node_id = NULL, expires_at = NULL,
           files_seen = coalesce(u.files_seen, i.files_seen)
      FROM unnest(CAST(:ids AS bigint[]), CAST(:errors AS text[]), CAST(:files_seen AS integer[]))
           AS u(id, error, files_seen)
     WHERE i.id = u.id
""")


class NotYourInspection(Conflict):
    code = "not_your_inspection"


class MalformedResult(ServiceError):
    code = "malformed_result"


@dataclass(frozen=True)
class InspectionLease:
    id: int
    group: str
    post_key: int
    name: str
    files: list[dict[str, Any]]  # name, message_id, bytes


def queue(session: Session, group_id: int, post_keys: list[int]) -> None:
    """Queue those of these posts (just written by the join) worth inspecting: a post not queued
    before, or one read before that has more files now (MAX_ROUNDS times at most); one still
    queued is noted changed (its lease waits for it to settle)."""
    if post_keys:
        session.execute(queue_statement(group_id), {"g": group_id, "keys": array_literal(post_keys)})


def lease(session: Session, node: SeedNode, count: int, timeout: int, settle: int = 0) -> list[InspectionLease]:
    """Up to count inspections for this node, each with the articles to read, of posts the join
    has not changed for `settle` seconds (a post still being posted is read once it is whole). A
    post with no file worth reading is marked failed here and not handed out; one whose leases
    expired MAX_ATTEMPTS times is given up. A few statements whatever the count."""
    count = max(1, min(count, MAX_LEASE))
    rows = session.execute(NEXT_EXPIRED, {"count": count}).all()
    if len(rows) < count:
        rows = [*rows, *session.execute(NEXT_QUEUED, {"count": count - len(rows), "settle": settle}).all()]
    given_up: list[tuple[int, str, int | None]] = []
    wanted: dict[int, list[Any]] = {}
    for row in rows:
        if row.attempts >= MAX_ATTEMPTS:
            given_up.append((row.id, f"its lease expired {row.attempts} times", row.files_seen))
        elif row.name is None:
            given_up.append((row.id, "the post is gone", None))
        else:
            wanted.setdefault(row.group_id, []).append(row)
    leased: list[InspectionLease] = []
    for group_id, group_rows in wanted.items():
        files = _files_to_read(session, group_id, [row.post_key for row in group_rows])
        for row in group_rows:
            chosen = files.get(row.post_key)
            if not chosen:
                given_up.append((row.id, "no file worth reading", row.files_seen))
                continue
            leased.append(InspectionLease(row.id, row.group_name, row.post_key, row.name, chosen))
    if leased:
        files_seen = {row.id: row.files_seen for row in rows}
        # Each is read with the files the post has now: it is queued again once it has more.
        session.execute(
            LEASED,
            {
                "node": node.id,
                "timeout": timeout,
                "ids": [i.id for i in leased],
                "files_seen": [files_seen[i.id] for i in leased],
            },
        )
    if given_up:
        session.execute(
            GIVEN_UP,
            {
                "ids": [i for i, _, _ in given_up],
                "errors": [e for _, e, _ in given_up],
                "files_seen": [f for _, _, f in given_up],
            },
        )
    return sorted(leased, key=lambda lease: lease.id)


def _files_to_read(session: Session, group_id: int, post_keys: list[int]) -> dict[int, list[dict[str, Any]]]:
    """The articles to read of each of these posts of a group (post key -> files; none for a post
    with no file worth reading)."""
    files: dict[int, dict[str, int]] = {}  # post -> file name -> file key
    for post, key, name in session.execute(POST_FILES, {"g": group_id, "keys": array_literal(post_keys)}):
        files.setdefault(post, {})[name] = key
    picks = {post: _picks(list(by_name)) for post, by_name in files.items()}
    # Which ends of which files are read (FILE_ENDS): file key -> whether its last article too.
    ends: dict[int, bool] = {}
    for post, by_name in files.items():
        named, lasts = picks[post]
        for name in named or by_name:
            ends.setdefault(by_name[name], False)
        for last in lasts.values():
            ends[by_name[last]] = True
    found: dict[int, Any] = {}
    if ends:
        keys = list(ends)
        params = {"g": group_id, "keys": array_literal(keys), "last": array_literal([str(ends[k]) for k in keys])}
        found = {row.key: row for row in session.execute(FILE_ENDS, params)}
    return {
        post: _chosen(*picks[post], {n: found[k] for n, k in by_name.items() if k in found})
        for post, by_name in files.items()
    }


def _picks(names: list[str]) -> tuple[list[str], dict[str, str]]:
    """Of a post's files (names), those a lease hands out by what their names say (named_files' first
    MAX_WANTED, at most MAX_FILES; none when no name tells what its file is), and for each of them
    that is a volume of a 7-Zip archive, the archive's last volume."""
    named = named_files(names)[: min(MAX_WANTED, MAX_FILES)]
    return named, {name: last for name in named if (last := _last_7z_volume(name, names)) is not None}


def _chosen(named: list[str], lasts: dict[str, str], read: dict[str, Any]) -> list[dict[str, Any]]:
    """The articles to read of a post: of the files _picks named (each with its first article in
    read, and the last of a 7-Zip archive's last volume), or when it named none, of the smallest
    file with an article stored (read then has every file's first)."""
    if not named:
        named = wanted_files(list(read), [row.bytes for row in read.values()])[:MAX_FILES]
    chosen: list[dict[str, Any]] = []
    total = 0
    for name in named:
        row = read.get(name)
        if row is None:  # a file without an article stored
            continue
        if total + row.bytes > MAX_BYTES:
            break
        total += row.bytes
        chosen.append({"name": name, "message_id": row.message_id, "bytes": row.bytes})
    # 7-Zip writes its header (the files inside, and whether they or it are encrypted) at the end
    # of the archive: the last article of its last volume is read too, when the budget allows.
    for entry in list(chosen):
        last_name = lasts.get(entry["name"])
        last = read.get(last_name) if last_name is not None else None
        if (
            last is not None
            and last.last_message_id is not None
            and last.last_message_id != entry["message_id"]
            and total + last.last_bytes <= MAX_BYTES
        ):
            total += last.last_bytes
            chosen.append({"name": last_name, "message_id": last.last_message_id, "bytes": last.last_bytes})
    return chosen


def _last_7z_volume(name: str, names: list[str]) -> str | None:
    """The last volume among names of the 7-Zip archive that name is a volume of (None: it is not one)."""
    stem = _7Z.match(name)
    if stem is None:
        return None
    volumes = {
        n: int(found[2] or 1)
        for n in names
        if (found := _7Z.match(n)) is not None and found[1].lower() == stem[1].lower()
    }
    return max(volumes, key=lambda n: (volumes[n], n))


def _locked(session: Session, inspection_id: int) -> PostInspection:
    """The inspection's row, locked; NotFound for an unknown id."""
    row = session.scalar(select(PostInspection).where(PostInspection.id == inspection_id).with_for_update())
    if row is None:
        raise NotFound(f"no such inspection: {inspection_id}", code="unknown_inspection")
    return row


def give_back(session: Session, node: SeedNode, inspection_id: int) -> str:
    """The node will not inspect it: back to the queue (its attempt not counted). Giving back
    one that is done, or no longer the node's, changes nothing."""
    row = _locked(session, inspection_id)
    if row.state == InspectionState.LEASED and row.node_id == node.id:
        row.state, row.node_id, row.expires_at = InspectionState.QUEUED, None, None
        row.attempts = max(0, row.attempts - 1)
    elif row.state not in (InspectionState.DONE, InspectionState.FAILED):
        raise NotYourInspection(f"inspection {inspection_id} is not leased to this node")
    return row.state


STORED = "stored"
ALREADY_STORED = "already_stored"


@dataclass(frozen=True)
class Recorded:
    """What became of one result: `status` is "stored", "already_stored" (stored before: the
    node's answer was lost and it posts again), or the code of the error that refused it
    (malformed_result, not_your_inspection, unknown_inspection), told in `message`."""

    id: int
    status: str
    message: str | None = None

    def taken(self) -> bool:
        """Stored now, or before: raises the error that refused it otherwise."""
        if self.status in (STORED, ALREADY_STORED):
            return self.status == STORED
        if self.status == MalformedResult.code:
            raise MalformedResult(self.message or "malformed result")
        if self.status == NotYourInspection.code:
            raise NotYourInspection(self.message or "not this node's inspection")
        raise NotFound(self.message or f"no such inspection: {self.id}", code="unknown_inspection")


def record(session: Session, node: SeedNode, inspection_id: int, result: Any) -> bool:
    """Store one result of a node (docs/api.md, Inspections); True when stored now, False when
    it was stored already. MalformedResult for a result out of its bounds; NotYourInspection when
    another node holds it (or it expired and went on); NotFound for an unknown id."""
    (recorded,) = record_many(session, node, [(inspection_id, result)])
    return recorded.taken()


def record_many(session: Session, node: SeedNode, results: list[tuple[int, Any]]) -> list[Recorded]:
    """Store a node's results (inspection id, result), each as record would, in one transaction:
    a result refused is answered so and changes nothing, the others are stored. One answer per
    result, in their order. The posts they name are summed again once each, by group."""
    answers: list[Recorded | None] = [None] * len(results)
    checked: list[tuple[int, int, dict[str, Any]]] = []
    for position, (inspection_id, result) in enumerate(results):
        try:
            checked.append((position, inspection_id, check_result(result)))
        except MalformedResult as exc:
            answers[position] = Recorded(inspection_id, MalformedResult.code, str(exc))
    ids = sorted({inspection_id for _, inspection_id, _ in checked})
    # The join's lock of each group first (the least id first), as the join takes it before it
    # queues posts here: taken after the rows', a join waiting on a row would wait on us and we on it.
    groups: dict[int, str] = (
        dict(
            session.execute(
                text(
                    "SELECT DISTINCT i.group_id, g.name FROM post_inspections i JOIN groups g ON g.id = i.group_id"
                    " WHERE i.id = ANY(CAST(:ids AS bigint[])) ORDER BY 1"
                ),
                {"ids": ids},
            ).all()
        )
        if ids
        else {}
    )
    for group_id in groups:
        _join_lock(session, group_id)
    rows = {
        row.id: row
        for row in session.scalars(
            select(PostInspection).where(PostInspection.id.in_(ids)).order_by(PostInspection.id).with_for_update()
        )
    }
    stored: list[tuple[PostInspection, list[dict[str, Any]]]] = []
    for position, inspection_id, fields in checked:
        row = rows.get(inspection_id)
        refused = _refusal(row, node, inspection_id)
        if refused is not None:
            answers[position] = refused
            continue
        assert row is not None
        read = fields.pop("read")
        for name, value in fields.items():
            setattr(row, name, value)
        row.state, row.expires_at, row.error, row.done_at = InspectionState.DONE, None, None, func.now()
        stored.append((row, read))
        answers[position] = Recorded(inspection_id, STORED)
    _name_by_files(session, [row for row, _ in stored], groups)
    for row, _ in stored:
        flags = (row.flags or "").split(",") if row.flags else []
        row.dropped_by = rules.flag_verdict(
            session, groups[row.group_id], flags + (["password"] if row.password == 1 else [])
        )
    session.flush()
    # Each post takes the name its files told (and its category by it), its password and ids,
    # the files its par2 set lists, or leaves search when a rule drops it: its row (and those of
    # the posts joined into it) summed again, once a post.
    touched: dict[int, set[int]] = {}
    for row, read in stored:
        touched.setdefault(row.group_id, set()).update({row.post_key, *join_by_par2(session, row, read)})
    if touched:
        # Imported here: the join imports this module to queue the posts it writes.
        from app.services.ingest.posts import refresh_posts_of

        for group_id, post_keys in sorted(touched.items()):
            refresh_posts_of(session, group_id, groups[group_id], sorted(post_keys))
    return [answer for answer in answers if answer is not None]


def _refusal(row: PostInspection | None, node: SeedNode, inspection_id: int) -> Recorded | None:
    """Why a result for this row is not stored now (stored before, or not this node's), or None."""
    if row is None:
        return Recorded(inspection_id, "unknown_inspection", f"no such inspection: {inspection_id}")
    if row.state == InspectionState.DONE:
        if row.node_id == node.id:
            return Recorded(inspection_id, ALREADY_STORED)
        return Recorded(inspection_id, NotYourInspection.code, f"inspection {inspection_id} was done by another node")
    if row.state != InspectionState.LEASED or row.node_id != node.id:
        return Recorded(inspection_id, NotYourInspection.code, f"inspection {inspection_id} is not leased to this node")
    return None


POST_NAMES = text("SELECT key, name, category FROM posts WHERE group_id = :g AND key = ANY(CAST(:keys AS bigint[]))")


def _name_by_files(session: Session, rows: list[PostInspection], groups: dict[int, str]) -> None:
    """No .nfo named them: the posts whose name says nothing take the name their par2 set's or
    archive's files share."""
    unnamed: dict[int, list[PostInspection]] = {}
    for row in rows:
        if row.inner_name is None and row.files:
            unnamed.setdefault(row.group_id, []).append(row)
    for group_id, group_rows in unnamed.items():
        group = groups[group_id]
        posts = {
            post.key: post
            for post in session.execute(POST_NAMES, {"g": group_id, "keys": [row.post_key for row in group_rows]})
        }
        for row in group_rows:
            post = posts.get(row.post_key)
            if post is not None and (post.category == MISC or postnames.is_hashed(post.name, group)):
                # row.files is never None here (unnamed holds rows with files): `or ()` tells the checker.
                row.inner_name = name_of_files([f["name"] for f in row.files or ()], group)


# The posts of a group with files of these (hash16k, size), listed by a par2 set or read.
MATCHING = text("""
    SELECT DISTINCT h.post_key FROM post_file_hashes h
      JOIN unnest(CAST(:hashes AS bytea[]), CAST(:sizes AS bigint[])) AS w(hash16k, size)
        ON h.hash16k = w.hash16k AND h.size = w.size
     WHERE h.group_id = :g AND h.listed = :listed AND h.post_key <> :key
""")
REMEMBER = text("""
    INSERT INTO post_file_hashes (group_id, hash16k, size, listed, post_key)
    SELECT :g, h, s, :listed, :key FROM unnest(CAST(:hashes AS bytea[]), CAST(:sizes AS bigint[])) AS w(h, s)
    ON CONFLICT DO NOTHING
""")
PIN = text("""
    INSERT INTO inspection_joins (group_id, release_key, anchor)
    SELECT :g, k, :anchor FROM unnest(CAST(:keys AS bigint[])) AS t(k)
    ON CONFLICT (group_id, release_key) DO UPDATE SET anchor = EXCLUDED.anchor
""")
MOVE = text("""
    INSERT INTO release_posts (group_id, key, post_key)
    SELECT :g, k, :post FROM unnest(CAST(:keys AS bigint[])) AS t(k) WHERE k <> :post
    ON CONFLICT (group_id, key) DO UPDATE SET post_key = EXCLUDED.post_key
""")


def join_by_par2(session: Session, row: PostInspection, read: list[dict[str, Any]]) -> set[int]:
    """Join the posts whose files a par2 set lists into the par2 set's post, by the MD5 of each
    file's first 16 KiB and its size (PAR2's hash16k): what the post's result listed ties posts
    read before to it, and what it read ties it to a par2 set listed before. The releases so
    joined are kept in inspection_joins (the join of posts keeps them there) and moved in
    release_posts, under the join's lock of the group (record takes it). Returns the posts that
    lost releases."""
    group, key = row.group_id, row.post_key
    listed = [
        (bytes.fromhex(f["hash16k"]), f["size"])
        for f in row.files or []
        if f.get("source") == "par2" and f.get("hash16k")
    ]
    mine = [(bytes.fromhex(f["hash16k"]), f["size"]) for f in read]
    for pairs, is_listed in ((listed, True), (mine, False)):
        if pairs:
            session.execute(
                REMEMBER,
                {
                    "g": group,
                    "listed": is_listed,
                    "key": key,
                    "hashes": [h for h, _ in pairs],
                    "sizes": [s for _, s in pairs],
                },
            )
    # The posts of the set: those that list its files (its par2 files, each an index or a
    # recovery volume) and those whose files they list. All go into the post of the least key
    # that lists them, whatever order their inspections come in: the last one joins them all.
    listers: set[int] = set()
    readers: set[int] = set()
    if listed:
        listers.add(key)
        for is_listed, into in ((True, listers), (False, readers)):
            into.update(
                other
                for (other,) in session.execute(
                    MATCHING,
                    {
                        "g": group,
                        "listed": is_listed,
                        "key": key,
                        "hashes": [h for h, _ in listed],
                        "sizes": [s for _, s in listed],
                    },
                )
            )
    if mine:
        found = {
            other
            for (other,) in session.execute(
                MATCHING,
                {"g": group, "listed": True, "key": key, "hashes": [h for h, _ in mine], "sizes": [s for _, s in mine]},
            )
        }
        if found:
            listers.update(found)
            readers.add(key)
    joins = [(member, min(listers)) for member in sorted((listers | readers) - {min(listers)})] if listers else []
    if not joins:
        return set()
    from app.services.ingest.posts import POSTS_MEMBERS  # the join imports this module

    emptied: set[int] = set()
    for joined, anchor in joins:
        # The whole post the joined release is in now moves (an earlier join may have put it in
        # another par2 file's post: every post of the set ends as one), and both rows are summed again.
        post, source = _current_post(session, group, anchor), _current_post(session, group, joined)
        releases = [k for (_, k) in session.execute(POSTS_MEMBERS, {"g": group, "keys": [source]})]
        if not releases or post == source:
            continue
        session.execute(PIN, {"g": group, "anchor": anchor, "keys": releases})
        session.execute(MOVE, {"g": group, "post": post, "keys": releases})
        emptied.update((joined, source, post))
    return emptied


def _join_lock(session: Session, group_id: int) -> None:
    """The join's lock of the group (app.services.ingest.posts.JOIN_LOCK), to the transaction's end."""
    from app.services.ingest.posts import JOIN_LOCK  # the join imports this module

    session.execute(text("SELECT pg_advisory_xact_lock(:lock, :g)"), {"lock": JOIN_LOCK, "g": group_id})


def _current_post(session: Session, group_id: int, release_key: int) -> int:
    """The post a release is in now."""
    post_key: int = session.execute(
        text("SELECT coalesce((SELECT post_key FROM release_posts WHERE group_id = :g AND key = :key), :key)"),
        {"g": group_id, "key": release_key},
    ).scalar_one()
    return post_key


def name_of_files(names: list[str], group: str) -> str | None:
    """The release name most of these files share once their extensions are taken off
    (``Name.part01.rar``, ``Name.vol03+04.par2``, ``Name.7z.001`` are all ``Name``), if it says
    more than a hash; None else."""
    stems = Counter(_EXTENSIONS.sub("", name.rsplit("/", 1)[-1].rsplit("\\", 1)[-1]) for name in names)
    for stem, _ in sorted(stems.items(), key=lambda item: (-item[1], -len(item[0]), item[0])):
        if stem and len(stem) <= MAX_NAME and not postnames.is_hashed(stem, group):
            return stem
    return None


def check_result(result: Any) -> dict[str, Any]:
    """The columns a result gives, or MalformedResult (every field bounded, texts without NUL)."""
    if not isinstance(result, dict):
        raise MalformedResult("the result must be an object")
    counts = {}
    for name in ("articles_read", "articles_missing", "bytes_read"):
        counts[name] = _count(result.get(name, 0), name)
    password = result.get("password", 0)
    if type(password) is not int or password not in (0, 1, 2):
        raise MalformedResult("password must be 0, 1 or 2")
    flags = result.get("flags", [])
    if not isinstance(flags, list) or not all(isinstance(f, str) and f in MAX_FLAGS for f in flags):
        raise MalformedResult(f"flags must be a list of {', '.join(MAX_FLAGS)}")
    files = result.get("files", [])
    if not isinstance(files, list) or len(files) > MAX_RESULT_FILES:
        raise MalformedResult(f"files must be a list of at most {MAX_RESULT_FILES}")
    kept = []
    for entry in files:
        if not isinstance(entry, dict):
            raise MalformedResult("each file must be an object with a name")
        item = {
            "name": _text(entry.get("name"), "a file's name", MAX_NAME, required=True),
            "size": _count(entry.get("size", 0), "a file's size"),
            "source": _text(entry.get("source", ""), "a file's source", 16) or None,
        }
        if entry.get("hash16k") is not None:
            item["hash16k"] = _hash(entry["hash16k"])
        kept.append(item)
    read = result.get("read", [])
    if not isinstance(read, list) or len(read) > MAX_READ:
        raise MalformedResult(f"read must be a list of at most {MAX_READ}")
    read_kept = []
    for entry in read:
        if not isinstance(entry, dict) or entry.get("hash16k") is None:
            raise MalformedResult("each file read must be an object with its size and hash16k")
        read_kept.append(
            {
                "name": _text(entry.get("name"), "a read file's name", MAX_NAME),
                "size": _count(entry.get("size"), "a read file's size"),
                "hash16k": _hash(entry["hash16k"]),
            }
        )
    nfo = _text(result.get("nfo"), "nfo", MAX_NFO)
    ids = {}
    for name in ("imdb", "tvdb", "tvmaze", "tmdb"):
        value = result.get(name)
        if value is not None and (type(value) is not int or not 0 < value <= MAX_ID):
            raise MalformedResult(f"{name} must be a positive id")
        ids[name] = value
    return {
        **counts,
        "password": password,
        "flags": ",".join(sorted(set(flags))) or None,
        "inner_name": _text(result.get("name"), "name", MAX_NAME),
        "files": kept or None,
        "read": read_kept,
        "nfo": zlib.compress(nfo.encode("utf-8")) if nfo else None,
        **ids,
    }


def nfo_of(session: Session, group_id: int, post_key: int) -> str | None:
    """The NFO text an inspection read of the post, or None."""
    nfo = session.scalar(
        select(PostInspection.nfo).where(PostInspection.group_id == group_id, PostInspection.post_key == post_key)
    )
    return zlib.decompress(nfo).decode("utf-8") if nfo else None


def found_of(session: Session, group_id: int, post_key: int) -> PostInspection | None:
    """The post's inspection (what it found), or None."""
    return session.scalar(
        select(PostInspection).where(PostInspection.group_id == group_id, PostInspection.post_key == post_key)
    )


def _hash(value: Any) -> str | None:
    """A hash16k as hex (MD5: 32 hex digits), lower-cased; None when not given."""
    if value is None:
        return None
    if not isinstance(value, str) or len(value) != 32 or not all(c in "0123456789abcdefABCDEF" for c in value):
        raise MalformedResult("hash16k must be 32 hex digits (an MD5)")
    return value.lower()


def _count(value: Any, what: str) -> int:
    if type(value) is not int or not 0 <= value <= 2**62:
        raise MalformedResult(f"{what} must be a whole number from 0")
    return value


def _text(value: Any, what: str, limit: int, required: bool = False) -> str | None:
    if value is None or value == "":
        if required:
            raise MalformedResult(f"{what} is missing")
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise MalformedResult(f"{what} must be a text of at most {limit:,} characters")
    return value.replace("\0", "\ufffd")


def expire(session: Session) -> int:
    """Leases past their time back to the queue (lease takes them back too; this is for a
    queue no node asks of). Returns how many."""
    # An UPDATE's result is a CursorResult, which Session.execute's annotation does not say.
    result = cast(
        "CursorResult[Any]",
        session.execute(
            update(PostInspection)
            .where(PostInspection.state == InspectionState.LEASED, PostInspection.expires_at < text("now()"))
            .values(state=InspectionState.QUEUED, node_id=None, expires_at=None)
        ),
    )
    return result.rowcount
