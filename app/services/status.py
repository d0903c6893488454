"""What the seed is doing: per group and range, nodes, batches waiting, rates, and the time left.

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
  says when that work was. The ETA is what remains at that rate.
- The oldest batch accepted but not stored yet, and how long it has waited: a stuck ingest
  queue shows there first.
- Every time is in UTC.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from sqlalchemy import text
from sqlalchemy.orm import Session

from app.models import SeedNode

# The rate is measured over this many of the latest minutes that saw a batch accepted.
RATE_MINUTES = 10
# Above this many files (the planner's estimate) a group's catalog counts are estimates.
EXACT_COUNT_LIMIT = 5_000_000
# Examples of failed ranges and batches shown: enough to see a pattern, bounded whatever fails.
EXAMPLES = 20


def status_for(session: Session, node: SeedNode | None = None) -> dict:
    """The whole status with no node (an operator), else what concerns that node."""
    return seed_status(session) if node is None else node_status(session, node)


def seed_status(session: Session) -> dict:
    """The whole seed, for an operator."""
    now = _now(session)
    return {
        "scope": "operator",
        "as_of": now,
        "groups": _groups(session, now, operator=True),
        "leased_ranges": _leased_ranges(session),
        # Ranges nodes gave back as failed and not done since: an operator looks at why.
        "failed_ranges": _failed_ranges(session),
        "nodes": _nodes(session),
        "batches": {**_batch_counts(session, now), "failed_examples": _failed_batches(session)},
        "rates": _seed_rate(session, now),
    }


def node_status(session: Session, node: SeedNode) -> dict:
    """The plan's totals and this node's own part of it."""
    now = _now(session)
    return {
        "scope": "node",
        "node": node.name,
        "as_of": now,
        "groups": _groups(session, now),
        "leased_ranges": _leased_ranges(session, node),
        "failed_ranges": _failed_ranges(session, node),
        "batches": {**_batch_counts(session, now), "failed_examples": _failed_batches(session, node)},
        "rates": _seed_rate(session, now),
    }


def _now(session: Session) -> datetime:
    """The database's time (the one its rows are stamped with), in UTC."""
    return _utc(session.execute(text("SELECT now()")).scalar_one())


def _utc(moment):
    """A time in UTC (the session's zone may be another); anything else as it is."""
    if isinstance(moment, datetime):
        if moment.tzinfo is None:  # every column is timestamptz: a naive time is taken as UTC
            return moment.replace(tzinfo=timezone.utc)
        return moment.astimezone(timezone.utc)
    return moment


def _rows(session: Session, sql: str, params: dict | None = None) -> list[dict]:
    return [{k: _utc(v) for k, v in r._mapping.items()} for r in session.execute(text(sql), params or {})]


def _groups(session: Session, now: datetime, operator: bool = False) -> list[dict]:
    """Each group's ranges and counts, its catalog's files, releases and posts, its progress,
    rate and time left, where live planning stands, its ranges the server expired before they
    were read, and (for an operator) how planning it last failed."""
    groups = _rows(
        session,
        """
        SELECT g.id, g.name AS group, g.active,
               count(r.id) AS ranges,
               count(r.id) FILTER (WHERE r.status = 'planned') AS planned,
               count(r.id) FILTER (WHERE r.status = 'leased') AS leased,
               count(r.id) FILTER (WHERE r.status = 'done') AS done,
               count(r.id) FILTER (WHERE r.status = 'expired') AS expired_ranges,
               count(r.id) FILTER (WHERE r.kind = 'live') AS live_ranges,
               count(r.id) FILTER (WHERE r.kind = 'live' AND r.status IN ('planned', 'leased')) AS live_waiting,
               coalesce(sum(r.last_id - r.first_id + 1), 0)::bigint AS span,
               coalesce(sum(r.next_id - r.first_id), 0)::bigint AS covered,
               coalesce(sum(r.articles), 0)::bigint AS articles,
               coalesce(sum(r.missing), 0)::bigint AS missing,
               coalesce(sum(r.expired), 0)::bigint AS expired,
               coalesce(sum(r.rejected), 0)::bigint AS rejected,
               coalesce(sum(r.dropped), 0)::bigint AS dropped,
               g.low_mark, g.high_mark, g.marks_at, g.live_first, g.live_next,
               g.plan_failures, g.plan_error, g.plan_error_at
          FROM groups g LEFT JOIN seed_ranges r ON r.group_id = g.id
         GROUP BY g.id, g.name ORDER BY g.name
        """,
    )
    activity = _group_activity(session)
    rules = _rule_counts(session)
    for group in groups:
        group_id = group.pop("id")
        if not operator:
            # The data center's planning errors name its Usenet server: an operator's business.
            del group["plan_error"]
        group.update(catalog_counts(session, group_id))
        group.update(_progress(group["span"], group["covered"], activity.get(group_id), now))
        group["rules"] = rules.get(group_id, {})
    return groups


