"""What the seed is doing: per group and range, nodes, batches waiting, rates, and the time left.

One read model for every view of it: `overview()` reads what they all show (each group's ranges
by status and kind, each node and the ranges it holds, the batches by state), `seed_status()` and
`node_status()` add the catalog counts, the rates and the examples. The web page, `flask seed
status`, the API's status (their `as_json()`) and /metrics read these dataclasses; how a figure is
written for people is app.formatting's.

An operator (an operator key, or the CLI) sees the whole seed: every node, every failed range
and the errors of failed batches. A node sees what concerns it: the plan's totals, its own
leased ranges, the ranges it gave back as failed, and its own failed batches; never another
node's name or errors.

How the figures are made, so that each says what it claims:

- A group's files, releases and posts are counted in the catalog (the tables files, releases
  and posts), each counted once however many batches saw it. A count of a group's partition is
  a scan of it, so a group whose files the planner estimates above EXACT_COUNT_LIMIT rows is
  given the planner's estimates instead (from the tables' statistics, kept by autovacuum's
  ANALYZE), and says so: its "counted" is "estimated", not "exact".
- Progress is in article numbers: `covered` is what nodes have read of the planned span
  (accepted, or missing on the server, or expired there), `percent_done` its share.
- The rate is article numbers accepted a second over the last RATE_MINUTES minutes in which
  batches were accepted (a minute counts whole), so it tells the pace of the recent work also
  after a pause, where a rate over the last minutes of the clock would read 0; `last_batch_at`
  says when that work was. The ETA is what remains at that rate. The minutes are looked for
  among the seed's latest RATE_BATCHES batches (by the index on when they were accepted; when
  there are more, the oldest minute among them is left out, as it is likely cut short): a group
  or node with none of them has no rate and no last batch shown.
- The batches are counted by state where they wait (accepted, stored, failed: each state's
  partial index); the joined ones, whose number only grows, are the batches the ranges count
  (seed_ranges.batches, one each as it is accepted) less those waiting. No statement here reads
  every batch ever accepted.
- The oldest batch accepted but not stored yet, and how long it has waited: a stuck ingest
  queue shows there first.
- Every time is in UTC.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from functools import cached_property
from datetime import datetime, timedelta, timezone
from typing import Any

from sqlalchemy import text
from sqlalchemy.orm import Session

from app.models import SeedNode
from app.models.ranges import RANGE_STATUSES

# The rate is measured over this many of the latest minutes that saw a batch accepted,
RATE_MINUTES = 10
# found among this many of the latest batches accepted (ten minutes of a fleet's batches, and more).
RATE_BATCHES = 20_000
# Above this many files (the planner's estimate) a group's catalog counts are estimates.
EXACT_COUNT_LIMIT = 5_000_000
# Examples of failed ranges and batches shown: enough to see a pattern, bounded whatever fails.
EXAMPLES = 20
# Hours of the articles-stored chart, by minute.
CHART_HOURS = 6

Row = dict[str, Any]


@dataclass(frozen=True)
class RangePart:
    """Ranges of one status (and kind) in a group: how many, the article numbers they span and
    cover (next_id passed them: accepted, or known missing), and what their batches brought."""

    ranges: int = 0
    span: int = 0
    covered: int = 0
    articles: int = 0
    missing: int = 0
    expired: int = 0
    rejected: int = 0
    dropped: int = 0
    batches: int = 0

    def __add__(self, other: RangePart) -> RangePart:
        return RangePart(*(getattr(self, f.name) + getattr(other, f.name) for f in fields(RangePart)))


@dataclass(frozen=True)
class GroupRanges:
    """A group, its planning's state and its ranges by status: `parts` (every status, the live
    ranges included) and `live` (the live ranges alone)."""

    id: int
    name: str
    active: bool
    parts: dict[str, RangePart]
    live: dict[str, RangePart]
    low_mark: int | None
    high_mark: int | None
    marks_at: datetime | None
    live_first: int | None
    live_next: int | None
    plan_failures: int
    plan_error: str | None
    plan_error_at: datetime | None

    @cached_property
    def total(self) -> RangePart:
        """Every status summed, once: the span, the covered and the remaining are read from it."""
        return sum(self.parts.values(), RangePart())


@dataclass(frozen=True)
class NodeState:
    id: int
    name: str
    enabled: bool
    last_seen_at: datetime | None
    leases: int  # ranges it holds leased


@dataclass(frozen=True)
class OldestBatch:
    """The oldest batch accepted and not stored yet: a stuck ingest queue shows here first."""

    id: int
    range_id: int
    group: str
    batch_from: int
    batch_to: int
    attempts: int
    accepted_at: datetime
    age_seconds: float


@dataclass(frozen=True)
class BatchCounts:
    pending: int  # accepted, waiting for the store
    stored: int  # stored, waiting for the join into posts
    joined: int  # done
    failed: int  # gave up after their attempts
    oldest_unstored: OldestBatch | None


@dataclass(frozen=True)
class Overview:
    """What every view of the seed shows, read in one place: the web page, the CLI and the API
    (through SeedStatus) and /metrics."""

    as_of: datetime
    groups: list[GroupRanges]
    nodes: list[NodeState]
    batches: BatchCounts


@dataclass(frozen=True)
class Rate:
    article_numbers_per_second: float
    rate_seconds: int
    last_batch_at: datetime | None


@dataclass(frozen=True)
class RuleCounts:
    releases: int
    files: int
    fragments: int


@dataclass(frozen=True)
class GroupStatus:
    """A group's ranges with its catalog's counts, its rate and the time left."""

    ranges: GroupRanges
    files: int
    releases: int
    posts: int
    counted: str  # "exact", or "estimated" for a group too big to count (the module's doc)
    rate: Rate
    eta_seconds: float | None  # None: nothing planned, or no batch yet to measure a rate by
    eta_at: datetime | None
    rules: dict[str, RuleCounts]

    @property
    def name(self) -> str:
        return self.ranges.name

    @property
    def parts(self) -> dict[str, RangePart]:
        return self.ranges.parts

    @property
    def span(self) -> int:
        return self.ranges.total.span

    @property
    def covered(self) -> int:
        return self.ranges.total.covered

    @property
    def remaining(self) -> int:
        return self.span - self.covered

    @property
    def percent_done(self) -> float | None:
        return round(100 * self.covered / self.span, 2) if self.span else None

    def as_json(self, operator: bool) -> Row:
        g, total = self.ranges, self.ranges.total
        live = sum(g.live.values(), RangePart())
        shown: Row = {
            "group": g.name,
            "active": g.active,
            "ranges": total.ranges,
            **{status: g.parts[status].ranges for status in ("planned", "leased", "done")},
            "expired_ranges": g.parts["expired"].ranges,
            "live_ranges": live.ranges,
            "live_waiting": g.live["planned"].ranges + g.live["leased"].ranges,
            "span": total.span,
            "covered": total.covered,
            "articles": total.articles,
            "missing": total.missing,
            "expired": total.expired,
            "rejected": total.rejected,
            "dropped": total.dropped,
            "low_mark": g.low_mark,
            "high_mark": g.high_mark,
            "marks_at": g.marks_at,
            "live_first": g.live_first,
            "live_next": g.live_next,
            "plan_failures": g.plan_failures,
            "plan_error": g.plan_error,
            "plan_error_at": g.plan_error_at,
            "files": self.files,
            "releases": self.releases,
            "posts": self.posts,
            "counted": self.counted,
            "remaining": self.remaining,
            "percent_done": self.percent_done,
            "article_numbers_per_second": self.rate.article_numbers_per_second,
            "rate_seconds": self.rate.rate_seconds,
            "last_batch_at": self.rate.last_batch_at,
            "eta_seconds": self.eta_seconds,
            "eta_at": self.eta_at,
            "rules": {rule: vars(counts) for rule, counts in self.rules.items()},
        }
        if not operator:
            # The data center's planning errors name its Usenet server: an operator's business.
            del shown["plan_error"]
        return shown


@dataclass(frozen=True)
class NodeStatus:
    node: NodeState
    rate: Rate
    last_error: str | None  # the last failure it gave a range back with

    def as_json(self) -> Row:
        n = self.node
        return {
            "name": n.name,
            "enabled": n.enabled,
            "last_seen_at": n.last_seen_at,
            "leases": n.leases,
            "last_error": self.last_error,
            "article_numbers_per_second": self.rate.article_numbers_per_second,
            "last_batch_at": self.rate.last_batch_at,
        }


@dataclass(frozen=True)
class SeedStatus:
    """The whole seed for an operator (node None), or what concerns one node: never another
    node's name or errors (no nodes, only its own ranges and failed batches)."""

    overview: Overview
    node: str | None
    groups: list[GroupStatus]
    nodes: list[NodeStatus]
    leased_ranges: list[Row]
    failed_ranges: list[Row]
    failed_batches: list[Row]
    rate: Rate
    idle_seconds: float | None

    @property
    def as_of(self) -> datetime:
        return self.overview.as_of

    @property
    def batches(self) -> BatchCounts:
        return self.overview.batches

    def as_json(self) -> Row:
        """The status as the API answers it and `flask seed status --json` prints it."""
        operator = self.node is None
        oldest = self.batches.oldest_unstored
        shown: Row = {"scope": "operator" if operator else "node"}
        if not operator:
            shown["node"] = self.node
        shown |= {
            "as_of": self.as_of,
            "groups": [g.as_json(operator) for g in self.groups],
            "leased_ranges": self.leased_ranges,
            "failed_ranges": self.failed_ranges,
        }
        if operator:
            shown["nodes"] = [n.as_json() for n in self.nodes]
        shown["batches"] = {
            "pending": self.batches.pending,
            "stored": self.batches.stored,
            "joined": self.batches.joined,
            "failed": self.batches.failed,
            "oldest_unstored": None if oldest is None else vars(oldest),
            "failed_examples": self.failed_batches,
        }
        shown["rates"] = {
            "basis": f"article numbers accepted over the last {RATE_MINUTES} minutes that saw a batch",
            **vars(self.rate),
            "idle_seconds": self.idle_seconds,
        }
        return shown


