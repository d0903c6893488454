"""Backpressure: while the data center is behind with the batches it took, it takes no more.

A batch is accepted in a few milliseconds but stored and joined by the workers in far more: with
many nodes posting, the accepted batches would pile up faster than the workers drain them, and
every node's call would wait in the API's queue (its latency grows with the fleet while the
throughput stays what the workers allow). So past `STORE_BACKLOG` batches accepted and not yet
joined, a lease or a batch is answered 429 `busy` with a Retry-After, at once and before the
batch is decoded: the nodes come back later, and the calls answered are answered quickly. What
lets a node finish or give back what it holds is always answered (heartbeats, done, release), and
the data center's own fetch is never refused.
"""

from __future__ import annotations


from app import metrics
from app.services.errors import ServiceError

# Seconds a node is told to wait (it adds up to half again at random, so that the nodes
# answered together do not come back together).
RETRY_AFTER = 2

# The batches waiting for the workers: accepted (not stored yet) or stored (not joined yet),
# counted no further than the bound, by the partial index that holds exactly them
# (ix_seed_batches_pending): a bounded read, whatever the table holds. A sub-select, so that a
# call counts them in a statement it makes anyway: a lease in its first (app.services.leases), a
# batch in its token's look-up (app.services.nodes.NODE_BY_TOKEN).
WAITING_SQL = (
    "SELECT count(*) AS waiting"
    " FROM (SELECT 1 FROM seed_batches WHERE state IN ('accepted', 'stored') LIMIT :bound) AS pending"
)


class Busy(ServiceError):
    status = 429
    code = "busy"
    retry_after = RETRY_AFTER


def refuse_when_behind(waiting: int, bound: int, call: str) -> None:
    """Raises Busy when `waiting` (batches counted up to `bound`) reaches `bound` (0: no bound)."""
    if bound and waiting >= bound:
        raise refusal(bound, call)


def refusal(bound: int, call: str) -> Busy:
    """The Busy a call is refused with (counted in the metrics) when `bound` batches wait."""
    metrics.busy(call)
    return Busy(f"the data center has {bound} or more batches to store; come back in {RETRY_AFTER} s (STORE_BACKLOG)")
