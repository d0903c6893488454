"""A small scripted NNTP server for tests, started and stopped in-process.

It serves given overview lines for its groups and can do what INN 2 cannot: XFEATURE COMPRESS
GZIP (both framings of the terminator), article numbers past 2**32, garbage lines, dropping the
connection in the middle of a reply, and going silent. It also speaks COMPRESS DEFLATE and
AUTHINFO USER/PASS, so one client code path can be tested against both servers.

    with ScriptedServer({"alt.binaries.test": lines}, gzip="after") as server:
        client = NNTPClient(server.host, server.port)
"""

from __future__ import annotations

import bisect
import socket
import threading
import zlib
from collections.abc import Iterable, Iterator
from datetime import datetime, timezone

INN_OVERVIEW_FORMAT = ("Subject:", "From:", "Date:", "Message-ID:", "References:", "Bytes:", "Lines:", "Xref:full")
LINES_PER_SEND = 1000


def overview_lines(articles: Iterable, group: str, first_number: int = 1) -> Iterator[bytes]:
    """INN-style overview lines (Subject From Date Message-ID References Bytes Lines Xref) for
    simnews.generator articles posted to `group`, numbered from `first_number`. Lost articles
    are skipped: a server never numbers what it did not get."""
    number = first_number
    for article in articles:
        if article.lost or (article.truth is not None and group not in article.truth.groups):
            continue
        head = article.raw.split(b"\r\n\r\n", 1)[0]
        headers = dict(line.split(b": ", 1) for line in head.split(b"\r\n") if b": " in line)
        if group.encode() not in headers.get(b"Newsgroups", b"").split(b","):
            continue
        yield b"\t".join(
            (
                str(number).encode(),
                headers.get(b"Subject", b""),
                headers.get(b"From", b""),
                headers.get(b"Date", b""),
                headers.get(b"Message-ID", b""),
                b"",
                str(len(article.raw)).encode(),
                headers.get(b"Lines", b"0"),
                b"Xref: scripted.invalid %s:%d" % (group.encode(), number),
            )
        )
        number += 1


class _Group:
    """A group's lines, each placed at the number it starts with (a line without one is
    placed with the line before it, so garbage is served inside ranges)."""

    def __init__(self, lines: list[bytes]):
        placed = []
        position = 0
        for order, line in enumerate(lines):
            digits = line.split(b"\t", 1)[0]
            if digits.isdigit():
                position = int(digits)
            placed.append((position, order, line))
        placed.sort()
        self.positions = [position for position, _, _ in placed]
        self.lines = [line for _, _, line in placed]

    def reply_numbers(self) -> tuple[int, int, int]:
        if not self.lines:
            return 0, 0, 0
        return len(self.lines), self.positions[0], self.positions[-1]

    def between(self, first: int, last: int) -> list[bytes]:
        return self.lines[bisect.bisect_left(self.positions, first) : bisect.bisect_right(self.positions, last)]


