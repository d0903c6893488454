"""An NNTP proxy that makes a private INN look like a Usenet provider.

It sits in front of INN's reader port and adds what providers do and INN does not:

- a per-connection throughput cap in overview lines per second (providers give ~26k lines/s
  per connection, so a client needs several connections to go fast);
- a latency before every command;
- a connection limit (extra connections are greeted with a refusal and closed);
- connections dropped in the middle of a data response after N lines;
- holes: overview lines of articles the provider lost are left out of OVER/XOVER answers;
- "boneless" article numbers: every article number is shifted up by a constant (INN cannot hold
  numbers of 2**31 or more), in replies (GROUP, LISTGROUP, OVER/XOVER and their Xref fields,
  HDR/XHDR, ARTICLE/HEAD/BODY/STAT, NEXT/LAST, LIST ACTIVE/COUNTS, NEWGROUPS) and back in
  requests. Numbers at or below the shift exist on no server: they are asked as article 0,
  which INN answers as empty.

Everything else passes through. COMPRESS and STARTTLS are not offered (the proxy rewrites lines).

    python -m simnews.proxy --upstream-port 11119 --port 11190 --lines-per-sec 26000 --shift 4294979641
"""

from __future__ import annotations

import argparse
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable

INN_MAX_ARTICLE = 2**31 - 1  # INN answers 501 to anything larger
RECV_SIZE = 65536
NOT_OFFERED = (b"COMPRESS", b"STARTTLS")
# responses with a data block, besides 211 which has one only for LISTGROUP
MULTILINE_CODES = {b"100", b"101", b"215", b"220", b"221", b"222", b"224", b"225", b"230", b"231", b"282"}
# the data responses a connection can be dropped in the middle of
DROPPABLE_CODES = {b"211", b"220", b"221", b"222", b"224", b"225"}


class ProviderProxy:
    def __init__(
        self,
        upstream_host: str,
        upstream_port: int,
        *,
        lines_per_sec: float | None = None,
        latency: float = 0.0,
        max_conns: int | None = None,
        drop_after_lines: int | None = None,
        drops: int | None = None,
        shift: int = 0,
        refusal: str = "502 Too many connections",
        host: str = "127.0.0.1",
        port: int = 0,
        hidden: Callable[[int], bool] | None = None,
    ):
        """drop_after_lines: close the connection after sending that many lines of a data response;
        drops: how many responses to cut that way over the proxy's life (None: every one);
        hidden: INN article numbers the provider has lost (expired, cancelled, never propagated):
        their overview lines are left out of OVER/XOVER answers, as a real provider's holes."""
        self.upstream = (upstream_host, upstream_port)
        self.lines_per_sec = lines_per_sec
        self.latency = latency
        self.max_conns = max_conns
        self.drop_after_lines = drop_after_lines
        self.drops_left = drops
        self.shift = shift
        self.hidden = hidden
        self.refusal = refusal.encode() + b"\r\n"
        self.address = (host, port)
        self.port = 0
        self.refused = 0  # connections turned away by the limit
        self.dropped = 0  # responses cut short
        self._lock = threading.Lock()
        self._sessions: set[_Session] = set()
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None

    def start(self) -> int:
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(self.address)
        listener.listen(64)
        listener.settimeout(0.2)  # lets the accept loop notice stop()
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._acceptor = threading.Thread(target=self._accept_loop, args=(listener,), name="proxy-accept", daemon=True)
        self._acceptor.start()
        return self.port

    def stop(self) -> None:
        self._stopping.set()
        if self._acceptor:
            self._acceptor.join()
        if self._listener:
            self._listener.close()
        with self._lock:
            sessions = list(self._sessions)
        for session in sessions:
            session.close()
        for session in sessions:
            session.thread.join(timeout=5)

    def __enter__(self) -> ProviderProxy:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._stopping.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            with self._lock:
                full = self.max_conns is not None and len(self._sessions) >= self.max_conns
                if full:
                    self.refused += 1
            if full:
                _send_and_close(client, self.refusal)
                continue
            try:
                upstream = socket.create_connection(self.upstream, timeout=10)
            except OSError:
                _send_and_close(client, b"400 Upstream server unavailable\r\n")
                continue
            upstream.settimeout(None)
            session = _Session(self, client, upstream)
            with self._lock:
                self._sessions.add(session)
            session.thread.start()

    def _forget(self, session: _Session) -> None:
        with self._lock:
            self._sessions.discard(session)

    def _take_drop(self) -> bool:
        """Whether a data response that reached drop_after_lines is to be cut (counts it if so)."""
        with self._lock:
            if self.drops_left is not None:
                if self.drops_left <= 0:
                    return False
                self.drops_left -= 1
            self.dropped += 1
            return True


