"""How fast the batch store is, beside a raw COPY of the same rows.

    .venv/bin/python bench/store.py [--articles 400000] [--group alt.binaries.e-book.french]
                                    [--rounds 3] [--catalog 0]

or `flask seed bench --store` with the same options, which runs this file of the checkout. It
works on the database of the data center's settings (DATABASE_URL, DB_SEARCH_PATH), with its
CHUNK_SIZE and BATCH_CHUNKS. A generated boneless range (article numbers past 2^32) is digested
into batches with the edge's own library (not timed), then each batch is accepted, then stored
exactly as the ingest task stores it (timed; the store keeps the releases' aggregates up to date
itself, so nothing is left to join). In the same run the same fragments are COPYed raw into a
scratch table shaped like the fragments partition, the way the store sends them (binary), and
as plain text (the baseline of docs/benchmarks.md). Everything made is removed afterwards. The
last line printed is JSON with every figure.
"""

from __future__ import annotations

import argparse
import json
import secrets
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import text  # noqa: E402

from app.config import get_settings  # noqa: E402
from app.db import PARTITIONED_TABLES, ensure_group_partitions, get_engine, partition_name, session_scope  # noqa: E402
from app.models import SeedPlan, SeedRange  # noqa: E402
from app.services import leases  # noqa: E402
from app.services.ingest import accept as acceptance  # noqa: E402
from app.services.ingest import store  # noqa: E402
from app.services.ingest.hosts import host_column, message_host_ids, split_message_ids  # noqa: E402
from app.services.ingest.store import PACK_COPY, pack_slices  # noqa: E402
from app.services.ingest.pgcopy import copy_payload  # noqa: E402
from app.services.groups import add_groups  # noqa: E402
from edge.digest.batch import Batch, decode_batch, encode_batch  # noqa: E402
from edge.digest.gather import Gatherer  # noqa: E402
from edge.digest.runner import batch_spans  # noqa: E402
from simnews.generator import Config, generate  # noqa: E402
from simnews.scripted import overview_lines  # noqa: E402

DEFAULT_GROUP = "alt.binaries.e-book.french"

BONELESS_BASE = 2**32 + 1_000_000


@dataclass
class StoreBench:
    group: str
    articles: int
    batches: int
    fragments: int
    release_chunks: int
    store_seconds: float
    # The worker's side of it: CPU seconds of the process that stores (what a compiled part saves).
    store_cpu_seconds: float
    ms_per_release_chunk: float
    store_fragments_per_second: float
    raw_copy_seconds: float
    raw_copy_fragments_per_second: float
    store_vs_raw_copy: float
    # The raw COPY in text format, group_id sent in every row, the whole payload built first: a
    # second baseline, slower than the binary one.
    raw_text_copy_seconds: float
    raw_text_copy_fragments_per_second: float
    store_vs_raw_text_copy: float

    def as_dict(self) -> dict:
        return asdict(self)


def _digest(group: str, articles: int, chunk_size: int, batch_chunks: int) -> list[Batch]:
    lines = list(overview_lines(generate(articles, Config(groups=(group,), namespace="bench")), group, BONELESS_BASE))
    last = BONELESS_BASE + len(lines) - 1
    by_number = {int(line.split(b"\t", 1)[0]): line for line in lines}
    built = []
    for spans in batch_spans(BONELESS_BASE, last, chunk_size, batch_chunks):
        gatherer = Gatherer(group)
        for first, end in spans:
            gatherer.add_chunk(first, end, [b"".join(by_number[n] + b"\r\n" for n in range(first, end + 1))])
        built.append(gatherer.build())
    return built


