"""Our own NNTP client (RFC 3977), made for fetching overview data fast and safely.

Plain TCP or TLS (NNTPS, or STARTTLS), AUTHINFO USER/PASS, CAPABILITIES, MODE READER, GROUP,
LIST OVERVIEW.FMT, OVER/XOVER, BODY, DATE and QUIT, with compression where the server offers it:

- RFC 8054 ``COMPRESS DEFLATE`` (INN 2 has it): from the 206 reply on, both directions of the
  connection are raw deflate streams (wbits -15). Order: TLS, then AUTHINFO, then COMPRESS.
- ``XFEATURE COMPRESS GZIP`` (common at binary providers, INN lacks it): after 290, the data
  block of an overview reply is one zlib (or gzip) stream. Providers frame it two ways, and both
  are read: the terminating ``.`` line either follows the compressed stream in plain text, or is
  the last line inside it (``XFEATURE COMPRESS GZIP TERMINATOR``). A reply is taken as compressed
  when its status line says ``COMPRESS=GZIP`` or its data starts with a zlib (``x``) or gzip
  (0x1f) byte, which a plain overview line (digits) never does. The end is found from the
  compressed stream's own end, never by polling for a terminator.

Overview replies are streamed: :meth:`NNTPClient.over` yields blocks of lines as they arrive, so
memory stays bounded whatever the range. What a server sends is bounded too: a reply with more
lines than the numbers asked for, more bytes than they can hold, lines numbered outside them, a
line that never ends (past MAX_OVERVIEW_LINE) or a short text reply over MAX_LINE in all is a
protocol error. An overview line past MAX_KEPT_LINE is cut to it (its start is enough for the
digest to reject it by its reason): one hostile article never fails its range. A BODY reply is
read whole, up to a byte limit the caller gives: one that goes on past it is a protocol error
(its readers want a few small articles, never more than their budget). Every socket operation
has a timeout; error replies, dropped connections, timeouts and broken streams raise an
:class:`NNTPError` subclass. After a connection-level error (anything but :class:`NNTPReplyError`)
the client is closed.
"""

from __future__ import annotations

import re
import socket
import ssl
import zlib
from collections.abc import Callable, Generator, Iterator
from datetime import datetime, timezone
from typing import NamedTuple, TypeVar

from edge.digest.overview import MAX_KEPT_LINE, OverviewLayout, parse_date

from edge.digest.compiled import load

_compiled = load("edge.digest._overview")  # edge/digest/_overview.c
_dot_line_c = _compiled.dot_line if _compiled is not None else None

DEFAULT_TIMEOUT = 30.0
RECV_SIZE = 256 * 1024
QUICKACK: int | None = getattr(socket, "TCP_QUICKACK", None)  # Linux's
# Output per inflate step: bounds memory whatever the compression ratio of what arrives.
INFLATE_STEP = 1024 * 1024
# No status line or short text reply is this long; a longer one means the stream is broken.
MAX_LINE = 1024 * 1024
# An overview line longer than MAX_KEPT_LINE is cut to it: real lines are well under a kilobyte,
# but anyone can post an article with a subject of megabytes (INN 2 takes one), and such a line is
# rejected by its length anyway (edge.digest.overview.MAX_TEXT_BYTES), so only its start is kept,
# for the digest to count it by its reason. One reply's memory stays bounded by the range asked for.
# What an overview reply may hold for each article number asked for: lines cut to MAX_KEPT_LINE.
MAX_OVER_BYTES_PER_ARTICLE = MAX_KEPT_LINE + 2
# An overview line longer than this (what is cut off is read and dropped as it comes) means the
# stream is broken: a line that never ends.
MAX_OVERVIEW_LINE = 64 * 1024 * 1024

CRLF = b"\r\n"
TERMINATOR = b"\r\n.\r\n"
# RFC 3977's message-id: "<", printable US-ASCII without "<" or ">", ">", 250 bytes at most. One
# with a space, CR or LF would end the command early and let its rest be read as a second one.
_MESSAGE_ID = re.compile(r"<[\x21-\x3b\x3d\x3f-\x7e]{1,248}>")
_DOT_AFTER_LF = re.compile(rb"\n\.")