def status_for(session: Session, node: SeedNode | None = None) -> SeedStatus:
    """The whole status with no node (an operator), else what concerns that node."""
    return seed_status(session) if node is None else node_status(session, node)


def seed_status(session: Session) -> SeedStatus:
    """The whole seed, for an operator."""
    seen = overview(session)
    activity = _activity(session)
    return SeedStatus(
        overview=seen,
        node=None,
        groups=_groups(session, seen, activity),
        nodes=_nodes(session, seen, activity),
        leased_ranges=_leased_ranges(session),
        # Ranges nodes gave back as failed and not done since: an operator looks at why.
        failed_ranges=_failed_ranges(session),
        failed_batches=_failed_batches(session),
        rate=_rate(activity["seed"].get(0)),
        idle_seconds=_idle(seen.as_of, activity["seed"].get(0)),
    )


def node_status(session: Session, node: SeedNode) -> SeedStatus:
    """The plan's totals and this node's own part of it."""
    seen = overview(session)
    activity = _activity(session)
    return SeedStatus(
        overview=seen,
        node=node.name,
        groups=_groups(session, seen, activity),
        nodes=[],
        leased_ranges=_leased_ranges(session, node),
        failed_ranges=_failed_ranges(session, node),
        failed_batches=_failed_batches(session, node),
        rate=_rate(activity["seed"].get(0)),
        idle_seconds=_idle(seen.as_of, activity["seed"].get(0)),
    )


