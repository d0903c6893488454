"""Free TCP ports on 127.0.0.1 for private servers (INN instances, proxies)."""

from __future__ import annotations

import socket
from contextlib import ExitStack, closing


def free_ports(count: int) -> list[int]:
    """`count` distinct ports that were free a moment ago (bound together, then released)."""
    with ExitStack() as stack:
        sockets = [stack.enter_context(closing(socket.socket())) for _ in range(count)]
        for sock in sockets:
            sock.bind(("127.0.0.1", 0))
        return [sock.getsockname()[1] for sock in sockets]
