"""`edge run`, installed as the edge image installs it, against the real API (gunicorn over HTTPS),
Celery workers and INN 2: a planned range is fetched, digested, posted and stored once."""

from __future__ import annotations

import os
import platform
import subprocess

import pytest

from tests.edge_node.conftest import (
    BATCH_CHUNKS,
    CHUNK_SIZE,
    DOCKERFILE,
    all_batches_stored,
    plan,
    post_articles,
    stored_message_ids,
)
from tests.fixtures.api_server import make_certificate
from tests.fixtures.queries import query
from tests.fixtures.waiting import wait_until

pytestmark = pytest.mark.services


def node_env(api, token, inn, **extra) -> dict[str, str]:
    """What an operator sets: the coordinator and token, and here the private INN over TLS."""
    return {
        "COORDINATOR_URL": api.url,
        "NODE_TOKEN": token,
        "COORDINATOR_CAFILE": api.cafile,
        "NNTP_HOST": inn.host,
        "NNTP_PORT": str(inn.tls_port),
        "NNTP_CAFILE": str(inn.cafile),
        **extra,
    }


def test_the_image_installs_only_the_edge_and_runs_it_unprivileged(edge_bin):
    text = DOCKERFILE.read_text()
    assert "USER edge" in text and "useradd" in text
    assert '["edge"]' in text and '["run"]' in text
    python = edge_bin.parent / "python"
    installed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    names = {line.split("==")[0].lower() for line in installed.split()}
    # The edge and its own few dependencies: msgpack, and ISA-L's gzip (the `fast` extra, on the
    # machines ISA-L has wheels for).
    with_isal = platform.machine() in ("x86_64", "aarch64", "AMD64", "arm64")
    assert names - {"pip", "setuptools", "wheel"} == {"msgpack", "seed-edge"} | ({"isal"} if with_isal else set())
    engine = subprocess.run(
        [python, "-c", "from edge.digest.deflate import ENGINE; print(ENGINE)"],
        check=True,
        capture_output=True,
        text=True,
        cwd=edge_bin.parent,
    ).stdout.strip()
    assert engine == ("isal" if with_isal else "zlib")
    assert "run" in subprocess.run([edge_bin, "run", "--help"], capture_output=True, text=True, check=True).stdout


# In the node's process, and in two digest worker processes (the image's install spawns them).
@pytest.mark.parametrize("digest_processes", [0, 2])
def test_a_planned_range_is_stored_whole_and_once(
    edge_api, celery_worker, inn, fresh_group, clean_db, run_edge, digest_processes
):
    posted = post_articles(inn, fresh_group, 6000)
    # The range runs past INN's last article: those chunks come back empty and are still covered.
    last_id = posted.high + 2 * CHUNK_SIZE + 500
    token, (range_id,) = plan(fresh_group, [(posted.low, last_id)])

    edge = run_edge(
        node_env(edge_api, token, inn, NNTP_CONNECTIONS="4", DIGEST_PROCESSES=str(digest_processes)), "--exit-when-idle"
    )
    assert edge.wait(180) == 0, edge.log()
    assert edge.named("start")[0]["digest_processes"] == digest_processes
    # The compiled digest runs where it is built (the image's install builds it), unless the
    # suite runs with the Python twins.
    assert edge.named("start")[0]["impl"] == (os.environ.get("SEED_IMPL") or "c")

    batches = edge.named("batch")
    chunks = -(-(last_id - posted.low + 1) // CHUNK_SIZE)
    assert len(batches) == -(-chunks // BATCH_CHUNKS)
    assert [b["first"] for b in batches] == [posted.low + i * CHUNK_SIZE * BATCH_CHUNKS for i in range(len(batches))]
    assert batches[-1]["last"] == last_id
    assert sum(b["missing"] for b in batches) == last_id - posted.high
    assert [e["range"] for e in edge.named("done")] == [range_id]
    # The lines the operator sees: every overview line the range had, counted once (by the digest).
    assert edge.named("done")[0]["lines"] == sum(b["lines"] for b in batches) == len(posted.kept) + len(posted.dropped)

    assert wait_until(lambda: all_batches_stored(clean_db), timeout=120), "batches not stored"
    stored = stored_message_ids(clean_db, fresh_group)
    assert len(stored) == len(set(stored)), "an article was stored twice"
    assert set(stored) == posted.kept
    ((status, next_id, missing),) = query(
        clean_db, "SELECT status, next_id, missing FROM seed_ranges WHERE id = :id", id=range_id
    )
    assert (status, next_id) == ("done", last_id + 1)
    assert missing == last_id - posted.high
    ((executable,),) = query(clean_db, "SELECT sum(fragments) FROM rule_counts WHERE rule = 'executable'")
    assert executable == len(posted.dropped)


def test_a_certificate_the_ca_file_does_not_vouch_for_is_refused(edge_api, inn, clean_db, run_edge, tmp_path):
    token, _ = plan("alt.binaries.test", [(1, 1000)])
    other_ca, _ = make_certificate(str(tmp_path), "other")
    edge = run_edge(node_env(edge_api, token, inn, COORDINATOR_CAFILE=other_ca), "--exit-when-idle")
    assert edge.wait(30) == 5, edge.log()
    (error,) = edge.named("error")
    assert "certificate is not trusted" in error["message"] and "COORDINATOR_CAFILE" in error["message"]
    assert query(clean_db, "SELECT status FROM seed_ranges") == [("planned",)]


def test_without_the_ca_file_the_private_certificate_is_refused_too(edge_api, inn, clean_db, run_edge):
    token, _ = plan("alt.binaries.test", [(1, 1000)])
    env = node_env(edge_api, token, inn)
    del env["COORDINATOR_CAFILE"]
    edge = run_edge(env, "--exit-when-idle")
    assert edge.wait(30) == 5, edge.log()


def test_a_bad_token_stops_the_node_with_a_clear_message(edge_api, inn, clean_db, run_edge):
    plan("alt.binaries.test", [(1, 1000)])
    edge = run_edge(node_env(edge_api, "seed_not-a-token", inn), "--exit-when-idle")
    assert edge.wait(30) == 3, edge.log()
    (error,) = edge.named("error")
    assert "NODE_TOKEN" in error["message"]


def test_bad_settings_are_named_and_exit_2(edge_bin):
    result = subprocess.run(
        [edge_bin, "run"],
        env={"NNTP_CONNECTIONS": "many", "COORDINATOR_URL": "https://x", "NODE_TOKEN": "t"},
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "edge run: NNTP_CONNECTIONS must be an integer, got 'many'"
    result = subprocess.run([edge_bin, "run"], env={}, capture_output=True, text=True)
    assert result.returncode == 2 and "COORDINATOR_URL and NODE_TOKEN must be set" in result.stderr
