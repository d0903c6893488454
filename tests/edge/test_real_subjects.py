"""The subject parser scored on real Usenet subjects (tests/data/real_subjects.jsonl), and the
`edge parse-subjects --score` command that prints the same score.

Each corpus line is a subject quoted verbatim by a public source (cited in `source`) with what a
person reads in it: the file name, the file counter and the segment counter. The score comes from
the same function as the command's, so the test and `edge parse-subjects --score` agree.
"""

import json
from pathlib import Path

import pytest

from edge.node.cli import CorpusError, main, score_subjects

CORPUS = Path(__file__).resolve().parents[1] / "data" / "real_subjects.jsonl"
FIELDS = {"subject", "filename", "file_index", "file_count", "part", "parts", "source"}
# The acceptance of issue 24: at least this share of file names and of file counters read right.
REQUIRED_PCT = 98


def corpus_lines() -> list[str]:
    return CORPUS.read_text("utf-8").splitlines()


def misses_text(score: dict, field: str) -> str:
    lines = [
        f"  {json.dumps(miss['subject'], ensure_ascii=False)}: expected {miss['expected']!r}, got {miss['got']!r}"
        for miss in score["misses"]
        if miss["field"] == field
    ]
    return "\n".join(lines)


def test_the_corpus_is_well_formed():
    subjects = set()
    for number, line in enumerate(corpus_lines(), 1):
        record = json.loads(line)
        assert isinstance(record, dict) and set(record) == FIELDS, f"line {number}: {sorted(record)}"
        assert isinstance(record["subject"], str) and record["subject"].strip(), f"line {number}"
        assert record["subject"] not in subjects, f"line {number} repeats a subject"
        subjects.add(record["subject"])
        assert record["filename"] is None or (isinstance(record["filename"], str) and record["filename"])
        for index, count in (("file_index", "file_count"), ("part", "parts")):
            pair = (record[index], record[count])
            # A counter is read whole or not at all.
            assert pair == (None, None) or all(type(value) is int and value >= 0 for value in pair), (
                f"line {number}: {index}/{count} {pair}"
            )
        assert isinstance(record["source"], str) and record["source"].strip(), f"line {number} cites no source"
    assert len(subjects) >= 300


def test_the_corpus_cites_its_sources_precisely():
    # A repository file is cited as owner/repo:path@commit, anything else by its address or the issue.
    for number, line in enumerate(corpus_lines(), 1):
        source = json.loads(line)["source"]
        assert (
            source.startswith("https://")
            or source == "issue 24"
            or (":" in source and "@" in source.rpartition(":")[2])
        ), f"line {number}: {source}"


@pytest.fixture(scope="module")
def score() -> dict:
    return score_subjects(corpus_lines())


def test_file_names_of_real_subjects(score):
    # Compared on the counts: the rounded percentage could pass a share just under the bar.
    assert score["filename_right"] * 100 >= REQUIRED_PCT * score["total"], (
        f"file names {score['filename_right']}/{score['total']} ({score['filename_pct']}%) are right, "
        f"{REQUIRED_PCT}% must be; the misses:\n" + misses_text(score, "filename")
    )


def test_file_counters_of_real_subjects(score):
    assert score["counter_right"] * 100 >= REQUIRED_PCT * score["total"], (
        f"file counters {score['counter_right']}/{score['total']} ({score['counter_pct']}%) are right, "
        f"{REQUIRED_PCT}% must be; the misses:\n" + misses_text(score, "counter")
    )


# A small corpus for the command: the first line expects what the digest reads, the second a
# wrong file name, the third a wrong file counter and a wrong segment counter.
RIGHT = {
    "subject": '[01/12] - "Some.Release.part01.rar" yEnc (1/137)',
    "filename": "Some.Release.part01.rar",
    "file_index": 1,
    "file_count": 12,
    "part": 1,
    "parts": 137,
    "source": "tests/edge/test_cli.py",
}
WRONG_NAME = {
    "subject": '"b2d3075d94af88c6742b1fdfc34b225e.10" yEnc (1/20)',
    "filename": "not.this.name",
    "file_index": None,
    "file_count": None,
    "part": 1,
    "parts": 20,
    "source": "issue 24",
}
WRONG_COUNTERS = {
    "subject": '[02/12] - "Some.Release.part02.rar" yEnc (5/137)',
    "filename": "Some.Release.part02.rar",
    "file_index": 3,
    "file_count": 12,
    "part": None,
    "parts": None,
    "source": "made here",
}


