"""The batch endpoint fuzzed, end to end: real batches of a scripted group, each mutated (a value's
type, size or sign, a list's or map's length, a value nested deep, the body's encoding) and posted
over HTTPS to the real API, its workers storing what it accepts. Each answer is a 4xx, or a 202
for a batch that is then stored exactly; never a 5xx, never a 202 that is not stored."""

from __future__ import annotations

import gzip
import json
import random
from collections import Counter

import msgpack
import pytest

from edge.digest.batch import decode_batch
from simnews.generator import Config, generate
from simnews.scripted import ScriptedServer, overview_lines
from tests.app.factories import RANGES_OFF_THEIR_ROWS, RELEASES_OFF_THEIR_ROWS
from tests.e2e.conftest import FRENCH
from tests.e2e.hand import Hand, digest_lease
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.services

BONELESS = 2**33 + 1
ATTEMPTS = 240
NEST = "\x01nested here\x01"  # a placeholder the encoder replaces with a deeply nested value
ODD = [
    None,
    True,
    False,
    1.5,
    "7",
    "",
    "\x00",
    [],
    {},
    [1, 2],
    {"a": 1},
    2**63,
    -(2**63),
    2**64 - 1,
    2**70,
    -1,
    0,
    2**31,
    2**31 - 1,
    2**63 - 1,
]


def _step(value, rng: random.Random):
    """A random key or index of a map or a list, or None for a leaf or an empty one."""
    if isinstance(value, dict) and value:
        return rng.choice(list(value))
    if isinstance(value, list) and value:
        return rng.randrange(len(value))
    return None


def mutated(batch: dict, rng: random.Random) -> dict:
    """A copy of the batch with one mutation somewhere in it (a random walk from the top)."""
    batch = json.loads(json.dumps(batch, default=lambda v: v.decode()))  # a deep copy, text as str
    parent, key = None, None
    node = batch
    while True:
        step = _step(node, rng)
        if step is None or (parent is not None and rng.random() < 0.3):
            break
        parent, key, node = node, step, node[step]
    kind = rng.choice(["type", "sign", "size", "length", "nesting"])
    if parent is None:  # the batch itself
        parent, key = batch, rng.choice(list(batch))
        node = parent[key]
    if kind == "type" or (kind == "sign" and type(node) is not int):
        parent[key] = rng.choice(ODD)
    elif kind == "sign":
        parent[key] = -node
    elif kind == "size":
        if type(node) is int:
            parent[key] = rng.choice(
                [node + 1, node - 1, node * 1000, 0, 2**31 - 1, 2**31, 2**63 - 1, 2**63, -(2**63), 2**64 - 1]
            )
        elif type(node) is str:
            parent[key] = rng.choice([node * 1000, "", node + "\x00", node + "\udc80", node + "é"])
        else:
            parent[key] = rng.choice([node * 2, node * 0] if isinstance(node, list) else [{}])
    elif kind == "length":
        if isinstance(node, list) and node:
            parent[key] = rng.choice([node[:-1], node + node[-1:], node[:1] + node, []])
        elif isinstance(node, dict) and node:
            shorter = dict(node)
            shorter.pop(rng.choice(list(node)))
            parent[key] = rng.choice([shorter, {**node, "extra": 1}])
        else:
            parent[key] = [node, node]
    else:
        parent[key] = rng.choice([[node], {"k": node}, NEST])
    return batch


