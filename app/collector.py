"""Python's cyclic garbage collector kept out of the data center's bulk work.

A collection starts every few hundred container objects made, and now and then it walks every
object the process holds: 60 - 78 ms in a process with the worker's app loaded, 48 ms in
bench/join.py's (about 100,000 objects; docs/benchmarks.md). The store and the join make tens of thousands of
short-lived tuples and lists, none in a cycle, so they run with it paused; and a worker moves what
it loaded before its first task out of its sight (gc.freeze), so that a collection walks only
what its tasks made since.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def collector_paused() -> Iterator[None]:
    """The collector paused meanwhile, and as it was after (a caller that paused it keeps it so)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


def freeze_loaded() -> None:
    """What the process holds now (modules, the app, its pools) kept out of every collection."""
    gc.collect()  # what is garbage already goes first, rather than stay frozen
    gc.freeze()
