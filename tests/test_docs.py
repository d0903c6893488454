"""The documents: every one found from docs/index.md, every link between them leads somewhere, the
README short enough to read first, and the pre-commit hooks the linters ops/test runs."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[1]
INDEX = REPO / "docs" / "index.md"
# A relative link of Markdown: [text](path) or [text](path#anchor); not a URL.
LINK = re.compile(r"\[[^\]]*\]\((?!https?:|mailto:)([^)#\s]+)(?:#[^)]*)?\)")
# A newcomer's five minutes, at the 200 words a minute of a careful read.
README_WORDS = 1_000


def documents() -> list[Path]:
    listed = (
        subprocess.run(
            ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard", "*.md"],
            cwd=REPO,
            check=True,
            capture_output=True,
        )
        .stdout.decode()
        .split("\0")
    )
    return sorted(REPO / name for name in listed if name and (REPO / name).is_file())


def links(path: Path) -> list[Path]:
    return [(path.parent / target).resolve() for target in LINK.findall(path.read_text())]


def test_every_document_is_found_from_the_index():
    linked = set(links(INDEX))
    assert [str(path.relative_to(REPO)) for path in documents() if path != INDEX and path not in linked] == []


def test_every_link_between_the_documents_leads_to_a_file():
    broken = [
        f"{path.relative_to(REPO)} -> {target}" for path in documents() for target in links(path) if not target.exists()
    ]
    assert broken == []
    assert len(links(INDEX)) >= 15


def test_the_readme_is_read_in_five_minutes_and_says_where_the_rest_is():
    readme = (REPO / "README.md").read_text()
    assert len(readme.split()) <= README_WORDS
    assert {"## Quick start", "## Layout", "## Documentation"} <= set(re.findall(r"^## .*$", readme, re.M))
    assert "ops/run" in readme and "ops/test" in readme and "docs/index.md" in readme


def test_the_pre_commit_hooks_are_the_linters_ops_test_runs():
    config = REPO / ".pre-commit-config.yaml"
    subprocess.run(
        [str(REPO / ".venv/bin/pre-commit"), "validate-config", str(config)], check=True, capture_output=True
    )
    entries = {hook["entry"] for repo in yaml.safe_load(config.read_text())["repos"] for hook in repo["hooks"]}
    linters = {
        line.strip()
        for line in (REPO / "ops" / "test").read_text().splitlines()
        if line.startswith(".venv/bin/") and "pytest" not in line
    }
    assert linters and entries == linters