def overview(session: Session) -> Overview:
    """Each group's ranges by status and kind, each node, the batches by state (the module's doc)."""
    now = _now(session)
    return Overview(
        as_of=now, groups=_group_ranges(session), nodes=_node_states(session), batches=_batch_counts(session, now)
    )


def _now(session: Session) -> datetime:
    """The database's time (the one its rows are stamped with), in UTC."""
    return _utc(session.execute(text("SELECT now()")).scalar_one())


def _utc(moment: datetime) -> datetime:
    """A time in UTC (the session's zone may be another)."""
    if moment.tzinfo is None:  # every column is timestamptz: a naive time is taken as UTC
        return moment.replace(tzinfo=timezone.utc)
    return moment.astimezone(timezone.utc)


def _rows(session: Session, sql: str, params: dict[str, Any] | None = None) -> list[Row]:
    """The rows as dicts, their times in UTC."""
    return [
        {k: _utc(v) if isinstance(v, datetime) else v for k, v in r._mapping.items()}
        for r in session.execute(text(sql), params or {})
    ]


def _group_ranges(session: Session) -> list[GroupRanges]:
    rows = _rows(
        session,
        """
        SELECT g.id, g.name, g.active, g.low_mark, g.high_mark, g.marks_at, g.live_first, g.live_next,
               g.plan_failures, g.plan_error, g.plan_error_at, r.status, r.kind,
               count(r.id) AS ranges,
               coalesce(sum(r.last_id - r.first_id + 1), 0)::bigint AS span,
               coalesce(sum(r.next_id - r.first_id), 0)::bigint AS covered,
               coalesce(sum(r.articles), 0)::bigint AS articles,
               coalesce(sum(r.missing), 0)::bigint AS missing,
               coalesce(sum(r.expired), 0)::bigint AS expired,
               coalesce(sum(r.rejected), 0)::bigint AS rejected,
               coalesce(sum(r.dropped), 0)::bigint AS dropped,
               coalesce(sum(r.batches), 0)::bigint AS batches
          FROM groups g LEFT JOIN seed_ranges r ON r.group_id = g.id
         GROUP BY g.id, r.status, r.kind ORDER BY g.name
        """,
    )
    parts: dict[int, dict[str, RangePart]] = {}
    live: dict[int, dict[str, RangePart]] = {}
    heads: dict[int, Row] = {}
    for row in rows:
        heads.setdefault(row["id"], row)
        if row["status"] is None:  # a group with no range yet
            continue
        part = RangePart(*(row[f.name] for f in fields(RangePart)))
        for into, wanted in ((parts, True), (live, row["kind"] == "live")):
            if wanted:
                by_status = into.setdefault(row["id"], {})
                by_status[row["status"]] = by_status.get(row["status"], RangePart()) + part
    return [
        GroupRanges(
            id=group_id,
            name=head["name"],
            active=head["active"],
            parts={s: parts.get(group_id, {}).get(s, RangePart()) for s in RANGE_STATUSES},
            live={s: live.get(group_id, {}).get(s, RangePart()) for s in RANGE_STATUSES},
            low_mark=head["low_mark"],
            high_mark=head["high_mark"],
            marks_at=head["marks_at"],
            live_first=head["live_first"],
            live_next=head["live_next"],
            plan_failures=head["plan_failures"] or 0,
            plan_error=head["plan_error"],
            plan_error_at=head["plan_error_at"],
        )
        for group_id, head in heads.items()
    ]