def run_store_bench(
    *, articles: int, source_group: str, chunk_size: int, batch_chunks: int, rounds: int = 3, catalog: int = 0
) -> StoreBench:
    """The best of `rounds` rounds for each timing (store, raw COPYs), so that another
    process busy on the machine for a moment does not decide the figures. catalog: the bench's
    group holds that many files already (and a release per three of them), as a group some
    years into indexing does: what the store looks up and updates then has a catalog to search."""
    built = _digest(source_group, articles, chunk_size, batch_chunks)
    encoded = [encode_batch(b) for b in built]
    decoded = [decode_batch(*e) for e in encoded]
    timings = [_one_round(source_group, built, encoded, decoded, catalog) for _ in range(rounds)]
    store_seconds = min(t.store for t in timings)
    store_cpu_seconds = min(t.store_cpu for t in timings)
    raw_seconds = min(t.raw for t in timings)
    raw_text_seconds = min(t.raw_text for t in timings)
    fragments, release_chunks = timings[0].fragments, timings[0].release_chunks
    return StoreBench(
        group=source_group,
        articles=articles,
        batches=len(built),
        fragments=fragments,
        release_chunks=release_chunks,
        store_seconds=round(store_seconds, 3),
        store_cpu_seconds=round(store_cpu_seconds, 3),
        ms_per_release_chunk=round(1000 * store_seconds / max(release_chunks, 1), 4),
        store_fragments_per_second=round(fragments / store_seconds),
        raw_copy_seconds=round(raw_seconds, 3),
        raw_copy_fragments_per_second=round(fragments / raw_seconds),
        store_vs_raw_copy=round(raw_seconds / store_seconds, 3),
        raw_text_copy_seconds=round(raw_text_seconds, 3),
        raw_text_copy_fragments_per_second=round(fragments / raw_text_seconds),
        store_vs_raw_text_copy=round(raw_text_seconds / store_seconds, 3),
    )


class _Round(NamedTuple):
    store: float
    store_cpu: float  # the storing process' own CPU (its threads too), not PostgreSQL's
    raw: float
    raw_text: float
    fragments: int
    release_chunks: int


def _one_round(
    source_group: str, built: list[Batch], encoded: list[tuple], decoded: list[dict], catalog: int = 0
) -> _Round:
    """The timings and the counts of one round, on a group of its own removed afterwards."""
    group_id, range_id = leased_group(f"{source_group}.bench-{secrets.token_hex(4)}", built)
    try:
        if catalog:
            _fill_catalog(group_id, catalog)
        batch_ids = [accept(range_id, batch, body) for batch, body in zip(built, encoded)]
        started, cpu_started = time.perf_counter(), time.process_time()
        for batch_id in batch_ids:  # as ingest.store_batch does it
            with session_scope() as session:
                store.store_batch(session, batch_id)
        store_seconds, store_cpu = time.perf_counter() - started, time.process_time() - cpu_started
        with session_scope() as session:
            release_chunks = session.execute(
                text("SELECT count(*) FROM release_chunks WHERE group_id = :g"), {"g": group_id}
            ).scalar_one()
            fragments = session.execute(
                text("SELECT count(*) FROM fragments WHERE group_id = :g"), {"g": group_id}
            ).scalar_one()
        raw_seconds = _raw_copy(decoded, group_id)
        raw_text_seconds = _raw_copy(decoded, group_id, text_format=True)
    finally:
        _remove(group_id)
    return _Round(store_seconds, store_cpu, raw_seconds, raw_text_seconds, fragments, release_chunks)


def leased_group(name: str, built: list[Batch]) -> tuple[int, int]:
    """A new group `name` with a plan and a range of the batches' articles, leased to the data
    center's node as the store's tasks have it, committed: the group's and the range's ids."""
    with session_scope() as session:
        group_id = add_groups(session, [name])[0].id
        plan = SeedPlan(group_id=group_id, first_id=built[0]["first"], last_id=built[-1]["last"])
        session.add(plan)
        session.flush()
        seed_range = SeedRange(
            plan_id=plan.id, group_id=group_id, first_id=plan.first_id, last_id=plan.last_id, next_id=plan.first_id
        )
        session.add(seed_range)
        session.flush()
        leases.lease_range(session, leases.datacenter_node(session), seed_range.id)
        return group_id, seed_range.id


