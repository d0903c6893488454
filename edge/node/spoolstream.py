"""A spooled range's chunks from the coordinator's stream (GET /ranges/<id>/chunks) instead of NNTP.

The stream holds the range's chunks as the data center fetched them (edge/digest/frames.py), from
where the spooling started: frames before the resume point are skipped. A stream cut short is
asked for again (with backoff) and read on from where it broke. When the coordinator has no
spool for the range, or its chunks do not line up with the lease's, the rest of the range comes
from the fallback source (the prefetcher's NNTP connections).
"""

from __future__ import annotations

import http.client
import zlib
from collections.abc import Callable, Iterable, Iterator

from edge.node.coordinator import Coordinator, Refused
from edge.digest.frames import Frame, FrameError, iter_frames
from edge.node.retry import Backoff, pause
from edge.digest.runner import Blocks, ChunkSource

EventHook = Callable[..., None]
# A stream that breaks this often at the same chunk is not read again: the chunk is fetched.
MAX_BREAKS = 5


class _Misaligned(Exception):
    """The stream's chunks are not the lease's chunks."""


class SpoolStreamSource:
    def __init__(
        self,
        coordinator: Coordinator,
        range_id: int,
        fallback: Callable[[], ChunkSource],
        on_event: EventHook | None = None,
    ):
        self.coordinator = coordinator
        self.range_id = range_id
        self.fallback = fallback
        self._on_event = on_event or (lambda name, **fields: None)

    def chunks(self, spans: list[tuple[int, int]]) -> Iterator[tuple[int, int, Blocks]]:
        position = 0  # spans[:position] were yielded
        failures = 0  # stream breaks in a row at this position
        reason = "the stream ended before the range's end"
        backoff = Backoff(cap=self.coordinator.backoff_cap)
        while position < len(spans):
            try:
                with self.coordinator.spool_stream(self.range_id) as stream:
                    for first, last, raw in _aligned(iter_frames(stream), spans[position:]):
                        position, failures = position + 1, 0
                        yield first, last, [raw]
                break
            except (Refused, _Misaligned) as exc:  # 404 not_spooled, or chunks cut differently
                reason = str(exc)
                break
            except (FrameError, OSError, http.client.HTTPException, zlib.error, EOFError) as exc:
                failures += 1
                if failures > MAX_BREAKS:
                    reason = f"the spool stream broke {failures} times at {spans[position][0]}: {exc}"
                    break
                delay = backoff.next_delay()
                self._on_event(
                    "retry",
                    range=self.range_id,
                    call="chunks",
                    reason=f"spool stream broke: {exc}",
                    delay=round(delay, 2),
                )
                pause(self.coordinator.stop, delay)
        if position < len(spans):
            self._on_event("spool_fallback", range=self.range_id, at=spans[position][0], reason=reason)
            yield from self.fallback().chunks(spans[position:])


def _aligned(frames: Iterable[Frame], spans: list[tuple[int, int]]) -> Iterator[tuple[int, int, bytes]]:
    """The frames that are the spans, in order (raw lines); frames before the first span skipped."""
    wanted = iter(spans)
    first, last = next(wanted)
    for frame in frames:
        if frame.chunk_to < first:
            continue  # accepted already
        if (frame.chunk_from, frame.chunk_to) != (first, last):
            raise _Misaligned(
                f"spool chunk {frame.chunk_from}-{frame.chunk_to} is not the lease's chunk {first}-{last}"
            )
        yield first, last, frame.raw()
        try:
            first, last = next(wanted)
        except StopIteration:
            return