def _node_states(session: Session) -> list[NodeState]:
    return [
        NodeState(**row)
        for row in _rows(
            session,
            """
            SELECT n.id, n.name, n.enabled, n.last_seen_at, count(r.id) AS leases
              FROM seed_nodes n LEFT JOIN seed_ranges r ON r.node_id = n.id AND r.status = 'leased'
             GROUP BY n.id ORDER BY n.name
            """,
        )
    ]


def _batch_counts(session: Session, now: datetime) -> BatchCounts:
    # Each state where batches wait by its partial index (ix_seed_batches_pending,
    # ix_seed_batches_failed); the joined are the rest of those the ranges count, read in the same
    # statement (one snapshot: a batch accepted meanwhile is in both or in neither).
    counts = (
        session.execute(
            text(
                """
        SELECT (SELECT count(*) FROM seed_batches WHERE state = 'accepted') AS pending,
               (SELECT count(*) FROM seed_batches WHERE state = 'stored') AS stored,
               (SELECT count(*) FROM seed_batches WHERE state = 'failed') AS failed,
               (SELECT coalesce(sum(batches), 0) FROM seed_ranges) AS accepted_ever
        """
            )
        )
        .one()
        ._mapping
    )
    oldest = _rows(
        session,
        """
        SELECT b.id, b.range_id, g.name AS group, b.batch_from, b.batch_to, b.attempts, b.accepted_at
          FROM seed_batches b JOIN seed_ranges r ON r.id = b.range_id JOIN groups g ON g.id = r.group_id
         WHERE b.state = 'accepted' ORDER BY b.accepted_at, b.id LIMIT 1
        """,
    )
    return BatchCounts(
        pending=counts["pending"],
        stored=counts["stored"],
        joined=counts["accepted_ever"] - counts["pending"] - counts["stored"] - counts["failed"],
        failed=counts["failed"],
        oldest_unstored=(
            OldestBatch(**oldest[0], age_seconds=round(max(0.0, (now - oldest[0]["accepted_at"]).total_seconds()), 1))
            if oldest
            else None
        ),
    )


