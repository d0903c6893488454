"""Bulk loading into innd's feed port with pipelined streaming TAKETHIS (RFC 4644).

Each connection has a sender thread that takes batches of articles from the shared
iterator and writes them without waiting, and a receiver thread that counts the
239 (accepted) and 439 (rejected) replies. Articles marked lost are skipped: they
are the generator's missing segments and must never reach the server.

    python -m simnews.inject --port 11120 --count 100000 --groups alt.binaries.test --seed 7 --truth t.jsonl
"""

from __future__ import annotations

import argparse
import itertools
import json
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass

from simnews import generator

BATCH = 256  # articles per write: large enough to keep the pipe full, small enough to interleave conns
PROGRESS_EVERY = 100_000


@dataclass(frozen=True)
class InjectResult:
    sent: int
    accepted: int
    rejected: int
    seconds: float

    @property
    def rate(self) -> float:
        return self.sent / self.seconds if self.seconds else 0.0


class InjectError(RuntimeError):
    pass


class _Counter:
    """Thread-safe totals shared by the connections, reported through an optional callback."""

    def __init__(self, progress: Callable[[int], None] | None):
        self.lock = threading.Lock()
        self.sent = 0
        self.progress = progress
        self.next_report = PROGRESS_EVERY

    def add_sent(self, n: int) -> None:
        with self.lock:
            self.sent += n
            if self.progress and self.sent >= self.next_report:
                self.next_report += PROGRESS_EVERY
                self.progress(self.sent)


def _frame(article) -> bytes:
    raw = article.raw
    if b"\r\n." in raw:  # dot-stuffing (the first line is a header, never a dot)
        raw = raw.replace(b"\r\n.", b"\r\n..")
    return b"TAKETHIS %s\r\n%s\r\n.\r\n" % (article.message_id.encode(), raw)


class _Connection:
    def __init__(self, host: str, port: int, timeout: float):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.file = self.sock.makefile("rb")
        self._expect(self.file.readline(), b"200", "greeting")
        self.sock.sendall(b"MODE STREAM\r\n")
        self._expect(self.file.readline(), b"203", "MODE STREAM")
        self.sent = 0
        self.accepted = 0
        self.rejected = 0
        self.other: list[bytes] = []
        self.error: BaseException | None = None

    @staticmethod
    def _expect(line: bytes, code: bytes, what: str) -> None:
        if not line.startswith(code):
            raise InjectError(f"{what}: expected {code.decode()}, got {line!r}")

    def send_all(self, source, lock: threading.Lock, counter: _Counter) -> None:
        try:
            while True:
                with lock:
                    taken = list(itertools.islice(source, BATCH))
                if not taken:
                    break
                batch = [a for a in taken if not a.lost]
                self.sock.sendall(b"".join([_frame(a) for a in batch]))
                self.sent += len(batch)
                counter.add_sent(len(batch))
            # innd answers QUIT after every earlier TAKETHIS: the receiver's end marker
            self.sock.sendall(b"QUIT\r\n")
        except BaseException as exc:  # reported by inject() after the threads end
            self.error = exc
            self.sock.shutdown(socket.SHUT_RDWR)  # unblocks the receiver

    def receive_all(self) -> None:
        try:
            while True:
                line = self.file.readline()
                code = line[:3]
                if code == b"239":
                    self.accepted += 1
                elif code == b"439":
                    self.rejected += 1
                elif code == b"205":
                    return
                elif not line:
                    raise InjectError("feed connection closed by the server")
                else:
                    self.other.append(line.rstrip())
        except BaseException as exc:
            self.error = self.error or exc

    def close(self) -> None:
        self.file.close()
        self.sock.close()


def inject(
    host: str,
    port: int,
    articles: Iterable,
    conns: int = 2,
    *,
    progress: Callable[[int], None] | None = None,
    timeout: float = 60.0,
) -> InjectResult:
    """Streams every article not marked lost to innd at host:port; articles need .message_id, .raw, .lost."""
    source = iter(articles)
    lock = threading.Lock()
    counter = _Counter(progress)
    connections = [_Connection(host, port, timeout) for _ in range(conns)]
    started = time.perf_counter()
    threads = []
    for connection in connections:
        threads.append(threading.Thread(target=connection.send_all, args=(source, lock, counter), daemon=True))
        threads.append(threading.Thread(target=connection.receive_all, daemon=True))
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    seconds = time.perf_counter() - started
    for connection in connections:
        connection.close()
    errors = [c.error for c in connections if c.error]
    if errors:
        raise InjectError(f"injection failed: {errors[0]!r}") from errors[0]
    other = [line for c in connections for line in c.other]
    if other:
        raise InjectError(f"{len(other)} unexpected replies, first: {other[0]!r}")
    return InjectResult(
        sent=sum(c.sent for c in connections),
        accepted=sum(c.accepted for c in connections),
        rejected=sum(c.rejected for c in connections),
        seconds=seconds,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Generate articles and stream them to innd's feed port.")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True, help="innd feed port")
    parser.add_argument("--count", type=int, default=100_000, help="articles to generate (lost ones included)")
    parser.add_argument("--conns", type=int, default=2)
    parser.add_argument("--truth", help="write the ground truth here (JSON lines)")
    generator.add_config_arguments(parser)
    args = parser.parse_args(argv)
    config = generator.config_from_arguments(args)

    articles = generator.generate(args.count, config)
    if args.truth:
        truth_file = open(args.truth, "w", encoding="utf-8")
        articles = generator.write_truth(articles, truth_file)
    started = time.perf_counter()

    def report(sent: int) -> None:
        elapsed = time.perf_counter() - started
        print(f"sent {sent} in {elapsed:.1f}s = {sent / elapsed:.0f} art/s", file=sys.stderr, flush=True)

    try:
        result = inject(args.host, args.port, articles, args.conns, progress=report)
    finally:
        if args.truth:
            truth_file.close()
    print(
        f"sent {result.sent} in {result.seconds:.1f}s = {result.rate:.0f} art/s; "
        f"accepted(239)={result.accepted} rejected(439)={result.rejected}",
        file=sys.stderr,
    )
    print(json.dumps(asdict(result) | {"rate": round(result.rate, 1)}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
