"""The `edge` program: ``edge COMMAND ...``.

Commands:
    run              the edge node (edge/node/node.py): lease ranges, fetch, digest, post batches
    parse-subjects   read subjects on stdin, print one JSON object per line with what the
                     digest reads from each (filename, part, parts, file_index, file_count, release);
                     with --score FILE, read a corpus of subjects with what each must give (JSONL, as
                     tests/data/real_subjects.jsonl) and print how many file names, file counters and
                     segment counters the digest reads right, then the misses (--json: one object)
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable
from typing import BinaryIO, TextIO, TypedDict

from edge.node.node import add_run_command
from edge.digest.overview import decode_text
from edge.digest.subjects import parse_subject


def parse_subjects(source: BinaryIO, out: TextIO) -> int:
    """One JSON object per subject line read (8-bit subjects decoded as UTF-8, else Latin-1)."""
    for raw in source:
        subject = decode_text(raw.rstrip(b"\r\n"))
        out.write(json.dumps({"subject": subject, **parse_subject(subject)._asdict()}, ensure_ascii=False))
        out.write("\n")
    return 0


class CorpusError(ValueError):
    """A corpus that cannot be scored: a line (numbered from 1) that is not a JSON object with a subject
    and well-typed expectations, or (line None) a corpus without subjects."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message if line is None else f"line {line}: {message}")
        self.line = line
        self.message = message


# What a corpus line expects, by field group: the file name, the file counter, the segment counter.
# A field left out of a line expects none.
_SCORED = (("filename", ("filename",)), ("counter", ("file_index", "file_count")), ("segment", ("part", "parts")))


class SubjectMiss(TypedDict):
    """A field group a subject is not read as its corpus line expects (_shown: expected, got)."""

    field: str
    subject: str
    expected: object
    got: object


class SubjectScore(TypedDict):
    """score_subjects: how many subjects are read right, by field group (count and percent), and the misses."""

    total: int
    filename_right: int
    filename_pct: float
    counter_right: int
    counter_pct: float
    segment_right: int
    segment_pct: float
    misses: list[SubjectMiss]


def _expectation(record: dict[str, object], number: int) -> dict[str, tuple[object, ...]]:
    subject = record.get("subject")
    if not isinstance(subject, str) or not subject:
        raise CorpusError(number, "no subject (a non-empty string)")
    filename = record.get("filename")
    if filename is not None and not isinstance(filename, str):
        raise CorpusError(number, f"filename is {filename!r}, not a string or null")
    for field in ("file_index", "file_count", "part", "parts"):
        value = record.get(field)
        # bool is an int to Python, not a counter to a reader.
        if value is not None and (not isinstance(value, int) or isinstance(value, bool)):
            raise CorpusError(number, f"{field} is {value!r}, not an integer or null")
    return {group: tuple(record.get(field) for field in fields) for group, fields in _SCORED}


def _shown(group: str, value: tuple[object, ...]) -> object:
    """A field group's value as a miss shows it: the file name, [index, count], or None."""
    if group == "filename":
        return value[0]
    return None if value == (None, None) else list(value)


