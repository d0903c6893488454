"""What an operator sees of a running node.

On a terminal, a live table (per range: where it is, articles, lines/s, batches, retries)
redrawn every second, with events printed above it; otherwise one JSON object per line per
event (lease, batch, retry, done, release, error, ...), for log collectors.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from datetime import datetime, timezone
from typing import TextIO

REFRESH_SECONDS = 1.0
# Events shown above the live table; the others (batch, a range's retries) only move its figures.
SHOWN_LIVE = {
    "start",
    "lease",
    "done",
    "dropped",
    "release",
    "error",
    "failed",
    "stopping",
    "stop",
    "idle",
    "spool_fallback",
}
RETRIES = {"retry", "nntp_retry"}


class JsonLog:
    """One JSON object per event and line: {"time", "event", ...fields}."""

    def __init__(self, stream: TextIO):
        self.stream = stream
        self._lock = threading.Lock()

    def event(self, name: str, **fields: object) -> None:
        record = {"time": datetime.now(timezone.utc).isoformat(timespec="milliseconds"), "event": name, **fields}
        line = json.dumps(record, default=str, ensure_ascii=False)
        with self._lock:
            self.stream.write(line + "\n")
            self.stream.flush()

    def close(self) -> None:
        pass


class LiveDisplay:
    """The table of held ranges, redrawn in place; `rows` gives its lines."""

    def __init__(self, stream: TextIO, rows: Callable[[], list[str]]):
        self.stream = stream
        self.rows = rows
        self._lock = threading.Lock()
        self._drawn = 0  # lines of the table now on screen
        self._closed = threading.Event()
        self._thread = threading.Thread(target=self._refresh, name="display", daemon=True)
        self._thread.start()

    def event(self, name: str, **fields: object) -> None:
        if name not in SHOWN_LIVE and not (name in RETRIES and fields.get("range") is None):
            return  # a range's retries show in its row; the others (leasing, connecting) here
        details = " ".join(f"{key}={value}" for key, value in fields.items() if value is not None)
        with self._lock:
            self._erase()
            self.stream.write(f"{time.strftime('%H:%M:%S')} {name:<8} {details}\n")
            self._draw()

    def close(self) -> None:
        self._closed.set()
        self._thread.join(timeout=2)
        with self._lock:
            self._erase()
            self._draw()
            self._drawn = 0
            self.stream.flush()

    def _refresh(self) -> None:
        while not self._closed.wait(REFRESH_SECONDS):
            with self._lock:
                self._erase()
                self._draw()

    def _erase(self) -> None:
        if self._drawn:
            self.stream.write(f"\x1b[{self._drawn}F\x1b[J")  # up to the table's first line, clear below
        self._drawn = 0

    def _draw(self) -> None:
        lines = self.rows()
        for line in lines:
            self.stream.write(line + "\n")
        self._drawn = len(lines)
        self.stream.flush()