def catalog_counts(session: Session, group_id: int) -> dict:
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


def _rule_counts(session: Session) -> dict[int, dict]:
    """Per group and rule: what the rule dropped (the rule '' counts what none dropped), summed
    over the batches: articles are each in one batch, files and releases in each batch that saw
    some of them."""
    by_group: dict[int, dict] = {}
    for row in session.execute(
        text(
            """
        SELECT c.group_id, c.rule, sum(c.releases)::bigint AS releases,
               sum(c.files)::bigint AS files, sum(c.fragments)::bigint AS fragments
          FROM rule_counts c GROUP BY c.group_id, c.rule ORDER BY c.group_id, c.rule
        """
        )
    ):
        by_group.setdefault(row.group_id, {})[row.rule] = {
            "releases": row.releases,
            "files": row.files,
            "fragments": row.fragments,
        }
    return by_group


# Article numbers accepted per minute that saw a batch, the latest RATE_MINUTES such minutes of
# each group (or of the whole seed): how many minutes, their article numbers, their last batch.
_ACTIVITY = """
    WITH minutes AS (
        SELECT {key} AS key, date_trunc('minute', b.accepted_at) AS minute,
               sum(b.batch_to - b.batch_from + 1)::bigint AS numbers, max(b.accepted_at) AS last_at
          FROM seed_batches b JOIN seed_ranges r ON r.id = b.range_id
         GROUP BY 1, 2
    ), latest AS (
        SELECT *, row_number() OVER (PARTITION BY key ORDER BY minute DESC) AS nth FROM minutes
    )
    SELECT key, count(*) AS minutes, sum(numbers)::bigint AS numbers, max(last_at) AS last_at
      FROM latest WHERE nth <= :minutes GROUP BY key
"""


def _group_activity(session: Session) -> dict[int, dict]:
    return {
        row.pop("key"): row for row in _rows(session, _ACTIVITY.format(key="r.group_id"), {"minutes": RATE_MINUTES})
    }


def _progress(span: int, covered: int, activity: dict | None, now: datetime) -> dict:
    """A group's share done, its rate over its recent activity and the time left at that rate."""
    rate = _rate(activity)
    remaining = span - covered
    if span and not remaining:
        eta_seconds = 0.0
    elif remaining > 0 and activity and activity["numbers"] > 0:
        eta_seconds = round(remaining * rate["rate_seconds"] / activity["numbers"], 1)
    else:
        eta_seconds = None  # nothing planned, or no batch yet to measure a rate by
    return {
        "remaining": remaining,
        "percent_done": round(100 * covered / span, 2) if span else None,
        **rate,
        "eta_seconds": eta_seconds,
        "eta_at": now + timedelta(seconds=eta_seconds) if eta_seconds else None,
    }


def _rate(activity: dict | None) -> dict:
    if not activity:
        return {"article_numbers_per_second": 0.0, "rate_seconds": 0, "last_batch_at": None}
    seconds = 60 * activity["minutes"]
    return {
        "article_numbers_per_second": round(activity["numbers"] / seconds, 1),
        "rate_seconds": seconds,
        "last_batch_at": activity["last_at"],
    }


