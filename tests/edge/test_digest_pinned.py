"""The digest's output pinned byte for byte: for fixed inputs, the batches Gatherer.build() returns
(every table, column and value, in their order, but what the releases' names say) hash to the
values below.

The digest is tuned for speed; this proves a change leaves its results identical. A change that
should alter batches (a format change) updates these hashes on purpose, with the format's
version and docs/batch-format.md. Files, releases and release chunks come in key order; the data
center stores them in that order whatever order they come in, so this is version 1 of the format.
"""

import hashlib
import json
from functools import cache
from pathlib import Path

import msgpack
import pytest

from edge.digest.gather import Gatherer
from edge.digest.overview import OverviewLayout
from edge.digest.rules import RuleSet
from simnews.generator import Config, generate
from simnews.scripted import INN_OVERVIEW_FORMAT, overview_lines
from tests.edge.helpers import overview_line

FIRST = 6_000_000_001
LAYOUT = OverviewLayout.from_format(INN_OVERVIEW_FORMAT)
OPERATOR_RULES = [
    {"name": "no-anonymous", "field": "poster", "pattern": r"anonymous@", "action": "drop"},
    {"name": "keep-reacher", "field": "subject", "pattern": r"reacher", "action": "keep"},
    {"name": "no-sfv", "field": "subject", "pattern": r"\.sfv\"", "action": "drop", "groups": "alt.binaries.*"},
    {"name": "mid", "field": "message_id", "pattern": r"^<part1of1\.1\$", "action": "drop"},
    {"name": "elsewhere", "field": "subject", "pattern": ".", "action": "drop", "groups": "alt.other.*"},
]
RULES = {
    "executable": lambda: RuleSet(),
    "none": lambda: RuleSet(executable=False),
    "operator": lambda: RuleSet.from_data(OPERATOR_RULES),
    "operator-only": lambda: RuleSet.from_data(OPERATOR_RULES, executable=False),
}


@cache
def generated(group: str, count: int, seed: int, lost_rate: float = 0.0) -> tuple[bytes, ...]:
    config = Config(seed=seed, groups=(group,), lost_rate=lost_rate)
    return tuple(overview_lines(generate(count, config), group, FIRST))


@cache
def odd_lines() -> tuple[bytes, ...]:
    """Real subjects, 8-bit text, odd dates and counters, and lines every reject reason catches."""
    real = [
        json.loads(line)["subject"]
        for line in (Path(__file__).parent / "data" / "real_subjects.jsonl").read_text("utf-8").splitlines()
    ]
    subjects = real + [
        "A text post (no counter)",
        '"x.rar" yEnc (2/3) (by someone)',
        '"x.rar" yEnc (3/3) (by someone)',
        "(1/2)",
        "",
        "(",
        "((1/2)",
        "x (1/2)(3/4)",
        'Re: "a.exe" yEnc (1/1)',
        '"b.exe" yEnc ( 1 / 2 )',
        '"c.nfo" yEnc (1/1)',
        'Émile Zola - Germinal [1/1] - "Émile Zola - Germinal.epub" yEnc (1/1)'.encode("latin-1"),
        'Café [2/3] - "Café.part2.rar" yEnc (1/9)',
        '[1/3] - "d.exe" yEnc (1/1)',
        '[2/3] - "d.par2" yEnc (1/1)',
        'File 3 of 12: "name.epub" yEnc (1/5)',
        '"e.exe" yEnc (1/1) 12,5 MB',
        '(3/12) "name.r01" - 12,34 MB - yEnc (1/50)',
    ]
    dates = [
        b"Sat, 01 Nov 2025 07:27:27 +0000",
        b"1 Nov 2025 07:27:27 -0130",
        b"not a date",
        b"",
        b"Sat, 01 Nov 2025 07:27 GMT",
        b"Sat, 01 Nov 2025 07:27:27 +0000 (UTC)",
        b"Mon, 31 Feb 2025 00:00:00 +0000",
    ]
    posters = [
        b"Poster <p@example.net>",
        "Bibliothécaire <b@x>".encode(),
        "Bibliothécaire <b@x>".encode("latin-1"),
        b"anonymous@x",
        b"",
    ]
    lines, number = [], FIRST
    for round_ in range(3):
        for index, subject in enumerate(subjects):
            if isinstance(subject, str):
                subject = subject.encode()
            message_id = b"<m%d.%d@x>" % (round_, index)
            if index % 11 == 0:
                message_id = "<é%d.%d@x>".encode("latin-1") % (round_, index)
            lines.append(
                overview_line(
                    number,
                    subject,
                    poster=posters[(index + round_) % len(posters)],
                    date=dates[(index * 3 + round_) % len(dates)],
                    message_id=message_id,
                    size=1000 + index,
                )
            )
            number += 1 + (index % 7 == 0)
    lines[5:5] = [
        b"garbage",
        overview_line(number + 10**6),
        overview_line(FIRST + 3, message_id=b""),
        overview_line(FIRST + 4).replace(b"Poster", b"Pos\0ter"),
        b"12x\tsubject\tp\td\t<m@x>\t\t5\t1\tx",
        b"%d\ts\tp\td\t<big@x>\t\t%d\t1\tx" % (FIRST + 5, 2**63),
        overview_line(FIRST + 6, b"w " * 1100),
        overview_line(FIRST + 7, poster=b"p" * 2049),
        overview_line(FIRST + 8, message_id=b"<" + b"m" * 250 + b"@x>"),
        overview_line(FIRST + 9, b"s" * 20_000)[: 16 * 1024],
    ]
    lines.append(overview_line(FIRST + 1, '"late.rar" yEnc (1/1)'))  # out of order, a number again
    return tuple(lines)


