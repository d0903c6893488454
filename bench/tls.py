"""What a TLS handshake costs the API's server, by key and by how its TLS context is made.

    .venv/bin/python bench/tls.py [--handshakes 300]

Every new connection to the API (a node starting, a newznab client or browser that does not keep
its connection) costs the server a handshake. For an RSA-2048 key (openssl's default) and the
ECDSA P-256 key ops/certificate makes, and for a TLS context made for each connection (gunicorn's
own factory: it reads the key and the system's CA store each time) and one context kept (what
ops/gunicorn.conf.py's `ssl_context` does), with a client that starts a new session each time
and one that comes back with its last, it measures the server side's CPU a handshake (the
thread's CPU time: the context, the handshake and one byte each way, Python's ssl as gunicorn
uses it) over --handshakes connections on a socket pair, a client thread on the other end, and
how many sessions were resumed. The last line is JSON.
"""

from __future__ import annotations

import argparse
import json
import socket
import ssl
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]

KEYS = {
    "rsa-2048": ["-newkey", "rsa:2048"],
    "ecdsa-p256": ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
}


# (context kept, client resumes its last session, what it is called): a context made for each
# connection cannot resume a session (each has its own ticket keys).
VARIANTS = (
    (False, True, "a context a connection"),
    (True, False, "one context kept, a new session"),
    (True, True, "one context kept, the session resumed"),
)


def certificate(directory: Path, name: str, key_options: list[str]) -> tuple[str, str]:
    cert, key = directory / f"{name}.pem", directory / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-new", "-x509", "-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"]
        + ["-addext", "subjectAltName=IP:127.0.0.1", *key_options, "-keyout", str(key), "-out", str(cert)],
        check=True,
        capture_output=True,
    )
    return str(cert), str(key)


def server_context(cert: str, key: str) -> ssl.SSLContext:
    """As gunicorn's default factory makes it (gunicorn.sock.ssl_context)."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(certfile=cert, keyfile=key)
    return context


def handshakes(cert: str, key: str, count: int, context_kept: bool, resume: bool) -> dict[str, Any]:
    client_context = ssl.create_default_context(cafile=cert)
    kept = server_context(cert, key)
    cpu = 0.0
    resumed = 0
    session: ssl.SSLSession | None = None
    for _ in range(count):
        ours, theirs = socket.socketpair()
        came_back: list[tuple[bool, ssl.SSLSession | None]] = []

        def client(
            sock: socket.socket = theirs,
            last: ssl.SSLSession | None = session if resume else None,
            came_back: list[tuple[bool, ssl.SSLSession | None]] = came_back,
        ) -> None:
            with client_context.wrap_socket(sock, server_hostname="127.0.0.1", session=last) as tls:
                tls.sendall(b"?")
                tls.recv(1)
                came_back.append((bool(tls.session_reused), tls.session))

        thread = threading.Thread(target=client)
        thread.start()
        started = time.thread_time()
        context = kept if context_kept else server_context(cert, key)
        with context.wrap_socket(ours, server_side=True) as tls:
            tls.recv(1)
            tls.sendall(b"!")
            cpu += time.thread_time() - started
            thread.join()
        reused, session = came_back[0]
        resumed += reused
    return {"server_cpu_ms": round(cpu / count * 1000, 3), "resumed": round(resumed / count, 3)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--handshakes", type=int, default=300)
    args = parser.parse_args(argv)
    if args.handshakes < 1:
        parser.error("--handshakes must be at least 1")
    print(f"command: .venv/bin/python bench/tls.py --handshakes {args.handshakes} ({ssl.OPENSSL_VERSION})")
    figures: dict[str, Any] = {"handshakes": args.handshakes}
    with tempfile.TemporaryDirectory(prefix="tls-bench.") as directory:
        for name, options in KEYS.items():
            cert, key = certificate(Path(directory), name, options)
            for kept, resume, how in VARIANTS:
                variant = f"{name}, {how}"
                result = handshakes(cert, key, args.handshakes, kept, resume)
                figures[variant] = result
                print(
                    f"{variant}: {result['server_cpu_ms']} ms of server CPU a handshake,"
                    f" {result['resumed']:.0%} of sessions resumed"
                )
    before = figures["rsa-2048, a context a connection"]["server_cpu_ms"]
    after = figures["ecdsa-p256, one context kept, a new session"]["server_cpu_ms"]
    figures["gain"] = round(before / after, 2)
    print(
        f"a new session: ECDSA with one context kept against RSA with a context a connection:"
        f" {figures['gain']}x less CPU"
    )
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