def _seed_rate(session: Session, now: datetime) -> dict:
    """The whole seed's rate over its recent activity (the module's doc), with how long ago its
    last batch came."""
    (activity,) = _rows(session, _ACTIVITY.format(key="0"), {"minutes": RATE_MINUTES}) or [None]
    rate = _rate(activity)
    last = rate["last_batch_at"]
    return {
        "basis": f"article numbers accepted over the last {RATE_MINUTES} minutes that saw a batch",
        **rate,
        "idle_seconds": round((now - last).total_seconds(), 1) if last is not None else None,
    }


def _leased_ranges(session: Session, node: SeedNode | None = None) -> list[dict]:
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


def _failed_ranges(session: Session, node: SeedNode | None = None) -> list[dict]:
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


def _nodes(session: Session) -> list[dict]:
    """Each node: whether enabled, when last seen, the ranges it holds, its rate (article numbers
    accepted a second over its last RATE_MINUTES minutes that saw its batches) and the last
    failure it gave a range back with (kept as "<node>: <reason>", app/services/leases.py)."""
    nodes = _rows(
        session,
        """
        SELECT n.id, n.name, n.enabled, n.last_seen_at,
               (SELECT count(*) FROM seed_ranges r WHERE r.node_id = n.id) AS leases,
               (SELECT substr(r.last_failure, length(n.name) + 3) FROM seed_ranges r
                 WHERE r.failures > 0 AND starts_with(r.last_failure, n.name || ': ')
                 ORDER BY r.touched_at DESC NULLS LAST, r.id DESC LIMIT 1) AS last_error
          FROM seed_nodes n ORDER BY n.name
        """,
    )
    activity = {
        row.pop("key"): row for row in _rows(session, _ACTIVITY.format(key="b.node_id"), {"minutes": RATE_MINUTES})
    }
    for node in nodes:
        rate = _rate(activity.get(node.pop("id")))
        node["article_numbers_per_second"], node["last_batch_at"] = (
            rate["article_numbers_per_second"],
            rate["last_batch_at"],
        )
    return nodes


# Hours of the articles-stored chart, by minute.
CHART_HOURS = 6


def stored_by_minute(session: Session, hours: int = CHART_HOURS) -> list[dict]:
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


def _batch_counts(session: Session, now: datetime) -> dict:
    counts = (
        session.execute(
            text(
                """
        SELECT count(*) FILTER (WHERE state = 'accepted') AS pending,
               count(*) FILTER (WHERE state = 'stored') AS stored,
               count(*) FILTER (WHERE state = 'gathered') AS gathered,
               count(*) FILTER (WHERE state = 'failed') AS failed
          FROM seed_batches
        """
            )
        )
        .one()
        ._mapping
    )
    # The oldest batch not stored yet: by the pending batches' index, whatever the table's size.
    oldest = _rows(
        session,
        """
        SELECT b.id, b.range_id, g.name AS group, b.batch_from, b.batch_to, b.attempts, b.accepted_at
          FROM seed_batches b JOIN seed_ranges r ON r.id = b.range_id JOIN groups g ON g.id = r.group_id
         WHERE b.state = 'accepted' ORDER BY b.accepted_at, b.id LIMIT 1
        """,
    )
    for batch in oldest:
        batch["age_seconds"] = round(max(0.0, (now - batch["accepted_at"]).total_seconds()), 1)
    return {**counts, "oldest_unstored": oldest[0] if oldest else None}


def _failed_batches(session: Session, node: SeedNode | None = None) -> list[dict]:
    return _rows(
        session,
        "SELECT id, range_id, batch_from, attempts, error FROM seed_batches"
        " WHERE state = 'failed' AND (CAST(:node_id AS integer) IS NULL OR node_id = :node_id)"
        " ORDER BY id LIMIT :examples",
        {"node_id": None if node is None else node.id, "examples": EXAMPLES},
    )


def batch_summary(session: Session, batch_id: int) -> dict | None:
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
