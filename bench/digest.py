"""How fast the digest library digests overview lines, beside a naive digest, on generated data
or real posts.

    .venv/bin/python bench/digest.py [--lines 600000] [--repeat 3] [--group alt.binaries.test] [--real-posts]

For simnews.generator's articles (or, with --real-posts, the real posts of tests/data/nzb/ posted
again and again under message-ids of their own) turned into INN-style overview lines, it times, on one core
(process CPU time, best of --repeat runs each): parse + gather + rules + encode (msgpack, gzip)
of batches of --batch-chunks chunks of --chunk lines, the lines in blocks of 256 KiB as the NNTP
client yields them; and the same job done naively (split on tabs and one regex per line, plain
loops). Every run starts with the library's per-process caches emptied (and the encoder's kept
buffer let go), as in a new process: a run must not gain from the one before it, which read the
same lines. It also reports the bytes on the wire per overview byte, and the release-chunk rows
per release at --batch-chunks chunks per batch (and at one chunk per batch) for the throughput
group and the e-book and PS2 DVD groups, for every release gathered (before rules) and for the
releases kept (after rules). The last line printed is JSON with every figure, among them which
implementation of the compiled parts ran ("impl": SEED_IMPL=python times the Python twins).
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import time
import zlib
from collections import defaultdict
from pathlib import Path

import msgpack

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from edge.digest import deflate  # noqa: E402
from edge.digest.batch import GZIP_LEVEL, Batch, clear_packer, encode_batch  # noqa: E402
from edge.digest.compiled import IMPL  # noqa: E402
from edge.digest.gather import BATCH_FORMAT_VERSION, Gatherer, clear_caches, file_key, release_key  # noqa: E402
from edge.digest.nntp import RECV_SIZE  # noqa: E402
from edge.digest.overview import DEFAULT_LAYOUT, decode_text, parse_date  # noqa: E402
from edge.digest.rules import EXECUTABLE_RULE, KEPT, RuleSet, is_bare_executable_set  # noqa: E402
from edge.digest.subjects import parse_subject  # noqa: E402
from simnews.generator import Article, Config, generate  # noqa: E402
from simnews.nzbpost import load_nzb, post_articles  # noqa: E402
from simnews.scripted import overview_lines  # noqa: E402

FIRST_ARTICLE = 6_000_000_001  # past 2**32, as in the groups being backfilled
NZB_DIR = Path(__file__).resolve().parents[1] / "tests" / "data" / "nzb"
RATIO_GROUPS = ("alt.binaries.e-book.french", "alt.binaries.cd.image.playstation2.dvdiso")


def real_post_lines(group: str, count: int) -> list[bytes]:
    """About `count` overview lines of real posts: the NZBs of tests/data/nzb/ posted again and
    again (each time under message-ids of its own) into `group`, one post after another."""
    posts = [load_nzb(path) for path in sorted(NZB_DIR.glob("*.nzb"))]
    articles: list[Article] = []
    round_ = 0
    while len(articles) < count:
        for post in posts:
            articles += [Article(a.message_id, a.raw) for a in post_articles(post, group, namespace=f"r{round_}")]
        round_ += 1
    return list(overview_lines(articles[:count], group, FIRST_ARTICLE))


def generated_lines(group: str, count: int, seed: int) -> list[bytes]:
    """`count` overview lines of `group` (every article of a one-group generator run)."""
    return list(overview_lines(generate(count, Config(seed=seed, groups=(group,))), group, FIRST_ARTICLE))


def as_batches(lines: list[bytes], chunk: int, batch_chunks: int) -> list[list[tuple[int, int, list[bytes]]]]:
    """Batches of chunks (first, last, blocks); a chunk's lines in blocks of about RECV_SIZE."""
    batches = []
    for batch_start in range(0, len(lines), chunk * batch_chunks):
        chunks = []
        for start in range(batch_start, min(len(lines), batch_start + chunk * batch_chunks), chunk):
            blocks, current, size = [], [], 0
            for line in lines[start : start + chunk]:
                current.append(line + b"\r\n")
                size += len(line) + 2
                if size >= RECV_SIZE:
                    blocks.append(b"".join(current))
                    current, size = [], 0
            if current:
                blocks.append(b"".join(current))
            chunks.append((FIRST_ARTICLE + start, FIRST_ARTICLE + start + chunk - 1, blocks))
        batches.append(chunks)
    return batches


def digest(group: str, chunks, rules: RuleSet) -> Batch:
    gatherer = Gatherer(group, DEFAULT_LAYOUT, rules)
    for first, last, blocks in chunks:
        gatherer.add_chunk(first, last, blocks)
    return gatherer.build()


# -- the naive digest: the baseline, a straightforward digest without the library's speed work --

NAIVE_SUBJECT = re.compile(rb"^(.*)\((\d+)/(\d+)\)(.*)$", re.DOTALL)  # greedy, so it finds the last counter


