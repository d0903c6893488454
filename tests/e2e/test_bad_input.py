"""Bad input at every door, end to end: at the API over HTTPS (tokens unknown, malformed,
disabled or another node's; malformed, oversized and wrong batches; a gzip bomb) while edge
nodes work, and at the news door (a scripted server serving fuzzed overview lines with article
numbers past 2^33). Every refusal is the documented one, and the catalog ends up equal to the
ground truth: bad input changed nothing. Also: a batch of another group, a batch over the body
limit and an overview line with a size past 32 bits (each found by this suite) neither get in nor
block a range."""

from __future__ import annotations

import gzip
import json
import random
import signal
import zlib

import msgpack
import pytest

from edge.digest.batch import encode_batch
from simnews.generator import Config, generate
from simnews.scripted import ScriptedServer, overview_lines
from tests.e2e.conftest import FRENCH, MAX_BODY_BYTES, MAX_DECODED_BYTES, PS2
from tests.e2e.hand import Hand, digest_lease
from tests.e2e.truth import GroupTruth, check_ground_truth
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.services


def test_bad_requests_at_the_api_are_refused_and_change_nothing(dc, news):
    with news.provider() as proxy:
        tokens = dc.prepare(proxy, nodes=("edge-a", "edge-b", "edge-hand", "edge-other", "edge-disabled"))
        dc.flask("nodes", "disable", "edge-disabled")
        hand = Hand(dc.api, tokens["edge-hand"])
        lease = hand.lease()
        seed_range = lease["range"]
        range_id, next_id = seed_range["id"], seed_range["next_id"]
        assert seed_range["group"] == FRENCH
        # The good nodes work meanwhile (on the other ranges, then on this one once it is given back).
        nodes = [dc.edge(name, dc.node_env(tokens[name], proxy.port)) for name in ("edge-a", "edge-b")]
        # Nodes with a token the API refuses stop at once, exit 3.
        for name, token in (("edge-unknown", "seed_" + "x" * 43), ("edge-disabled", tokens["edge-disabled"])):
            stopped = dc.edge(name, dc.node_env(token, proxy.port), "--exit-when-idle")
            assert stopped.wait(30) == 3, stopped.log()

        batch = digest_lease(proxy.port, lease)[0]
        body, content_type, encoding = encode_batch(batch)
        good = {"Content-Type": content_type, "Content-Encoding": encoding}

        def refused(expected: tuple[int, str], method: str, path: str, **request) -> None:
            status, answer = hand.call(method, path, **request)
            assert (status, answer.get("error")) == expected, (path, request.get("headers"), status, answer)

        batches = f"/ranges/{range_id}/batches"
        # Tokens: unknown, malformed, disabled, or another node's.
        unauthorized = (401, "unauthorized")
        for authorization in (
            "",
            "Bearer",
            "Bearer ",
            "Basic ZWRnZTpwdw==",
            "Bearer seed_unknown_token",
            f"Bearer {tokens['edge-hand']}x",
            f"bearer{tokens['edge-hand']}",
        ):
            refused(unauthorized, "POST", "/lease", authorization=authorization)
            refused(unauthorized, "POST", batches, body=body, headers=good, authorization=authorization)
        refused(unauthorized, "POST", batches, body=body, headers=good, token=tokens["edge-disabled"])
        refused(unauthorized, "GET", "/status", token=tokens["edge-disabled"])
        for call in ("batches", "heartbeat", "done", "release"):
            refused(
                (409, "not_your_lease"),
                "POST",
                f"/ranges/{range_id}/{call}",
                body=body,
                headers=good,
                token=tokens["edge-other"],
            )
        refused((404, "unknown_range"), "POST", "/ranges/999999/batches", body=body, headers=good)
        refused((409, "batches_missing"), "POST", f"/ranges/{range_id}/done")

        # Bodies: malformed, wrong, oversized, a gzip bomb.
        malformed = (400, "malformed_batch")
        raw = zlib.decompress(body, 16 + zlib.MAX_WBITS)
        as_json = encode_batch(batch, fmt="json", gzip=False)[0]
        for bad_body, headers in [
            (b"", good),
            (b"\x00" * 100, good),
            (body[: len(body) // 2], good),  # gzip cut short
            (body + b"trailing", good),
            (raw, good),  # says gzip, is not
            (raw[:-7], {"Content-Type": content_type}),  # msgpack cut short
            (msgpack.packb([1, 2, 3]), {"Content-Type": content_type}),
            (msgpack.packb({**msgpack.unpackb(raw), "version": 2}), {"Content-Type": content_type}),
            (msgpack.packb({**msgpack.unpackb(raw), "fragments": {"article": [1]}}), {"Content-Type": content_type}),
            (as_json.replace(b'"version":1', b'"version":NaN'), {"Content-Type": "application/json"}),
            (as_json, {"Content-Type": "text/plain"}),
            (as_json, {"Content-Type": "application/json", "Content-Encoding": "br"}),
        ]:
            refused(malformed, "POST", batches, body=bad_body, headers=headers)
        huge_part = {**batch, "fragments": {**batch["fragments"], "part": [2**40] + batch["fragments"]["part"][1:]}}
        refused(malformed, "POST", batches, body=encode_batch(huge_part)[0], headers=good)
        # Counts that are not the batch's (refused whole, before the range is looked at): rule
        # counts adding up past 2^63 - 1, a release's bytes near 2^63, negative lines, more
        # rejected lines than lines, five million missing spans for a few thousand articles.
        kept_bytes = batch["rules"][""][3]
        for spoiled in [
            {**batch, "rules": {**batch["rules"], "a": [1, 1, 2**63 - 1, 0], "b": [1, 1, 2**63 - 1, 0]}},
            {
                **batch,
                "release_chunks": {
                    **batch["release_chunks"],
                    "bytes": [2**63 - 1000 - kept_bytes] + batch["release_chunks"]["bytes"][1:],
                },
                "rules": {**batch["rules"], "": batch["rules"][""][:3] + [2**63 - 1000]},
            },
            {**batch, "chunks": [[*batch["chunks"][0][:2], -5, 0]] + batch["chunks"][1:]},
            {**batch, "chunks": [[*batch["chunks"][0][:3], batch["chunks"][0][2] + 1]] + batch["chunks"][1:]},
        ]:
            refused(malformed, "POST", batches, body=encode_batch(spoiled)[0], headers=good)
        spans = msgpack.packb({**msgpack.unpackb(raw), "missing": []})
        spans = spans.replace(
            b"\xa7missing\x90", b"\xa7missing\xdd" + (5_000_000).to_bytes(4, "big") + b"\x92\x01\x01" * 5_000_000
        )
        refused(malformed, "POST", batches, body=gzip.compress(spans, compresslevel=9), headers=good)
        # A batch past the range's end, its counts in step: refused for its span.
        past_the_end = {
            **batch,
            "last": seed_range["last_id"] + 1,
            "chunks": batch["chunks"][:-1]
            + [[batch["chunks"][-1][0], seed_range["last_id"] + 1, *batch["chunks"][-1][2:]]],
            "missing": batch["missing"] + [[batch["last"] + 1, seed_range["last_id"] + 1]],
        }
        refused((422, "outside_range"), "POST", batches, body=encode_batch(past_the_end)[0], headers=good)
        later = digest_lease(proxy.port, lease)[1]
        refused((409, "out_of_order"), "POST", batches, body=encode_batch(later)[0], headers=good)
        refused((413, "request_entity_too_large"), "POST", batches, body=b"\x1f" * (MAX_BODY_BYTES + 1), headers=good)
        bomb = gzip.compress(b"\x00" * (MAX_DECODED_BYTES * 4), compresslevel=9)
        assert len(bomb) < MAX_BODY_BYTES // 16
        refused((413, "batch_too_large"), "POST", batches, body=bomb, headers=good)
        refused(
            (413, "batch_too_large"),
            "POST",
            batches,
            body=gzip.compress(msgpack.packb({**batch, "group": "x" * MAX_DECODED_BYTES})),
            headers=good,
        )

        # Nothing changed: the range is where it was, no batch of it is stored.
        assert [
            tuple(r) for r in dc.rows("SELECT status, next_id, batches FROM seed_ranges WHERE id = :id", id=range_id)
        ] == [("leased", next_id, 0)]
        assert dc.value("SELECT count(*) FROM seed_batches WHERE range_id = :id", id=range_id) == 0
        # The good batch still goes in; then the range is given back and the nodes finish it.
        assert hand.post(range_id, batch)[0] == 202
        assert hand.call("POST", f"/ranges/{range_id}/release")[0] == 200
        wait_until(dc.ranges_done, 60, "every range done")
        for node in nodes:
            node.signal(signal.SIGTERM)
            assert node.wait(10) == 143, node.log()
    dc.wait_finished()
    check_ground_truth(dc.engine, news.truths())


# -- the news door: fuzzed overview lines --------------------------------------------------------

BONELESS = 2**33 + 1  # the scripted group's first article number
FUZZ_ARTICLES = 8_000


def garble(line: bytes, rng: random.Random) -> bytes:
    """The line broken in one of the ways a node must reject (number kept or spoiled)."""
    fields = line.split(b"\t")
    kind = rng.randrange(6)
    if kind == 0:
        fields[1] = fields[1][:5] + b"\x00" + fields[1][5:]  # NUL byte in the subject
    elif kind == 1:
        fields = fields[: rng.randint(1, 4)]  # too few fields
    elif kind == 2:
        fields[6] = rng.choice([b"12k", b"-5", b"", b"99999999999999999999"])  # bytes not a number
    elif kind == 3:
        fields[4] = b""  # no message-id
    elif kind == 4:
        fields[0] = rng.choice([b"x", b"-", b"+", b" ", b"0x"]) + fields[0]  # article number spoiled
    else:
        fields = [fields[0], b""]  # a number and nothing
    return b"\t".join(fields)


def junk(rng: random.Random) -> bytes:
    """A garbage line that belongs to no article (never starting with a digit)."""
    alphabet = bytes(b for b in range(256) if b not in b"\r\n")
    body = bytes(rng.choice(alphabet) for _ in range(rng.randint(0, 120)))
    head = rng.choice([b"", b".", b"..", b"\t", b"-", b"abc\t", b"\x00", b"\xff"])
    line = head + body
    while line[:1].isdigit():
        line = line[1:]
    return line


def fuzzed_group(group: str, seed: int) -> tuple[list[bytes], GroupTruth]:
    articles = list(generate(FUZZ_ARTICLES, Config(seed=seed, groups=(group,), namespace="fuzz", lost_rate=0.01)))
    posted = [a for a in articles if not a.lost]
    lines = list(overview_lines(posted, group, first_number=BONELESS))
    numbers = range(BONELESS, BONELESS + len(lines))
    rng = random.Random(seed)
    served, hidden, garbled, junk_lines = [], set(), set(), 0
    for i, (number, line) in enumerate(zip(numbers, lines)):
        roll = rng.random()
        if i in (0, len(lines) - 1):  # the group's marks stay readable
            served.append(line)
        elif roll < 0.01:
            hidden.add(number)  # the server lacks it
        elif roll < 0.04:
            garbled.add(number)
            served.append(garble(line, rng))
        elif roll < 0.05:
            fields = line.split(b"\t")
            fields[3] = rng.choice([b"", b"yesterday", b"Mon, 99 Foo 2025 99:99:99 +9999", b"\xff\xfe"])
            served.append(b"\t".join(fields))  # an unreadable date: kept all the same
        else:
            served.append(line)
        if 0 < i < len(lines) - 1 and rng.random() < 0.01:
            served.append(junk(rng))
            junk_lines += 1
    truth = GroupTruth(
        group,
        numbers[0],
        numbers[-1],
        {n: a.truth for n, a in zip(numbers, posted)},
        lost=[a.truth for a in articles if a.lost],
        hidden=frozenset(hidden),
        garbled=frozenset(garbled),
        junk_lines=junk_lines,
    )
    return served, truth


def test_fuzzed_overview_lines_from_a_scripted_server(dc):
    lines, truth = fuzzed_group(FRENCH, seed=23)
    assert truth.garbled and truth.hidden and truth.junk_lines and truth.floods
    with ScriptedServer({FRENCH: lines}, deflate=True) as server:
        dc.add_groups(FRENCH)
        dc.plan(server, FRENCH, range_size=3_000)
        tokens = {name: dc.create_node(name) for name in ("edge-a", "edge-b")}
        nodes = [dc.edge(name, dc.node_env(token, server.port), "--exit-when-idle") for name, token in tokens.items()]
        for node in nodes:
            assert node.wait(90) == 0, node.log()
    assert not [e for node in nodes for e in node.named("failed") + node.named("error")]
    dc.wait_finished()
    reports = check_ground_truth(dc.engine, [truth])
    assert reports[FRENCH].ranges == 3 and reports[FRENCH].rejected == truth.rejected
    assert json.loads(dc.flask("status", "--json"))["groups"][0]["rejected"] == truth.rejected


@pytest.mark.parametrize("spoil", ["size", "segments"])
def test_an_overview_line_with_a_number_past_32_bits_does_not_block_its_range(dc, spoil):
    articles = [a for a in generate(600, Config(seed=29, groups=(FRENCH,), namespace="wide")) if not a.lost]
    lines = list(overview_lines(articles, FRENCH, first_number=BONELESS))
    fields = lines[300].split(b"\t")
    if spoil == "size":
        fields[6] = b"%d" % 2**32  # a 64-bit size no article has: skipped as a bad number
    else:
        fields[1] = fields[1].replace(b" yEnc (", b" yEnc (1/4294967296) (", 1)
    lines[300] = b"\t".join(fields)
    with ScriptedServer({FRENCH: lines}) as server:
        dc.add_groups(FRENCH)
        dc.plan(server, FRENCH)
        node = dc.edge("edge-a", dc.node_env(dc.create_node("edge-a"), server.port), "--exit-when-idle")
        event = node.wait_for(lambda e: e["event"] in ("failed", "stop"), timeout=60)
    assert (event["event"], event.get("exit_code")) == ("stop", 0), event
    dc.wait_finished()
    assert dc.value("SELECT count(*) FROM fragments") > 0
    assert dc.value("SELECT sum(rejected) FROM seed_ranges") == (1 if spoil == "size" else 0)


def test_a_batch_of_another_group_is_refused(dc, news):
    with news.provider() as proxy:
        tokens = dc.prepare(proxy, nodes=("edge-hand",))
        hand = Hand(dc.api, tokens["edge-hand"])
        lease = hand.lease()
        assert lease["range"]["group"] == FRENCH
        # The same span of article numbers, read from the other group.
        (foreign, *_) = digest_lease(proxy.port, lease, group=PS2)
        status, answer = hand.post(lease["range"]["id"], foreign)
    assert (status, answer.get("error")) == (422, "outside_range"), f"a batch of {PS2} for a range of {FRENCH}"
    assert dc.value("SELECT count(*) FROM seed_batches") == 0
    assert (
        dc.value("SELECT next_id FROM seed_ranges WHERE id = :id", id=lease["range"]["id"]) == lease["range"]["next_id"]
    )


def scripted_line(number: int, name: str) -> bytes:
    return b"\t".join(
        [
            b"%d" % number,
            f'[1/1] - "{name}.rar" yEnc (1/1)'.encode(),
            b"P <p@example.net>",
            b"Sat, 01 Nov 2025 07:27:27 +0000",
            b"<%d@example.net>" % number,
            b"",
            b"716800",
            b"5500",
            b"Xref: scripted.invalid",
        ]
    )


def test_a_range_that_fails_is_given_back_marked_and_the_nodes_go_on_with_the_others(dc):
    # 2,000 ordinary articles, then 2,000 with long random subjects: one batch of several MiB,
    # gzip or not, over the coordinator's body limit. Two ranges; the newest (bad) is leased first.
    rng = random.Random(31)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_"
    lines = [scripted_line(number, f"ordinary.{number}") for number in range(BONELESS, BONELESS + 2_000)]
    lines += [
        scripted_line(number, "".join(rng.choice(alphabet) for _ in range(1_500)))
        for number in range(BONELESS + 2_000, BONELESS + 4_000)
    ]
    with ScriptedServer({FRENCH: lines}) as server:
        dc.add_groups(FRENCH)
        dc.plan(server, FRENCH, range_size=2_000)
        (bad_id, good_id) = [row[0] for row in dc.rows("SELECT id FROM seed_ranges ORDER BY first_id DESC")]
        node = dc.edge("edge-a", dc.node_env(dc.create_node("edge-a"), server.port), "--exit-when-idle")
        # Without the failure mark the coordinator offered the failed range again and again: the
        # node gave it back every poll and never leased the other one, nor exited.
        assert node.wait(120) == 0, node.log()
        failed = node.named("failed")
        assert [(e["range"], "413" in e["reason"]) for e in failed] == [(bad_id, True)], failed
        assert [e["range"] for e in node.named("done")] == [good_id]
        # A second node takes the failed range once (nothing else is left), fails too, and exits.
        other = dc.edge("edge-b", dc.node_env(dc.create_node("edge-b"), server.port), "--exit-when-idle")
        assert other.wait(120) == 0, other.log()
        assert [e["range"] for e in other.named("failed")] == [bad_id]
    wait_until(dc.all_joined, 60, "every batch joined")
    ((status, next_id, failures, last_failure),) = dc.rows(
        "SELECT status, next_id, failures, last_failure FROM seed_ranges WHERE id = :id", id=bad_id
    )
    assert (status, next_id, failures) == ("planned", BONELESS + 2_000, 2)
    assert last_failure.startswith("edge-b: ") and "413" in last_failure, last_failure
    assert dc.value("SELECT status FROM seed_ranges WHERE id = :id", id=good_id) == "done"
    assert dc.value("SELECT count(*) FROM fragments") == 2_000
    (shown,) = dc.status()["failed_ranges"]
    assert (shown["id"], shown["failures"], shown["last_failure"]) == (bad_id, 2, last_failure)