def _send_and_close(sock: socket.socket, data: bytes) -> None:
    try:
        sock.sendall(data)
    except OSError:
        pass
    sock.close()


class _Dropped(Exception):
    """The proxy cut the connection on purpose."""


class _Upstream:
    """Buffered reading of INN's replies; the buffer always begins at the start of a line."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buf = b""

    def _fill(self) -> None:
        data = self.sock.recv(RECV_SIZE)
        if not data:
            raise ConnectionError("upstream closed")
        self.buf += data

    def readline(self) -> bytes:
        while (end := self.buf.find(b"\r\n")) < 0:
            self._fill()
        line, self.buf = self.buf[: end + 2], self.buf[end + 2 :]
        return line

    def data_chunks(self):
        """Yields a data block as chunks of whole lines, without the terminating '.' line."""
        while True:
            if self.buf.startswith(b".\r\n"):
                self.buf = self.buf[3:]
                return
            end = self.buf.find(b"\r\n.\r\n")
            if end >= 0:
                chunk, self.buf = self.buf[: end + 2], self.buf[end + 5 :]
                yield chunk
                return
            cut = self.buf.rfind(b"\r\n")
            if cut >= 0:
                chunk, self.buf = self.buf[: cut + 2], self.buf[cut + 2 :]
                yield chunk
            self._fill()


class _Session:
    def __init__(self, proxy: ProviderProxy, client: socket.socket, upstream: socket.socket):
        self.proxy = proxy
        self.shift = proxy.shift
        self.client = client
        self.client_in = client.makefile("rb")
        self.upstream_sock = upstream
        self.upstream = _Upstream(upstream)
        self.next_send = 0.0  # when the throttle lets the next line go
        self.thread = threading.Thread(target=self.run, name="proxy-session", daemon=True)

    def close(self) -> None:
        for sock in (self.client, self.upstream_sock):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()

    def run(self) -> None:
        try:
            self.client.sendall(self.upstream.readline())
            while line := self.client_in.readline():
                if not self.command(line):
                    break
        except (OSError, ConnectionError, _Dropped):
            pass
        finally:
            self.close()
            self.proxy._forget(self)

    # --- one command -----------------------------------------------------------------------

    def command(self, line: bytes) -> bool:
        """Relays one command and its reply; False once the session is over."""
        words = line.split()
        verb = words[0].upper() if words else b""
        if verb in NOT_OFFERED:
            self.client.sendall(b"502 %s is not available through this proxy\r\n" % verb)
            return True
        if self.proxy.latency:
            time.sleep(self.proxy.latency)
        if self.shift:
            line = self._shift_request(verb, words) or line
        self.upstream_sock.sendall(line)
        status = self.upstream.readline()
        while status[:3] in (b"335", b"340"):  # IHAVE/POST: the client sends an article first
            self._relay_client_data()
            status = self.upstream.readline()
        code = status[:3]
        if self.shift:
            status = self._shift_status(verb, code, status)
        self.client.sendall(status)
        if code in MULTILINE_CODES or (code == b"211" and verb == b"LISTGROUP"):
            self._relay_data(verb, words, code)
        return verb != b"QUIT"

    def _relay_client_data(self) -> None:
        while True:
            line = self.client_in.readline()
            if not line:
                raise ConnectionError("client closed while sending an article")
            self.upstream_sock.sendall(line)
            if line == b".\r\n":
                return

    def _relay_data(self, verb: bytes, words: list[bytes], code: bytes) -> None:
        proxy = self.proxy
        rewrite = self._line_rewriter(verb, words, code) if self.shift else None
        drop_at = proxy.drop_after_lines if code in DROPPABLE_CODES else None
        rate = proxy.lines_per_sec
        # the throttle's schedule starts now: idle time between commands gives no credit
        self.next_send = max(self.next_send, time.monotonic())
        sent = 0
        hidden = proxy.hidden if code == b"224" else None
        for chunk in self.upstream.data_chunks():
            if hidden is not None:
                chunk = b"".join(
                    line for line in chunk.splitlines(True) if not hidden(int(line.split(b"\t", 1)[0] or b"0"))
                )
                if not chunk:
                    continue
            if code == b"101":
                chunk = b"".join(line for line in chunk.splitlines(True) if not line.upper().startswith(NOT_OFFERED))
            elif rewrite:
                chunk = b"\r\n".join([rewrite(line) for line in chunk[:-2].split(b"\r\n")]) + b"\r\n"
            lines = chunk.count(b"\n")
            if drop_at is not None and sent + lines >= drop_at:
                if proxy._take_drop():
                    self.client.sendall(_first_lines(chunk, drop_at - sent))
                    raise _Dropped
                drop_at = None
            if rate:
                self._throttle(lines, rate)
            self.client.sendall(chunk)
            sent += lines
        self.client.sendall(b".\r\n")

    def _throttle(self, lines: int, rate: float) -> None:
        # a chunk goes when the lines before it have had their time; oversleeping is made up later
        delay = self.next_send - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        self.next_send += lines / rate

    # --- article number shifting ------------------------------------------------------------

    def _down(self, number: int) -> int:
        """A client's article number as INN's: 0 (no such article) below the shift, capped above."""
        local = number - self.shift
        return local if 0 < local <= INN_MAX_ARTICLE else 0

    def _down_range(self, text: bytes) -> bytes | None:
        low, dash, high = text.partition(b"-")
        if not low.isdigit() or (high and not high.isdigit()):
            return None  # a message-id or malformed: INN answers it as it is
        if not dash:
            return b"%d" % self._down(int(low))
        first = int(low) - self.shift
        if first > INN_MAX_ARTICLE:
            return b"%d-0" % INN_MAX_ARTICLE  # past anything INN holds: an empty range
        first = max(first, 0)
        if not high:
            return b"%d-" % first
        return b"%d-%d" % (first, min(max(int(high) - self.shift, 0), INN_MAX_ARTICLE))

    def _shift_request(self, verb: bytes, words: list[bytes]) -> bytes | None:
        """The command with INN's article numbers, or None to send it unchanged."""
        position = {
            b"OVER": 1,
            b"XOVER": 1,
            b"ARTICLE": 1,
            b"HEAD": 1,
            b"BODY": 1,
            b"STAT": 1,
            b"HDR": 2,
            b"XHDR": 2,
            b"LISTGROUP": 2,
            b"XPAT": 2,
        }.get(verb)
        if position is None or len(words) <= position:
            return None
        mapped = self._down_range(words[position])
        if mapped is None:
            return None
        return b" ".join(words[:position] + [mapped] + words[position + 1 :]) + b"\r\n"

    def _up(self, number: bytes) -> bytes:
        return b"%d" % (int(number) + self.shift) if number.isdigit() else number

    def _up_article(self, number: bytes) -> bytes:
        """Like _up, but 0 stays: it is the number of an article asked for by message-id."""
        return number if number == b"0" else self._up(number)

    def _shift_status(self, verb: bytes, code: bytes, status: bytes) -> bytes:
        parts = status.split(b" ")
        if len(parts) < 3:
            return status
        if code == b"211" and len(parts) >= 5:  # 211 count low high group
            parts[2], parts[3] = self._up(parts[2]), self._up(parts[3])
        elif code in (b"220", b"221", b"222", b"223") and verb not in (b"XHDR", b"HDR"):
            parts[1] = self._up_article(parts[1])  # 22x n <message-id>
        else:
            return status
        return b" ".join(parts)

    def _up_xref(self, value: bytes) -> bytes:
        """'[Xref: ]host group:n group:n' with every n shifted."""
        tokens = value.split(b" ")
        for i, token in enumerate(tokens):
            group, colon, number = token.rpartition(b":")
            if colon and number.isdigit():
                tokens[i] = group + b":" + self._up(number)
        return b" ".join(tokens)

    def _line_rewriter(self, verb: bytes, words: list[bytes], code: bytes):
        """How each line of this data response is rewritten, or None to pass it through."""
        if code == b"224":
            return self._up_overview
        if code == b"211":
            return self._up
        if code in (b"225", b"221") and verb in (b"HDR", b"XHDR"):
            xref = len(words) > 1 and words[1].lower() == b"xref"
            return lambda line: self._up_header_line(line, xref)
        if code in (b"220", b"221"):
            return _ArticleHeaders(self._up_xref)
        if (
            code in (b"215", b"231")
            and verb in (b"LIST", b"NEWGROUPS")
            and (len(words) < 2 or words[1].upper() in (b"ACTIVE", b"COUNTS"))
        ):
            return self._up_active
        return None

    def _up_overview(self, line: bytes) -> bytes:
        fields = line.split(b"\t")
        fields[0] = self._up_article(fields[0])
        if len(fields) > 8:
            fields[8] = self._up_xref(fields[8])
        return b"\t".join(fields)

    def _up_header_line(self, line: bytes, xref: bool) -> bytes:
        number, space, value = line.partition(b" ")
        return self._up_article(number) + space + (self._up_xref(value) if xref else value)

    def _up_active(self, line: bytes) -> bytes:
        parts = line.split(b" ")  # group high low [count] status
        if len(parts) >= 4:
            parts[1], parts[2] = self._up(parts[1]), self._up(parts[2])
        return b" ".join(parts)