def accept(range_id: int, batch: Batch, encoded: tuple) -> int:
    """The batch accepted into the range from the data center's node, as the API accepts a
    node's, committed: its id. `encoded` is encode_batch's (body, content type, encoding)."""
    body, content_type, content_encoding = encoded
    with session_scope() as session:
        return acceptance.accept_batch(
            session,
            leases.datacenter_node(session),
            range_id,
            batch_from=batch["first"],
            batch_to=batch["last"],
            body=body,
            content_type=content_type,
            content_encoding=content_encoding or "",
        ).batch_id


def _fill_catalog(group_id: int, files: int) -> None:
    """The group's catalog holds `files` files and a release per three of them, with keys no
    generated batch has (the batches' keys are blake2b hashes, these hashtextextended ones), and
    is vacuumed and analyzed, as autovacuum would have it."""
    with session_scope() as session:
        ensure_group_partitions(session, group_id)
        session.execute(
            text(
                f'INSERT INTO "{partition_name("files", group_id)}"'
                " (key, release_key, posted_at, file_index, file_count, parts, name, subject)"
                " SELECT hashtextextended(n::text, 1), hashtextextended((n / 3)::text, 2), now(), 1, 1, 10,"
                " 'file ' || n, 'earlier file ' || n FROM generate_series(1, :files) AS n"
            ),
            {"files": files},
        )
        session.execute(
            text(
                "INSERT INTO releases (group_id, key, name, poster, file_count, files_seen, parts_expected, parts_seen)"
                " SELECT :group_id, hashtextextended(n::text, 2), 'release ' || n, 'poster', 3, 3, 30, 30"
                " FROM generate_series(0, :files / 3) AS n"
            ),
            {"group_id": group_id, "files": files},
        )
    with get_engine().connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        # Vacuumed too: the fill's inserts would otherwise set autovacuum going on these tables
        # while the store is timed, which it would long have done in a catalog that size.
        conn.execute(text(f'VACUUM (ANALYZE) "{partition_name("files", group_id)}"'))
        conn.execute(text("VACUUM (ANALYZE) releases"))


def _raw_copy(decoded: list[dict], group_id: int, text_format: bool = False) -> float:
    """The same fragments COPYed into a table shaped like a partition of the packs (without a key,
    as the packs have none, with their index, and with its group_id default), the same way the
    store sends them (binary, in slices), one transaction per batch as the store has; or, with
    `text_format`, a row an article in COPY's text format into a table of the view `fragments`'
    columns. Their message-ids are cut and their hosts' ids found before the clock starts (the
    store's timing includes both)."""
    table = f"bench_raw_fragments_{secrets.token_hex(4)}"
    with session_scope() as session:
        like = "fragments" if text_format else "fragment_packs INCLUDING ALL"
        session.execute(text(f"CREATE TABLE {table} (LIKE {like})"))
        # As a partition: its group_id defaults to its group.
        session.execute(text(f"ALTER TABLE {table} ALTER COLUMN group_id SET DEFAULT {int(group_id)}"))
        hosts = [split_message_ids(batch["fragments"]["message_id"]) for batch in decoded]
        host_ids = [host_column(h.numbers, message_host_ids(session.connection(), h.names)) for h in hosts]
        local_texts = [[local.decode() for local in h.locals] for h in hosts] if text_format else [None] * len(hosts)
    try:
        started = time.perf_counter()
        for batch, cut, ids, locals_text in zip(decoded, hosts, host_ids, local_texts):
            with session_scope() as session:
                conn = session.connection().connection.driver_connection
                assert conn is not None  # a pooled connection's psycopg connection, open
                with conn.cursor() as cur:
                    if text_format:  # the baseline: text, group_id in every row
                        fragments = batch["fragments"]
                        columns = [
                            ("int", fragments["article"]),
                            ("int", fragments["file"]),
                            ("int", fragments["part"]),
                            ("int", fragments["bytes"]),
                            ("int", list(ids)),
                            ("text", locals_text),
                            ("int", [group_id] * len(fragments["article"])),
                        ]
                        with cur.copy(
                            f"COPY {table} (article, file_key, part, bytes, host_id, message_local, group_id)"
                            " FROM STDIN"
                        ) as copy:
                            copy.write(copy_payload(columns))
                        continue
                    with cur.copy(PACK_COPY.format(table=table)) as copy:
                        for piece in pack_slices(batch["fragments"], cut.locals, ids):  # as the store sends them
                            copy.write(piece)
        return time.perf_counter() - started
    finally:
        with session_scope() as session:
            session.execute(text(f"DROP TABLE IF EXISTS {table}"))


