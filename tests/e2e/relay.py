"""An HTTPS relay in front of the API that loses answers: the batch is forwarded and taken, but
the node never hears back (a connection cut on the way back), so it sends the same batch again.
It records every batch it forwarded, so a test can post them again later, in any order."""

from __future__ import annotations

from dataclasses import dataclass

from tests.fixtures.https_relay import CUT, HttpsRelay


@dataclass(frozen=True)
class Posted:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int  # what the API answered (the node may not have heard it)


class AnswerLosingRelay(HttpsRelay):
    def __init__(self, upstream_url: str, upstream_cafile: str, *, lose: set[int]):
        """lose: which batches (1 = the first one forwarded) have the answer to their first post
        lost; a batch sent again is answered."""
        self.lose = set(lose)
        self.posts: list[Posted] = []
        self.batches = 0  # distinct batches forwarded
        self.lost: list[Posted] = []
        super().__init__(upstream_url, upstream_cafile, name="relay")

    def after_forwarding(self, path: str, headers: dict[str, str], body: bytes, status: int) -> str | None:
        if not path.endswith("/batches"):
            return None
        posted = Posted(path, headers, body, status)
        with self.lock:
            first_time = all(p.body != body for p in self.posts)
            self.posts.append(posted)
            if first_time:
                self.batches += 1
            losing = first_time and self.batches in self.lose
            if losing:
                self.lost.append(posted)
        return CUT if losing else None  # taken upstream; the answer never comes back