def _groups(session: Session, seen: Overview, activity: dict[str, dict[int, Row]]) -> list[GroupStatus]:
    """Each group's ranges with its catalog's files, releases and posts, its rate and time left,
    and what its rules dropped."""
    rules = _rule_counts(session)
    shown = []
    for group in seen.groups:
        counts = catalog_counts(session, group.id)
        rate = _rate(activity["group"].get(group.id))
        eta = _eta(group.total, activity["group"].get(group.id), rate)
        shown.append(
            GroupStatus(
                ranges=group,
                files=counts["files"],
                releases=counts["releases"],
                posts=counts["posts"],
                counted=counts["counted"],
                rate=rate,
                eta_seconds=eta,
                eta_at=seen.as_of + timedelta(seconds=eta) if eta else None,
                rules=rules.get(group.id, {}),
            )
        )
    return shown


def catalog_counts(session: Session, group_id: int) -> Row:
    """The group's distinct files, releases and posts in the catalog: counted, or the planner's
    estimates for a group above EXACT_COUNT_LIMIT files (see the module's doc)."""
    params = {"group_id": group_id}
    if _estimated_rows(session, "files", group_id) <= EXACT_COUNT_LIMIT:
        counts = session.execute(
            text(
                "SELECT (SELECT count(*) FROM files WHERE group_id = :group_id) AS files,"
                " (SELECT count(*) FROM releases WHERE group_id = :group_id) AS releases,"
                " (SELECT count(*) FROM posts WHERE group_id = :group_id) AS posts"
            ),
            params,
        ).one()
        return {**counts._mapping, "counted": "exact"}
    return {table: _estimated_rows(session, table, group_id) for table in ("files", "releases", "posts")} | {
        "counted": "estimated"
    }


def _estimated_rows(session: Session, table: str, group_id: int) -> int:
    """The planner's estimate of the group's rows in `table` (files, releases or posts): no row
    is read. The group's id is written into the statement (an integer from the database):
    EXPLAIN takes no parameters."""
    plan = session.execute(
        text(f"EXPLAIN (FORMAT JSON) SELECT 1 FROM {table} WHERE group_id = {int(group_id)}")
    ).scalar_one()
    return int(plan[0]["Plan"]["Plan Rows"])


def _rule_counts(session: Session) -> dict[int, dict[str, RuleCounts]]:
    """Per group and rule: what the rule dropped (the rule '' counts what none dropped), summed
    over the batches: articles are each in one batch, files and releases in each batch that saw
    some of them."""
    by_group: dict[int, dict[str, RuleCounts]] = {}
    for row in session.execute(
        text(
            """
        SELECT c.group_id, c.rule, sum(c.releases)::bigint AS releases,
               sum(c.files)::bigint AS files, sum(c.fragments)::bigint AS fragments
          FROM rule_counts c GROUP BY c.group_id, c.rule ORDER BY c.group_id, c.rule
        """
        )
    ):
        by_group.setdefault(row.group_id, {})[row.rule] = RuleCounts(row.releases, row.files, row.fragments)
    return by_group


