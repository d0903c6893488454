"""A coordinator in front of the real one, over HTTPS, that misbehaves when told to: answers 503
to batches, or drops the connection without an answer, then forwards everything."""

from __future__ import annotations

import time

from tests.fixtures.https_relay import CUT, HttpsRelay, Reply

UNAVAILABLE = Reply(503, b'{"error": "unavailable", "message": "try later"}', "application/json")


class FlakyCoordinator(HttpsRelay):
    def __init__(
        self,
        upstream_url: str,
        upstream_cafile: str,
        *,
        batch_failures: list[str] | None = None,
        batch_delay: float = 0.0,
    ):
        """batch_failures: what the next batch posts get, in order: "503" or "drop" (then forwarded);
        "503-forever" as the last item answers 503 to every batch from then on. batch_delay: seconds
        each batch post waits before it is forwarded (a slow coordinator)."""
        self.batch_failures = list(batch_failures or [])
        self.batch_delay = batch_delay
        self.batch_posts = 0
        super().__init__(upstream_url, upstream_cafile, name="flaky")

    def _next_failure(self, path: str) -> str | None:
        if not path.endswith("/batches"):
            return None
        with self.lock:
            self.batch_posts += 1
            if not self.batch_failures:
                return None
            if self.batch_failures[0] == "503-forever":
                return "503"
            return self.batch_failures.pop(0)

    def before_forwarding(self, path: str) -> Reply | str | None:
        if self.batch_delay and path.endswith("/batches"):
            time.sleep(self.batch_delay)
        failure = self._next_failure(path)
        if failure == "drop":
            return CUT
        if failure == "503":
            return UNAVAILABLE
        return None