def naive_digest(group: str, chunks, rules: RuleSet) -> dict:
    """The same batch, made the plain way: every line split on tabs and run through one regex,
    everything else in plain loops."""
    files: dict[tuple, dict] = {}
    lines = rejected = 0
    for _, _, blocks in chunks:
        for block in blocks:
            for line in block.split(b"\r\n")[:-1]:
                lines += 1
                fields = line.split(b"\t")
                try:
                    number, size = int(fields[0]), int(fields[6])
                    subject, poster, date, message_id = fields[1], fields[2], fields[3], fields[4]
                except (IndexError, ValueError):
                    rejected += 1
                    continue
                match = NAIVE_SUBJECT.match(subject)
                part, parts, key = (
                    (int(match[2]), int(match[3]), (poster, match[1], match[4]))
                    if match
                    else (1, 1, (poster, subject, b""))
                )
                file = files.setdefault(
                    key, {"subject": subject, "poster": poster, "parts": parts, "fragments": [], "dates": []}
                )
                file["fragments"].append((part, number, size, message_id.decode()))
                file["dates"].append(date)
    releases: dict[tuple, list[dict]] = defaultdict(list)
    for file in files.values():
        file["parsed"] = parsed = parse_subject(decode_text(file["subject"]))
        file["name"] = parsed.filename
        releases[(file["poster"], parsed.release.casefold(), parsed.file_count)].append(file)
    batch = {
        "version": BATCH_FORMAT_VERSION,
        "group": group,
        "first": chunks[0][0],
        "last": chunks[-1][1],
        "chunks": [],
        "missing": [],
        "rules": {name: [0, 0, 0, 0] for name in rules.names()},
        "files": defaultdict(list),
        "fragments": defaultdict(list),
        "releases": defaultdict(list),
        "release_chunks": defaultdict(list),
        "stats": {"lines": lines, "rejected": {"bad": rejected}},
    }
    for (poster, _, count), release_files in releases.items():
        name = release_files[0]["parsed"].release
        rkey = release_key(poster, name, count)
        bare = rules.executable and is_bare_executable_set([file["name"] for file in release_files])
        rule = EXECUTABLE_RULE if bare else KEPT
        batch["rules"][rule][0] += 1
        if bare:
            for file in release_files:
                batch["rules"][rule][1] += 1
                batch["rules"][rule][2] += len(file["fragments"])
                batch["rules"][rule][3] += sum(fragment[2] for fragment in file["fragments"])
            continue
        dates, fragments, size = [], 0, 0
        for file in release_files:
            parsed = file["parsed"]
            fkey = file_key(rkey, parsed.filename or f"#{parsed.file_index}")
            file_dates = [date for date in map(parse_date, file["dates"]) if date is not None]
            dates += file_dates
            for column, value in (
                ("key", fkey),
                ("release", rkey),
                ("name", parsed.filename),
                ("subject", decode_text(file["subject"])),
                ("poster", decode_text(poster)),
                ("date", min(file_dates, default=None)),
                ("index", parsed.file_index),
                ("count", count),
                ("parts", file["parts"]),
            ):
                batch["files"][column].append(value)
            for part, number, fragment_size, message_id in file["fragments"]:
                for column, value in (
                    ("file", fkey),
                    ("part", part),
                    ("article", number),
                    ("bytes", fragment_size),
                    ("message_id", message_id),
                ):
                    batch["fragments"][column].append(value)
                fragments += 1
                size += fragment_size
        for column, value in (("key", rkey), ("name", name), ("poster", decode_text(poster)), ("file_count", count)):
            batch["releases"][column].append(value)
        for column, value in (
            ("release", rkey),
            ("files", len(release_files)),
            ("fragments", fragments),
            ("bytes", size),
            ("first_date", min(dates, default=None)),
            ("last_date", max(dates, default=None)),
        ):
            batch["release_chunks"][column].append(value)
    return batch


# -- measuring -------------------------------------------------------------------------------


def gzip_engines(packed: list[bytes], repeat: int) -> dict:
    """CPU seconds (best of repeat) to gzip, then to inflate, the packed batches at GZIP_LEVEL with
    the engine edge.digest.deflate uses and with zlib, and the bytes each writes."""

    def zlib_gzip(data):
        packer = zlib.compressobj(GZIP_LEVEL, zlib.DEFLATED, deflate.GZIP_WBITS)
        return packer.compress(data) + packer.flush()

    def best(job, items):
        runs = []
        for _ in range(repeat):
            started = time.process_time()
            for item in items:
                job(item)
            runs.append(time.process_time() - started)
        return min(runs)

    figures = {}
    for name, gzip, gunzip in (
        (
            deflate.ENGINE,
            lambda data: deflate.gzip(data, GZIP_LEVEL),
            lambda body: deflate.gunzipper().decompress(body),
        ),
        ("zlib", zlib_gzip, lambda body: zlib.decompress(body, deflate.GZIP_WBITS)),
    ):
        bodies = list(map(gzip, packed))
        figures[name] = {
            "gzip_seconds": round(best(gzip, packed), 4),
            "gunzip_seconds": round(best(gunzip, bodies), 4),
            "bytes": sum(map(len, bodies)),
        }
    return figures


