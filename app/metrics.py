"""Prometheus metrics of the data center (docs/monitoring.md lists them all).

Counters and histograms are counted where the thing happens, in the services, so that the API, the
Celery workers and the data center's own runner (`flask seed range`) count alike, each once. What
a transaction does is counted when it commits (on_commit): a store rolled back and retried is
counted once, by the attempt that committed.

The processes are many (gunicorn's workers, Celery's prefork children, the CLI), so the values
live in PROMETHEUS_MULTIPROC_DIR (prometheus_client's multiprocess mode, read by the library
itself): every process writes its own files there and the API's /metrics sums them. The gauges
are not kept by any process: app.services.gauges reads them from PostgreSQL and Redis when
/metrics is scraped, so they are as fresh as the scrape and never left behind by a process that
died.

This module sits under the services (they import it) and imports only the database and the
settings.
"""

from __future__ import annotations

import logging
import os
import socket
from collections.abc import Callable, Iterable
from time import perf_counter

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    REGISTRY,
    CollectorRegistry,
    Counter,
    Histogram,
    generate_latest,
    values,
)
from prometheus_client.core import Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector
from prometheus_client.multiprocess import mark_process_dead as _mark_dead
from sqlalchemy import event, text
from sqlalchemy.orm import Session

from app.config import get_settings

log = logging.getLogger(__name__)

MULTIPROC_DIR = "PROMETHEUS_MULTIPROC_DIR"
# The Celery queues (celeryconfig.task_queues): Redis lists named after them.
QUEUES = ("ingest", "repair", "control")
# How long a scrape waits on Redis before it reports the source down.
REDIS_TIMEOUT_SECONDS = 2


def _host() -> str:
    # '_' separates the parts of prometheus_client's file names (type_mode_id.db).
    return socket.gethostname().replace("_", "-") or "host"


_HOST = _host()


def process_identifier(pid: int | None = None) -> str:
    """The name of a process's files in PROMETHEUS_MULTIPROC_DIR: host and pid. The API and the
    workers may run in containers of their own that share the directory (a volume), each with its
    own pid 1, 7, ...: the host name (the container's) keeps their files apart."""
    return f"{_HOST}-{os.getpid() if pid is None else pid}"


def multiprocess_dir() -> str | None:
    return os.environ.get(MULTIPROC_DIR) or None


def _use_multiprocess_files() -> None:
    """Every metric made after this writes to PROMETHEUS_MULTIPROC_DIR under process_identifier.
    A directory that is not there is made; one that cannot be made leaves the values in the
    process (counting must never stop a store or a request)."""
    path = multiprocess_dir()
    if path is None:
        return
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        log.warning("%s=%s cannot be made (%s): metrics stay in this process", MULTIPROC_DIR, path, exc)
        values.ValueClass = values.MutexValue
        return
    values.ValueClass = values.MultiProcessValue(process_identifier)


_use_multiprocess_files()


def mark_process_dead(pid: int) -> None:
    """For gunicorn's child_exit hook: a dead worker's live gauges dropped (prometheus_client's
    bookkeeping; its counters and histograms stay, summed into the totals)."""
    path = multiprocess_dir()
    if path is not None and os.path.isdir(path):
        _mark_dead(process_identifier(pid), path)


# -- counted where it happens ------------------------------------------------------------------

