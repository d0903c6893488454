"""SEED_IMPL: one switch for the compiled parts (edge.digest.compiled). Each case runs in a new
process, since the choice is made once, when the first module with a compiled part is imported."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from edge.digest import compiled, gather, nntp, overview, subjects

REPO = Path(__file__).resolve().parents[2]

# What every import site chose: None where the Python twin runs.
REPORT = """
import json, sys
from edge.digest import compiled, gather, nntp, overview, subjects
print(json.dumps({
    "impl": compiled.IMPL,
    "overview": overview._compiled is not None,
    "gather": [f is not None for f in (gather._number_lines, gather._add_to_files, gather._compiled_file_rows)],
    "nntp": nntp._dot_line is not nntp._dot_line_python,
    "subjects": subjects._usual_subject is not None,
}))
"""

# A finder first on sys.meta_path that finds no edge.digest._overview: an install without it.
NOT_BUILT = """
import sys
class NotBuilt:
    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "edge.digest._overview":
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
sys.meta_path.insert(0, NotBuilt)
"""


def _run(code: str, impl: str | None) -> subprocess.CompletedProcess:
    env = {key: value for key, value in os.environ.items() if key != "SEED_IMPL"}
    if impl is not None:
        env["SEED_IMPL"] = impl
    return subprocess.run([sys.executable, "-c", code], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)


def _choices(impl: str | None, prelude: str = "") -> dict:
    done = _run(prelude + REPORT, impl)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


ALL_C = {"impl": "c", "overview": True, "gather": [True, True, True], "nntp": True, "subjects": True}
ALL_PYTHON = {"impl": "python", "overview": False, "gather": [False, False, False], "nntp": False, "subjects": False}


def test_this_install_runs_the_compiled_parts():
    """The test machine builds them (ops/setup): unset, they run, as with SEED_IMPL=c."""
    assert compiled.IMPL == "c" or os.environ.get("SEED_IMPL") == "python"
    assert _choices(None) == ALL_C
    assert _choices("c") == ALL_C
    assert _choices(" C ") == ALL_C  # read as the settings read words: case and spaces aside


def test_seed_impl_python_runs_every_twin_even_where_the_compiled_parts_are_built():
    assert _choices("python") == ALL_PYTHON
    assert _choices("") == ALL_C  # empty is unset


def test_seed_impl_c_without_the_compiled_part_is_an_error_not_a_slow_digest():
    done = _run(NOT_BUILT + REPORT, "c")
    assert done.returncode != 0
    assert "ImportError: SEED_IMPL=c but edge.digest._overview is not built" in done.stderr
    # With SEED_IMPL unset, the Python twins serve where the C part is not built, and IMPL says so.
    assert _choices(None, NOT_BUILT) == ALL_PYTHON


def test_an_unknown_seed_impl_is_an_error():
    done = _run(REPORT, "fast")
    assert done.returncode != 0
    assert "ValueError: SEED_IMPL must be 'c' or 'python' (or unset), not 'fast'" in done.stderr


def test_the_data_center_parts_load_through_the_same_switch():
    code = "from edge.digest.compiled import load; print(load('app.services._copyrows') is not None)"
    for impl, loaded in ((None, "True"), ("c", "True"), ("python", "False")):
        done = _run(code, impl)
        assert done.returncode == 0 and done.stdout.strip() == loaded, done.stderr
    done = _run("from edge.digest.compiled import load; load('app.services._not_built')", "c")
    assert "SEED_IMPL=c but app.services._not_built is not built" in done.stderr


def test_the_same_batch_whichever_runs():
    """A digest of generated lines: the same batch with the compiled parts as with the twins."""
    code = """
import json, msgpack
from edge.digest.gather import Gatherer
from simnews.generator import Config, generate
from simnews.scripted import overview_lines
lines = list(overview_lines(generate(3000, Config(seed=5, groups=("alt.binaries.test",))), "alt.binaries.test", 1))
gatherer = Gatherer("alt.binaries.test")
gatherer.add_chunk(1, len(lines), [b"".join(line + b"\\r\\n" for line in lines)])
print(msgpack.packb(gatherer.build(), use_bin_type=False).hex())
"""
    with_c, with_python = _run(code, "c"), _run(code, "python")
    assert with_c.returncode == 0 and with_python.returncode == 0, with_c.stderr + with_python.stderr
    assert with_c.stdout == with_python.stdout and with_c.stdout


def test_the_modules_in_this_process_agree_with_impl():
    """Tests that switch a part to its twin (tests/edge/helpers.python_twins) change these
    attributes, never IMPL: here they are as the import made them."""
    built = compiled.IMPL == "c"
    assert (overview._compiled is not None) == built
    assert (gather._number_lines is not None) == built
    assert (subjects._usual_subject is not None) == built
    assert (nntp._dot_line is not nntp._dot_line_python) == built


# What a build made from other sources looks like to the Python code: another interface version.
STALE = """
from edge.digest import compiled
compiled.VERSIONS["{module}"] += 1
from edge.digest.compiled import load
load("{module}")
"""


def test_each_built_part_is_the_interface_version_the_code_expects():
    assert set(compiled.VERSIONS) == {"edge.digest._overview", "app.services._copyrows", "app.services._msgcolumns"}
    code = (
        "import importlib, json; from edge.digest.compiled import VERSIONS; print(json.dumps("
        "{name: importlib.import_module(name).VERSION for name in VERSIONS}))"
    )
    done = _run(code, None)
    assert done.returncode == 0 and json.loads(done.stdout) == compiled.VERSIONS, done.stderr


def test_a_stale_build_is_refused_whatever_seed_impl_says_but_python():
    for module in compiled.VERSIONS:
        for impl in (None, "c"):
            done = _run(STALE.format(module=module), impl)
            assert done.returncode != 0, (module, impl)
            assert f"StaleBuild: {module} (" in done.stderr and "is a stale build: interface version" in done.stderr
            assert "build it again" in done.stderr
        # The twins need no build: a stale one is not even loaded.
        assert _run(STALE.format(module=module), "python").returncode == 0


def test_each_part_has_stubs_naming_what_it_has():
    """The .pyi beside each C source (for type checkers and readers) names exactly the module's
    functions and its VERSION."""
    import ast
    import importlib

    for name in compiled.VERSIONS:
        stub = REPO / (name.replace(".", "/") + ".pyi")
        tree = ast.parse(stub.read_text())
        stubbed = {node.name for node in tree.body if isinstance(node, ast.FunctionDef)}
        stubbed |= {node.target.id for node in tree.body if isinstance(node, ast.AnnAssign)}
        module = importlib.import_module(name)
        public = {attribute for attribute in dir(module) if not attribute.startswith("_")}
        assert stubbed == public, name