def _remove(group_id: int) -> None:
    with session_scope() as session:
        for table in PARTITIONED_TABLES:
            session.execute(text(f'DROP TABLE IF EXISTS "{partition_name(table, group_id)}"'))
        session.execute(text("DELETE FROM rule_counts WHERE group_id = :g"), {"g": group_id})
        session.execute(text("DELETE FROM releases WHERE group_id = :g"), {"g": group_id})
        session.execute(text("DELETE FROM groups WHERE id = :g"), {"g": group_id})
    # The next round stores the same keys again: left dead in the releases' index, they would make
    # every later round check them (the partitions are dropped whole, the raw COPY's table is new).
    with get_engine().connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        conn.execute(text("VACUUM releases"))


def announce(*, articles: int, group: str, rounds: int, catalog: int) -> str:
    """What a run is about to do (it takes a while)."""
    held = f", the catalog holding {catalog:,} files" if catalog else ""
    return (
        f"digesting {articles} generated articles of {group} numbered from 2^32 + 1,000,000;"
        f" best of {rounds} rounds{held} ..."
    )


def summary(result: StoreBench) -> list[str]:
    """The figures in words, before the JSON line."""
    return [
        f"stored {result.batches} batches: {result.fragments} fragments, {result.release_chunks} release"
        f" chunks in {result.store_seconds} s = {result.ms_per_release_chunk} ms per release chunk"
        " (releases brought up to date in the same transactions)",
        f"store: {result.store_fragments_per_second:,} fragments/s; raw COPY of the same fragments:"
        f" {result.raw_copy_fragments_per_second:,}/s binary ({result.store_vs_raw_copy:.0%} of raw),"
        f" {result.raw_text_copy_fragments_per_second:,}/s text ({result.store_vs_raw_text_copy:.0%})",
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--articles", type=int, default=400_000, help="generated articles (at least 1000)")
    parser.add_argument(
        "--group",
        default=DEFAULT_GROUP,
        help="which group's generated data: alt.binaries.e-book.french or alt.binaries.cd.image.playstation2.dvdiso",
    )
    parser.add_argument("--rounds", type=int, default=3, help="each timing is the best of this many rounds")
    parser.add_argument(
        "--catalog", type=int, default=0, help="files the group's catalog holds before the store (a release per three)"
    )
    args = parser.parse_args(argv)
    if args.articles < 1000 or args.rounds < 1 or args.catalog < 0:
        parser.error("--articles must be at least 1000, --rounds at least 1, --catalog at least 0")
    settings = get_settings()
    print(
        announce(articles=args.articles, group=args.group, rounds=args.rounds, catalog=args.catalog),
        file=sys.stderr,
        flush=True,
    )
    result = run_store_bench(
        articles=args.articles,
        source_group=args.group,
        chunk_size=settings.chunk_size,
        batch_chunks=settings.batch_chunks,
        rounds=args.rounds,
        catalog=args.catalog,
    )
    for line in summary(result):
        print(line)
    print(json.dumps(result.as_dict()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
