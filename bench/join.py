"""The join on a large catalog: a batch's releases joined into their posts afresh, statement by
statement, on the catalog bench/catalog.py keeps.

    .venv/bin/python bench/catalog.py --keep DIR                 # fill the catalog once
    .venv/bin/python bench/join.py --keep DIR [--batches 3] [--rounds 3] [--releases 3700]
                                  [--names node|datacenter] [--json]

Each of --batches of the catalog's batches (spread evenly over them) is joined --rounds times, the
batches in turn, as a new batch is joined after its store: in a transaction, its releases and
their files are written again under new keys (the keys and the names' hashes turned by a
constant, so that the copies are new posts of the same names, namesakes of each other as the
originals are, and of none of the catalog's), app.services.ingest.posts.join_posts joins them,
and the transaction is rolled back: the catalog is left as it was. A batch of bench/catalog.py's
holds some 95,000 releases of an article or two; --releases takes that many of each (their first
by key; 0: all), as many as a batch of bench/e2e.py's e-book group by default (100,000 articles,
3,700 releases). The first round of a batch reads what the join needs from disk unless an earlier
run left it in memory; the later rounds find it there, as the join of a batch just stored does.
Each join parses its names afresh (a round's parses are not kept for the next). With --names node
(the default) the join is given what a node reads of the names (release_names), read before the
join's clock starts as the node reads them before it sends the batch; with --names datacenter the
join reads every name itself, as for a batch of a node of another reading.

Measured each time: the join's wall time, this process' CPU in it (the worker's part: the names'
parse, the rows made, the statements sent), and each statement's time as the session ran it
(SQLAlchemy's cursor events). Printed: per statement its median time and µs a post over every
join, each join's figures, and, last, a JSON line of it all.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.catalog import NOTE, app_cluster  # noqa: E402

if TYPE_CHECKING:
    from sqlalchemy import CursorResult

GROUP = "alt.binaries.multimedia"  # bench/catalog.py's one group
# A statement's name in the figures: what it does, by its first words (the rest: its first 60
# characters).
KINDS = (
    ("SELECT pg_advisory_xact_lock", "the group's join lock"),
    ("WITH batch AS MATERIALIZED", "the namesakes"),
    ("INSERT INTO posts", "the posts' upsert"),
    ("WITH worth AS MATERIALIZED", "the queue of inspections"),
    ("SELECT post_key, inner_name", "the inspections' findings"),
    ("INSERT INTO release_posts", "the releases' posts (joined)"),
    ("DELETE FROM release_posts", "the releases' posts (forgotten)"),
    ("SAVEPOINT", "savepoints"),
    ("RELEASE SAVEPOINT", "savepoints"),
)


def say(message: str) -> None:
    print(f"join bench: {message}", file=sys.stderr, flush=True)


def kind_of(statement: str) -> str:
    flat = " ".join(statement.split())
    for start, kind in KINDS:
        if flat.startswith(start):
            return kind
    return flat[:60]


def batches_of(session: Any, group_id: int, count: int, releases: int) -> list[tuple[int, int, list[int]]]:
    """count of the group's batches, spread evenly: (range, first article, release keys, at most
    `releases` of them unless 0)."""
    from sqlalchemy import text

    every = session.execute(
        text("SELECT DISTINCT range_id, batch_from FROM release_chunks WHERE group_id = :g ORDER BY 1, 2"),
        {"g": group_id},
    ).all()
    if not every:
        raise SystemExit("join bench: the catalog has no batches")
    step = max(1, len(every) // count)
    chosen = every[step // 2 :: step][:count]
    return [
        (
            range_id,
            batch_from,
            list(
                session.scalars(
                    text(
                        "SELECT DISTINCT release_key FROM release_chunks"
                        " WHERE group_id = :g AND range_id = :r AND batch_from = :b ORDER BY 1"
                        + (f" LIMIT {releases}" if releases else "")
                    ),
                    {"g": group_id, "r": range_id, "b": batch_from},
                )
            ),
        )
        for range_id, batch_from in chosen
    ]


# What turns a key and a name's hash into the copy's (XOR, PostgreSQL's #): a 64-bit constant.
TURN = 0x5EED_B07C_A7A1_0600


def copied(session: Any, table: str, group_id: int, keys: list[int], key: str, turned: tuple[str, ...]) -> int:
    """The rows of `table` whose `key` is one of keys, written again with the `turned` columns
    turned (every other column as it is, the generated ones made again); how many."""
    from sqlalchemy import text

    columns = session.scalars(
        text(
            "SELECT attname FROM pg_attribute WHERE attrelid = CAST(:t AS regclass) AND attnum > 0"
            " AND NOT attisdropped AND attgenerated = '' ORDER BY attnum"
        ),
        {"t": table},
    ).all()
    values = ", ".join(f"{c} # {TURN}" if c in turned else c for c in columns)
    result = session.execute(
        text(
            f"INSERT INTO {table} ({', '.join(columns)}) SELECT {values} FROM {table}"
            f" WHERE group_id = :g AND {key} = ANY(:k)"
        ),
        {"g": group_id, "k": keys},
    )
    # An INSERT's result is a CursorResult, which Session.execute's annotation does not say.
    return cast("CursorResult[Any]", result).rowcount


def join_once(group_id: int, keys: list[int], timed: list[tuple[str, float]], by_node: bool) -> dict[str, Any]:
    """The batch's releases copied as a new batch's and joined, in a transaction rolled back; what
    it took. by_node: the join given what a node reads of the names."""
    from sqlalchemy import text

    from app.db import array_literal, session_scope
    from app.services import postnames
    from app.services.ingest import posts
    from edge.digest import namecolumns
    from edge.digest.namecolumns import COLUMNS

    # The names are parsed afresh, as a batch's new names are: an earlier round's parses are
    # forgotten (the words' readings are kept, as a worker keeps them from batch to batch).
    postnames._parsed.cache_clear()
    postnames._named.cache_clear()
    namecolumns.read.cache_clear()

    with session_scope() as session:
        releases = copied(session, "releases", group_id, keys, "key", ("key", "name_hash"))
        files = copied(session, "files", group_id, keys, "release_key", ("key", "release_key"))
        new_keys = [key ^ TURN for key in keys]
        read_names: dict[str, namecolumns.PostName] = {}
        if by_node:
            names = session.execute(
                text("SELECT name FROM releases WHERE group_id = :g AND key = ANY(CAST(:k AS bigint[]))"),
                {"g": group_id, "k": array_literal(new_keys)},
            ).scalars()
            read_names = {name: row for name in names if (row := namecolumns.read(name, GROUP)) is not None}
        timed.clear()
        wall, cpu = time.perf_counter(), time.process_time()
        posts.join_posts(session, group_id, new_keys, read_names=read_names)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        statements = list(timed)
        # How many posts the join wrote, and a hash of what their names gave them: the same
        # whoever read the names.
        written, named_hash = session.execute(
            text(
                "SELECT count(*), md5(coalesce(string_agg(row(key, name, " + ", ".join(COLUMNS) + ")::text, ','"
                " ORDER BY key), '')) FROM posts WHERE group_id = :g AND key IN"
                " (SELECT coalesce(x.post_key, k) FROM unnest(CAST(:k AS bigint[])) AS k"
                " LEFT JOIN release_posts x ON x.group_id = :g AND x.key = k)"
            ),
            {"g": group_id, "k": new_keys},
        ).one()
        session.rollback()
    by_kind: dict[str, float] = defaultdict(float)
    for kind, seconds in statements:
        by_kind[kind] += seconds
    return {
        "releases": releases,
        "files": files,
        "posts_written": written,
        "posts_named_md5": named_hash,
        "wall_ms": round(wall * 1e3, 1),
        "cpu_ms": round(cpu * 1e3, 1),
        "statements_ms": round(sum(by_kind.values()) * 1e3, 1),
        "by_statement_ms": {kind: round(seconds * 1e3, 2) for kind, seconds in by_kind.items()},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", metavar="DIR", required=True, help="a catalog bench/catalog.py kept")
    parser.add_argument("--batches", type=int, default=3, help="batches joined, spread over the catalog's")
    parser.add_argument("--rounds", type=int, default=3, help="joins of each batch")
    parser.add_argument("--releases", type=int, default=3700, help="releases of each batch joined (0: all)")
    parser.add_argument(
        "--names",
        choices=("node", "datacenter"),
        default="node",
        help="who reads the names: the node, before the batch is sent (the default), or the join",
    )
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
    if args.batches < 1 or args.rounds < 1 or args.releases < 0:
        parser.error("--batches and --rounds: at least 1; --releases: at least 0")
    workdir = Path(args.keep)
    if not (workdir / NOTE).exists():
        parser.error(f"{workdir} holds no kept catalog: fill one with bench/catalog.py --keep {workdir}")
    command = "command: .venv/bin/python bench/join.py " + " ".join(argv if argv is not None else sys.argv[1:])

    cluster = app_cluster(workdir / "pg")
    cluster.start()
    try:
        from sqlalchemy import event, text

        from app.db import get_engine, session_scope

        timed: list[tuple[str, float]] = []
        engine = get_engine()

        @event.listens_for(engine, "before_cursor_execute")
        def started(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
            conn.info["bench_started"] = time.perf_counter()

        @event.listens_for(engine, "after_cursor_execute")
        def ended(conn: Any, cursor: Any, statement: str, *_: Any) -> None:
            timed.append((kind_of(statement), time.perf_counter() - conn.info.pop("bench_started")))

        with session_scope() as session:
            group_id = session.execute(text("SELECT id FROM groups WHERE name = :n"), {"n": GROUP}).scalar_one()
            releases = session.execute(text("SELECT count(*) FROM posts WHERE group_id = :g"), {"g": group_id})
            posts_before = releases.scalar_one()
            batches = batches_of(session, group_id, args.batches, args.releases)
        joins: list[dict[str, Any]] = []
        for round_ in range(args.rounds):
            for range_id, batch_from, keys in batches:
                say(f"round {round_ + 1}: the batch of range {range_id} from {batch_from} ({len(keys):,} releases)")
                joined = join_once(group_id, keys, timed, args.names == "node")
                joins.append({"round": round_ + 1, "range": range_id, "batch_from": batch_from, **joined})
        with session_scope() as session:
            posts_after = session.execute(
                text("SELECT count(*) FROM posts WHERE group_id = :g"), {"g": group_id}
            ).scalar_one()
    finally:
        cluster.stop()

    written = sum(join["posts_written"] for join in joins)
    kinds = sorted({kind for join in joins for kind in join["by_statement_ms"]})
    statements = {
        kind: {
            "median_ms": round(statistics.median(join["by_statement_ms"].get(kind, 0.0) for join in joins), 2),
            "us_per_post": round(
                1e3 * sum(join["by_statement_ms"].get(kind, 0.0) for join in joins) / max(1, written), 1
            ),
        }
        for kind in kinds
    }
    figures = {
        "posts_in_catalog": posts_before,
        "posts_unchanged": posts_before == posts_after,
        "batches": len(batches),
        "rounds": args.rounds,
        "names_read_by": args.names,
        "joins": joins,
        "join_median_ms": statistics.median(join["wall_ms"] for join in joins),
        "cpu_median_ms": statistics.median(join["cpu_ms"] for join in joins),
        "us_per_post": round(1e3 * sum(join["wall_ms"] for join in joins) / max(1, written), 1),
        "cpu_us_per_post": round(1e3 * sum(join["cpu_ms"] for join in joins) / max(1, written), 1),
        "statements": dict(sorted(statements.items(), key=lambda item: -item[1]["median_ms"])),
    }
    if not args.json:
        print(command)
        print(
            f"catalog: {posts_before:,} posts in {GROUP}; {len(batches)} batches joined {args.rounds} times each,"
            f" the names read by the {args.names}"
        )
        for join in joins:
            print(
                f"  round {join['round']}, range {join['range']} from {join['batch_from']}: {join['posts_written']:,}"
                f" posts in {join['wall_ms']:,.1f} ms (CPU here {join['cpu_ms']:,.1f}, statements"
                f" {join['statements_ms']:,.1f})"
            )
        print(
            f"a join: median {figures['join_median_ms']:,.1f} ms, CPU here {figures['cpu_median_ms']:,.1f} ms;"
            f" {figures['us_per_post']} µs a post ({figures['cpu_us_per_post']} of CPU here)"
        )
        for kind, figure in figures["statements"].items():
            print(f"  {figure['median_ms']:>9,.2f} ms  {figure['us_per_post']:>7} µs a post  {kind}")
        print(f"the catalog as it was: {'yes' if figures['posts_unchanged'] else 'NO'}")
    print(json.dumps(figures))
    return 0 if figures["posts_unchanged"] else 1


if __name__ == "__main__":
    sys.exit(main())
