"""bench/catalog.py fills a small catalog, times it through gunicorn and ends with its figures as
JSON; a kept catalog is timed again without a fill, and its joins by bench/join.py (speed is not
asserted here: the benchmarks' own runs are)."""

import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BENCH = REPO / "bench" / "catalog.py"
pytestmark = pytest.mark.services
SMALL = [
    "--releases",
    "3000",
    "--big-segments",
    "450",
    "--vocabulary",
    "2000",
    "--searches",
    "24",
    "--warmup",
    "4",
    "--serial",
    "8",
    "--category-searches",
    "8",
    "--gets",
    "2",
    "--no-words",
    "1",
]


def run_bench(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(BENCH), *SMALL, *args], capture_output=True, text=True, timeout=600, cwd=REPO
    )


def run_join(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(REPO / "bench" / "join.py"), *args], capture_output=True, text=True, timeout=600, cwd=REPO
    )


def test_bench_fills_times_and_reuses_a_kept_catalog():
    keep = Path(tempfile.mkdtemp(prefix="catalog-bench-test."))
    try:
        first = run_bench("--keep", str(keep), "--explain")
        assert first.returncode == 0, first.stdout[-3000:] + first.stderr[-3000:]
        figures = json.loads(first.stdout.splitlines()[-1])
        assert first.stdout.startswith("command: .venv/bin/python bench/catalog.py")
        assert not figures["reused_catalog"] and figures["durable"]
        assert figures["postgresql"]["fsync"] == "on" and figures["postgresql"]["synchronous_commit"] == "on"
        fill = figures["fill"]
        # Every small release and the big one, each stored and joined (no batch left behind).
        assert fill["releases_stored"] == 3001
        assert fill["fragments"] == fill["articles"] and fill["articles"] >= 3000 + 450
        assert fill["files"] >= 3000 and fill["batches"] >= 1
        searches = figures["searches"]
        assert searches["all"]["n"] == 24
        assert {"common", "rare", "common+common", "common+rare"} <= searches.keys()
        assert all(searches[kind]["n"] == 6 for kind in ("common", "rare", "common+common", "common+rare"))
        assert (
            0
            < searches["all"]["p50_ms"]
            <= searches["all"]["p95_ms"]
            <= searches["all"]["p99_ms"]
            <= searches["all"]["max_ms"]
        )
        # The commonest words are in many names; the searches found what the catalog holds.
        assert searches["common"]["posts_found_max"] > 100
        assert sum(band["n"] for band in figures["searches_by_posts_found"].values()) == 24
        assert figures["searches_one_client"]["n"] == 8
        # Searches with a category, each of the default four in turn, timed apart from the rest.
        by_category = figures["searches_with_category"]
        assert by_category["all"]["n"] == 8 and by_category["all"]["cpu_ms_per_search"]["gunicorn"] > 0
        assert {key: by_category[key]["n"] for key in ("2000", "2040", "2045", "5030")} == {
            "2000": 2,
            "2040": 2,
            "2045": 2,
            "5030": 2,
        }
        assert "t=search with a category, 8 searches from 4 threads" in first.stdout
        assert "cat=2045:" in first.stdout
        assert len(figures["slowest_searches"]) == 5 and len(figures["search_no_words_ms"]) == 1
        assert len(figures["get_big_ms"]["all"]) == 2 and figures["get_big_ms"]["best"] > 0
        assert len(figures["get_small_ms"]["all"]) == 5
        goals = figures["goals"]
        assert goals["search_p99_ms"]["goal"] == 50 and isinstance(goals["search_p99_ms"]["met"], bool)
        one = goals["search_p99_one_client_ms"]
        assert (one["goal"], one["clients"], one["measured"]) == (25, 1, figures["searches_one_client"]["p99_ms"])
        # 450 segments are fewer than the goal names: never counted as met.
        assert goals["get_big_ms"]["goal"] == 100 and goals["get_big_ms"]["met"] is False
        assert "goals: search p99 from 4 threads" in first.stdout and "from one thread" in first.stdout
        plans = first.stdout.split("-- EXPLAIN ANALYZE: ")[1:]
        assert [plan.split(":", 1)[0].split("\n", 1)[0] for plan in plans] == [
            "the slowest search",
            "the search without words",
            "t=get of the post of 450 segments",
        ]
        assert all("(actual time=" in plan for plan in plans)
        assert (
            "Query Text: WITH matching AS MATERIALIZED ( SELECT p.group_id, p.key, p.last_post FROM posts p" in plans[0]
        )
        assert "FROM posts p" in plans[1]
        # The export reads the fragments' packs (the last plan runs on to the end of the output,
        # whose JSON names the fill's fragments: cut there).
        assert "on fragment_packs_g" in plans[2].split("\ngoals:")[0]
        assert (keep / "catalog.json").exists() and not (keep / "pg" / "postmaster.pid").exists()

        assert figures["dead_versions"] is None  # not asked for
        again = run_bench("--keep", str(keep), "--no-durability", "--dead", "200")
        assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
        reused = json.loads(again.stdout.splitlines()[-1])
        # Searches before and with 200 dead row versions among the newest posts, and after a vacuum
        # with the posts' own settings (migration 0029's); the settings as they were after.
        dead = reused["dead_versions"]
        assert dead["dead"] == 200 and dead["vacuum_seconds"] > 0
        assert {"autovacuum_vacuum_threshold=2000", "vacuum_index_cleanup=on"} <= set(dead["posts_options"])
        assert dead["posts_options_left"] == dead["posts_options"]
        for phase in ("clean", "with_dead_versions", "after_vacuum"):
            assert dead[phase]["n"] == 8 and dead[phase]["cpu_ms_per_search"]["postgresql"] >= 0, phase
        assert "with 200 dead row versions among the newest posts" in again.stdout
        for bad in ("3", "-2"):
            refused = run_bench("--keep", str(keep), "--dead", bad)
            assert refused.returncode == 2 and "--dead: an even number" in refused.stderr, bad
        assert reused["reused_catalog"] and not reused["durable"] and reused["postgresql"]["fsync"] == "off"
        assert reused["fill"] == fill
        assert "filling" not in again.stderr

        for bad in ("20x0", "", "2000,10000", "-1"):
            refused = run_bench("--keep", str(keep), "--categories", bad)
            assert refused.returncode == 2 and "--categories: newznab category numbers" in refused.stderr, bad

        other = run_bench("--keep", str(keep), "--seed", "2")
        assert other.returncode == 2 and "give the same options or another directory" in other.stderr

        # bench/join.py on the kept catalog: a batch's releases copied as a new batch's and joined,
        # each statement timed, and the catalog left as it was (each join rolled back).
        joined = run_join("--keep", str(keep), "--batches", "2", "--rounds", "2", "--releases", "400")
        assert joined.returncode == 0, joined.stdout[-3000:] + joined.stderr[-3000:]
        assert joined.stdout.startswith("command: .venv/bin/python bench/join.py --keep ")
        join = json.loads(joined.stdout.splitlines()[-1])
        assert join["posts_unchanged"] and join["posts_in_catalog"] >= 3000
        assert len(join["joins"]) == join["batches"] * 2 and join["batches"] >= 1
        for one in join["joins"]:
            # Each copy a post of its own, as each original is (the fill's names differ).
            assert one["releases"] == one["posts_written"] == 400 and one["files"] >= 400, one
            assert 0 < one["statements_ms"] < one["wall_ms"] and one["cpu_ms"] > 0
        assert {"the posts' upsert", "the namesakes", "the queue of inspections"} <= set(join["statements"])
        assert join["statements"]["the posts' upsert"]["median_ms"] > 0
        assert join["names_read_by"] == "node"
        # The join reading every name itself, as for a node of another reading: the same posts,
        # with the same columns of their names.
        itself = run_join(
            "--keep", str(keep), "--batches", "2", "--rounds", "1", "--releases", "400", "--names", "datacenter"
        )
        assert itself.returncode == 0, itself.stdout[-3000:] + itself.stderr[-3000:]
        alone = json.loads(itself.stdout.splitlines()[-1])
        assert alone["names_read_by"] == "datacenter" and alone["posts_unchanged"]
        by_node = {(one["range"], one["batch_from"]): one["posts_named_md5"] for one in join["joins"]}
        assert {(one["range"], one["batch_from"]): one["posts_named_md5"] for one in alone["joins"]} == by_node
        assert all(one["posts_written"] == 400 for one in alone["joins"])
        assert not (keep / "pg" / "postmaster.pid").exists()  # stopped again
        for bad in (["--releases", "-1"], ["--rounds", "0"]):
            refused = run_join("--keep", str(keep), *bad)
            assert refused.returncode == 2 and "at least" in refused.stderr, bad
        refused = run_join("--keep", str(keep), "--names", "edge")
        assert refused.returncode == 2 and "invalid choice" in refused.stderr
        empty = Path(tempfile.mkdtemp(prefix="join-bench-test."))
        try:
            refused = run_join("--keep", str(empty))
            assert refused.returncode == 2 and "holds no kept catalog" in refused.stderr
        finally:
            shutil.rmtree(empty, ignore_errors=True)

        # bench/newgroup.py: a new group's batches stored and joined, the statistics kept up by the
        # join and not, alternating; the group removed after each round.
        added = subprocess.run(
            [sys.executable, str(REPO / "bench" / "newgroup.py"), "--keep", str(keep), "--batches", "2"]
            + ["--articles-a-batch", "10000", "--rounds", "2"],
            capture_output=True,
            text=True,
            timeout=600,
            cwd=REPO,
        )
        assert added.returncode == 0, added.stdout[-3000:] + added.stderr[-3000:]
        assert added.stdout.startswith("command: .venv/bin/python bench/newgroup.py --keep ")
        newgroup = json.loads(added.stdout.splitlines()[-1])
        assert newgroup["catalog_unchanged"]
        assert [r["statistics"] for r in newgroup["rounds"]] == ["kept", "not kept"]
        for round_ in newgroup["rounds"]:
            assert [j["batch"] for j in round_["joins"]] == [1, 2]
            assert all(0 < j["namesakes"] < j["seconds"] and 0 < j["queue"] < j["seconds"] for j in round_["joins"])
        assert sum(j["analyze"] for j in newgroup["rounds"][0]["joins"]) > 0  # the group's ~360 releases
        assert all(j["analyze"] == 0 for j in newgroup["rounds"][1]["joins"])
        refused = subprocess.run(
            [sys.executable, str(REPO / "bench" / "newgroup.py"), "--keep", str(keep), "--rounds", "0"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=REPO,
        )
        assert refused.returncode == 2 and "at least" in refused.stderr

        # The faster path to a large catalog: the posts made three times, as older posting.
        copied = run_bench("--keep", str(keep), "--no-durability", "--copies", "3")
        assert copied.returncode == 0, copied.stdout[-3000:] + copied.stderr[-3000:]
        copies = json.loads(copied.stdout.splitlines()[-1])["copies"]
        assert copies["copies"] == 3 and copies["posts"] == 3 * copies["originals"] > 3000
        assert f"posts: {copies['posts']:,}, the fill's 3 times" in copied.stdout
        fewer = run_bench("--keep", str(keep), "--copies", "2")
        assert fewer.returncode != 0 and "holds 3 copies of its posts" in fewer.stderr
    finally:
        subprocess.run([str(REPO / "ops" / "pg"), "stop", str(keep / "pg")], capture_output=True)
        shutil.rmtree(keep, ignore_errors=True)
