"""Posts: the releases of one post joined, whatever batches, ranges and nodes saw them.

The digest gathers a release from the files of one poster, one release name and one file count,
under a key every node computes the same, so a release split over batches, ranges and nodes is
one row. Real posts break that in ways no single file shows: posting tools (ngPost, Nyuu) give
files, or parts of a post, posters of their own, and a post's .nfo or .sfv comes with a counter
of its own ([01/01] beside [i/36]). The releases such a post leaves share their name and were
posted within minutes of each other; this joins them into one post.

Releases of a group are of one post when their folded names (``releases.name_fold``: no case,
spaces or punctuation) are equal and at least MIN_NAME_CHARS long (a generic name such as
"sample" joins nothing), and
- both count the same files (or none), their posters write from one mail domain (ngPost's
  "KIUzWM340zX@mile.com" then "Myfranco@mile.com") and their posting times, first to last, come
  within JOIN_GAP of each other; or
- one is a companion (``releases.companion``, marked by the store: one metadata file, .nfo,
  .sfv, .nzb, .jpg..., counting one file or none) still on its own: it joins the post of the
  nearest release of its name posted within COMPANION_GAP (an .nfo is often added later, by
  someone else).
Joining is transitive. Different names never join: two posts of one poster at one time stay two;
nor do two series of one name counting different files ([i/3] and [i/4] are two posts), nor a
name posted again by another poster days later. A post whose every file has a poster of its own,
from mail domains of their own, is left as that many releases: nothing but the name and the time
would join them, and those join different posts of one name too.

A post's key is its least release key: ``releases.post_key`` (NULL: the release is a post of its
own), and the view ``posts`` sums a post's releases. The least key does not depend on the order
the batches came in, and a join only ever adds releases to a post (a release's posting times
only widen as batches add to it), so any order of batches gives the same posts.

The join runs after the store, in a transaction of its own (gather_batch): the batch waits in
'stored' with its release keys until then, and the requeue sweep sends it again should the task
be lost. Joins of one group run one at a time (an advisory lock), so each sees every release the
joins before it saw; a store never waits on it (it takes no lock a store takes, but the rows it
moves to another post, in key order as the store locks them).
"""
from __future__ import annotations

from datetime import timedelta

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from app.models import SeedBatch, SeedRange
from app.models.batches import BatchState

JOIN_GAP = timedelta(hours=1)
COMPANION_GAP = timedelta(days=45)
MIN_NAME_CHARS = 8
# pg_advisory_xact_lock(JOIN_LOCK, group_id): one join of a group at a time.
JOIN_LOCK = 0x706F7374  # "post"

# Every release of the group sharing a name with one of these (names of posts are not common).
NAMESAKES = text("""
    SELECT r.key, coalesce(r.post_key, r.key) AS post, r.name_fold, r.companion, r.file_count,
           lower(substring(r.poster from '@([^>[:space:]]+)')) AS domain, r.first_post, r.last_post
      FROM releases r
     WHERE r.group_id = :g AND r.name_fold IN (
           SELECT name_fold FROM releases WHERE group_id = :g AND key = ANY(:keys)
              AND length(name_fold) >= :min_chars)
""")
LOCK_POSTS = text("SELECT FROM releases WHERE group_id = :g AND coalesce(post_key, key) = ANY(:posts)"
                  " ORDER BY key FOR UPDATE")
# The releases of these posts into the target's; a release whose post becomes its own key is a
# post of its own again (NULL), as a companion moved back out is.
MOVE = text("UPDATE releases SET post_key = nullif(:target, key)"
            " WHERE group_id = :g AND (coalesce(post_key, key) = ANY(:posts) AND NOT companion"
            "                          OR companion AND key = ANY(:posts))")


def gather_batch(session: Session, batch_id: int) -> int | None:
    """Join the releases of a stored batch into their posts and mark it gathered; None when there
    was nothing to do (not stored yet, or gathered already). Returns how many releases moved to
    another post."""
    row = session.scalar(
        select(SeedBatch).where(SeedBatch.id == batch_id).with_for_update()
        .execution_options(populate_existing=True)
    )
    if row is None or row.state != BatchState.STORED:
        return None
    group_id = session.scalar(select(SeedRange.group_id).where(SeedRange.id == row.range_id))
    moved = join_posts(session, group_id, row.release_keys or [])
    row.state = BatchState.GATHERED
    row.release_keys = None
    return moved


def join_posts(session: Session, group_id: int, release_keys: list[int]) -> int:
    """Join these releases with the releases of their posts (see the module's doc); returns how
    many releases moved to another post."""
    if not release_keys:
        return 0
    session.execute(text("SELECT pg_advisory_xact_lock(:lock, :g)"), {"lock": JOIN_LOCK, "g": group_id})
    rows = session.execute(NAMESAKES, {"g": group_id, "keys": sorted(set(release_keys)),
                                       "min_chars": MIN_NAME_CHARS}).all()
    by_name: dict[str, list] = {}
    for row in rows:
        by_name.setdefault(row.name_fold, []).append(row)
    moves: dict[int, list[int]] = {}  # target post -> the posts (or companions) that go to it
    for namesakes in by_name.values():
        for target, posts in _moves(namesakes):
            moves.setdefault(target, []).extend(posts)
    moved = 0
    for target, posts in sorted(moves.items()):
        session.execute(LOCK_POSTS, {"g": group_id, "posts": sorted({target, *posts})})
        moved += session.execute(MOVE, {"g": group_id, "target": target, "posts": posts}).rowcount
    return moved


def _apart(a, b) -> timedelta | None:
    """The time between two releases' postings (zero when they overlap); None without dates."""
    if None in (a.first_post, a.last_post, b.first_post, b.last_post):
        return None
    return max(b.first_post - a.last_post, a.first_post - b.last_post, timedelta(0))


def _moves(namesakes: list):
    """(target post, [posts]) for the releases of one name: the sets (non-companions) joined by
    their pairs, their post the least key of their releases; each companion in the post of its
    nearest set, or its own, computed afresh each time (a nearer set may have come since)."""
    sets = [r for r in namesakes if not r.companion]
    pairs = []
    for i, a in enumerate(sets):
        for b in sets[i + 1:]:
            if a.post != b.post and a.file_count == b.file_count and a.domain == b.domain:
                gap = _apart(a, b)
                if gap is not None and gap <= JOIN_GAP:
                    pairs.append((a.post, b.post))
    post_of = {r.post: r.post for r in sets}
    for posts in _components(pairs):
        yield posts[0], posts[1:]
        post_of.update(dict.fromkeys(posts, posts[0]))
    for companion in namesakes:
        if not companion.companion:
            continue
        near = [(gap, post_of[r.post]) for r in sets
                if (gap := _apart(companion, r)) is not None and gap <= COMPANION_GAP]
        target = min(near)[1] if near else companion.key
        if target != companion.post:
            yield target, [companion.key]  # by its own key: a companion is a post of its own or a member


def _components(pairs) -> list[list[int]]:
    """The posts that pairs join, each set sorted (its least key first)."""
    parent: dict[int, int] = {}

    def root(post: int) -> int:
        parent.setdefault(post, post)
        while parent[post] != post:
            parent[post] = parent[parent[post]]
            post = parent[post]
        return post

    for a, b in pairs:
        ra, rb = root(a), root(b)
        if ra != rb:
            parent[max(ra, rb)] = min(ra, rb)
    sets: dict[int, list[int]] = {}
    for post in parent:
        sets.setdefault(root(post), []).append(post)
    return [sorted(posts) for posts in sets.values()]