def _dot_line_python(data: bytes) -> int:
    """Where the first line after the first starts with a dot: the index of the dot, or -1 (a
    regex: twice as fast as bytes.find here; _overview.dot_line, its twin, one memchr a line)."""
    found = _DOT_AFTER_LF.search(data)
    return -1 if found is None else found.end() - 1


_dot_line = _dot_line_c or _dot_line_python


def _long_line_python(data: bytes, longest: int) -> int:
    """Where the first line longer than `longest` bytes (its CRLF not counted) starts, or -1
    (_overview.long_line, its twin, is one memchr a line)."""
    start, size = 0, len(data)
    while start < size:
        lf = data.find(b"\n", start)
        stop = size if lf < 0 else lf
        length = stop - start - (1 if lf > start and data[lf - 1] == 13 else 0)
        if length > longest:
            return start
        if lf < 0:
            break
        start = lf + 1
    return -1


_long_line = _compiled.long_line if _compiled is not None else _long_line_python


def _cut_long_lines(block: bytes) -> bytes:
    """The block's lines, each cut to MAX_KEPT_LINE bytes (see there)."""
    if len(block) <= MAX_KEPT_LINE or _long_line(block, MAX_KEPT_LINE) < 0:
        return block
    return CRLF.join(line[:MAX_KEPT_LINE] for line in block.split(CRLF))


class NNTPError(Exception):
    """Any NNTP failure."""


class NNTPReplyError(NNTPError):
    """The server answered with an unexpected status code; the connection stays usable."""

    def __init__(self, code: int, message: str, command: str):
        super().__init__(f"{command!r} -> {code} {message}")
        self.code = code
        self.message = message
        self.command = command


class NNTPConnectionError(NNTPError):
    """The connection failed or was dropped; the client is closed."""


class NNTPTimeout(NNTPConnectionError):
    """The server did not answer within the timeout; the client is closed."""


class NNTPProtocolError(NNTPConnectionError):
    """The server sent something that cannot be read (bad status line, corrupt compression)."""


class NNTPReplyTooLong(NNTPProtocolError):
    """A BODY reply went on past the bytes the caller allowed; the client is closed (the rest of
    the reply was never read, so the connection cannot be used again)."""


_T = TypeVar("_T")


class GroupInfo(NamedTuple):
    count: int  # type: ignore[assignment]  # the GROUP reply's count, a public field name: it hides tuple.count
    first: int
    last: int
    name: str


class _Wire:
    """The connection's bytes: a socket (maybe TLS), maybe through RFC 8054 deflate."""

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._deflater: zlib._Compress | None = None
        self._inflater: zlib._Decompress | None = None

    def start_tls(self, context: ssl.SSLContext, host: str) -> None:
        self.sock = context.wrap_socket(self.sock, server_hostname=host)

    def start_deflate(self) -> None:
        self._deflater = zlib.compressobj(6, zlib.DEFLATED, -15)
        self._inflater = zlib.decompressobj(-15)

    @property
    def deflating(self) -> bool:
        return self._inflater is not None

    def send(self, data: bytes) -> None:
        if self._deflater is not None:
            data = self._deflater.compress(data) + self._deflater.flush(zlib.Z_SYNC_FLUSH)
        self.sock.sendall(data)

    def recv(self) -> bytes:
        """The next bytes from the server (never empty); raises at end of stream."""
        if self._inflater is None:
            return self._recv_raw()
        while True:
            raw = self._inflater.unconsumed_tail or self._recv_raw()
            try:
                data = self._inflater.decompress(raw, INFLATE_STEP)
            except zlib.error as exc:
                raise NNTPProtocolError(f"corrupt COMPRESS DEFLATE stream: {exc}") from exc
            if data:
                return data
            if self._inflater.eof:
                raise NNTPProtocolError("the server ended its COMPRESS DEFLATE stream")

    def _recv_raw(self) -> bytes:
        if QUICKACK is not None:
            # Acknowledged at once: a server that writes a short reply in two pieces (INN: the
            # status line, then a small body) waits for the first one's ACK before sending the
            # second (Nagle), and a delayed ACK costs 40 ms a reply. Linux clears it as it goes.
            self.sock.setsockopt(socket.IPPROTO_TCP, QUICKACK, 1)
        data = self.sock.recv(RECV_SIZE)
        if not data:
            raise NNTPConnectionError("connection closed by the server")
        return data

    def close(self) -> None:
        try:
            self.sock.close()
        except OSError:
            pass


