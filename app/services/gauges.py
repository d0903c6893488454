"""The gauges /metrics serves, read from PostgreSQL and Redis at each scrape (app.metrics keeps
the counters, which the services count): the ranges, nodes and batches from the status' read
model (app.services.status.overview, the figures the web page and `flask seed status` show), the
inspections waiting, the replica's lag and the Celery queues' depths."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from sqlalchemy import text

from app import metrics
from app.config import get_settings
from app.db import get_read_engine, replica_state, session_scope
from app.services import status

log = logging.getLogger(__name__)

# Batch states counted at scrape time; 'joined', the end of every batch, grows without bound
# and its rate is seed_batches_stored_total's.
BATCH_STATES = ("accepted", "stored", "failed")
# How long a scrape waits on PostgreSQL before it reports the source down.
SCRAPE_TIMEOUT_SECONDS = 5


def exposition() -> tuple[bytes, str]:
    """What /metrics serves: the counters of every process and these gauges, read now."""
    return metrics.exposition(SeedCollector())


def _read_source(source: str, read: Callable[[], list[Metric]], up: GaugeMetricFamily) -> list[Metric]:
    """What one source gives, its seed_metrics_source_up noted: 1 when it answered, 0 (its gauges
    left out, and the reason logged) when it did not."""
    try:
        metrics = read()
    except Exception as exc:  # noqa: BLE001 - reported as a gauge, the scrape goes on
        log.warning("metrics: the %s could not be read: %s", source, _first_line(exc))
        metrics = []
    up.add_metric([source], 1 if metrics else 0)
    return metrics


class SeedCollector:
    """The gauges, read from PostgreSQL and Redis at each scrape. A source that does not answer
    is reported by seed_metrics_source_up (0) and its gauges left out; the counters are still
    served."""

    def collect(self) -> Iterator[Metric]:
        up = GaugeMetricFamily(
            "seed_metrics_source_up",
            "Whether the scrape could read the source"
            " (database: PostgreSQL, broker: Redis, replica: the read replica of"
            " DATABASE_READ_URL, when set).",
            labels=["source"],
        )
        sources: list[tuple[str, Callable[[], list[Metric]]]] = [("database", lambda: list(self._database()))]
        if get_settings().database_read_url is not None:
            sources.append(("replica", lambda: [self._replica()]))
        sources.append(("broker", lambda: [self._queues()]))
        for source, read in sources:
            yield from _read_source(source, read, up)
        yield up

    def _replica(self) -> Metric:
        with get_read_engine().connect() as conn:
            conn.execute(text(f"SET LOCAL statement_timeout = '{SCRAPE_TIMEOUT_SECONDS}s'"))
            state = replica_state(conn)
        return GaugeMetricFamily(
            "seed_database_replica_lag_seconds",
            "How far the read replica (DATABASE_READ_URL) is behind the primary: 0 while it"
            " has replayed all it received, else the age of the last transaction it replayed.",
            value=state.lag_seconds,
        )

    def _queues(self) -> Metric:
        depth = GaugeMetricFamily("seed_queue_depth", "Messages waiting in a Celery queue.", labels=["queue"])
        for queue, count in metrics.queue_depths().items():
            depth.add_metric([queue], count)
        return depth

    def _database(self) -> Iterator[Metric]:
        with session_scope() as session:
            session.execute(text(f"SET LOCAL statement_timeout = '{SCRAPE_TIMEOUT_SECONDS}s'"))
            # The figures the status page and `flask seed status` show, from the same read model.
            seen = status.overview(session)
            # The inspections waiting and under way (their partial indexes; the done ones grow with
            # the catalog and are not counted at each scrape).
            inspecting: dict[str, int] = dict(
                session.execute(
                    text(
                        "SELECT state, count(*) FROM post_inspections WHERE state IN ('queued', 'leased') GROUP BY state"
                    )
                ).all()
            )
        waiting = GaugeMetricFamily(
            "seed_inspections", "Inspections of posts queued for a node, and leased to one.", labels=["state"]
        )
        for state in ("queued", "leased"):
            waiting.add_metric([state], inspecting.get(state, 0))
        yield waiting

        ranges = GaugeMetricFamily("seed_ranges", "Ranges by group and state.", labels=["group", "state"])
        failures = GaugeMetricFamily(
            "seed_group_plan_failures",
            "Plannings of the group that failed in a row (0 after one that worked).",
            labels=["group"],
        )
        for group in seen.groups:
            failures.add_metric([group.name], group.plan_failures)
            for state, part in group.parts.items():
                ranges.add_metric([group.name, state], part.ranges)
        yield ranges
        yield failures

        leased = GaugeMetricFamily("seed_node_leased_ranges", "Ranges a node holds leased.", labels=["node"])
        seen_at = GaugeMetricFamily(
            "seed_node_last_seen_timestamp_seconds",
            "When a node last called the API (Unix time; nodes never seen left out).",
            labels=["node"],
        )
        for node in seen.nodes:
            leased.add_metric([node.name], node.leases)
            if node.last_seen_at is not None:
                seen_at.add_metric([node.name], node.last_seen_at.timestamp())
        yield leased
        yield seen_at

        batches = GaugeMetricFamily(
            "seed_batches",
            "Batches not yet joined, by state (accepted: waiting for the"
            " store; stored: for the join into posts; failed: for an operator).",
            labels=["state"],
        )
        counts = seen.batches
        by_state = {"accepted": counts.pending, "stored": counts.stored, "failed": counts.failed}
        for state in BATCH_STATES:
            batches.add_metric([state], by_state[state])
        yield batches
        oldest = counts.oldest_unstored
        yield GaugeMetricFamily(
            "seed_oldest_unstored_batch_age_seconds",
            "Seconds since the oldest batch not yet stored was accepted (0: none waits).",
            value=0.0 if oldest is None else oldest.age_seconds,
        )


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {lines[0] if lines else ''}"[:300]
