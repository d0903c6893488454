"""A group added to a large catalog: its first batches stored and joined, with the planner told
what the group holds (app.services.ingest.groupstats) and, in the same sitting, without.

    .venv/bin/python bench/catalog.py --keep DIR                 # fill the catalog once
    .venv/bin/python bench/newgroup.py --keep DIR [--batches 2] [--articles-a-batch 100000]
                                      [--rounds 2] [--json]

Each round adds a group of its own to the catalog bench/catalog.py kept (1,000,000 posts of one
group, its statistics analyzed), stores --batches batches of generated e-book articles into it
and joins each after its store, as the ingest task does; then the group and everything of it is
removed (the catalog is left as it was found: `catalog_unchanged`), and the tables the join reads
are analyzed again, so that the next round's group is as new as the first's. The rounds alternate: the join as it is (`kept`), then with
`groupstats.keep_up` made to do nothing (`not kept`), and so on.

Measured each join: its wall time, and the time of its namesakes' statement, of its queue of
inspections and of the ANALYZEs it ran (SQLAlchemy's cursor events). Printed: each round's
joins, then a JSON line of it all.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.catalog import NOTE, app_cluster  # noqa: E402

SOURCE_GROUP = "alt.binaries.e-book.french"
KINDS = (
    ("WITH batch AS MATERIALIZED", "namesakes"),
    ("WITH worth AS MATERIALIZED", "queue"),
    ("ANALYZE ", "analyze"),
)
# The tables whose rows of the round's group stay after its partitions are dropped (its plans,
# ranges and batches go with its row of groups).
GROUP_ROWS = ("post_inspections", "inspection_joins", "release_posts", "post_words", "posts", "releases", "rule_counts")


def say(message: str) -> None:
    print(f"newgroup bench: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", metavar="DIR", required=True, help="a catalog bench/catalog.py kept")
    parser.add_argument("--batches", type=int, default=2, help="batches stored and joined into each new group")
    parser.add_argument("--articles-a-batch", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=2, help="rounds, alternating kept and not kept")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
    if args.batches < 1 or args.rounds < 1 or args.articles_a_batch < 1000:
        parser.error("--batches and --rounds: at least 1; --articles-a-batch: at least 1000")
    workdir = Path(args.keep)
    if not (workdir / NOTE).exists():
        parser.error(f"{workdir} holds no kept catalog: fill one with bench/catalog.py --keep {workdir}")
    command = "command: .venv/bin/python bench/newgroup.py " + " ".join(argv if argv is not None else sys.argv[1:])

    cluster = app_cluster(workdir / "pg")
    cluster.start()
    try:
        before = _counts()
        rounds = _rounds(args)
        after = _counts()
    finally:
        cluster.stop()
    result = {
        "command": command,
        "batches": args.batches,
        "articles_a_batch": args.articles_a_batch,
        "rounds": rounds,
        "catalog_unchanged": before == after,
    }
    if not args.json:
        print(command)
        for round_ in rounds:
            for join in round_["joins"]:
                print(
                    f"round {round_['round']} ({round_['statistics']}), batch {join['batch']}: join {join['seconds']} s"
                    f" (namesakes {join['namesakes']}, queue {join['queue']}, analyze {join['analyze']} s)"
                )
    print(json.dumps(result))
    return 0


def _counts() -> tuple[int, ...]:
    """The catalog's groups, ranges, releases and posts: what a run leaves as it found them."""
    from sqlalchemy import text

    from app.db import session_scope

    with session_scope() as session:
        return tuple(
            session.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
            for table in ("groups", "seed_ranges", "releases", "posts")
        )


def _rounds(args: argparse.Namespace) -> list[dict[str, Any]]:
    from sqlalchemy import event, text

    from app.db import PARTITIONED_TABLES, get_engine, partition_name, session_scope
    from app.services.ingest import groupstats, posts, store
    from bench.store import _digest, accept, leased_group
    from edge.digest.batch import encode_batch

    engine = get_engine()
    timed: dict[str, float] = defaultdict(float)

    @event.listens_for(engine, "before_cursor_execute")
    def started(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        conn.info["bench_started"] = time.perf_counter()

    @event.listens_for(engine, "after_cursor_execute")
    def ended(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
        seconds = time.perf_counter() - conn.info.pop("bench_started")
        for start, kind in KINDS:
            if statement.lstrip().startswith(start):
                timed[kind] += seconds

    say(f"digesting {args.batches} batches of {args.articles_a_batch:,} articles ...")
    chunk = min(20_000, args.articles_a_batch)
    built = _digest(SOURCE_GROUP, args.batches * args.articles_a_batch, chunk, max(1, args.articles_a_batch // chunk))
    encoded = [encode_batch(batch) for batch in built]
    kept_up = groupstats.keep_up
    rounds = []
    for number in range(1, args.rounds + 1):
        kept = number % 2 == 1
        groupstats.keep_up = kept_up if kept else (lambda session, group_id: [])
        groupstats._settled.clear()
        groupstats._analyzed_at.clear()
        group_id, range_id = leased_group(f"{SOURCE_GROUP}.new-{number}-{os.getpid()}", built)
        joins = []
        try:
            for index, (batch, body) in enumerate(zip(built, encoded), 1):
                batch_id = accept(range_id, batch, body)
                with session_scope() as session:
                    names = store.store_batch(session, batch_id).names
                timed.clear()
                began = time.perf_counter()
                with session_scope() as session:
                    posts.join_batch(session, batch_id, names)
                joins.append(
                    {
                        "batch": index,
                        "seconds": round(time.perf_counter() - began, 3),
                        **{kind: round(timed[kind], 3) for _, kind in KINDS},
                    }
                )
                say(f"round {number} ({'kept' if kept else 'not kept'}), batch {index}: {joins[-1]}")
        finally:
            groupstats.keep_up = kept_up
            with session_scope() as session:
                for table in GROUP_ROWS:
                    session.execute(text(f"DELETE FROM {table} WHERE group_id = :g"), {"g": group_id})
                for table in PARTITIONED_TABLES:
                    session.execute(text(f'DROP TABLE IF EXISTS "{partition_name(table, group_id)}"'))
                session.execute(text("DELETE FROM groups WHERE id = :g"), {"g": group_id})
            with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as connection:
                for table in groupstats.GROUP_TABLES:
                    connection.execute(text(f"VACUUM ANALYZE {table}"))
        rounds.append({"round": number, "statistics": "kept" if kept else "not kept", "joins": joins})
    return rounds


if __name__ == "__main__":
    raise SystemExit(main())