class _Session:
    """One client connection: line reading and writing, with optional deflate both ways."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self.buffer = b""
        self.inflater: zlib._Decompress | None = None
        self.deflater: zlib._Compress | None = None

    def start_deflate(self) -> None:
        self.inflater = zlib.decompressobj(-15)
        self.deflater = zlib.compressobj(6, zlib.DEFLATED, -15)

    def readline(self) -> bytes | None:
        while b"\r\n" not in self.buffer:
            data = self.sock.recv(65536)
            if not data:
                return None
            self.buffer += self.inflater.decompress(data) if self.inflater else data
        line, self.buffer = self.buffer.split(b"\r\n", 1)
        return line

    def send(self, data: bytes) -> None:
        if self.deflater:
            data = self.deflater.compress(data) + self.deflater.flush(zlib.Z_SYNC_FLUSH)
        self.sock.sendall(data)

    def reply(self, status: str) -> None:
        self.send(status.encode() + b"\r\n")


def _dot_stuffed(lines: list[bytes]) -> bytes:
    return b"".join((b"." + line if line.startswith(b".") else line) + b"\r\n" for line in lines)


class ScriptedServer:
    """Options:

    - ``users``: {user: password}; when given, AUTHINFO is required before GROUP/OVER.
    - ``deflate``: offer RFC 8054 COMPRESS DEFLATE.
    - ``gzip``: accept XFEATURE COMPRESS GZIP; ``"after"`` sends the terminator line in plain
      text after the compressed stream, ``"inside"`` puts it inside the stream. ``gzip_wrapper``
      picks a zlib (default) or gzip header.
    - ``drop_after_lines``: hang up after sending this many lines of an OVER reply.
    - ``stall_over``: send the 224 status line of an OVER reply and then nothing.
    - ``silent``: accept connections but never send a byte.
    - ``overview_format``: what LIST OVERVIEW.FMT answers (INN's by default).
    """

    def __init__(
        self,
        groups: dict[str, list[bytes]] | None = None,
        *,
        users: dict[str, str] | None = None,
        deflate: bool = False,
        gzip: str | None = None,
        gzip_wrapper: str = "zlib",
        drop_after_lines: int | None = None,
        stall_over: bool = False,
        silent: bool = False,
        overview_format: tuple[str, ...] = INN_OVERVIEW_FORMAT,
        host: str = "127.0.0.1",
    ):
        if gzip not in (None, "after", "inside") or gzip_wrapper not in ("zlib", "gzip"):
            raise ValueError("gzip is None, 'after' or 'inside'; gzip_wrapper is 'zlib' or 'gzip'")
        self.groups = {name: _Group(lines) for name, lines in (groups or {}).items()}
        self.users = users
        self.deflate = deflate
        self.gzip = gzip
        self.gzip_wbits = 15 if gzip_wrapper == "zlib" else 31
        self.drop_after_lines = drop_after_lines
        self.stall_over = stall_over
        self.silent = silent
        self.overview_format = overview_format
        self.host = host
        self.port = 0
        self.commands: list[str] = []  # every command received, for assertions
        self._stopping = threading.Event()
        self._listener: socket.socket | None = None
        self._threads: list[threading.Thread] = []
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        listener = socket.create_server((self.host, 0))
        listener.settimeout(0.2)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._spawn(self._accept_loop, listener)
        return self

    def stop(self) -> None:
        self._stopping.set()
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()
        for thread in self._threads:
            thread.join(timeout=5)
        if self._listener:
            self._listener.close()

    def __enter__(self) -> ScriptedServer:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.stop()

    def _spawn(self, target, *args) -> None:
        thread = threading.Thread(target=target, args=args, daemon=True)
        self._threads.append(thread)
        thread.start()

    def _accept_loop(self, listener: socket.socket) -> None:
        while not self._stopping.is_set():
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            sock.settimeout(None)
            with self._lock:
                self._sockets.append(sock)
            self._spawn(self._serve, sock)

    # -- protocol --------------------------------------------------------------------------

    def _serve(self, sock: socket.socket) -> None:
        session = _Session(sock)
        try:
            if self.silent:
                self._stopping.wait()
                return
            session.reply("200 scripted news server ready")
            state = {"group": None, "user": None, "authed": self.users is None, "gzip": False}
            while not self._stopping.is_set():
                line = session.readline()
                if line is None:
                    return
                command = line.decode("utf-8", "replace")
                self.commands.append(command)
                if not self._answer(session, state, command):
                    return
        except OSError:
            pass  # the client went away, or stop() closed the socket
        finally:
            sock.close()

    def _answer(self, session: _Session, state: dict, command: str) -> bool:
        """Answers one command; False ends the session."""
        words = command.split()
        verb = words[0].upper() if words else ""
        args = words[1:]
        if verb == "QUIT":
            session.reply("205 bye")
            return False
        if verb == "CAPABILITIES":
            caps = ["VERSION 2", "READER", "OVER", "LIST ACTIVE OVERVIEW.FMT"]
            if self.users is not None and not state["authed"]:
                caps.append("AUTHINFO USER")
            if self.deflate and not session.deflater:
                caps.append("COMPRESS DEFLATE")
            session.reply("101 capability list follows")
            session.send(_dot_stuffed([cap.encode() for cap in caps]) + b".\r\n")
        elif verb == "AUTHINFO" and len(args) == 2 and args[0].upper() == "USER":
            state["user"] = args[1]
            session.reply("381 password required")
        elif verb == "AUTHINFO" and len(args) == 2 and args[0].upper() == "PASS":
            if self.users is not None and self.users.get(state["user"]) == args[1]:
                state["authed"] = True
                session.reply("281 authentication accepted")
            else:
                session.reply("481 authentication failed")
        elif verb == "DATE":
            session.reply("111 " + datetime.now(timezone.utc).strftime("%Y%m%d%H%M%S"))
        elif verb == "COMPRESS" and self.deflate and args[:1] == ["DEFLATE"] and not session.deflater:
            session.reply("206 compression active")
            session.start_deflate()
        elif verb == "XFEATURE" and self.gzip and [a.upper() for a in args] == ["COMPRESS", "GZIP"]:
            state["gzip"] = True
            session.reply("290 feature enabled")
        elif not state["authed"]:
            session.reply("480 authentication required")
        elif verb == "LIST" and [a.upper() for a in args] == ["OVERVIEW.FMT"]:
            session.reply("215 order of fields in overview database")
            session.send(_dot_stuffed([name.encode() for name in self.overview_format]) + b".\r\n")
        elif verb == "GROUP" and len(args) == 1:
            group = self.groups.get(args[0])
            if group is None:
                session.reply("411 no such group")
            else:
                state["group"] = group
                count, low, high = group.reply_numbers()
                session.reply(f"211 {count} {low} {high} {args[0]}")
        elif verb in ("OVER", "XOVER"):
            return self._over(session, state, args)
        else:
            session.reply("500 what?")
        return True

    def _over(self, session: _Session, state: dict, args: list[str]) -> bool:
        group: _Group | None = state["group"]
        if group is None:
            session.reply("412 no newsgroup selected")
            return True
        try:
            first_text, _, last_text = args[0].partition("-")
            first = int(first_text)
            last = int(last_text) if last_text else (first if "-" not in args[0] else 2**63 - 1)
        except (IndexError, ValueError):
            session.reply("501 syntax error in range")
            return True
        lines = group.between(first, last)
        if not lines:
            session.reply("423 no articles in that range")
            return True
        if state["gzip"]:
            session.reply("224 overview information follows [COMPRESS=GZIP]")
        else:
            session.reply("224 overview information follows")
        if self.stall_over:
            self._stopping.wait()
            return False
        if self.drop_after_lines is not None:
            session.send(_dot_stuffed(lines[: self.drop_after_lines]))
            session.sock.shutdown(socket.SHUT_RDWR)
            return False
        compressor = zlib.compressobj(6, zlib.DEFLATED, self.gzip_wbits) if state["gzip"] else None
        for start in range(0, len(lines), LINES_PER_SEND):
            data = _dot_stuffed(lines[start : start + LINES_PER_SEND])
            session.send(compressor.compress(data) if compressor else data)
        if compressor:
            session.send(compressor.compress(b".\r\n" if self.gzip == "inside" else b"") + compressor.flush())
            if self.gzip == "after":
                session.send(b".\r\n")
            return True
        session.send(b".\r\n")
        return True
