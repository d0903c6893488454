"""An HTTPS relay in front of the API that loses answers: the batch is forwarded and taken, but
the node never hears back (a connection cut on the way back), so it sends the same batch again.
It records every batch it forwarded, so a test can post them again later, in any order."""
from __future__ import annotations

import http.client
import shutil
import ssl
import tempfile
import threading
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.fixtures.api_server import make_certificate

FORWARDED_HEADERS = ("Authorization", "Content-Type", "Content-Encoding", "Accept", "User-Agent")


@dataclass(frozen=True)
class Posted:
    path: str
    headers: dict[str, str]
    body: bytes
    status: int  # what the API answered (the node may not have heard it)


class AnswerLosingRelay:
    def __init__(self, upstream_url: str, upstream_cafile: str, *, lose: set[int]):
        """lose: which batches (1 = the first one forwarded) have the answer to their first post
        lost; a batch sent again is answered."""
        self.upstream = upstream_url.removeprefix("https://")
        self.upstream_context = ssl.create_default_context(cafile=upstream_cafile)
        self.lose = set(lose)
        self.posts: list[Posted] = []
        self.batches = 0  # distinct batches forwarded
        self.lost: list[Posted] = []
        self.lock = threading.Lock()
        self.directory = tempfile.mkdtemp(prefix="relay.")
        self.cafile, key = make_certificate(self.directory, "relay")
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cafile, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> AnswerLosingRelay:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()
        shutil.rmtree(self.directory, ignore_errors=True)

    def _handler(self):
        relay = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._relay()

            def do_POST(self):
                self._relay()

            def _relay(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                headers = {h: self.headers[h] for h in FORWARDED_HEADERS if self.headers[h]}
                upstream = http.client.HTTPSConnection(relay.upstream, context=relay.upstream_context, timeout=60)
                try:
                    upstream.request(self.command, self.path, body=body or None, headers=headers)
                    response = upstream.getresponse()
                    status, data, content_type = response.status, response.read(), response.getheader("Content-Type")
                finally:
                    upstream.close()
                if self.path.endswith("/batches"):
                    posted = Posted(self.path, headers, body, status)
                    with relay.lock:
                        first_time = all(p.body != body for p in relay.posts)
                        relay.posts.append(posted)
                        if first_time:
                            relay.batches += 1
                        losing = first_time and relay.batches in relay.lose
                        if losing:
                            relay.lost.append(posted)
                    if losing:  # taken upstream; the answer never comes back
                        self.close_connection = True
                        self.connection.shutdown(2)
                        return
                self.send_response(status)
                if content_type:
                    self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