BATCHES_ACCEPTED = Counter("seed_batches_accepted", "Batches accepted (answered 202), by group.", ["group"])
BATCH_BYTES_ACCEPTED = Counter("seed_batch_bytes_accepted", "Bytes of the batches accepted, as sent (gzip).", ["group"])
NUMBERS_ACCEPTED = Counter(
    "seed_article_numbers_accepted",
    "Article numbers the accepted batches cover (their ends included, holes too).",
    ["group"],
)
# By node as well: each node's rate in a fleet (a hundred nodes: a hundred series; the data
# center's own runner is the node "datacenter").
NODE_NUMBERS_ACCEPTED = Counter(
    "seed_node_article_numbers_accepted", "Article numbers the batches a node sent cover, by node.", ["node"]
)
BUSY_ANSWERS = Counter(
    "seed_busy_answers",
    "Leases and new batches answered 429 busy while the workers were behind (STORE_BACKLOG), by call.",
    ["call"],
)
BATCHES_STORED = Counter("seed_batches_stored", "Batches stored into the catalog, by group.", ["group"])
ARTICLES_STORED = Counter(
    "seed_articles_stored", "Articles (overview lines read, less the rejected) of the batches stored.", ["group"]
)
NUMBERS_STORED = Counter("seed_article_numbers_stored", "Article numbers the stored batches cover.", ["group"])
BATCH_BYTES_STORED = Counter("seed_batch_bytes_stored", "Bytes of the batches stored, as sent (gzip).", ["group"])
BATCHES_FAILED = Counter("seed_batches_failed", "Batches that failed for good (BATCH_MAX_ATTEMPTS).", ["group"])
BATCH_BYTES_FAILED = Counter("seed_batch_bytes_failed", "Bytes of the batches that failed for good.", ["group"])
NUMBERS_FAILED = Counter("seed_article_numbers_failed", "Article numbers the batches that failed cover.", ["group"])
POSTS_LEFT_OUT = Counter(
    "seed_posts_left_out",
    "Posts PostgreSQL refused to sum into the searched table for good"
    " (a value past one of its limits): their releases are not searchable.",
    ["group"],
)
POST_NAMES_READ_BY_NODE = Counter(
    "seed_post_names_read_by_node",
    "Posts the join wrote with what the node that sent their batch read of their names"
    " (the rest read in the data center).",
    ["group"],
)
POST_NAMES_DISAGREED = Counter(
    "seed_post_names_disagreed",
    "Names a node read otherwise than the data center does, though it said the same reading"
    " (of the share the join reads again to compare): the data center's reading is kept.",
    ["group"],
)
STATISTICS_ANALYZED = Counter(
    "seed_statistics_analyzed",
    "Tables the join analyzed because their statistics put far fewer rows in a growing group"
    " than it had (app.services.ingest.groupstats), by table.",
    ["table"],
)
STORE_ERRORS = Counter(
    "seed_store_errors", "Failed attempts at storing a batch (each retried until the last).", ["group"]
)
ACCEPT_SECONDS = Histogram(
    "seed_accept_duration_seconds",
    "Accepting a batch: its range locked, its body stored, to the commit.",
    buckets=(0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10),
)
STORE_SECONDS = Histogram(
    "seed_store_duration_seconds",
    "Storing a batch into the catalog, to the commit.",
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300),
)
PLANNING_RUNS = Counter("seed_planning_runs", "Plannings of a group tried (kind: backfill or live).", ["group", "kind"])
PLANNING_FAILURES = Counter("seed_planning_failures", "Plannings of a group that failed.", ["group", "kind"])
RANGES_PLANNED = Counter("seed_ranges_planned", "Ranges made by planning.", ["group", "kind"])
CATALOG_REQUESTS = Counter(
    "seed_catalog_requests",
    "Catalog requests: searches, post details and NZB downloads, by interface (newznab, web) and outcome.",
    ["interface", "request", "outcome"],
)
CATALOG_SECONDS = Histogram(
    "seed_catalog_request_duration_seconds",
    "Catalog requests' time, by interface and request.",
    ["interface", "request"],
    buckets=(0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30),
)

# -- counted when the transaction commits -----------------------------------------------------

_PENDING = "seed_metrics_pending"


def on_commit(session: Session, count: Callable[[], None]) -> None:
    """count() once the session's transaction commits; forgotten if it rolls back."""
    session.info.setdefault(_PENDING, []).append(count)


@event.listens_for(Session, "after_commit")
def _count_committed(session: Session) -> None:
    for count in session.info.pop(_PENDING, ()):
        try:
            count()
        except Exception as exc:  # noqa: BLE001 - the commit is done: a metric must not undo its answer
            log.warning("a metric could not be counted: %s: %s", type(exc).__name__, exc)


@event.listens_for(Session, "after_soft_rollback")
def _forget_rolled_back(session: Session, previous_transaction) -> None:
    # The session's transaction, not a savepoint inside it (begin_nested): what the transaction
    # did before the savepoint still commits.
    if not previous_transaction.nested:
        session.info.pop(_PENDING, None)


def batch_accepted(session: Session, group: str, node: str, numbers: int, body_bytes: int, started: float) -> None:
    def count() -> None:
        BATCHES_ACCEPTED.labels(group).inc()
        BATCH_BYTES_ACCEPTED.labels(group).inc(body_bytes)
        NUMBERS_ACCEPTED.labels(group).inc(numbers)
        NODE_NUMBERS_ACCEPTED.labels(node).inc(numbers)
        ACCEPT_SECONDS.observe(perf_counter() - started)

    on_commit(session, count)


def batch_stored(session: Session, group: str, articles: int, numbers: int, body_bytes: int, started: float) -> None:
    def count() -> None:
        BATCHES_STORED.labels(group).inc()
        ARTICLES_STORED.labels(group).inc(articles)
        NUMBERS_STORED.labels(group).inc(numbers)
        BATCH_BYTES_STORED.labels(group).inc(body_bytes)
        STORE_SECONDS.observe(perf_counter() - started)

    on_commit(session, count)