class _ArticleHeaders:
    """Shifts the Xref header of an ARTICLE/HEAD response, leaving the body alone."""

    def __init__(self, up_xref):
        self.up_xref = up_xref
        self.in_headers = True

    def __call__(self, line: bytes) -> bytes:
        if not line:
            self.in_headers = False
        elif self.in_headers and line[:5].lower() == b"xref:":
            return self.up_xref(line)
        return line


def _first_lines(chunk: bytes, count: int) -> bytes:
    end = 0
    for _ in range(count):
        end = chunk.index(b"\n", end) + 1
    return chunk[:end]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Provider-like NNTP proxy in front of an INN reader port.")
    parser.add_argument("--upstream-host", default="127.0.0.1")
    parser.add_argument("--upstream-port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=0, help="0: any free port (printed)")
    parser.add_argument("--lines-per-sec", type=float, help="per-connection cap on data lines per second")
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before every command")
    parser.add_argument("--max-conns", type=int)
    parser.add_argument("--drop-after-lines", type=int)
    parser.add_argument("--drops", type=int, help="cut only this many responses (default: every one)")
    parser.add_argument("--shift", type=int, default=0, help="added to every article number")
    args = parser.parse_args(argv)
    proxy = ProviderProxy(
        args.upstream_host,
        args.upstream_port,
        lines_per_sec=args.lines_per_sec,
        latency=args.latency,
        max_conns=args.max_conns,
        drop_after_lines=args.drop_after_lines,
        drops=args.drops,
        shift=args.shift,
        host=args.host,
        port=args.port,
    )
    port = proxy.start()
    print(f"proxy listening on {args.host}:{port} -> {args.upstream_host}:{args.upstream_port}", flush=True)
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    stop.wait()
    proxy.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