def batch_hashes(lines, group, rules, chunk, per_batch, block_lines) -> list[str]:
    """Batches of per_batch chunks of chunk lines numbered from FIRST, each chunk in blocks of
    block_lines lines; a short hash of each batch's msgpack (bytes and str told apart)."""
    hashes = []
    for batch_start in range(0, len(lines), chunk * per_batch):
        gatherer = Gatherer(group, LAYOUT, rules)
        for start in range(batch_start, min(len(lines), batch_start + chunk * per_batch), chunk):
            chunk_lines = lines[start : start + chunk]
            blocks = [
                b"".join(line + b"\r\n" for line in chunk_lines[at : at + block_lines])
                for at in range(0, len(chunk_lines), block_lines)
            ]
            gatherer.add_chunk(FIRST + start, FIRST + start + chunk - 1, blocks)
        batch = dict(gatherer.build())
        # What the names say is the name parser's, tested with it (tests/app/test_names.py) and
        # with the batch (tests/edge/test_gather.py): its changes are not the digest's.
        del batch["release_names"]
        hashes.append(hashlib.sha256(msgpack.packb(batch, use_bin_type=True)).hexdigest()[:16])
    return hashes


def generated_cases():
    for group in ("alt.binaries.test", "alt.binaries.e-book.french", "alt.binaries.cd.image.playstation2.dvdiso"):
        for rules in RULES:
            yield group, rules


EXPECTED_GENERATED: dict[tuple[str, str], list[str]] = {
    ("alt.binaries.test", "executable"): ["daea72dc8a17e676", "a0210f910eac83dd"],
    ("alt.binaries.test", "none"): ["0f11e674ca27452b", "2585ea20413c83f0"],
    ("alt.binaries.test", "operator"): ["1d237043d82b0138", "e78d7f6388501a76"],
    ("alt.binaries.test", "operator-only"): ["c8c29d597cf3de43", "14e9243ad83cb777"],
    ("alt.binaries.e-book.french", "executable"): ["d55ab75700a44c26", "e96318632a7beff1"],
    ("alt.binaries.e-book.french", "none"): ["62a15dc84bb82b37", "07ad079d0ae756b6"],
    ("alt.binaries.e-book.french", "operator"): ["9b85c21ae83f29e5", "72eda13b08e2425b"],
    ("alt.binaries.e-book.french", "operator-only"): ["5ad76645e0c37dd1", "3cc3e274f22379c6"],
    ("alt.binaries.cd.image.playstation2.dvdiso", "executable"): ["e35210e3a41854b1", "45a4461dbeb2fa67"],
    ("alt.binaries.cd.image.playstation2.dvdiso", "none"): ["c846596ec45af790", "5ac996ad44f900f4"],
    ("alt.binaries.cd.image.playstation2.dvdiso", "operator"): ["7914e8d310987f83", "7b8745f5f7764e36"],
    ("alt.binaries.cd.image.playstation2.dvdiso", "operator-only"): ["d78ac2a9e9f62da4", "c970d850e585f95d"],
}
EXPECTED_ODD: dict[str, list[str]] = {
    "executable": ["e493c6c1273edad5"],
    "none": ["97be8129ef3c762a"],
    "operator": ["9d8a99364a5d2688"],
    "operator-only": ["4577cd4dc2714d59"],
}


@pytest.mark.parametrize("group,rules", list(generated_cases()))
def test_generated_batches_are_pinned(group, rules):
    lines = generated(group, 12_000, 3, 0.02)
    got = batch_hashes(lines, group, RULES[rules](), chunk=1500, per_batch=4, block_lines=700)
    assert got == EXPECTED_GENERATED[(group, rules)]


@pytest.mark.parametrize("rules", list(RULES))
def test_odd_batches_are_pinned(rules):
    lines = odd_lines()
    got = batch_hashes(lines, "alt.binaries.test", RULES[rules](), chunk=len(lines) + 20, per_batch=1, block_lines=9)
    assert got == EXPECTED_ODD[rules]
