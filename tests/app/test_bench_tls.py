"""bench/tls.py measures each key and way of keeping the TLS context, and ends with its figures as
JSON; here with a few handshakes, to show it runs and that what each variant says holds (a
context made for each connection resumes nothing; one kept resumes a session offered to it)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_measures_each_variant_and_prints_its_figures_last():
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "tls.py"), "--handshakes", "8"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=REPO,
    )
    assert result.returncode == 0, result.stderr
    figures = json.loads(result.stdout.strip().splitlines()[-1])
    for key in ("rsa-2048", "ecdsa-p256"):
        assert figures[f"{key}, a context a connection"]["resumed"] == 0
        assert figures[f"{key}, one context kept, a new session"]["resumed"] == 0
        # The first connection has no session to offer; every one after it resumes.
        assert figures[f"{key}, one context kept, the session resumed"]["resumed"] == 7 / 8
    assert all(value["server_cpu_ms"] > 0 for value in figures.values() if isinstance(value, dict))
    assert figures["gain"] > 0


def test_bench_refuses_no_handshakes():
    result = subprocess.run(
        [sys.executable, str(REPO / "bench" / "tls.py"), "--handshakes", "0"], capture_output=True, text=True, cwd=REPO
    )
    assert result.returncode == 2 and "--handshakes must be at least 1" in result.stderr
