"""The planner's picture of a group, kept up with the group as it fills.

The catalog's tables that are not partitioned by group (GROUP_TABLES) hold every group's rows,
and the join reads them by group and key. PostgreSQL estimates how many rows `group_id = g`
matches from each table's statistics, and a group those statistics never saw (one added to a
catalog that has others) is estimated at a row or so until autovacuum analyzes the table again,
after a tenth of it has changed: a million rows of a catalog of ten million. On that estimate a
scan of the whole group looks as cheap as a probe by key, and the join's plans read every row
the group has once for each row of the batch: the namesakes compared each release of the group
with each name of the batch, and the queue of inspections read every inspection of the group for
each post. Joins of a group added to bench/catalog.py's catalog of 1,000,000 posts took 2.3 s for
its first batch of 100,000 articles and 26.0 s for its sixth, against 0.5 - 0.7 s with the group
analyzed (bench/newgroup.py, docs/benchmarks.md).

So a join first asks the planner what it expects of its group on each table, and while an
estimate is under SAFE_ROWS counts what the table holds (by its index, as far as it takes to
tell: a few thousand rows at most); a table that holds RATIO times what the planner expects, and at least MIN_ROWS, is
analyzed, its column group_id alone (a sample of the table; the other columns' statistics stay as
they are). A group is analyzed again on a table only once it has doubled there since, so a group
too small to show in ANALYZE's sample of a huge table costs a few ANALYZEs rather than one a
join; and a process stops asking about a group's table once its estimate is SAFE_ROWS or more,
from where a scan of the group is priced above the join's probes and autovacuum keeps up.
"""

from __future__ import annotations

import logging
from typing import Any

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.orm import Session

from app import metrics

log = logging.getLogger(__name__)

# The tables the join reads by group that are not partitioned by it (files and fragment_packs
# are: each group's partition has statistics of its own).
GROUP_TABLES = ("releases", "release_posts", "posts", "post_inspections")
SAFE_ROWS = 1_000
RATIO = 4
MIN_ROWS = 200
# A group's rows on a table it was analyzed for are counted up to this many (what the next ANALYZE
# waits for it to double from); a group that has this many and is still estimated under
# SAFE_ROWS (ANALYZE's sample never shows it) is asked about no more.
COUNTED_MAX = 100_000

# The groups' tables whose estimate was SAFE_ROWS or more (asked no more by this process), and
# the rows a group had on a table when this process last analyzed it for the group.
_settled: set[tuple[int, str]] = set()
_analyzed_at: dict[tuple[int, str], int] = {}


def keep_up(session: Session, group_id: int) -> list[str]:
    """Analyze the tables whose statistics put far fewer rows in this group than it has (see the
    module's doc), before the join plans its statements; returns the tables analyzed. The
    estimates and counts are read in the session's transaction, each ANALYZE runs on a
    connection of its own, outside it."""
    analyzed = []
    for table in GROUP_TABLES:
        if (group_id, table) in _settled:
            continue
        expected = estimate(session, table, group_id)
        if expected >= SAFE_ROWS:
            _settled.add((group_id, table))
            continue
        # Counted as far as it takes to tell: RATIO times the estimate, and twice what the group
        # had when this process last analyzed the table for it.
        enough = max(MIN_ROWS, RATIO * expected, 2 * _analyzed_at.get((group_id, table), 0))
        if _rows(session, table, group_id, enough) < enough:
            continue
        if _analyze(session, table):
            rows = _rows(session, table, group_id, COUNTED_MAX)
            _analyzed_at[(group_id, table)] = rows
            if rows >= COUNTED_MAX:
                _settled.add((group_id, table))
            analyzed.append(table)
            log.info(
                "statistics of %s analyzed for group %s: the planner expected %s rows of it, it has %s%s;"
                " it expects %s now",
                table,
                group_id,
                expected,
                rows,
                " or more" if rows >= COUNTED_MAX else "",
                estimate(session, table, group_id),
            )
    return analyzed


def estimate(session: Session, table: str, group_id: int) -> int:
    """How many rows of the table (one of GROUP_TABLES) the planner expects `group_id = group_id`
    to match."""
    if table not in GROUP_TABLES:
        raise ValueError(f"{table} is not a table of GROUP_TABLES")
    # The group's id written into the statement (an integer), so that the plan is the one a
    # statement of the join gets for it, not a generic one.
    plan: Any = session.execute(
        text(f"EXPLAIN (FORMAT JSON) SELECT FROM {table} WHERE group_id = {int(group_id)}")
    ).scalar_one()
    return int(plan[0]["Plan"]["Plan Rows"])


def _rows(session: Session, table: str, group_id: int, most: int) -> int:
    """The group's rows in the table, counted by its index up to `most`."""
    return int(
        session.execute(
            text(f"SELECT count(*) FROM (SELECT FROM {table} WHERE group_id = :g LIMIT :n) AS g"),
            {"g": group_id, "n": most},
        ).scalar_one()
    )


# The tables this process found it may not analyze (said once).
_refused: set[str] = set()
_LAST_ANALYZE = "SELECT last_analyze FROM pg_stat_user_tables WHERE relid = CAST(:table AS regclass)"


def _analyze(session: Session, table: str) -> bool:
    """ANALYZE the table's group_id on a connection of its own, committed at once; False when it
    did not run: the table held by another ANALYZE or a VACUUM (SKIP_LOCKED: a join neither waits
    for autovacuum nor has it cancelled; the next join asks again), or not the app's to analyze."""
    engine = session.get_bind().engine
    try:
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
            before = connection.execute(text(_LAST_ANALYZE), {"table": table}).scalar()
            connection.execute(text(f"ANALYZE (SKIP_LOCKED) {table} (group_id)"))
            ran = connection.execute(text(_LAST_ANALYZE), {"table": table}).scalar() != before
    except SQLAlchemyError as exc:  # the database away, the pool exhausted: the join goes on without
        log.warning("statistics of %s not analyzed: %s: %s", table, type(exc).__name__, exc)
        return False
    if not ran:
        if table not in _refused and not _own(session, table):
            _refused.add(table)
            log.warning("statistics of %s cannot be analyzed by the app's role (not the table's owner)", table)
        return False
    metrics.statistics_analyzed(table)
    return True


def _own(session: Session, table: str) -> bool:
    return bool(
        session.execute(
            text("SELECT pg_has_role(c.relowner, 'USAGE') FROM pg_class c WHERE c.oid = CAST(:table AS regclass)"),
            {"table": table},
        ).scalar()
    )