def encoded(batch: dict, rng: random.Random) -> tuple[bytes, dict]:
    """The batch as a body and its headers, in one of the encodings a node might send, right or
    wrong."""
    fmt = rng.choice(["msgpack", "msgpack", "json", "bin"])
    try:
        if fmt == "json":
            raise ValueError
        body = msgpack.packb(batch, use_bin_type=fmt == "bin")
        body = body.replace(msgpack.packb(NEST), b"\x91" * 60_000 + b"\x01")
        content_type = "application/msgpack"
    except (ValueError, OverflowError):
        body = json.dumps(batch, ensure_ascii=rng.random() < 0.5).encode("utf-8", "surrogatepass")
        body = body.replace(json.dumps(NEST).encode(), b"[" * 60_000 + b"1" + b"]" * 60_000)
        content_type = "application/json"
    headers = {"Content-Type": content_type}
    if rng.random() < 0.7:
        body = gzip.compress(body, compresslevel=1)
        headers["Content-Encoding"] = "gzip"
    roll = rng.random()
    if roll < 0.03:
        body = body[: len(body) // 2]
    elif roll < 0.06:
        body += b"\x00trailing"
    elif roll < 0.08:
        headers["Content-Type"] = "text/plain"
    elif roll < 0.10:
        headers["Content-Encoding"] = "br"
    return body, headers


def test_mutated_batches_get_a_4xx_or_are_stored_exactly(dc):
    articles = [a for a in generate(3_000, Config(seed=37, groups=(FRENCH,), namespace="fuzzbatch")) if not a.lost]
    lines = list(overview_lines(articles, FRENCH, first_number=BONELESS))
    rng = random.Random(37)
    answers: Counter = Counter()
    taken: dict[int, list[dict]] = {}  # range id -> the batches it accepted, as decoded
    with ScriptedServer({FRENCH: lines}) as server:
        dc.add_groups(FRENCH)
        dc.plan(server, FRENCH, range_size=60)
        hand = Hand(dc.api, dc.create_node("edge-hand"))
        lease = None
        for _ in range(ATTEMPTS):
            if lease is None:
                status, lease = hand.call("POST", "/lease")
                if status == 204:
                    break
                assert status == 200, (status, lease)
                range_id, batches = lease["range"]["id"], digest_lease(server.port, lease)
                taken.setdefault(range_id, [])
            body, headers = encoded(mutated(batches[0], rng), rng)
            status, answer = hand.call("POST", f"/ranges/{range_id}/batches", body=body, headers=headers)
            answers[status] += 1
            assert status < 500, (status, answer)
            assert status == 202 or 400 <= status < 500 and answer.get("error"), (status, answer)
            if status != 202:
                continue
            taken[range_id].append(decode_batch(body, headers["Content-Type"], headers.get("Content-Encoding")))
            # The rest of the range as the node digested it, from where the accepted batch ended.
            for batch in batches[1:]:
                if batch["first"] == answer["next_id"]:
                    status, answer = hand.post(range_id, batch)
                    assert status == 202, (status, answer)
                    taken[range_id].append(batch)
            if answer["next_id"] == lease["range"]["last_id"] + 1:
                assert hand.call("POST", f"/ranges/{range_id}/done")[0] == 200
            else:  # the accepted batch ended elsewhere: its range is given back
                assert hand.call("POST", f"/ranges/{range_id}/release")[0] == 200
            lease = None
    wait_until(dc.all_joined, 120, "every accepted batch stored", interval=0.2)
    print(f"answers: {dict(answers)}; ranges with an accepted mutated batch: {sum(map(bool, taken.values()))}")
    assert answers[202] and sum(n for status, n in answers.items() if 400 <= status < 500) > answers[202]
    # Stored exactly: each accepted batch's fragments, release chunks and counts, no more.
    for range_id, batches in taken.items():
        if not batches:
            continue
        row = dc.rows(
            "SELECT articles, missing, rejected, files, releases FROM seed_ranges WHERE id = :id", id=range_id
        )[0]
        assert tuple(row) == (
            sum(c[2] - c[3] for b in batches for c in b["chunks"]),
            sum(b_ - a + 1 for b in batches for a, b_ in b["missing"]),
            sum(c[3] for b in batches for c in b["chunks"]),
            sum(b["rules"][""][1] for b in batches),
            sum(b["rules"][""][0] for b in batches),
        )
        for batch in batches:
            assert dc.value(
                "SELECT count(*) FROM fragments WHERE article BETWEEN :a AND :b", a=batch["first"], b=batch["last"]
            ) == len(batch["fragments"]["article"])
            assert dc.value(
                "SELECT count(*) FROM release_chunks WHERE range_id = :r AND batch_from = :a",
                r=range_id,
                a=batch["first"],
            ) == len(batch["release_chunks"]["release"])
    assert dc.value("SELECT count(*) FROM seed_batches") == sum(map(len, taken.values()))
    assert dc.value(RELEASES_OFF_THEIR_ROWS) == 0
    assert dc.value(RANGES_OFF_THEIR_ROWS) == 0
