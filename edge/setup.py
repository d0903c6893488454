"""The edge's compiled part, everything else being declared in pyproject.toml:
edge/digest/_overview.c cuts overview blocks into columns (edge.digest.overview), gathers them into
files (edge.digest.gather) and finds dot lines in NNTP replies (edge.digest.nntp), each with its
Python twin beside it (the same results, slower).

The package is this directory, so setuptools' build directory and egg-info go to a temporary
directory: building the distribution leaves the source tree as it was. The extension is required:
an install without a C compiler or Python's headers (Debian's python3-dev) stops with the
compiler's error, rather than going on with the Python twins unnoticed. `SEED_IMPL=python pip
install ...` installs without it, for the twins only (edge.digest.compiled)."""

import atexit
import os
import shutil
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

TWINS_ONLY = os.environ.get("SEED_IMPL", "").strip().lower() == "python"
OUT_OF_TREE = tempfile.mkdtemp(prefix="seed-edge-build-")
atexit.register(shutil.rmtree, OUT_OF_TREE, ignore_errors=True)


class WithoutThisFile(build_py):
    """The package is this directory: everything in it but this build script."""

    def find_package_modules(self, package: str, package_dir: str) -> list[tuple[str, str, str]]:
        """(package, module, file) of each module, as build_py's: all but this file's."""
        found_modules: list[tuple[str, str, str]] = super().find_package_modules(package, package_dir)  # type: ignore[no-untyped-call]  # types-setuptools leaves it unannotated
        return [found for found in found_modules if found[1] != "setup"]


setup(
    cmdclass={"build_py": WithoutThisFile},
    options={"build": {"build_base": f"{OUT_OF_TREE}/build"}, "egg_info": {"egg_base": OUT_OF_TREE}},
    ext_modules=[]
    if TWINS_ONLY
    else [
        Extension(
            "edge.digest._overview",
            ["digest/_overview.c"],
            extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"],
        )
    ],
)
