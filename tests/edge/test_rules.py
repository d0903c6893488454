"""Rules: the executable rule and operator rules given as data, decided per file."""

from types import SimpleNamespace

import pytest

from edge.digest.rules import EXECUTABLE_RULE, KEPT, Rule, RuleError, RuleSet, is_bare_executable_set


def file(name, subject="s", poster="p <p@x>", message_id="<m@x>"):
    return SimpleNamespace(filename=name, subject=subject, poster=poster, message_id=message_id)


@pytest.mark.parametrize(
    ("names", "bare"),
    [
        (["Movie.2024.exe"], True),
        (["Movie.2024.exe", "Movie.2024.par2", "Movie.2024.vol00+01.par2", "Movie.2024.nfo"], True),
        (["setup.SCR"], True),
        (["a.bat", "b.msi", "c.com"], True),
        (["Soft.part01.rar", "Soft.part02.rar", "setup.exe"], False),  # inside an archive set
        (["Movie.mkv", "Movie.exe"], False),
        (["Movie.par2"], False),
        ([None], False),
        ([], False),
    ],
)
def test_bare_executables(names, bare):
    assert is_bare_executable_set(names) is bare


def test_executable_rule_drops_the_whole_release():
    rules = RuleSet()
    decisions = rules.decide(
        "alt.binaries.test",
        [
            [file("X.exe"), file("X.par2")],
            [file("Y.part1.rar"), file("Y.exe")],
        ],
    )
    assert decisions == [[EXECUTABLE_RULE, EXECUTABLE_RULE], [KEPT, KEPT]]
    assert RuleSet(executable=False).decide("g", [[file("X.exe")]]) == [[KEPT]]
    assert rules.names() == ["", "executable"]


def test_operator_rules_first_match_decides():
    rules = RuleSet.from_data(
        [
            {"name": "trusted", "field": "poster", "pattern": r"^good@", "action": "keep"},
            {"name": "spam", "field": "subject", "pattern": "casino", "action": "drop"},
            {"name": "bad-host", "field": "message_id", "pattern": r"@spam\.invalid>$"},
            {"name": "ebooks-only", "field": "subject", "pattern": ".", "groups": "alt.binaries.e-book.*"},
        ]
    )
    files = [
        file("a.rar", subject="CASINO bonus"),
        file("b.rar", subject="casino", poster="good@x"),
        file("c.rar", message_id="<1@spam.invalid>"),
        file("d.rar"),
    ]
    assert rules.decide("alt.binaries.test", [files]) == [["spam", KEPT, "bad-host", KEPT]]
    assert rules.decide("alt.binaries.e-book.french", [[file("e.rar")]]) == [["ebooks-only"]]
    assert rules.names() == ["", "trusted", "spam", "bad-host", "ebooks-only", "executable"]


def test_a_kept_file_is_protected_from_the_executable_rule():
    rules = RuleSet.from_data([{"name": "mine", "field": "poster", "pattern": "me@", "action": "keep"}])
    assert rules.decide("g", [[file("tool.exe", poster="me@x")], [file("tool.exe")]]) == [[KEPT], [EXECUTABLE_RULE]]


def test_operator_drops_are_seen_before_the_executable_check():
    rules = RuleSet.from_data([{"name": "no-rar", "field": "subject", "pattern": r"\.rar"}])
    decisions = rules.decide("g", [[file("a.rar", subject="a.rar"), file("a.exe", subject="a.exe")]])
    assert decisions == [["no-rar", EXECUTABLE_RULE]]


@pytest.mark.parametrize(
    "data",
    [
        "not a map",
        {"field": "subject", "pattern": "x"},
        {"name": "", "field": "subject", "pattern": "x"},
        {"name": "executable", "field": "subject", "pattern": "x"},
        {"name": "r", "field": "body", "pattern": "x"},
        {"name": "r", "field": "subject", "pattern": "(", "action": "drop"},
        {"name": "r", "field": "subject", "pattern": "x", "action": "ban"},
        {"name": "r", "field": "subject", "pattern": "x", "groups": 5},
    ],
)
def test_bad_rules_are_refused(data):
    with pytest.raises(RuleError):
        Rule.from_data(data)


def test_rule_names_are_unique():
    with pytest.raises(RuleError, match="unique"):
        RuleSet.from_data([{"name": "r", "field": "subject", "pattern": "a"}] * 2)