class _DotTerminatedBody:
    """Cuts a multi-line data block (RFC 3977 3.1.1) into runs of complete lines, fed in pieces
    of any size: finds the terminating ``.`` line across piece boundaries and undoes
    dot-stuffing. Only the last partial line is kept between pieces."""

    def __init__(self) -> None:
        self._pending = b""
        self._dropping = 0  # > 0: bytes dropped so far of a line cut to MAX_KEPT_LINE (in _pending)
        self.done = False
        self.rest = b""  # what followed the terminator

    def feed(self, data: bytes) -> bytes:
        """The complete lines now available (CRLF-terminated, each cut to MAX_KEPT_LINE), maybe b""."""
        if self._dropping:
            # The rest of an over-long line, up to its end, is dropped as it comes.
            lf = data.find(b"\n")
            if lf < 0:
                self._dropping += len(data)
                if self._dropping > MAX_OVERVIEW_LINE:
                    raise NNTPProtocolError(f"a line of the reply goes on past {MAX_OVERVIEW_LINE} bytes")
                return b""
            cut, self._pending, self._dropping = _unstuffed(self._pending + CRLF), b"", 0
            rest = self.feed(data[lf + 1 :]) if lf + 1 < len(data) else b""
            return cut + rest
        if self._pending:
            data = self._pending + data
        # One scan for the first line that starts with a dot (data always starts at a line
        # start). Overview lines never do, so usually there is none, or it is the terminator.
        if data[:1] == b".":
            dot = 0
        else:
            dot = _dot_line(data)
            if dot < 0:  # no line starts with a dot: nothing to unstuff, no terminator yet
                return self._complete_lines(data)
        if data[dot : dot + 3] == b".\r\n" and (dot == 0 or data[dot - 2 : dot] == CRLF):
            # the terminator, with no stuffed line before it
            block, self.rest, self._pending, self.done = data[:dot], data[dot + 3 :], b"", True
            return _cut_long_lines(block)
        return self._feed_stuffed(data)

    def _feed_stuffed(self, data: bytes) -> bytes:
        if data.startswith(b".\r\n"):
            end = 0
        else:
            end = data.find(TERMINATOR)
            if end >= 0:
                end += 2
        if end >= 0:
            block, self.rest, self._pending, self.done = _cut_long_lines(data[:end]), data[end + 3 :], b"", True
        else:
            block = self._complete_lines(data)
        return _unstuffed(block) if block else block

    def _complete_lines(self, data: bytes) -> bytes:
        """data up to its last CRLF; the partial line after it waits for the next piece."""
        cut = data.rfind(CRLF) + 2  # 1 when there is none: then nothing is complete yet
        if cut == 1:
            cut = 0
        block, self._pending = data[:cut], data[cut:]
        if len(self._pending) > MAX_KEPT_LINE:  # its start kept, the rest dropped as it comes
            self._dropping = len(self._pending) - MAX_KEPT_LINE
            self._pending = self._pending[:MAX_KEPT_LINE]
        return _cut_long_lines(block)

    def finish(self) -> bytes:
        """The partial line left when a compressed block ended without a final CRLF."""
        pending, self._pending, self._dropping = self._pending, b"", 0
        return _unstuffed(pending + CRLF) if pending else b""


def _unstuffed(block: bytes) -> bytes:
    """Removes the dot RFC 3977 adds in front of every line that starts with one."""
    if block.startswith(b"."):
        block = block[1:]
    return block.replace(b"\r\n.", CRLF) if b"\r\n." in block else block


def _number_of(block: bytes, start: int) -> int | None:
    """The article number the line at `start` begins with, or None when it has none (the digest
    counts such a line as rejected)."""
    end = block.find(b"\t", start, start + 21)
    digits = block[start:end] if end > start else b""
    return int(digits) if digits.isdigit() else None