# Article numbers accepted per minute that saw a batch, the latest RATE_MINUTES such minutes of
# each group, node and the whole seed, among the seed's latest RATE_BATCHES batches (found by
# ix_seed_batches_accepted_at): how many minutes, their article numbers, their last batch.
_ACTIVITY = """
    WITH latest AS (
        SELECT b.accepted_at, b.node_id, b.batch_to - b.batch_from + 1 AS numbers, r.group_id,
               count(*) OVER () AS taken, min(b.accepted_at) OVER () AS oldest
          FROM (SELECT * FROM seed_batches ORDER BY accepted_at DESC LIMIT :batches) b
          JOIN seed_ranges r ON r.id = b.range_id
    ), minutes AS (
        SELECT kind, key, date_trunc('minute', accepted_at) AS minute, sum(numbers)::bigint AS numbers,
               max(accepted_at) AS last_at
          FROM latest CROSS JOIN LATERAL (VALUES ('seed', 0), ('group', group_id), ('node', node_id)) k(kind, key)
         -- With the limit reached, the oldest minute taken is likely cut short: it is left out.
         WHERE key IS NOT NULL
           AND NOT (taken = :batches AND date_trunc('minute', accepted_at) = date_trunc('minute', oldest))
         GROUP BY 1, 2, 3
    ), ranked AS (
        SELECT *, row_number() OVER (PARTITION BY kind, key ORDER BY minute DESC) AS nth FROM minutes
    )
    SELECT kind, key, count(*) AS minutes, sum(numbers)::bigint AS numbers, max(last_at) AS last_at
      FROM ranked WHERE nth <= :minutes GROUP BY kind, key
"""


def _activity(session: Session) -> dict[str, dict[int, Row]]:
    """The recent activity (see _ACTIVITY) by kind ('seed' under key 0, 'group', 'node') and key."""
    found: dict[str, dict[int, Row]] = {"seed": {}, "group": {}, "node": {}}
    for row in _rows(session, _ACTIVITY, {"minutes": RATE_MINUTES, "batches": RATE_BATCHES}):
        found[row.pop("kind")][row.pop("key")] = row
    return found


def _rate(activity: Row | None) -> Rate:
    if not activity:
        return Rate(0.0, 0, None)
    seconds = 60 * activity["minutes"]
    return Rate(round(activity["numbers"] / seconds, 1), seconds, activity["last_at"])


def _eta(total: RangePart, activity: Row | None, rate: Rate) -> float | None:
    """The seconds left at the group's recent rate: 0 when all is covered, None with nothing
    planned or no batch yet to measure a rate by."""
    remaining = total.span - total.covered
    if total.span and not remaining:
        return 0.0
    numbers: int = activity["numbers"] if activity else 0
    if remaining > 0 and numbers > 0:
        return round(remaining * rate.rate_seconds / numbers, 1)
    return None


def _idle(now: datetime, activity: Row | None) -> float | None:
    """How long ago the seed's last batch came."""
    last = _rate(activity).last_batch_at
    return round((now - last).total_seconds(), 1) if last is not None else None


def _leased_ranges(session: Session, node: SeedNode | None = None) -> list[Row]:
    return _rows(
        session,
        """
        SELECT r.id, g.name AS group, r.first_id, r.last_id, r.next_id, r.status, n.name AS node,
               r.batches, r.articles, r.files, r.releases, r.dropped, r.leased_at, r.touched_at
          FROM seed_ranges r JOIN groups g ON g.id = r.group_id LEFT JOIN seed_nodes n ON n.id = r.node_id
         WHERE r.status = 'leased' AND (CAST(:node_id AS integer) IS NULL OR r.node_id = :node_id)
         ORDER BY r.id
        """,
        {"node_id": None if node is None else node.id},
    )