def timed_runs(job, batches, group: str, rules: RuleSet, repeat: int) -> tuple[list[float], int]:
    """CPU seconds of each run over all batches (digest + encode), and the bytes encoded. Each
    run starts with the library's per-process caches empty (counter tails, subjects, name
    suffixes, dates: edge.digest.gather.clear_caches) and without the encoder's kept buffer
    (edge.digest.batch.clear_packer), as in a new process."""
    runs, wire = [], 0
    for _ in range(repeat):
        wire = 0
        clear_caches()
        clear_packer()
        started = time.process_time()
        for chunks in batches:
            body, _, _ = encode_batch(job(group, chunks, rules))
            wire += len(body)
        runs.append(time.process_time() - started)
    return runs, wire


def release_chunk_rows(group: str, lines: list[bytes], chunk: int, batch_chunks: int) -> dict:
    """Release-chunk rows per release: every release gathered, and the releases kept."""
    figures = {}
    for label, rules in (("all_releases", RuleSet(executable=False)), ("kept_releases", RuleSet())):
        rows, releases = 0, set()
        for chunks in as_batches(lines, chunk, batch_chunks):
            keys = digest(group, chunks, rules)["release_chunks"]["release"]
            rows += len(keys)
            releases.update(keys)
        figures[label] = round(rows / len(releases), 4) if releases else None
        figures[f"{label}_count"] = len(releases)
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lines", type=int, default=600_000, help="overview lines per group")
    parser.add_argument("--group", default="alt.binaries.test", help="the throughput group")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--chunk", type=int, default=20_000, help="article numbers per OVER chunk")
    parser.add_argument("--batch-chunks", type=int, default=10, help="chunks per batch")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs (the best counts)")
    parser.add_argument(
        "--real-posts",
        action="store_true",
        help="digest the real posts of tests/data/nzb/ (posted again and again) instead of the generator's articles",
    )
    args = parser.parse_args(argv)

    if args.real_posts:
        lines = real_post_lines(args.group, args.lines)
    else:
        lines = generated_lines(args.group, args.lines, args.seed)
    overview_bytes = sum(len(line) + 2 for line in lines)
    batches = as_batches(lines, args.chunk, args.batch_chunks)
    rules = RuleSet()
    what = "real posts" if args.real_posts else args.group
    print(
        f"{len(lines)} overview lines of {what} ({overview_bytes / len(lines):.0f} bytes each), "
        f"{len(batches)} batches of {args.batch_chunks} x {args.chunk}; compiled parts: {IMPL} (SEED_IMPL)"
    )

    runs, wire = timed_runs(digest, batches, args.group, rules, args.repeat)
    naive_runs, naive_wire = timed_runs(naive_digest, batches, args.group, rules, args.repeat)
    rate, naive_rate = len(lines) / min(runs), len(lines) / min(naive_runs)
    engines = gzip_engines(
        [msgpack.packb(digest(args.group, chunks, rules), use_bin_type=False) for chunks in batches], args.repeat
    )
    print(
        f"digest: {rate:,.0f} lines/s (best of {args.repeat}; median {len(lines) / statistics.median(runs):,.0f})"
        f", {wire:,} bytes on the wire"
    )
    print(f"naive:  {naive_rate:,.0f} lines/s (best of {args.repeat}), {naive_wire:,} bytes on the wire")
    print(
        "gzip level 1 of the packed batches: "
        + "; ".join(
            f"{name} {f['gzip_seconds']:.3f} s to write ({f['bytes']:,} bytes), {f['gunzip_seconds']:.3f} s to read"
            for name, f in engines.items()
        )
    )

    ratios = {args.group: release_chunk_rows(args.group, lines, args.chunk, args.batch_chunks)}
    per_chunk = release_chunk_rows(args.group, lines, args.chunk, 1)
    for group in RATIO_GROUPS:
        ratios[group] = release_chunk_rows(
            group, generated_lines(group, args.lines, args.seed), args.chunk, args.batch_chunks
        )
    for group, figures in ratios.items():
        print(
            f"release-chunk rows per release at {args.batch_chunks} chunks per batch, {group}: "
            f"{figures['all_releases']} for all {figures['all_releases_count']} releases, "
            f"{figures['kept_releases']} for the {figures['kept_releases_count']} kept"
        )
    print(
        json.dumps(
            {
                "lines": len(lines),
                "group": args.group,
                "real_posts": args.real_posts,
                "impl": IMPL,
                "overview_bytes": overview_bytes,
                "lines_per_second": round(rate),
                "lines_per_second_median": round(len(lines) / statistics.median(runs)),
                "naive_lines_per_second": round(naive_rate),
                "speedup": round(rate / naive_rate, 2),
                "wire_bytes": wire,
                "wire_ratio": round(wire / overview_bytes, 4),
                "chunk": args.chunk,
                "batch_chunks": args.batch_chunks,
                "gzip": engines,
                "release_chunk_rows_per_release": ratios,
                "release_chunk_rows_per_release_one_chunk_per_batch": {args.group: per_chunk},
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