def _is_compressed_start(first_byte: int) -> bool:
    return first_byte in (0x78, 0x1F)  # zlib header with a 32 KiB window; gzip magic


class NNTPClient:
    """One NNTP connection. Use :func:`connect` for the usual connect-login-compress sequence."""

    def __init__(
        self,
        host: str,
        port: int | None = None,
        *,
        tls: bool = False,
        cafile: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
    ):
        self.host = host
        self.port = port if port is not None else (563 if tls else 119)
        self.timeout = timeout
        self._cafile = cafile
        self._buffer = b""
        self._busy = False  # a multi-line reply is being streamed
        self._closed = False
        self._capabilities: dict[str, list[str]] | None = None
        self._layout: OverviewLayout | None = None
        self.compression: str | None = None  # "deflate" or "gzip" once active
        try:
            sock = socket.create_connection((host, self.port), timeout=timeout)
        except TimeoutError as exc:
            raise NNTPTimeout(f"connecting to {host}:{self.port} timed out") from exc
        except OSError as exc:
            raise NNTPConnectionError(f"cannot connect to {host}:{self.port}: {exc}") from exc
        self._wire = _Wire(sock)
        self._guarded(lambda: self._wire.start_tls(self._tls_context(), host) if tls else None)
        code, message = self._read_status()
        if code not in (200, 201):
            self.close()
            raise NNTPReplyError(code, message, "<greeting>")

    # -- session ---------------------------------------------------------------------------

    def capabilities(self) -> dict[str, list[str]]:
        """CAPABILITIES as {LABEL: [arguments]}; empty when the server lacks the command."""
        if self._capabilities is None:
            code, _ = self._command("CAPABILITIES", (101, 500, 501))
            lines = self._read_text_block() if code == 101 else []
            self._capabilities = {}
            for line in lines:
                words = line.split()
                if words:
                    self._capabilities[words[0].upper()] = words[1:]
        return self._capabilities

    def mode_reader(self) -> None:
        """MODE READER, for servers that announce MODE-READER (transit first)."""
        self._command("MODE READER", (200, 201))
        self._capabilities = None

    def starttls(self) -> None:
        """STARTTLS (RFC 4642): TLS on this connection, verified like NNTPS."""
        self._command("STARTTLS", (382,))
        self._guarded(lambda: self._wire.start_tls(self._tls_context(), self.host))
        self._capabilities = None

    def login(self, user: str, password: str) -> None:
        """AUTHINFO USER/PASS (RFC 4643)."""
        code, _ = self._command(f"AUTHINFO USER {user}", (281, 381))
        if code == 381:
            self._command(f"AUTHINFO PASS {password}", (281,), shown="AUTHINFO PASS ****")
        self._capabilities = None

    def compress(self) -> str | None:
        """Turn on compression if the server offers it: COMPRESS DEFLATE, else XFEATURE
        COMPRESS GZIP. Returns "deflate", "gzip", or None when neither is available."""
        if self.compression:
            return self.compression
        if "DEFLATE" in self.capabilities().get("COMPRESS", []) and self._optional("COMPRESS DEFLATE", 206):
            self._wire.start_deflate()
            self.compression = "deflate"
        elif self._optional("XFEATURE COMPRESS GZIP", 290):
            self.compression = "gzip"
        return self.compression

    def _optional(self, command: str, wanted: int) -> bool:
        """A command the server may refuse (unknown, not now, not before AUTHINFO)."""
        try:
            self._command(command, (wanted,))
        except NNTPReplyError:
            return False
        return True

    def quit(self) -> None:
        """QUIT and close; a connection that already failed is just closed."""
        if self._closed:
            return
        try:
            if not self._busy:
                self._command("QUIT", (205,))
        except NNTPError:
            pass
        finally:
            self.close()

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self._wire.close()

    def __enter__(self) -> NNTPClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.quit()

    # -- reading ---------------------------------------------------------------------------

    def group(self, name: str) -> GroupInfo:
        """GROUP: the group's estimated count and low/high water marks."""
        _, message = self._command(f"GROUP {name}", (211,))
        words = message.split()
        try:
            return GroupInfo(int(words[0]), int(words[1]), int(words[2]), words[3] if len(words) > 3 else name)
        except (IndexError, ValueError) as exc:
            raise self._broken(NNTPProtocolError(f"bad GROUP reply: {message!r}")) from exc

    def overview_format(self) -> list[str]:
        """LIST OVERVIEW.FMT, or RFC 3977's default order when the server lacks it."""
        code, _ = self._command("LIST OVERVIEW.FMT", (215, 500, 501, 503))
        if code != 215:
            return list(OverviewLayout.RFC_DEFAULT_FORMAT)
        return self._read_text_block()

    def overview_layout(self) -> OverviewLayout:
        """Where each overview field is on this server (asked once per connection)."""
        if self._layout is None:
            self._layout = OverviewLayout.from_format(self.overview_format())
        return self._layout

    def over(self, first: int, last: int) -> Iterator[bytes]:
        """OVER (or XOVER) ``first-last``: yields the raw overview lines as they arrive, in blocks
        of complete CRLF-terminated lines, dot-unstuffed. A range without articles yields nothing.
        Abandoning the iterator part way closes the connection (the rest of the reply is unread).
        """
        verb = "OVER" if "OVER" in self.capabilities() else "XOVER"
        code, message = self._command(f"{verb} {first}-{last}", (224, 420, 423))
        if code != 224:
            return
        gzip = self.compression == "gzip" and (
            "COMPRESS=GZIP" in message.upper() or _is_compressed_start(self._peek_byte())
        )
        blocks = self._stream_block(self._gzip_blocks() if gzip else self._plain_blocks())
        yield from self._bounded(blocks, first, last)

    def _bounded(self, blocks: Generator[bytes, None, None], first: int, last: int) -> Iterator[bytes]:
        """The blocks of an OVER reply, checked against the range asked for: more lines than it
        has numbers (and some stray ones), more bytes than such lines can hold, or a block that
        starts before `first` or ends past `last` is a protocol error (the connection is closed),
        so that a server whose reply never ends cannot fill the memory. Lines in the middle of a block are not
        looked at here: the digest rejects those outside the range one by one."""
        numbers = last - first + 1
        # One line a number, and some more: stray lines without a number that a server keeps
        # are passed on for the digest to reject and count (a tenth of the range, and a hundred).
        max_lines = numbers + numbers // 10 + 100
        max_bytes = max_lines * MAX_OVER_BYTES_PER_ARTICLE
        lines = size = 0
        try:
            for block in blocks:
                lines += block.count(CRLF)
                size += len(block)
                if lines > max_lines or size > max_bytes:
                    raise self._broken(
                        NNTPProtocolError(
                            f"the OVER {first}-{last} reply goes on past the {max_lines} lines or {max_bytes} bytes"
                            " that many articles can have"
                        )
                    )
                head = _number_of(block, 0)
                tail = _number_of(block, block.rfind(b"\n", 0, len(block) - 1) + 1)
                if (head is not None and head < first) or (tail is not None and tail > last):
                    raise self._broken(
                        NNTPProtocolError(
                            f"the OVER {first}-{last} reply has lines numbered outside the range asked for"
                            f" ({head if head is not None and head < first else tail})"
                        )
                    )
                yield block
        finally:
            # Whether cut off here or abandoned by the caller, the reply is no longer read: its
            # stream closes the connection (a reply read to its end makes this a no-op).
            blocks.close()

    def article_date(self, number: int) -> int | None:
        """The Date of one article as unix seconds (from its overview line), or None when the
        article does not exist or its date cannot be read. Planning bisects with this."""
        layout = self.overview_layout()
        wanted = str(number).encode()
        date = None
        for block in self.over(number, number):
            for line in block.split(CRLF)[:-1]:
                fields = line.split(b"\t")
                if fields[0] == wanted and len(fields) > layout.date:
                    date = parse_date(fields[layout.date])
        return date

    def body(self, message_id: str, max_bytes: int) -> bytes | None:
        """BODY ``<message-id>``: the article's body, dot-stuffing taken off, each line ending in
        CRLF as it came (the terminating ``.`` line left out); None when the server has no such
        article (430, or 423 from servers that answer so).

        At most `max_bytes` of the reply's data block are read: one that goes on past them raises
        NNTPReplyTooLong and closes the connection (the rest of the reply is never read, so the
        connection cannot be used again). A message-id that is not ``<...>`` of printable ASCII
        without spaces raises ValueError before anything is sent. A reply the server marks as
        compressed (XFEATURE COMPRESS GZIP) is refused (NNTPProtocolError, the connection
        closed): the body's readers connect without it, yEnc data does not compress."""
        if not isinstance(message_id, str) or not _MESSAGE_ID.fullmatch(message_id):
            raise ValueError(f"not a message-id: {str(message_id)[:80]!r}")
        if max_bytes < 0:
            raise ValueError("max_bytes must not be negative")
        code, message = self._command(f"BODY {message_id}", (222, 423, 430))
        if code != 222:
            return None
        if "COMPRESS=GZIP" in message.upper():
            raise self._broken(NNTPProtocolError(f"BODY {message_id}: a compressed reply is not read"))
        return self._read_body(message_id, max_bytes)

    def _read_body(self, message_id: str, max_bytes: int) -> bytes:
        """The data block of a BODY reply up to its terminator, at most max_bytes of it, unstuffed."""
        # Searched with a CRLF in front, so that a terminator right at the start (an empty body)
        # is found as one after a line.
        data = bytearray(CRLF)
        data += self._buffer
        self._buffer = b""
        searched = 0
        while True:
            end = data.find(TERMINATOR, searched)
            # (The data block, its terminator not counted, is data[2:end + 2]: `end` bytes.)
            if end > max_bytes or (end < 0 and len(data) - 2 > max_bytes + 3):
                raise self._broken(
                    NNTPReplyTooLong(f"the BODY {message_id} reply goes on past the {max_bytes} bytes allowed")
                )
            if end >= 0:
                self._buffer = bytes(data[end + len(TERMINATOR) :])
                return _unstuffed(bytes(data[2 : end + 2]))
            searched = max(0, len(data) - len(TERMINATOR) + 1)
            data += self._recv()

    def date(self) -> datetime:
        """DATE: the server's clock (UTC)."""
        _, message = self._command("DATE", (111,))
        try:
            return datetime.strptime(message.split()[0], "%Y%m%d%H%M%S").replace(tzinfo=timezone.utc)
        except (IndexError, ValueError) as exc:
            raise self._broken(NNTPProtocolError(f"bad DATE reply: {message!r}")) from exc

    # -- plumbing --------------------------------------------------------------------------

    def _tls_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self._cafile)

    def _command(self, line: str, expected: tuple[int, ...], shown: str | None = None) -> tuple[int, str]:
        if self._closed:
            raise NNTPConnectionError("the connection is closed")
        if self._busy:
            raise NNTPError("a multi-line reply is still being read on this connection")
        self._guarded(lambda: self._wire.send(line.encode("utf-8") + CRLF))
        code, message = self._read_status()
        if code not in expected:
            raise NNTPReplyError(code, message, shown or line)
        return code, message

    def _read_status(self) -> tuple[int, str]:
        line = self._readline()
        head = line[:3]
        if len(line) < 3 or not head.isdigit() or line[3:4] not in (b"", b" "):
            raise self._broken(NNTPProtocolError(f"bad status line: {line[:80]!r}"))
        return int(head), line[4:].decode("utf-8", "replace").strip()

    def _readline(self) -> bytes:
        while True:
            end = self._buffer.find(CRLF)
            if end >= 0:
                line, self._buffer = self._buffer[:end], self._buffer[end + 2 :]
                return line
            if len(self._buffer) > MAX_LINE:
                raise self._broken(NNTPProtocolError("reply line too long"))
            self._buffer += self._recv()

    def _peek_byte(self) -> int:
        if not self._buffer:
            self._buffer = self._recv()
        return self._buffer[0]

    def _recv(self) -> bytes:
        return self._guarded(self._wire.recv)

    def _read_text_block(self) -> list[str]:
        """A short multi-line reply (CAPABILITIES, LIST OVERVIEW.FMT): one over MAX_LINE bytes in
        all is a protocol error, so that a reply that never ends cannot fill the memory."""
        pieces, size = [], 0
        blocks = self._stream_block(self._plain_blocks())
        try:
            for block in blocks:
                size += len(block)
                if size > MAX_LINE:
                    raise self._broken(NNTPProtocolError(f"a text reply goes on past {MAX_LINE} bytes"))
                pieces.append(block)
        finally:
            blocks.close()
        return b"".join(pieces).decode("utf-8", "replace").split("\r\n")[:-1]

    def _stream_block(self, blocks: Iterator[bytes]) -> Generator[bytes, None, None]:
        """Marks the connection busy while a data block is read; closes it if abandoned."""
        self._busy = True
        finished = False
        try:
            yield from blocks
            finished = True
        finally:
            self._busy = False
            if not finished:
                self.close()

    def _plain_blocks(self) -> Iterator[bytes]:
        body = _DotTerminatedBody()
        data, self._buffer = self._buffer, b""
        while True:
            if data:
                block = body.feed(data)
                if block:
                    yield block
                if body.done:
                    self._buffer = body.rest
                    return
            data = self._recv()

    def _gzip_blocks(self) -> Iterator[bytes]:
        inflater = zlib.decompressobj(32 + 15)  # zlib or gzip header, detected
        body = _DotTerminatedBody()
        data, self._buffer = self._buffer, b""
        while not inflater.eof:
            if not data:
                data = self._recv()
            try:
                out = inflater.decompress(data, INFLATE_STEP)
            except zlib.error as exc:
                raise self._broken(NNTPProtocolError(f"corrupt XFEATURE COMPRESS GZIP data: {exc}")) from exc
            data = inflater.unconsumed_tail
            if out:
                if body.done:
                    raise self._broken(NNTPProtocolError("compressed data after the terminator"))
                block = body.feed(out)
                if block:
                    yield block
        self._buffer = inflater.unused_data
        if not body.done:
            # The terminator follows the compressed stream in plain text (maybe after a CRLF).
            block = body.finish()
            if block:
                yield block
            line = self._readline()
            if line == b"":
                line = self._readline()
            if line != b".":
                raise self._broken(NNTPProtocolError(f"no terminator after compressed data: {line[:80]!r}"))

    def _guarded(self, operation: Callable[[], _T]) -> _T:
        """Runs a socket operation, turning OS/TLS failures into NNTP errors (and closing)."""
        try:
            return operation()
        except NNTPConnectionError as exc:
            raise self._broken(exc) from exc.__cause__
        except TimeoutError as exc:
            raise self._broken(NNTPTimeout(f"{self.host}:{self.port}: no answer within {self.timeout} s")) from exc
        except ssl.SSLCertVerificationError as exc:
            raise self._broken(
                NNTPConnectionError(f"TLS certificate of {self.host} not trusted: {exc.verify_message}")
            ) from exc
        except OSError as exc:
            raise self._broken(NNTPConnectionError(f"{self.host}:{self.port}: {exc}")) from exc

    def _broken(self, error: NNTPError) -> NNTPError:
        self.close()
        return error


def connect(
    host: str,
    port: int | None = None,
    *,
    tls: bool = False,
    starttls: bool = False,
    cafile: str | None = None,
    user: str | None = None,
    password: str | None = None,
    compress: bool = True,
    timeout: float = DEFAULT_TIMEOUT,
) -> NNTPClient:
    """A ready connection, set up in the order RFC 8054 requires: TLS, AUTHINFO, COMPRESS."""
    client = NNTPClient(host, port, tls=tls, cafile=cafile, timeout=timeout)
    try:
        if starttls:
            client.starttls()
        if "MODE-READER" in client.capabilities():
            client.mode_reader()
        if user is not None:
            client.login(user, password or "")
        if compress:
            client.compress()
    except BaseException:
        client.close()
        raise
    return client