def write_corpus(path: Path, lines: list[str]) -> str:
    path.write_text("".join(line + "\n" for line in lines), "utf-8")
    return str(path)


@pytest.fixture
def small_corpus(tmp_path) -> str:
    # A blank line in the middle is skipped, not counted.
    return write_corpus(
        tmp_path / "corpus.jsonl", [json.dumps(RIGHT), "", json.dumps(WRONG_NAME), json.dumps(WRONG_COUNTERS)]
    )


def test_score_in_text(small_corpus, capsys):
    assert main(["parse-subjects", "--score", small_corpus]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == f"3 subjects in {small_corpus}"
    assert out[1].split() == ["file", "names", "2/3", "66.67%"]
    assert out[2].split() == ["file", "counters", "2/3", "66.67%"]
    assert out[3].split() == ["segment", "counters", "2/3", "66.67%"]
    assert out[4] == "misses: 3"
    assert out[5:] == [
        'filename\t"\\"b2d3075d94af88c6742b1fdfc34b225e.10\\" yEnc (1/20)"\texpected "not.this.name"'
        '\tgot "b2d3075d94af88c6742b1fdfc34b225e.10"',
        'counter\t"[02/12] - \\"Some.Release.part02.rar\\" yEnc (5/137)"\texpected 3/12\tgot 2/12',
        'segment\t"[02/12] - \\"Some.Release.part02.rar\\" yEnc (5/137)"\texpected none\tgot 5/137',
    ]


def test_score_as_json(small_corpus, capsys):
    assert main(["parse-subjects", "--score", small_corpus, "--json"]) == 0
    score = json.loads(capsys.readouterr().out)
    assert score == {
        "total": 3,
        "filename_right": 2,
        "filename_pct": 66.67,
        "counter_right": 2,
        "counter_pct": 66.67,
        "segment_right": 2,
        "segment_pct": 66.67,
        "misses": [
            {
                "field": "filename",
                "subject": WRONG_NAME["subject"],
                "expected": "not.this.name",
                "got": "b2d3075d94af88c6742b1fdfc34b225e.10",
            },
            {"field": "counter", "subject": WRONG_COUNTERS["subject"], "expected": [3, 12], "got": [2, 12]},
            {"field": "segment", "subject": WRONG_COUNTERS["subject"], "expected": None, "got": [5, 137]},
        ],
    }


def test_the_command_prints_what_the_test_computes(capsys):
    assert main(["parse-subjects", "--score", str(CORPUS), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == score_subjects(corpus_lines())


@pytest.mark.parametrize(
    "bad, message",
    [
        ("{not json", "not JSON"),
        (json.dumps({"filename": "a.rar"}), "no subject"),
        (json.dumps(["a list"]), "not a JSON object"),
        (json.dumps({"subject": "x.rar (1/2)", "file_index": "1"}), "file_index is '1'"),
    ],
)
def test_a_bad_corpus_line_is_named(tmp_path, capsys, bad, message):
    path = write_corpus(tmp_path / "bad.jsonl", [json.dumps(RIGHT), bad, json.dumps(RIGHT)])
    assert main(["parse-subjects", "--score", path]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"edge parse-subjects: {path} line 2: {message}")
    assert "Traceback" not in captured.err


def test_a_corpus_line_not_in_utf8_is_named(tmp_path, capsys):
    path = tmp_path / "latin1.jsonl"
    path.write_bytes(json.dumps(RIGHT).encode() + b"\n" + '{"subject": "Émile"}'.encode("latin-1") + b"\n")
    assert main(["parse-subjects", "--score", str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"edge parse-subjects: {path} line 2: not UTF-8")


def test_an_empty_or_missing_corpus_is_an_error(tmp_path, capsys):
    empty = write_corpus(tmp_path / "empty.jsonl", [""])
    assert main(["parse-subjects", "--score", empty]) == 2
    assert capsys.readouterr().err == f"edge parse-subjects: {empty}: no subjects\n"
    missing = str(tmp_path / "missing.jsonl")
    assert main(["parse-subjects", "--score", missing]) == 2
    assert capsys.readouterr().err.startswith(f"edge parse-subjects: cannot read {missing}")


def test_score_subjects_raises_with_the_line_number():
    with pytest.raises(CorpusError) as error:
        score_subjects([json.dumps(RIGHT), "[1, 2"])
    assert error.value.line == 2


def test_json_needs_score(capsys):
    with pytest.raises(SystemExit) as exit:
        main(["parse-subjects", "--json"])
    assert exit.value.code == 2 and "--json goes with --score" in capsys.readouterr().err
