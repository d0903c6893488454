"""The test acting as a node by hand, over the API's HTTPS: raw calls with any token, headers
and body, and batches digested from the provider with the edge's own range loop, to be posted
in whatever order a case needs."""

from __future__ import annotations

import http.client
import json
import ssl

from edge.digest.batch import encode_batch
from edge.digest.nntp import connect
from edge.digest.rules import RuleSet
from edge.digest.runner import RangeJob, SingleConnectionSource, run_range
from tests.fixtures.api_server import ApiServer

PREFIX = "/api/v1/seed"


class Hand:
    def __init__(self, api: ApiServer, token: str):
        self.host, _, port = api.url.removeprefix("https://").partition(":")
        self.port = int(port)
        self.context = ssl.create_default_context(cafile=api.cafile)
        self.token = token

    def call(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict | None = None,
        token: str | None = None,
        authorization: str | None = None,
    ) -> tuple[int, dict]:
        """(status, JSON answer or {}) of one request; the token is this hand's unless given."""
        connection = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=60)
        try:
            auth = authorization if authorization is not None else f"Bearer {token or self.token}"
            try:
                connection.request(method, PREFIX + path, body=body, headers={"Authorization": auth, **(headers or {})})
            except OSError:
                pass  # the server answered (413) and closed before taking the whole body: read the answer
            response = connection.getresponse()
            data = response.read()
        finally:
            connection.close()
        try:
            answer = json.loads(data) if data else {}
        except ValueError:
            answer = {"raw": data[:200]}
        return response.status, answer

    def lease(self) -> dict:
        status, answer = self.call("POST", "/lease")
        assert status == 200, (status, answer)
        return answer

    def post(
        self,
        range_id: int,
        batch: dict | None = None,
        *,
        body: bytes | None = None,
        headers: dict | None = None,
        token: str | None = None,
    ) -> tuple[int, dict]:
        """A batch encoded as a node encodes it, or a raw body with the given headers."""
        if batch is not None:
            body, content_type, encoding = encode_batch(batch)
            headers = {
                "Content-Type": content_type,
                **({"Content-Encoding": encoding} if encoding else {}),
                **(headers or {}),
            }
        return self.call("POST", f"/ranges/{range_id}/batches", body=body, headers=headers, token=token)


class _Recorder:
    def __init__(self):
        self.batches: list[dict] = []

    def submit(self, batch: dict) -> None:
        self.batches.append(batch)


def digest_lease(nntp_port: int, lease: dict, *, group: str | None = None, last_id: int | None = None) -> list[dict]:
    """The leased range's batches as a node would post them, read from the provider (or those of
    another group, or up to another end, for cases that need a wrong batch)."""
    seed_range = lease["range"]
    group = group or seed_range["group"]
    recorder = _Recorder()
    with connect("127.0.0.1", nntp_port, compress=False) as client:
        client.group(group)
        job = RangeJob(
            group=group,
            next_id=seed_range["next_id"],
            last_id=last_id or seed_range["last_id"],
            chunk_size=lease["chunk_size"],
            batch_chunks=lease["batch_chunks"],
            rules=RuleSet.from_data(lease["rules"]),
            layout=client.overview_layout(),
        )
        run_range(job, SingleConnectionSource(client), recorder)
    return recorder.batches
