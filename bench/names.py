"""The release-name parser (edge.digest.names): its speed on one core and its accuracy on a set
of real names with their expected fields.

    .venv/bin/python bench/names.py [--data tests/data/names/dev.jsonl] [--seconds 3] [--misses] [--json]
    .venv/bin/python bench/names.py --data SET.jsonl --records OUT.jsonl   # score the command's output

The set is JSON lines as tests/data/names/README.md describes ({"name", "expect": {...}}).

Accuracy: every field the set states (a null is not stated, so not scored) is compared with the
parse (score() below): the share of stated fields right, overall and per field, and of the
stated categories the share whose parent is right (overall and per parent). --misses lists
each field missed. With --records, the records scored are those `flask seed names parse --json`
printed for the set's names (one a line, in order), as a set kept elsewhere is scored:

    .venv/bin/python -c 'import json, sys; [print(json.loads(l)["name"]) for l in sys.stdin]' < SET.jsonl \
        | FLASK_APP=wsgi .venv/bin/flask seed names parse --json > OUT.jsonl

Speed (speed() below): the set's names parsed over and over in this one process, in CPU time
(one core; what other processes take is not counted), best and median of five rounds: the
parse with its word cache warm, the parse with the cache cleared before each pass, and the
parse with the category. A human summary comes first; the last line is JSON with every figure
and whether the goals of issue 33 are met (>= 95% of the stated fields right, >= 97% of the
stated categories' parents right, >= 20,000 names a second with the category, median round).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from edge.digest import names  # noqa: E402  (after the path: run as a script from anywhere)
from edge.digest.categories import category_of  # noqa: E402

DEV_SET = REPO / "tests" / "data" / "names" / "dev.jsonl"
FIELDS_GOAL = 0.95
PARENT_GOAL = 0.97
SPEED_GOAL = 20_000
# The sources the parser folds to; a set's finer ones fold the same way, and one that is none of
# these (cam, telesync) is expected as null.
_SOURCE_FOLD = {"web-dl": "web", "webrip": "web", "web": "web", "hdtv": "hdtv", "bluray": "bluray", "dvd": "dvd"}


def load(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as lines:
        return [json.loads(line) for line in lines if line.strip()]


def folded_title(title: str) -> str:
    """A title as compared: no case, no accents, no punctuation (letters and digits only)."""
    decomposed = unicodedata.normalize("NFKD", title)
    return "".join(c for c in decomposed.casefold() if c.isalnum() and not unicodedata.combining(c))


def _expected(field: str, value: Any) -> Any:
    if field == "source":
        return _SOURCE_FOLD.get(value)
    if field in ("title", "artist", "album", "author"):
        return folded_title(value)
    return value


def _got(field: str, value: Any) -> Any:
    if field in ("title", "artist", "album", "author"):
        return folded_title(value) if value else None
    if field in ("episodes", "absolute") and value is not None:
        return list(value)
    return value


def score(rows: list[dict[str, Any]], records: list[dict[str, Any]]) -> dict[str, Any]:
    """Compare records (one a row, in order, as `flask seed names parse --json` prints them) with
    the rows' stated fields: the share right overall and per field, and of stated categories the
    share whose parent is right (overall and per parent). Misses are listed."""
    if len(rows) != len(records):
        raise ValueError(f"{len(rows)} names but {len(records)} records")
    stated: Counter[str] = Counter()
    right: Counter[str] = Counter()
    parents_stated: Counter[int] = Counter()
    parents_right: Counter[int] = Counter()
    misses = []
    for row, record in zip(rows, records):
        for field, value in row["expect"].items():
            if value is None:
                continue
            stated[field] += 1
            want, got = _expected(field, value), _got(field, record.get(field))
            if want == got:
                right[field] += 1
            else:
                misses.append({"name": row["name"], "field": field, "expected": value, "got": record.get(field)})
            if field == "category":
                parent = value // 1000 * 1000
                parents_stated[parent] += 1
                if isinstance(record.get("category"), int) and record["category"] // 1000 * 1000 == parent:
                    parents_right[parent] += 1
    total_stated, total_right = sum(stated.values()), sum(right.values())
    all_parents = sum(parents_stated.values())
    return {
        "names": len(rows),
        "fields_stated": total_stated,
        "fields_right": total_right,
        "fields_share": total_right / total_stated if total_stated else 1.0,
        "per_field": {
            f: {"stated": stated[f], "right": right[f], "share": right[f] / stated[f]} for f in sorted(stated)
        },
        "parents_stated": all_parents,
        "parents_right": sum(parents_right.values()),
        "parents_share": sum(parents_right.values()) / all_parents if all_parents else 1.0,
        "per_parent": {
            str(p): {
                "stated": parents_stated[p],
                "right": parents_right[p],
                "share": parents_right[p] / parents_stated[p],
            }
            for p in sorted(parents_stated)
        },
        "misses": misses,
    }


def records_of(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """What `flask seed names parse --json` prints for each row's name (no group: the name alone)."""
    return [names.record(row["name"]) for row in rows]