def store_failed(session: Session, group: str, numbers: int, body_bytes: int, for_good: bool) -> None:
    def count() -> None:
        STORE_ERRORS.labels(group).inc()
        if for_good:
            BATCHES_FAILED.labels(group).inc()
            BATCH_BYTES_FAILED.labels(group).inc(body_bytes)
            NUMBERS_FAILED.labels(group).inc(numbers)

    on_commit(session, count)


def post_names(session: Session, group: str, by_node: int, disagreed: int) -> None:
    def count() -> None:
        POST_NAMES_READ_BY_NODE.labels(group).inc(by_node)
        if disagreed:
            POST_NAMES_DISAGREED.labels(group).inc(disagreed)

    on_commit(session, count)


def posts_left_out(session: Session, group_id: int, posts: int) -> None:
    group = session.execute(text("SELECT name FROM groups WHERE id = :g"), {"g": group_id}).scalar_one()

    def count() -> None:
        POSTS_LEFT_OUT.labels(group).inc(posts)

    on_commit(session, count)


def busy(call: str) -> None:
    """A lease or a batch answered 429 busy (app.services.ingest.backlog)."""
    try:
        BUSY_ANSWERS.labels(call).inc()
    except Exception as exc:  # noqa: BLE001 - see _count_committed
        log.warning("a metric could not be counted: %s: %s", type(exc).__name__, exc)


def statistics_analyzed(table: str) -> None:
    """A table analyzed for a group its statistics had fallen behind (app.services.ingest.groupstats)."""
    try:
        STATISTICS_ANALYZED.labels(table).inc()
    except Exception as exc:  # noqa: BLE001 - see _count_committed
        log.warning("a metric could not be counted: %s: %s", type(exc).__name__, exc)


def planned(group: str, kind: str, ranges: int, failed: bool) -> None:
    """One planning of a group, after its transaction ended (planner._each_group)."""
    try:
        PLANNING_RUNS.labels(group, kind).inc()
        if failed:
            PLANNING_FAILURES.labels(group, kind).inc()
        elif ranges:
            RANGES_PLANNED.labels(group, kind).inc(ranges)
    except Exception as exc:  # noqa: BLE001 - see _count_committed
        log.warning("a metric could not be counted: %s: %s", type(exc).__name__, exc)


def outcome_of(status: int) -> str:
    """A catalog request's outcome label from its HTTP status."""
    if status < 400:
        return "ok"
    return {
        400: "bad_request",
        401: "unauthorized",
        403: "unauthorized",
        404: "not_found",
        429: "limited",
        503: "unavailable",
    }.get(status, "error")


class CatalogCall:
    """One catalog request, counted and timed when done(): seed_catalog_requests_total and
    seed_catalog_request_duration_seconds. Not counted while `request` is None (a request that
    turned out to be none of search, details, nzb)."""

    def __init__(self, interface: str, request: str | None = None):
        self.interface, self.request, self.outcome = interface, request, "ok"
        self.started = perf_counter()

    def done(self, status: int | None = None) -> None:
        if self.request is None:
            return
        if status is not None:
            self.outcome = outcome_of(status)
        try:
            CATALOG_REQUESTS.labels(self.interface, self.request, self.outcome).inc()
            CATALOG_SECONDS.labels(self.interface, self.request).observe(perf_counter() - self.started)
        except Exception as exc:  # noqa: BLE001 - see _count_committed
            log.warning("a metric could not be counted: %s: %s", type(exc).__name__, exc)


# -- read when scraped ---------------------------------------------------------------------------


def queue_depths(redis_url: str | None = None, queues: tuple[str, ...] = QUEUES) -> dict[str, int]:
    """Messages waiting in each Celery queue (Redis lists named after the queues; a message a
    worker took is not counted)."""
    import redis

    client = redis.Redis.from_url(
        redis_url or get_settings().redis_url,
        socket_timeout=REDIS_TIMEOUT_SECONDS,
        socket_connect_timeout=REDIS_TIMEOUT_SECONDS,
    )
    try:
        with client.pipeline(transaction=False) as pipe:
            for queue in queues:
                pipe.llen(queue)
            return {queue: int(depth) for queue, depth in zip(queues, pipe.execute())}
    finally:
        client.close()


class _ThisProcess:
    """The process's own metrics (the default registry), where no multiprocess directory is set."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


def exposition(*gauges: Collector) -> tuple[bytes, str]:
    """What /metrics serves: the counters and histograms of every process (summed from
    PROMETHEUS_MULTIPROC_DIR, or this process's own without it) and the gauges read now (their
    collector is app.services.gauges', which reads the services' figures)."""
    registry = CollectorRegistry()
    path = multiprocess_dir()
    if path is not None and os.path.isdir(path):
        MultiProcessCollector(registry, path=path)
    else:
        registry.register(_ThisProcess())
    for collector in gauges:
        registry.register(collector)
    return generate_latest(registry), CONTENT_TYPE_LATEST
