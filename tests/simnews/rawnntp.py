"""A few lines of raw-socket NNTP for these tests (they must not depend on the edge's client)."""

from __future__ import annotations

import socket
import ssl


class RawNNTP:
    def __init__(self, host: str, port: int, *, cafile=None, timeout: float = 20.0):
        sock = socket.create_connection((host, port), timeout=timeout)
        if cafile:
            sock = ssl.create_default_context(cafile=str(cafile)).wrap_socket(sock, server_hostname=host)
        self.sock = sock
        self.file = sock.makefile("rb")
        self.greeting = self.file.readline()

    def command(self, line: str | bytes) -> bytes:
        """Sends one command; returns its status line without CRLF."""
        self.sock.sendall((line.encode() if isinstance(line, str) else line) + b"\r\n")
        return self.file.readline().rstrip(b"\r\n")

    def data(self) -> list[bytes]:
        """The lines of a data block (dot-unstuffed, without CRLF); EOFError if it ends early."""
        lines = []
        while True:
            line = self.file.readline()
            if not line.endswith(b"\r\n"):
                raise EOFError(f"connection closed after {len(lines)} lines")
            if line == b".\r\n":
                return lines
            lines.append(line[1:-2] if line.startswith(b"..") else line[:-2])

    def over(self, article_range: str, command: str = "XOVER") -> list[list[bytes]]:
        status = self.command(f"{command} {article_range}")
        assert status.startswith(b"224"), status
        return [line.split(b"\t") for line in self.data()]

    def close(self) -> None:
        try:
            self.sock.sendall(b"QUIT\r\n")
        except OSError:
            pass
        self.file.close()
        self.sock.close()

    def __enter__(self) -> RawNNTP:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