def _failed_ranges(session: Session, node: SeedNode | None = None) -> list[Row]:
    # A range's last failure is kept as "<node name>: <reason>" (app/services/leases.py); a node
    # name has neither ':' nor spaces, so the prefix names exactly one node.
    return _rows(
        session,
        """
        SELECT r.id, g.name AS group, r.first_id, r.next_id, r.last_id, r.status, r.failures, r.last_failure
          FROM seed_ranges r JOIN groups g ON g.id = r.group_id
         WHERE r.failures > 0 AND r.status NOT IN ('done', 'expired')
           AND (CAST(:prefix AS text) IS NULL OR starts_with(r.last_failure, :prefix))
         ORDER BY r.failures DESC, r.id LIMIT :examples
        """,
        {"prefix": None if node is None else f"{node.name}: ", "examples": EXAMPLES},
    )


def _nodes(session: Session, seen: Overview, activity: dict[str, dict[int, Row]]) -> list[NodeStatus]:
    """Each node with its rate (article numbers accepted a second over its last RATE_MINUTES
    minutes that saw its batches) and the last failure it gave a range back with (kept as
    "<node>: <reason>", app/services/leases.py)."""
    last_errors = {
        row["id"]: row["last_error"]
        for row in _rows(
            session,
            """
            SELECT n.id,
                   (SELECT substr(r.last_failure, length(n.name) + 3) FROM seed_ranges r
                     WHERE r.failures > 0 AND starts_with(r.last_failure, n.name || ': ')
                     ORDER BY r.touched_at DESC NULLS LAST, r.id DESC LIMIT 1) AS last_error
              FROM seed_nodes n
            """,
        )
    }
    return [NodeStatus(n, _rate(activity["node"].get(n.id)), last_errors.get(n.id)) for n in seen.nodes]


def stored_by_minute(session: Session, hours: int = CHART_HOURS) -> list[Row]:
    """Articles stored a minute by group over the last `hours` (the batches' stored_at, found by
    its index; a batch's articles from its rule counts): [{group, minute, articles}] by minute."""
    return _rows(
        session,
        """
        SELECT g.name AS group, date_trunc('minute', b.stored_at) AS minute,
               coalesce(sum(c.fragments) FILTER (WHERE c.rule = ''), 0)::bigint AS articles
          FROM seed_batches b
          JOIN seed_ranges r ON r.id = b.range_id
          JOIN groups g ON g.id = r.group_id
          LEFT JOIN rule_counts c ON c.range_id = b.range_id AND c.batch_from = b.batch_from
         WHERE b.stored_at >= now() - make_interval(hours => :hours)
         GROUP BY 1, 2 ORDER BY 2, 1
        """,
        {"hours": hours},
    )


def _failed_batches(session: Session, node: SeedNode | None = None) -> list[Row]:
    return _rows(
        session,
        "SELECT id, range_id, batch_from, attempts, error FROM seed_batches"
        " WHERE state = 'failed' AND (CAST(:node_id AS integer) IS NULL OR node_id = :node_id)"
        " ORDER BY id LIMIT :examples",
        {"node_id": None if node is None else node.id, "examples": EXAMPLES},
    )


def batch_summary(session: Session, batch_id: int) -> Row | None:
    """What one batch brought, from its rows (for the ingest task's result, which Flower shows):
    its group, range and article numbers, its articles (kept and dropped), the files and releases
    it kept (as the batch saw them: one spanning batches counts in each), its state. None for a
    batch that is gone."""
    rows = _rows(
        session,
        """
        SELECT b.id AS batch_id, g.name AS group, b.range_id, b.batch_from, b.batch_to, b.state,
               coalesce(sum(c.fragments), 0)::bigint AS articles,
               coalesce(sum(c.files) FILTER (WHERE c.rule = ''), 0)::bigint AS files,
               coalesce(sum(c.releases) FILTER (WHERE c.rule = ''), 0)::bigint AS releases,
               coalesce(sum(c.fragments) FILTER (WHERE c.rule <> ''), 0)::bigint AS dropped
          FROM seed_batches b
          JOIN seed_ranges r ON r.id = b.range_id
          JOIN groups g ON g.id = r.group_id
          LEFT JOIN rule_counts c ON c.range_id = b.range_id AND c.batch_from = b.batch_from
         WHERE b.id = :batch_id
         GROUP BY b.id, g.name
        """,
        {"batch_id": batch_id},
    )
    return rows[0] if rows else None
