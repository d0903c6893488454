"""Times bulk loading of generated articles into a fresh private INN 2 instance.

    .venv/bin/python bench/inject.py [--count 1000000] [--conns 2] [--storage cnfs|trash]

Makes the instance with ops/inn under /tmp, streams the articles with simnews.inject,
stops and removes the instance. The last line of output is JSON:
{"articles": ..., "seconds": ..., "rate": ...}.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from simnews import generator  # noqa: E402
from simnews.inject import inject  # noqa: E402
from simnews.ports import free_ports  # noqa: E402

OPS_INN = REPO / "ops" / "inn"
CNFS_MB_PER_THOUSAND = 4.2  # every article takes at least one 4 KiB CNFS block


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--conns", type=int, default=2)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--storage", choices=("cnfs", "trash"), default="cnfs")
    args = parser.parse_args(argv)

    root = tempfile.mkdtemp(prefix="inn.", dir="/tmp")
    reader_port, feed_port, tls_port = free_ports(3)
    env = os.environ | {
        "INN_READER_PORT": str(reader_port),
        "INN_FEED_PORT": str(feed_port),
        "INN_TLS_PORT": str(tls_port),
        "INN_GROUPS": " ".join(generator.DEFAULT_GROUPS),
        "INN_STORAGE": args.storage,
        "INN_CNFS_MB": str(int(args.count / 1000 * CNFS_MB_PER_THOUSAND) + 64),
        "INN_HISTORY_SIZE": str(max(2 * args.count, 100_000)),
    }
    try:
        subprocess.run([str(OPS_INN), "init", root], env=env, check=True)
        subprocess.run([str(OPS_INN), "start", root], env=env, check=True)
        started = time.perf_counter()

        def progress(sent: int) -> None:
            elapsed = time.perf_counter() - started
            print(f"  {sent:>9} articles  {elapsed:6.1f} s  {sent / elapsed:8.0f} art/s", flush=True)

        articles = generator.generate(args.count, generator.Config(seed=args.seed))
        result = inject("127.0.0.1", feed_port, articles, args.conns, progress=progress)
    finally:
        subprocess.run([str(OPS_INN), "stop", root], check=False)
        shutil.rmtree(root, ignore_errors=True)

    print(
        f"{result.sent} articles in {result.seconds:.1f} s = {result.rate:.0f} art/s "
        f"(accepted {result.accepted}, rejected {result.rejected}, {args.conns} connections, {args.storage})"
    )
    print(json.dumps({"articles": result.accepted, "seconds": round(result.seconds, 2), "rate": round(result.rate, 1)}))
    return 0 if result.accepted == result.sent else 1


if __name__ == "__main__":
    sys.exit(main())
