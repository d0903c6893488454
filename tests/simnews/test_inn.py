"""Generated articles through a real INN 2: posted with simnews.inject, read back with XOVER."""

from __future__ import annotations

import json
import subprocess
import sys

from simnews.generator import Config, generate, load_truth
from tests.simnews.rawnntp import RawNNTP


def read_group(inn, group: str) -> tuple[bytes, list[list[bytes]]]:
    with RawNNTP(inn.host, inn.reader_port) as nntp:
        status = nntp.command(f"GROUP {group}")
        return status, nntp.over("1-")


def test_articles_come_back_through_xover_as_the_truth_says(inn, fresh_group):
    articles = list(generate(3_000, Config(seed=11, groups=(fresh_group,), namespace=fresh_group, lost_rate=0.02)))
    posted = [a for a in articles if not a.lost]
    assert 0 < len(posted) < len(articles)

    assert inn.post(articles) == len(posted)

    status, rows = read_group(inn, fresh_group)
    assert status.split()[:4] == [b"211", b"%d" % len(posted), b"1", b"%d" % len(posted)]
    assert [int(row[0]) for row in rows] == list(range(1, len(posted) + 1))
    truth = {a.message_id: a.truth for a in articles}
    assert {row[4].decode() for row in rows} == {a.message_id for a in posted}
    for number, subject, poster, _date, message_id, *rest in rows:
        t = truth[message_id.decode()]
        assert not t.lost
        assert subject == t.subject
        assert poster.decode() == t.poster
        assert rest[3] == b"Xref: testnews.localdomain %s:%s" % (fresh_group.encode(), number)


def test_the_inject_command_writes_a_truth_file_that_matches_the_server(inn, fresh_group, tmp_path):
    truth_path = tmp_path / "truth.jsonl"
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "simnews.inject",
            "--port",
            str(inn.feed_port),
            "--count",
            "2000",
            "--groups",
            fresh_group,
            "--namespace",
            fresh_group,
            "--seed",
            "3",
            "--lost-rate",
            "0.01",
            "--truth",
            str(truth_path),
            "--conns",
            "2",
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    truth = load_truth(str(truth_path))
    lost = sum(t.lost for t in truth.values())
    assert len(truth) == 2000 and lost > 0
    assert result["sent"] == result["accepted"] == 2000 - lost and result["rejected"] == 0

    _, rows = read_group(inn, fresh_group)
    seen = {row[4].decode(): row for row in rows}
    assert set(seen) == {mid for mid, t in truth.items() if not t.lost}
    assert all(seen[mid][1] == truth[mid].subject for mid in seen)


def test_8bit_and_broken_utf8_subjects_survive_byte_for_byte(inn, fresh_group):
    articles = list(generate(1_500, Config(seed=4, groups=(fresh_group,), kind="ebook", namespace=fresh_group)))
    assert inn.post(articles) == len(articles)
    _, rows = read_group(inn, fresh_group)
    subjects = {row[4].decode(): row[1] for row in rows}
    expected = {a.message_id: a.truth.subject for a in articles}
    assert subjects == expected
    raw = list(expected.values())

    def is_utf8(data: bytes) -> bool:
        try:
            data.decode("utf-8")
            return True
        except UnicodeDecodeError:
            return False

    assert any(not s.isascii() and is_utf8(s) for s in raw)
    assert any(not is_utf8(s) for s in raw)


def test_crossposts_land_in_both_groups(inn, fresh_group):
    second = fresh_group + ".second"
    inn.add_group(second)
    config = Config(seed=8, groups=(fresh_group, second), namespace=fresh_group, crosspost_rate=0.5)
    articles = list(generate(400, config))
    assert inn.post(articles) == len(articles)
    crossposted = {a.message_id for a in articles if len(a.truth.groups) == 2}
    assert crossposted
    _, first_rows = read_group(inn, fresh_group)
    _, second_rows = read_group(inn, second)
    in_first = {row[4].decode() for row in first_rows}
    in_second = {row[4].decode() for row in second_rows}
    assert crossposted <= in_first & in_second
    assert len(in_first) + len(in_second) == len(articles) + len(crossposted)
    xref = next(row[8] for row in first_rows if row[4].decode() in crossposted)
    assert fresh_group.encode() + b":" in xref and second.encode() + b":" in xref


def test_a_message_id_seen_before_is_rejected(inn, fresh_group):
    articles = list(generate(50, Config(seed=21, groups=(fresh_group,), namespace=fresh_group)))
    assert inn.post(articles) == 50
    assert inn.post(articles) == 0


def test_auth_instance_requires_authinfo(inn_auth):
    with RawNNTP(inn_auth.host, inn_auth.reader_port) as nntp:
        assert nntp.command("GROUP alt.binaries.test").startswith(b"480")
        assert nntp.command("AUTHINFO USER testuser").startswith(b"381")
        assert nntp.command("AUTHINFO PASS wrong").startswith(b"481")
    user, password = next(iter(inn_auth.users.items()))
    with RawNNTP(inn_auth.host, inn_auth.reader_port) as nntp:
        assert nntp.command(f"AUTHINFO USER {user}").startswith(b"381")
        assert nntp.command(f"AUTHINFO PASS {password}").startswith(b"281")
        assert nntp.command("GROUP alt.binaries.test").startswith(b"211")


def test_nntps_port_verifies_with_the_instance_certificate(inn):
    with RawNNTP(inn.host, inn.tls_port, cafile=inn.cafile) as nntp:
        assert nntp.greeting.startswith(b"200")
        assert nntp.command("GROUP alt.binaries.test").startswith(b"211")
