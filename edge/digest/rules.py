"""Rules that drop files and releases from a batch, evaluated once per file after gathering.

Operator rules are data (the coordinator hands them out with a lease)::

    {"name": "no-spammer", "field": "poster", "pattern": "spam@example\\.com",
     "action": "drop", "groups": "alt.binaries.*"}

``field`` is ``subject`` (the file's subject without its segment counter), ``poster`` or
``message_id`` (the first fragment's); ``pattern`` is a Python regex searched case-insensitively;
``action`` is ``drop`` or ``keep``; ``groups`` (optional) is a glob the group must match.

Evaluation, per batch:

1. each file is matched against the operator rules in order; the first rule that matches decides:
   ``drop`` drops the file, ``keep`` protects it from every later rule;
2. the executable rule (named ``executable``, on unless turned off) drops the release files left
   when they are bare executables (.exe, .scr, .com, .bat, .msi, ...): the release's remaining
   files are all executables or metadata (par2, nfo, sfv, ...), with no archive or media file
   beside them. Protected files stay;
3. the rest is kept.

Counts per rule are ``[releases, files, fragments, bytes]``: a release counts for a rule when the
rule dropped at least one of its files, and for ``''`` (kept) when at least one file stayed.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from itertools import compress
from typing import Protocol

EXECUTABLE_RULE = "executable"
KEPT = ""

EXECUTABLE_EXTENSIONS = frozenset("exe scr com bat cmd msi pif vbs vbe js jse wsf wsh hta cpl lnk jar ps1 apk".split())
# Files that travel with any posting and say nothing about what it is.
METADATA_EXTENSIONS = frozenset("par2 par nfo sfv md5 sha1 sha256 nzb srr txt diz url jpg jpeg png gif".split())
_PAR_VOLUME = re.compile(r"p\d{2}")

FIELDS = ("subject", "poster", "message_id")
ACTIONS = ("drop", "keep")


class RuleError(ValueError):
    """A rule given as data is not valid."""


class RuleFile(Protocol):
    """What the rules look at in a gathered file (the executable rule reads only the filename)."""

    @property
    def filename(self) -> str | None: ...
    @property
    def subject(self) -> str: ...
    @property
    def poster(self) -> str: ...
    @property
    def message_id(self) -> str: ...


@dataclass(frozen=True)
class Rule:
    name: str
    field: str
    pattern: re.Pattern[str]
    action: str
    groups: str | None = None

    @classmethod
    def from_data(cls, data: object) -> Rule:
        if not isinstance(data, dict):
            raise RuleError(f"a rule is an object, not {data!r}")
        name = data.get("name")
        if not isinstance(name, str) or not name or name == EXECUTABLE_RULE:
            raise RuleError(f"a rule needs a non-empty name other than {EXECUTABLE_RULE!r}: {data!r}")
        if data.get("field") not in FIELDS:
            raise RuleError(f"rule {name!r}: field must be one of {', '.join(FIELDS)}")
        if data.get("action", "drop") not in ACTIONS:
            raise RuleError(f"rule {name!r}: action must be drop or keep")
        groups = data.get("groups")
        if groups is not None and not isinstance(groups, str):
            raise RuleError(f"rule {name!r}: groups must be a glob string")
        try:
            pattern = re.compile(data.get("pattern", ""), re.IGNORECASE)
        except (re.error, TypeError) as exc:
            raise RuleError(f"rule {name!r}: bad pattern: {exc}") from exc
        return cls(name, data["field"], pattern, data.get("action", "drop"), groups or None)

    def applies_to(self, group: str) -> bool:
        return self.groups is None or fnmatchcase(group, self.groups)

    def matches(self, file: RuleFile) -> bool:
        return self.pattern.search(getattr(file, self.field)) is not None


# What a file name is to the executable rule (file_kind).
OTHER, METADATA, EXECUTABLE = 0, 1, 2


def file_kind(filename: str | None) -> int:
    """EXECUTABLE (.exe, .scr...), METADATA (par2, nfo, sfv...) or OTHER (anything else, no name)."""
    _, dot, ext = (filename or "").rpartition(".")
    if not dot:
        return OTHER
    kind = _KINDS.get(ext)
    if kind is None:
        if len(_KINDS) > 10_000:
            _KINDS.clear()
        folded = ext.lower()
        kind = _KINDS[ext] = (
            EXECUTABLE
            if folded in EXECUTABLE_EXTENSIONS
            else METADATA
            if folded in METADATA_EXTENSIONS or _PAR_VOLUME.fullmatch(folded)
            else OTHER
        )
    return kind


_KINDS: dict[str, int] = {}  # an extension as written -> its kind (extensions repeat)


def clear_rule_caches() -> None:
    """Forget the extensions seen (see edge.digest.gather.clear_caches)."""
    _KINDS.clear()


def is_bare_executable_set(filenames: list[str | None]) -> bool:
    """True when the names hold an executable and nothing but executables and metadata."""
    kinds = set(map(file_kind, filenames))
    return EXECUTABLE in kinds and OTHER not in kinds


def bare_executable_releases(release_of_file: list[int], kinds: list[int]) -> set[int]:
    """The releases that are bare executable sets, given every file's release number and kind
    (file_kind), column by column: is_bare_executable_set for all releases at C speed."""
    with_executable = set(compress(release_of_file, map(EXECUTABLE.__eq__, kinds)))
    return with_executable.difference(compress(release_of_file, map(OTHER.__eq__, kinds)))


@dataclass
class RuleSet:
    rules: list[Rule] = field(default_factory=list)
    executable: bool = True

    @classmethod
    def from_data(cls, rules: Sequence[object] | None, executable: bool = True) -> RuleSet:
        parsed = [Rule.from_data(rule) for rule in rules or []]
        names = [rule.name for rule in parsed]
        if len(set(names)) != len(names):
            raise RuleError("rule names must be unique")
        return cls(parsed, executable)

    def inspects(self, group: str) -> bool:
        """Whether an operator rule applies to the group (and so looks at subjects, posters...)."""
        return any(rule.applies_to(group) for rule in self.rules)

    def names(self) -> list[str]:
        """Every name a batch counts under, '' (kept) first."""
        return [KEPT] + [rule.name for rule in self.rules] + ([EXECUTABLE_RULE] if self.executable else [])

    def decide(self, group: str, releases: list[list[RuleFile]]) -> list[list[str]]:
        """For each release (its files), the rule name that settles each file ('' = kept)."""
        active = [rule for rule in self.rules if rule.applies_to(group)]
        decisions = []
        for files in releases:
            if not active and len(files) == 1:  # most releases: one file, no operator rule
                bare = self.executable and is_bare_executable_set([files[0].filename])
                decisions.append([EXECUTABLE_RULE] if bare else [KEPT])
                continue
            verdicts = [KEPT] * len(files)
            protected = [False] * len(files)
            for position, file in enumerate(files):
                for rule in active:
                    if rule.matches(file):
                        if rule.action == "keep":
                            protected[position] = True
                        else:
                            verdicts[position] = rule.name
                        break
            if self.executable and is_bare_executable_set(
                [file.filename for file, verdict in zip(files, verdicts) if verdict == KEPT]
            ):
                verdicts = [
                    EXECUTABLE_RULE if verdict == KEPT and not keep else verdict
                    for verdict, keep in zip(verdicts, protected)
                ]
            decisions.append(verdicts)
        return decisions
