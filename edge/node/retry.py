"""Waiting between attempts and stopping: what the coordinator client and the prefetcher share.

Delays grow exponentially with "equal jitter" (half fixed, half random), so many nodes that lost
the coordinator at once do not come back in step, and every wait ends early when the node is
asked to stop.
"""

from __future__ import annotations

import random
import threading


class Stopped(Exception):
    """The node is stopping: the work in hand is abandoned (its range is given back)."""


class Backoff:
    """Delays for attempt 1, 2, ...: base * 2**(n-1), capped, the upper half of it random."""

    def __init__(self, base: float = 0.5, cap: float = 30.0, rng: random.Random | None = None):
        if base <= 0 or cap <= 0:
            raise ValueError("backoff needs a positive base and cap")
        self.base = min(base, cap)
        self.cap = cap
        self.attempts = 0
        self._random = rng or random.Random()

    def next_delay(self) -> float:
        self.attempts += 1
        ceiling: float = min(self.cap, self.base * 2 ** min(self.attempts - 1, 32))
        return ceiling / 2 + self._random.uniform(0, ceiling / 2)

    def reset(self) -> None:
        self.attempts = 0


def pause(stop: threading.Event, seconds: float) -> None:
    """Sleep, but raise Stopped as soon as the node is asked to stop."""
    if stop.wait(seconds):
        raise Stopped()
