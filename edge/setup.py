"""The edge's compiled part, everything else being declared in pyproject.toml:
edge/digest/_overview.c cuts overview blocks into columns (edge.digest.overview), gathers them into
files (edge.digest.gather) and finds dot lines in NNTP replies (edge.digest.nntp), each with its
Python twin beside it (the same results, slower).

The package is this directory, so setuptools' build directory and egg-info go to a temporary
directory: building the distribution leaves the source tree as it was. The extension is optional:
where no C compiler is at hand the install goes on and the Python twins serve."""
import atexit
import shutil
import tempfile

from setuptools import Extension, setup
from setuptools.command.build_py import build_py

OUT_OF_TREE = tempfile.mkdtemp(prefix="seed-edge-build-")
atexit.register(shutil.rmtree, OUT_OF_TREE, ignore_errors=True)


class WithoutThisFile(build_py):
    """The package is this directory: everything in it but this build script."""

    def find_package_modules(self, package, package_dir):
        return [found for found in super().find_package_modules(package, package_dir) if found[1] != "setup"]


setup(
    cmdclass={"build_py": WithoutThisFile},
    options={"build": {"build_base": f"{OUT_OF_TREE}/build"}, "egg_info": {"egg_base": OUT_OF_TREE}},
    ext_modules=[Extension("edge.digest._overview", ["digest/_overview.c"], optional=True,
                           extra_compile_args=["-O2", "-Wall", "-Wextra", "-Wno-unused-parameter"])],
)
