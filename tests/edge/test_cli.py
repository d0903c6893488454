"""The `edge` program's parse-subjects command."""

import io
import json
import subprocess
import sys

import pytest

from edge.node.cli import main

SUBJECTS = [
    '[01/12] - "Some.Release.part01.rar" yEnc (1/137)'.encode(),
    'Émile Zola - Germinal [1/2] - "Émile Zola - Germinal.epub" yEnc (3/5)'.encode("latin-1"),
    b"no counters at all",
]


def test_parse_subjects(monkeypatch, capsys):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"\n".join(SUBJECTS) + b"\n")))
    assert main(["parse-subjects"]) == 0
    rows = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert rows[0] == {
        "subject": SUBJECTS[0].decode(),
        "filename": "Some.Release.part01.rar",
        "part": 1,
        "parts": 137,
        "file_index": 1,
        "file_count": 12,
        "release": "Some.Release",
    }
    assert (rows[1]["filename"], rows[1]["release"], rows[1]["part"]) == (
        "Émile Zola - Germinal.epub",
        "Émile Zola - Germinal",
        3,
    )
    assert rows[2] == {
        "subject": "no counters at all",
        "filename": None,
        "part": None,
        "parts": None,
        "file_index": None,
        "file_count": None,
        "release": "no counters at all",
    }


def test_the_program_runs_as_a_module():
    result = subprocess.run(
        [sys.executable, "-m", "edge", "parse-subjects"], input=b"\r\n".join(SUBJECTS), capture_output=True, check=True
    )
    assert [json.loads(line)["parts"] for line in result.stdout.splitlines()] == [137, 5, None]


def test_a_command_is_required(capsys):
    with pytest.raises(SystemExit) as exit:
        main([])
    assert exit.value.code == 2 and "COMMAND" in capsys.readouterr().err


def test_the_program_starts_without_multiprocessing():
    # Only digest processes need it (DIGEST_PROCESSES, none on two cores): 11 ms of every start.
    started = subprocess.run(
        [sys.executable, "-c", "import sys, edge.node.cli; print('multiprocessing' in sys.modules)"],
        check=True,
        capture_output=True,
        text=True,
    )
    assert started.stdout.strip() == "False"