def score_subjects(lines: Iterable[str | bytes]) -> SubjectScore:
    """How many subjects of a corpus (JSONL lines) the digest reads as they expect: file names (exact),
    file counters (file_index and file_count) and segment counters (part and parts), with the misses.

    Blank lines are skipped; a line that is not a JSON object with a subject raises CorpusError."""
    total = 0
    right = {group: 0 for group, _ in _SCORED}
    misses: list[SubjectMiss] = []
    for number, line in enumerate(lines, 1):
        if isinstance(line, bytes):
            try:
                line = line.decode("utf-8")
            except UnicodeDecodeError as error:
                raise CorpusError(number, f"not UTF-8 ({error.reason} at byte {error.start})") from None
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except ValueError as error:
            raise CorpusError(number, f"not JSON ({error})") from None
        if not isinstance(record, dict):
            raise CorpusError(number, "not a JSON object")
        expected = _expectation(record, number)
        parsed = parse_subject(record["subject"])
        got = {group: tuple(getattr(parsed, field) for field in fields) for group, fields in _SCORED}
        total += 1
        for group, _ in _SCORED:
            if got[group] == expected[group]:
                right[group] += 1
            else:
                misses.append(
                    {
                        "field": group,
                        "subject": record["subject"],
                        "expected": _shown(group, expected[group]),
                        "got": _shown(group, got[group]),
                    }
                )
    if total == 0:
        raise CorpusError(None, "no subjects")

    def percent(count: int) -> float:
        return round(100 * count / total, 2)

    return {
        "total": total,
        "filename_right": right["filename"],
        "filename_pct": percent(right["filename"]),
        "counter_right": right["counter"],
        "counter_pct": percent(right["counter"]),
        "segment_right": right["segment"],
        "segment_pct": percent(right["segment"]),
        "misses": misses,
    }


def _value_text(value: object) -> str:
    if value is None:
        return "none"
    if isinstance(value, list):
        return "/".join("?" if part is None else str(part) for part in value)
    return json.dumps(value, ensure_ascii=False)  # quoted, so spaces and control characters show


def score_corpus(path: str, as_json: bool, out: TextIO, err: TextIO) -> int:
    """`edge parse-subjects --score FILE`: the score of the corpus in FILE, in text or as one JSON object."""
    try:
        with open(path, "rb") as corpus:
            score = score_subjects(corpus)
    except OSError as error:
        err.write(f"edge parse-subjects: cannot read {path}: {error.strerror}\n")
        return 2
    except CorpusError as error:
        where = path if error.line is None else f"{path} line {error.line}"
        err.write(f"edge parse-subjects: {where}: {error.message}\n")
        return 2
    if as_json:
        out.write(json.dumps(score, ensure_ascii=False) + "\n")
        return 0
    total = score["total"]
    out.write(f"{total} subjects in {path}\n")
    for label, right, pct in (
        ("file names", score["filename_right"], score["filename_pct"]),
        ("file counters", score["counter_right"], score["counter_pct"]),
        ("segment counters", score["segment_right"], score["segment_pct"]),
    ):
        out.write(f"{label:<18}{right:>6}/{total}  {pct:6.2f}%\n")
    misses = score["misses"]
    out.write(f"misses: {len(misses)}\n")
    for miss in misses:
        out.write(
            f"{miss['field']}\t{json.dumps(miss['subject'], ensure_ascii=False)}"
            f"\texpected {_value_text(miss['expected'])}\tgot {_value_text(miss['got'])}\n"
        )
    return 0


def _parse_subjects_command(args: argparse.Namespace) -> int:
    if args.score is None:
        return parse_subjects(sys.stdin.buffer, sys.stdout)
    return score_corpus(args.score, args.json, sys.stdout, sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edge", description="Edge node of the Usenet header indexer.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_run_command(commands)
    parse = commands.add_parser(
        "parse-subjects",
        help="parse subjects read on stdin, one JSON object per line on stdout",
        description="Reads one subject per line on stdin and prints, per line, a JSON object with the "
        "subject and its filename, part, parts, file_index, file_count and release. "
        "With --score FILE, reads a corpus instead and prints how many subjects are read right.",
    )
    parse.add_argument(
        "--score",
        metavar="FILE",
        help="a corpus of subjects, one JSON object a line with the subject and the filename, "
        "file_index, file_count, part and parts it must give: print how many file names, "
        "file counters and segment counters are read right, then the misses",
    )
    parse.add_argument("--json", action="store_true", help="with --score: print the score as one JSON object")
    parse.set_defaults(handler=_parse_subjects_command)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "json", False) and args.score is None:
        parser.error("--json goes with --score FILE")
    handler: Callable[[argparse.Namespace], int] = args.handler  # what each command's set_defaults gave
    return handler(args)


if __name__ == "__main__":
    sys.exit(main())
