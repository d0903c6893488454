"""A coordinator in front of the real one, over HTTPS, that misbehaves when told to: answers 503
to batches, or drops the connection without an answer, then forwards everything."""
from __future__ import annotations

import http.client
import ssl
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from tests.fixtures.api_server import make_certificate

FORWARDED_HEADERS = ("Authorization", "Content-Type", "Content-Encoding", "Accept", "User-Agent")


class FlakyCoordinator:
    def __init__(self, upstream_url: str, upstream_cafile: str, *, batch_failures: list[str] | None = None):
        """batch_failures: what the next batch posts get, in order: "503" or "drop" (then forwarded);
        "503-forever" as the last item answers 503 to every batch from then on."""
        self.upstream = upstream_url.removeprefix("https://")
        self.upstream_context = ssl.create_default_context(cafile=upstream_cafile)
        self.batch_failures = list(batch_failures or [])
        self.batch_posts = 0
        self.lock = threading.Lock()
        directory = tempfile.mkdtemp(prefix="flaky.")
        self.cafile, key = make_certificate(directory, "flaky")
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.cafile, key)
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.url = f"https://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FlakyCoordinator:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.server.shutdown()
        self.server.server_close()

    def _next_failure(self, path: str) -> str | None:
        if not path.endswith("/batches"):
            return None
        with self.lock:
            self.batch_posts += 1
            if not self.batch_failures:
                return None
            if self.batch_failures[0] == "503-forever":
                return "503"
            return self.batch_failures.pop(0)

    def _handler(self):
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_GET(self):
                self._relay()

            def do_POST(self):
                self._relay()

            def _relay(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                failure = stub._next_failure(self.path)
                if failure == "drop":
                    self.close_connection = True
                    self.connection.shutdown(2)
                    return
                if failure == "503":
                    self._answer(503, b'{"error": "unavailable", "message": "try later"}', "application/json")
                    return
                upstream = http.client.HTTPSConnection(stub.upstream, context=stub.upstream_context, timeout=60)
                try:
                    upstream.request(self.command, self.path, body=body or None,
                                     headers={h: self.headers[h] for h in FORWARDED_HEADERS if self.headers[h]})
                    response = upstream.getresponse()
                    self._answer(response.status, response.read(), response.getheader("Content-Type"))
                finally:
                    upstream.close()

            def _answer(self, status, data, content_type):
                self.send_response(status)
                if content_type:
                    self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        return Handler
