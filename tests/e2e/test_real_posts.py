"""Real posts end to end: the five NZBs of tests/data/nzb/ (real posts of public projects) posted
to INN 2 amid a group's other traffic, read by two edge nodes over ranges that cut them, through
the API and the Celery workers into PostgreSQL, in batches of 4,000 lines and of 500; and by
`flask seed range` in batches of 500 lines. Each post comes out as one post of the catalog
(app.services.ingest.posts) holding exactly its files, each file exactly its segments, nothing
dropped, named as the post names itself."""

from __future__ import annotations

from collections import defaultdict

import pytest

from simnews.proxy import ProviderProxy
from tests.e2e.conftest import DataCenter
from tests.e2e.realposts import GROUP, NAMES
from tests.fixtures.api_server import start_api, stop_api

pytestmark = pytest.mark.services


def check_posts(dc: DataCenter, truth: dict[str, dict], group: str = GROUP, names: dict[str, str] = NAMES) -> None:
    """Each NZB of `truth` ({message-id: (file name, segment)} of what was posted) is one post of
    the group holding exactly its files and segments, named names[nzb]."""
    group_id = dc.value("SELECT id FROM groups WHERE name = :n", n=group)
    rows = dc.rows(
        "SELECT f.message_id, f.part, fi.key AS file, fi.name, coalesce(rp.post_key, r.key) AS post"
        " FROM fragments_with_ids f JOIN files fi ON fi.group_id = f.group_id AND fi.key = f.file_key"
        " JOIN releases r ON r.group_id = fi.group_id AND r.key = fi.release_key"
        " LEFT JOIN release_posts rp ON rp.group_id = r.group_id AND rp.key = r.key WHERE f.group_id = :g",
        g=group_id,
    )
    by_id = {row.message_id: row for row in rows}
    problems = []
    for nzb, segments in truth.items():
        stored = [by_id.get(message_id) for message_id in segments]
        if None in stored:
            problems.append(f"{nzb}: {stored.count(None)} of {len(segments)} segments not stored")
            continue
        posts = {row.post for row in stored}
        if len(posts) != 1:
            problems.append(f"{nzb}: came out as {len(posts)} posts")
            continue
        (post,) = posts
        expected_files: dict[str, set[int]] = defaultdict(set)
        for name, segment in segments.values():
            expected_files[name].add(segment)
        files: dict[str, set[int]] = defaultdict(set)
        keys: dict[str, set[int]] = defaultdict(set)
        for message_id, row in zip(segments, stored):
            files[row.name].add(row.part)
            keys[row.name].add(row.file)
            if row.part != segments[message_id][1]:
                problems.append(f"{nzb}: {message_id} stored as segment {row.part}")
        if files != expected_files:
            problems.append(f"{nzb}: files {sorted(set(files) ^ set(expected_files))[:5]} differ")
        if any(len(k) != 1 for k in keys.values()):
            problems.append(f"{nzb}: a file came out as several files")
        in_post = sum(1 for row in rows if row.post == post)
        if in_post != len(segments):
            problems.append(f"{nzb}: its post holds {in_post} articles, {len(segments)} were posted")
        name = dc.value("SELECT name FROM posts WHERE group_id = :g AND key = :k", g=group_id, k=post)
        if name != names[nzb]:
            problems.append(f"{nzb}: named {name!r}")
    assert not problems, "\n".join(problems)


def test_real_posts_read_by_two_nodes_over_ranges_that_cut_them_are_whole(dc, news, real_posts):
    dc.add_groups(GROUP)
    with ProviderProxy(news.inn.host, news.inn.reader_port) as proxy:
        dc.plan(proxy, GROUP, range_size=1_500)
        tokens = {name: dc.create_node(name) for name in ("edge-a", "edge-b")}
        nodes = [dc.edge(name, dc.node_env(token, proxy.port), "--exit-when-idle") for name, token in tokens.items()]
        for node in nodes:
            assert node.wait(120) == 0, node.log()
    dc.wait_finished()
    check_posts(dc, real_posts)
    # The run proves something only if posts were cut: by ranges, and ranges read by both nodes.
    cut = dc.value(
        "SELECT count(*) FROM (SELECT coalesce(rp.post_key, r.key) FROM release_chunks c"
        " JOIN releases r ON r.group_id = c.group_id AND r.key = c.release_key"
        " LEFT JOIN release_posts rp ON rp.group_id = r.group_id AND rp.key = r.key"
        " GROUP BY 1 HAVING count(DISTINCT c.range_id) > 1) AS cut"
    )
    assert cut >= 3
    done = [{e["range"] for e in node.named("done")} for node in nodes]
    assert all(done), done


def test_real_posts_in_batches_of_500_lines_read_by_nodes_are_whole(dc, news, real_posts):
    # The coordinator hands its chunk size to the nodes with each lease: its API restarted with
    # chunks of 250 articles, 2 to a batch.
    stop_api(dc.api)
    dc.api = start_api({**dc.env, "CHUNK_SIZE": "250", "BATCH_CHUNKS": "2"}, dc.directory, workers=3)
    try:
        dc.add_groups(GROUP)
        with ProviderProxy(news.inn.host, news.inn.reader_port) as proxy:
            dc.plan(proxy, GROUP, range_size=3_000)
            tokens = {name: dc.create_node(name) for name in ("edge-a", "edge-b")}
            nodes = [
                dc.edge(name, dc.node_env(token, proxy.port), "--exit-when-idle") for name, token in tokens.items()
            ]
            for node in nodes:
                assert node.wait(120) == 0, node.log()
        dc.wait_finished()
        assert dc.value("SELECT max(batch_to - batch_from + 1) FROM seed_batches") == 500
        check_posts(dc, real_posts)
    finally:
        stop_api(dc.api)
        dc.api = start_api(dc.env, dc.directory, workers=3)


def test_real_posts_in_batches_of_500_lines_fetched_by_the_data_center_are_whole(dc, news, real_posts):
    dc.add_groups(GROUP)
    with ProviderProxy(news.inn.host, news.inn.reader_port) as proxy:
        dc.plan(proxy, GROUP, range_size=100_000)
        for (range_id,) in dc.rows("SELECT id FROM seed_ranges ORDER BY id"):
            dc.flask(
                "range",
                str(range_id),
                CHUNK_SIZE="250",
                BATCH_CHUNKS="2",
                NNTP_HOST="127.0.0.1",
                NNTP_PORT=str(proxy.port),
                NNTP_SSL="0",
            )
    assert dc.value("SELECT max(batch_to - batch_from + 1) FROM seed_batches") == 500
    dc.wait_finished()
    check_posts(dc, real_posts)
