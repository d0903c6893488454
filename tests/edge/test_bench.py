"""bench/digest.py runs end to end and ends with its figures as JSON (speed is not asserted)."""

import json
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench" / "digest.py"


def test_bench_prints_its_figures_last():
    result = subprocess.run(
        [sys.executable, str(BENCH), "--lines", "4000", "--chunk", "500", "--batch-chunks", "2", "--repeat", "1"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    figures = json.loads(result.stdout.splitlines()[-1])
    assert figures["lines"] == 4000 and figures["lines_per_second"] > 0 and figures["naive_lines_per_second"] > 0
    assert 0 < figures["wire_ratio"] < 1
    ratios = figures["release_chunk_rows_per_release"]
    assert set(ratios) == {
        "alt.binaries.test",
        "alt.binaries.e-book.french",
        "alt.binaries.cd.image.playstation2.dvdiso",
    }
    assert all(group["all_releases"] >= 1 for group in ratios.values())
    # Both gzip engines timed on the same packed batches; the one the digest uses wrote the wire bytes.
    from edge.digest.deflate import ENGINE

    gzip = figures["gzip"]
    assert set(gzip) == {ENGINE, "zlib"} and gzip[ENGINE]["bytes"] == figures["wire_bytes"]
    assert all(f["gzip_seconds"] >= 0 and f["gunzip_seconds"] >= 0 and f["bytes"] > 0 for f in gzip.values())


def test_bench_digests_the_real_posts():
    result = subprocess.run(
        [
            sys.executable,
            str(BENCH),
            "--real-posts",
            "--lines",
            "5000",
            "--chunk",
            "500",
            "--batch-chunks",
            "2",
            "--repeat",
            "1",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    figures = json.loads(result.stdout.splitlines()[-1])
    # Five posts of 3,785 articles, and the first of them again under new message-ids.
    assert figures["real_posts"] is True and figures["lines"] == 5000 and figures["lines_per_second"] > 0
