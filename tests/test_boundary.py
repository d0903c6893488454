"""The edge stays small: it imports nothing of the data center and installs on its own."""

from __future__ import annotations

import ast
import platform
import subprocess
import sys
import venv
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
FORBIDDEN = {
    "app",
    "celery",
    "kombu",
    "redis",
    "sqlalchemy",
    "psycopg",
    "psycopg2",
    "flask",
    "werkzeug",
    "alembic",
    "gunicorn",
    "flower",
    "simnews",
    "tests",
}


COMPILED_LOADER = REPO / "edge" / "digest" / "compiled.py"


def _called(call: ast.Call) -> str:
    return getattr(call.func, "attr", getattr(call.func, "id", ""))


def imported_top_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
        elif isinstance(node, ast.Call) and _called(node) in ("import_module", "__import__", "load"):
            # Dynamic imports would dodge the check: allow only literal edge-internal ones. The
            # one exception is the loader of the compiled parts, which imports the names its
            # callers give it (checked here in edge/, and the data center's own in app/).
            if path == COMPILED_LOADER and _called(node) == "import_module":
                continue
            arg = node.args[0] if node.args else None
            if _called(node) == "load" and not (isinstance(arg, ast.Constant) and "._" in str(arg.value)):
                continue  # some other function named load (json.load, msgpack's)
            assert isinstance(arg, ast.Constant) and str(arg.value).startswith(("edge", ".")), (
                f"{path}: dynamic import {ast.dump(node)}"
            )
    return names


def test_edge_imports_nothing_of_the_data_center():
    sources = sorted((REPO / "edge").rglob("*.py"))
    assert sources, "edge/ has no sources"
    offenders = {str(p.relative_to(REPO)): sorted(imported_top_modules(p) & FORBIDDEN) for p in sources}
    assert {k: v for k, v in offenders.items() if v} == {}


def _untracked_and_ignored() -> set[str]:
    listed = subprocess.run(
        ["git", "status", "--porcelain", "--ignored", "--untracked-files=all", "edge"],
        check=True,
        capture_output=True,
        text=True,
        cwd=REPO,
    ).stdout
    return {line for line in listed.splitlines() if "__pycache__" not in line}


def test_the_digest_library_imports_nothing_of_the_node():
    sources = sorted((REPO / "edge" / "digest").rglob("*.py"))
    assert len(sources) > 5
    offenders = {}
    for path in sources:
        tree = ast.parse(path.read_text(), filename=str(path))
        for node in ast.walk(tree):
            names = (
                [alias.name for alias in node.names]
                if isinstance(node, ast.Import)
                else [node.module or ""]
                if isinstance(node, ast.ImportFrom) and node.level == 0
                else []
            )
            bad = [name for name in names if name == "edge.node" or name.startswith("edge.node.")]
            if bad:
                offenders[str(path.relative_to(REPO))] = bad
    assert offenders == {}


def test_edge_installs_alone_into_a_bare_virtualenv(tmp_path):
    env_dir = tmp_path / "edge-venv"
    venv.EnvBuilder(with_pip=True).create(env_dir)
    python = env_dir / "bin" / "python"
    tree_before = _untracked_and_ignored()
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(REPO / "edge")],
        check=True,
        cwd=tmp_path,
    )
    # Building the distribution leaves the source tree as it was (no build/, no egg-info).
    assert _untracked_and_ignored() == tree_before
    installed = subprocess.run(
        [python, "-m", "pip", "list", "--format=freeze", "--disable-pip-version-check"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    names = {line.split("==")[0].lower() for line in installed.split()}
    assert names - {"pip", "setuptools", "wheel"} == {"msgpack", "seed-edge"}
    # Every edge module imports in that environment (run outside the repo so nothing leaks in).
    modules = [
        f"edge.{part}.{p.stem}"
        for part in ("digest", "node")
        for p in sorted((REPO / "edge" / part).glob("*.py"))
        if p.stem != "__init__"
    ]
    assert len(modules) > 15
    code = "import importlib, sys\nfor m in sys.argv[1:]: importlib.import_module(m)\nprint('ok')"
    out = subprocess.run([python, "-c", code, *modules], check=True, capture_output=True, text=True, cwd=tmp_path)
    assert out.stdout.strip() == "ok"
    # Its compiled part is built there too (ops/setup makes sure of a C compiler); the build
    # script is not installed with the package.
    compiled = "import importlib.util, edge.digest._overview; print(importlib.util.find_spec('edge.setup') is None)"
    assert (
        subprocess.run(
            [python, "-c", compiled], check=True, capture_output=True, text=True, cwd=tmp_path
        ).stdout.strip()
        == "True"
    )
    help_text = subprocess.run([env_dir / "bin" / "edge", "--help"], capture_output=True, text=True, cwd=tmp_path)
    assert "edge" in (help_text.stdout + help_text.stderr)
    # Alone it gzips with zlib; with the `fast` extra (as the image installs it), with ISA-L.
    engine = (
        "from edge.digest.deflate import ENGINE, gzip, gunzipper; import zlib;"
        " assert zlib.decompress(gzip(b'x' * 99), 31) == gunzipper().decompress(gzip(b'x' * 99)); print(ENGINE)"
    )
    assert (
        subprocess.run([python, "-c", engine], check=True, capture_output=True, text=True, cwd=tmp_path).stdout.strip()
        == "zlib"
    )
    subprocess.run(
        [python, "-m", "pip", "install", "-q", "--disable-pip-version-check", f"{REPO / 'edge'}[fast]"],
        check=True,
        cwd=tmp_path,
    )
    with_isal = platform.machine() in ("x86_64", "aarch64", "AMD64", "arm64")  # ISA-L's wheels
    assert subprocess.run(
        [python, "-c", engine], check=True, capture_output=True, text=True, cwd=tmp_path
    ).stdout.strip() == ("isal" if with_isal else "zlib")
    assert sys.prefix != str(env_dir)