def speed(all_names: list[str], seconds: float, rounds: int = 5) -> dict[str, float]:
    """Names a second on this one core (CPU time: what other processes take is not counted), in
    rounds of whole passes over the names, each round at least seconds / rounds; the best round
    and the median one. Three ways: the parse with its word cache warm (as it runs on a stream
    of names: edge.digest.names keeps the readings of 50,000 words), the parse with the cache
    cleared before each pass (every word of the set read afresh once a pass), and the parse with
    the category (what `flask seed names parse` computes for each name), cache warm."""

    def parse_cold(batch: list[str]) -> None:
        names.clear_caches()
        for name in batch:
            names.parse(name)

    def parse_warm(batch: list[str]) -> None:
        for name in batch:
            names.parse(name)

    def with_category(batch: list[str]) -> None:
        for name in batch:
            category_of(names.parse(name))

    figures = {}
    for label, work in (("parse", parse_warm), ("parse_cold_cache", parse_cold), ("parse_and_category", with_category)):
        work(all_names)  # warm: the cache, and the interpreter's specialised code
        rates = []
        for _ in range(rounds):
            done = 0
            started = time.process_time()
            while time.process_time() - started < seconds / rounds or not done:
                work(all_names)
                done += len(all_names)
            rates.append(done / (time.process_time() - started))
        rates.sort()
        figures[f"{label}_per_second"] = rates[-1]
        figures[f"{label}_per_second_median"] = rates[len(rates) // 2]
    return figures


def shown_path(path: Path) -> str:
    """A path as the command line would give it: from the repository when inside it."""
    resolved = path.resolve()
    return str(resolved.relative_to(REPO)) if resolved.is_relative_to(REPO) else str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEV_SET, help="JSON lines of names and expected fields")
    parser.add_argument("--seconds", type=float, default=3.0, help="time each speed measure this long")
    parser.add_argument("--records", type=Path, help="score these records (the command's --json output) instead")
    parser.add_argument("--misses", action="store_true", help="list every field missed")
    parser.add_argument("--json", action="store_true", help="print only the JSON line")
    args = parser.parse_args(argv)
    rows = load(args.data)
    records = load(args.records) if args.records else records_of(rows)
    figures = score(rows, records)
    misses = figures.pop("misses")
    figures["speed"] = speed([row["name"] for row in rows], args.seconds)
    figures["data"] = shown_path(args.data)
    figures["goals"] = {
        "fields_share>=0.95": figures["fields_share"] >= FIELDS_GOAL,
        "parents_share>=0.97": figures["parents_share"] >= PARENT_GOAL,
        "names_per_second>=20000": figures["speed"]["parse_and_category_per_second_median"] >= SPEED_GOAL,
    }
    if not args.json:
        print(
            f"command: .venv/bin/python bench/names.py --data {shown_path(args.data)} --seconds {args.seconds:g}"
            + (f" --records {shown_path(args.records)}" if args.records else "")
        )
        print(
            f"{figures['names']} names; stated fields right: {figures['fields_right']}/{figures['fields_stated']}"
            f" ({figures['fields_share']:.1%}); category parents right: {figures['parents_right']}/"
            f"{figures['parents_stated']} ({figures['parents_share']:.1%})"
        )
        for field, counts in figures["per_field"].items():
            print(f"  {field:<11} {counts['right']:>4}/{counts['stated']:<4} {counts['share']:.1%}")
        for parent, counts in figures["per_parent"].items():
            print(f"  parent {parent}: {counts['right']}/{counts['stated']} ({counts['share']:.1%})")
        for label, text in (
            ("parse", "parsed (word cache warm)"),
            ("parse_cold_cache", "parsed (cache cleared each pass)"),
            ("parse_and_category", "parsed with the category"),
        ):
            print(
                f"speed, one core: {figures['speed'][label + '_per_second_median']:>9,.0f} names/s median,"
                f" {figures['speed'][label + '_per_second']:>9,.0f} best: {text}"
            )
        if args.misses:
            for miss in misses:
                print(f"  miss {miss['field']}: {miss['name']!r} expected {miss['expected']!r} got {miss['got']!r}")
    print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())
