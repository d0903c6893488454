"""The `edge` program: ``edge COMMAND ...``.

Commands:
    run              the edge node (edge/node/node.py): lease ranges, fetch, digest, post batches
    parse-subjects   read subjects on stdin, print one JSON object per line with what the
                     digest reads from each (filename, part, parts, file_index, file_count, release)
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import BinaryIO, TextIO

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


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="edge", description="Edge node of the Usenet header indexer.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_run_command(commands)
    commands.add_parser(
        "parse-subjects",
        help="parse subjects read on stdin, one JSON object per line on stdout",
        description="Reads one subject per line on stdin and prints, per line, a JSON object with the "
                    "subject and its filename, part, parts, file_index, file_count and release.",
    ).set_defaults(handler=lambda args: parse_subjects(sys.stdin.buffer, sys.stdout))
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.handler(args)


if __name__ == "__main__":
    sys.exit(main())
