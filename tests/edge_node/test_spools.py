"""The node's spool directory, and a spooled range read from the coordinator's stream (with a
stand-in coordinator: the real one is in test_failures.py)."""

from __future__ import annotations

import io
import os
import threading
from contextlib import contextmanager

import pytest

from edge.node.coordinator import Refused
from edge.digest.frames import compress_lines, encode_frame
from edge.node.localspool import LocalSpool
from edge.digest.runner import chunk_spans
from edge.node.spoolstream import SpoolStreamSource
from tests.edge.helpers import overview_line


def lines(first: int, last: int) -> bytes:
    return b"".join(overview_line(n) + b"\r\n" for n in range(first, last + 1))


def test_chunks_are_kept_whole_and_forgotten_once_accepted(tmp_path):
    spool = LocalSpool(str(tmp_path), 10**6)
    assert spool.store("alt.binaries.test", 1, 10, [lines(1, 5), lines(6, 10)])
    assert spool.store("alt.binaries.test", 11, 20, [lines(11, 20)])
    assert spool.load("alt.binaries.test", 1, 10) == lines(1, 10)
    assert spool.load("alt.binaries.test", 1, 11) is None
    assert spool.load("alt.binaries.other", 1, 10) is None
    spool.discard("alt.binaries.test", 1, 10)
    assert spool.load("alt.binaries.test", 1, 10) is None and spool.load("alt.binaries.test", 11, 20) is not None
    assert spool.size == len(lines(11, 20))


def test_a_chunk_cut_short_is_not_read_and_leftovers_are_cleared(tmp_path):
    spool = LocalSpool(str(tmp_path), 10**6)
    spool.store("g", 1, 10, [lines(1, 10)])
    (path,) = (tmp_path / "g").glob("*.over")
    path.write_bytes(path.read_bytes()[:-7])  # as after a crash mid-write
    assert spool.load("g", 1, 10) is None
    (tmp_path / "g" / "11-20-99.over.tmp123").write_bytes(b"partial")
    LocalSpool(str(tmp_path), 10**6)
    assert not list((tmp_path / "g").glob("*.tmp*"))


def test_the_spool_stays_under_its_cap_oldest_first(tmp_path):
    chunk = lines(1, 10)
    spool = LocalSpool(str(tmp_path), 2 * len(chunk) + 10)
    for number, first in enumerate((1, 11, 21)):
        assert spool.store("g", first, first + 9, [chunk])
        for path in (tmp_path / "g").glob(f"{first}-*.over"):
            os.utime(path, (number, number))  # file times say which is oldest
    assert spool.load("g", 1, 10) is None and spool.load("g", 21, 30) == chunk
    assert spool.size == 2 * len(chunk)
    assert not spool.store("g", 31, 60, [chunk * 3])  # larger than the cap: not kept


def test_group_names_cannot_escape_the_directory(tmp_path):
    spool = LocalSpool(str(tmp_path / "spool"), 10**6)
    assert spool.store("alt/../../etc", 1, 10, [lines(1, 10)])
    assert [p.parent.name for p in (tmp_path / "spool").rglob("*.over")] == ["alt%2F..%2F..%2Fetc"]
    assert not spool.store("..", 1, 10, [lines(1, 10)]) and not spool.store("../x", 1, 10, [lines(1, 10)])


class StandInCoordinator:
    """Serves a list of frames as the spool stream; can cut the stream or say 404."""

    def __init__(self, frames: list[bytes], *, cut_after: list[int] | None = None, spooled: bool = True):
        self.frames = frames
        self.cut_after = list(cut_after or [])
        self.spooled = spooled
        self.opened = 0
        self.stop = threading.Event()
        self.backoff_cap = 0.01

    @contextmanager
    def spool_stream(self, range_id):
        self.opened += 1
        if not self.spooled:
            raise Refused(404, "not_spooled", "range has no spooled chunks")
        data = b"".join(self.frames)
        if self.cut_after:
            data = data[: self.cut_after.pop(0)]
        yield io.BytesIO(data)


class FallbackSource:
    def __init__(self):
        self.asked: list[tuple[int, int]] = []

    def chunks(self, spans):
        for first, last in spans:
            self.asked.append((first, last))
            yield first, last, [lines(first, last)]


def frame(first: int, last: int) -> bytes:
    raw = lines(first, last)
    return encode_frame(first, last, compress_lines(raw), raw.count(b"\r\n"))


def read(source, spans):
    return [(first, last, b"".join(blocks)) for first, last, blocks in source.chunks(spans)]


def test_frames_before_the_resume_point_are_skipped():
    coordinator = StandInCoordinator([frame(a, b) for a, b in chunk_spans(1, 100, 20)])
    fallback = FallbackSource()
    got = read(SpoolStreamSource(coordinator, 1, lambda: fallback), chunk_spans(41, 100, 20))
    assert got == [(a, b, lines(a, b)) for a, b in chunk_spans(41, 100, 20)]
    assert fallback.asked == []


def test_a_broken_stream_is_read_again_from_where_it_broke():
    frames = [frame(a, b) for a, b in chunk_spans(1, 100, 20)]
    coordinator = StandInCoordinator(frames, cut_after=[len(frames[0]) + 30, len(frames[0]) + len(frames[1]) + 5])
    events = []
    got = read(
        SpoolStreamSource(coordinator, 1, FallbackSource, lambda name, **f: events.append(name)),
        chunk_spans(1, 100, 20),
    )
    assert [(a, b) for a, b, _ in got] == chunk_spans(1, 100, 20)
    assert coordinator.opened == 3 and events == ["retry", "retry"]


def test_chunks_that_do_not_line_up_come_from_the_fallback():
    coordinator = StandInCoordinator([frame(1, 20), frame(21, 50)])
    fallback = FallbackSource()
    got = read(SpoolStreamSource(coordinator, 1, lambda: fallback), chunk_spans(1, 60, 20))
    assert [(a, b) for a, b, _ in got] == [(1, 20), (21, 40), (41, 60)]
    assert fallback.asked == [(21, 40), (41, 60)]


@pytest.mark.parametrize(
    "coordinator", [StandInCoordinator([], spooled=False), StandInCoordinator([frame(1, 20)])]
)  # 404, or the stream ends early
def test_without_a_whole_spool_the_rest_is_fetched(coordinator):
    fallback = FallbackSource()
    events = []
    got = read(
        SpoolStreamSource(coordinator, 1, lambda: fallback, lambda name, **f: events.append(name)),
        chunk_spans(1, 40, 20),
    )
    assert [(a, b) for a, b, _ in got] == [(1, 20), (21, 40)]
    assert fallback.asked[-1] == (21, 40) and events == ["spool_fallback"]
